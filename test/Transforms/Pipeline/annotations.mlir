// RUN: tessera-opt %s --tessera-train-step=optimizer=sgd --tessera-propagate --tessera-partition --tessera-pipeline="stages=2" | FileCheck %s

// Tests that annotations cut the stages: stage 1 starts at the op marked
// dist.stage = 1, so rank 0 holds the first three layers and rank 1 the
// last with the loss (by FLOPs alone the cut would fall in the middle).
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: nn.param = "w0"
// CHECK-SAME: nn.param = "w1"
// CHECK-SAME: nn.param = "w2"
// CHECK-NOT: nn.param = "w3"
// CHECK-SAME: attributes {dist.pipeline_rank = 0 : i64, dist.schedule =
// CHECK-NOT: dist.stage
// CHECK-LABEL: func.func @mlp_stage1
// CHECK-SAME: %arg0: tensor<8x4xf32> {dist.source_index = 1 : i64}
// CHECK-SAME: %arg1: tensor<4x4xf32> {dist.source_index = 5 : i64, nn.param = "w3"}
// CHECK-NOT: dist.stage
// CHECK: nn.sgd %arg1
// CHECK-NOT: nn.sgd
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
  %6 = nn.dot %5, %w3 contracting_dims = [1] x [0] {dist.stage = 1 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %7 = nn.sub %6, %y : tensor<8x4xf32>
  %8 = nn.mul %7, %7 : tensor<8x4xf32>
  %9 = nn.reduce_mean %8 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %9 : tensor<f32>
}
