// A four-layer MLP on a mesh with a pipeline axis: the model of the pipeline
// tests (lit does not run this file by itself).
dist.mesh @mesh ["pp"=2]
func.func @mlp(%x: tensor<8x4xf32>, %y: tensor<8x4xf32>,
               %w0: tensor<4x4xf32> {nn.param = "w0"},
               %w1: tensor<4x4xf32> {nn.param = "w1"},
               %w2: tensor<4x4xf32> {nn.param = "w2"},
               %w3: tensor<4x4xf32> {nn.param = "w3"}) -> tensor<f32> {
  %0 = nn.dot %x, %w0 contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.relu %0 : tensor<8x4xf32>
  %2 = nn.dot %1, %w1 contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %3 = nn.relu %2 : tensor<8x4xf32>
  %4 = nn.dot %3, %w2 contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %5 = nn.relu %4 : tensor<8x4xf32>
  %6 = nn.dot %5, %w3 contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %7 = nn.sub %6, %y : tensor<8x4xf32>
  %8 = nn.mul %7, %7 : tensor<8x4xf32>
  %9 = nn.reduce_mean %8 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %9 : tensor<f32>
}
