// RUN: tessera-opt %s --tessera-train-step="optimizer=adamw" --tessera-parameter-server="part=worker" | FileCheck %s
// RUN: tessera-opt %s --tessera-train-step="optimizer=adamw" --tessera-parameter-server="part=worker" --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PARTITIONED

// Tests the workers' program: the updates, their state and the step counter
// go; the loss and each parameter's gradient come back pinned as partial
// sums over the data axis, so that partitioned the worker holds no
// collective. Arguments keep their index in the step.

dist.mesh @mesh ["dp"=2]
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %arg0: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>, dist.source_index = 0 : i64}
// CHECK-SAME: %arg1: tensor<16x4xf32> {dist.source_index = 1 : i64, nn.param = "w"}
// CHECK-SAME: %arg2: tensor<4xf32> {dist.source_index = 2 : i64, nn.param = "b"})
// CHECK-SAME: -> (tensor<f32> {dist.sharding = #dist.sharding<@mesh, [], unreduced={"dp"}>},
// CHECK-SAME: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}], unreduced={"dp"}>, nn.grad_of = "w"},
// CHECK-SAME: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [{}], unreduced={"dp"}>, nn.grad_of = "b"})
// CHECK-NOT: nn.adamw
// CHECK: %[[LOSS:.+]] = dist.sharding_constraint %{{.+}} <@mesh, [], unreduced={"dp"}> : tensor<f32>
// CHECK: %[[GW:.+]] = dist.sharding_constraint %{{.+}} <@mesh, [{}, {}], unreduced={"dp"}> : tensor<16x4xf32>
// CHECK: %[[GB:.+]] = dist.sharding_constraint %{{.+}} <@mesh, [{}], unreduced={"dp"}> : tensor<4xf32>
// CHECK: return %[[LOSS]], %[[GW]], %[[GB]]
// PARTITIONED-LABEL: func.func @mlp(%arg0: tensor<4x16xf32>
// PARTITIONED-NOT: dist.all_reduce
// PARTITIONED: return
func.func @mlp(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
               %w: tensor<16x4xf32> {nn.param = "w"},
               %b: tensor<4xf32> {nn.param = "b"}) -> tensor<f32> {
  %h = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  %y = nn.add %h, %bb : tensor<8x4xf32>
  %s = nn.mul %y, %y : tensor<8x4xf32>
  %l = nn.reduce_mean %s dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
