// RUN: tessera-opt %s --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=2 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=2 schedule=1f1b" | FileCheck %s

// Tests that pipeline stages combine with data parallelism on a pp x dp mesh:
// each all_reduce over "dp" and "mb" becomes the sum over microbatches, then
// one all_reduce over "dp" per step; the microbatch axis leaves the mesh and
// the data keeps its split over "dp" with all microbatches in one argument,
// which each unit's run reads its microbatch's rows of.
// CHECK: dist.mesh @mesh ["pp"=2, "dp"=2]
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: %arg0: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>, dist.source_index = 0 : i64}
// CHECK: dist.microbatch_slice %arg0 of 2 {dist.unit = "F0"} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: %[[SUM:.+]] = dist.accumulate %{{.+}} : tensor<4x4xf32>
// CHECK: %[[REDUCED:.+]] = dist.all_reduce %[[SUM]] on @mesh ["dp"] sum {dist.unit = "update"} : tensor<4x4xf32>
// CHECK: nn.transpose %[[REDUCED]]
// CHECK-NOT: "mb"
// CHECK-LABEL: func.func @mlp_stage1
// CHECK: dist.all_reduce %{{.+}} on @mesh ["dp"] avg : tensor<f32>
dist.mesh @mesh ["pp"=2, "dp"=2]
func.func @mlp(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>},
               %y: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>},
               %w0: tensor<4x4xf32> {nn.param = "w0"},
               %w1: tensor<4x4xf32> {nn.param = "w1"}) -> tensor<f32> {
  %0 = nn.dot %x, %w0 contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.relu %0 : tensor<8x4xf32>
  %2 = nn.dot %1, %w1 contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %3 = nn.sub %2, %y : tensor<8x4xf32>
  %4 = nn.mul %3, %3 : tensor<8x4xf32>
  %5 = nn.reduce_mean %4 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %5 : tensor<f32>
}
