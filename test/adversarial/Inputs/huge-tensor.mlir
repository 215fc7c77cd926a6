// A model whose input is too large to count: 2^62 x 4 elements.
func.func @f(%x: tensor<4611686018427387904x4xf32>, %w: tensor<4x8xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4611686018427387904x4xf32>, tensor<4x8xf32>) -> tensor<4611686018427387904x8xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4611686018427387904x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
