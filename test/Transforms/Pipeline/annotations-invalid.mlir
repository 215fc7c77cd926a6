// RUN: not tessera-opt %s --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=2 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=2" 2>&1 | FileCheck %s

// Tests that stage annotations must not decrease in program order.
dist.mesh @mesh ["pp"=2]
func.func @annotations(%x: tensor<8x4xf32>, %w0: tensor<4x4xf32> {nn.param = "w0"},
                       %w1: tensor<4x4xf32> {nn.param = "w1"}) -> tensor<f32> {
  %0 = nn.dot %x, %w0 contracting_dims = [1] x [0] {dist.stage = 1 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  // CHECK: error: pipeline stage 0 does not follow stage 1 of 2 (stage annotations must increase in program order)
  %1 = nn.dot %0, %w1 contracting_dims = [1] x [0] {dist.stage = 0 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %2 = nn.reduce_mean %1 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %2 : tensor<f32>
}
