// RUN: tessera-opt %s --tessera-zero=stage=1 | FileCheck %s

// Tests that ZeRO-1 splits the optimizer state over "dp" and pins the
// gradient, a partial sum over "dp" until then, to that split just before the
// update, on a train step whose forward pass (what the returned %y depends
// on) reads %w once and whose backward pass reads it again.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]+]]: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [{?}, {?}], replicated={"dp"}>, nn.param = "w"}
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>, nn.state = "w.adam_m"}
// CHECK: %[[DW:.+]] = nn.dot %[[X:.+]], %{{.+}} contracting_dims = [0] x [0]
// CHECK-NEXT: nn.add
// CHECK-NEXT: %[[P:.+]] = dist.sharding_constraint %[[DW]] <@mesh, [{?}, {?}], unreduced={"dp"}>
// CHECK-NEXT: %[[G:.+]] = dist.sharding_constraint %[[P]] <@mesh, [{"dp"}, {?}]>
// CHECK-NEXT: nn.adamw %[[W]], %[[G]]
dist.mesh @mesh ["dp"=2]
func.func @step(%w: tensor<4x4xf32> {nn.param = "w"},
                %m: tensor<4x4xf32> {nn.state = "w.adam_m"},
                %v: tensor<4x4xf32> {nn.state = "w.adam_v"},
                %t: tensor<i64> {nn.state = "step"},
                %x: tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<4x4xf32> {nn.updates = 0 : i64}, tensor<4x4xf32> {nn.updates = 1 : i64},
        tensor<4x4xf32> {nn.updates = 2 : i64}, tensor<2x4xf32>) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %dx = nn.dot %y, %w contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %dw = nn.dot %x, %dx contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %other = nn.add %dw, %dw : tensor<4x4xf32>
  %w2, %m2, %v2 = nn.adamw %w, %dw, %m, %v, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  return %w2, %m2, %v2, %y : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>
}
