// RUN: not tessera-opt %s --tessera-train-step=optimizer=sgd --tessera-propagate --tessera-partition --tessera-pipeline="stages=3" 2>&1 | FileCheck %s

// Tests that stages are cut only where one value crosses: here two cross
// everywhere but after the first op, which leaves two stages, not three.
// CHECK: error: the forward pass has 2 places where one value crosses (layer boundaries) to cut between, too few for 3 pipeline stages; mark the cuts with dist.stage
dist.mesh @mesh ["pp"=3]
func.func @no_cut(%x: tensor<8x4xf32>, %w: tensor<4x4xf32> {nn.param = "w"}) -> tensor<f32> {
  %0 = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.relu %0 : tensor<8x4xf32>
  %2 = nn.mul %0, %1 : tensor<8x4xf32>
  %3 = nn.dot %2, %0 contracting_dims = [0, 1] x [0, 1] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
