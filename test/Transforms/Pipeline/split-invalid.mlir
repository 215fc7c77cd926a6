// RUN: not tessera-opt %s --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=2 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=2" 2>&1 | FileCheck %s

// Tests that --tessera-pipeline does not split into microbatches a program
// that normalizes over the batch: that needs every microbatch at once.
dist.mesh @mesh ["pp"=2]
func.func @batch_norm(%x: tensor<8x4xf32>, %w: tensor<4x4xf32> {nn.param = "w"}) -> tensor<f32> {
  %0 = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.reduce_mean %0 dims = [0] : tensor<8x4xf32> -> tensor<4xf32>
  %2 = nn.broadcast %1 dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  // CHECK: error: cannot split into microbatches: 'nn.sub' reads a per-microbatch value that is not reduced over microbatches (an all_reduce over "mb")
  %3 = nn.sub %0, %2 : tensor<8x4xf32>
  %4 = nn.mul %3, %3 : tensor<8x4xf32>
  %5 = nn.reduce_mean %4 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %5 : tensor<f32>
}
