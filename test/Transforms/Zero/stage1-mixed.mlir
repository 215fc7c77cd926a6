// RUN: tessera-opt %s --tessera-zero=stage=1 | FileCheck %s

// Tests that with mixed precision ZeRO-1 splits the f32 master weight with
// the moments (the ZeRO paper counts it in the optimizer state) and pins
// every read of its bf16 cast, forward and backward, to one whole layout:
// one gather of the bf16 copy per step.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]+]]: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>, nn.param = "w"}
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>, nn.state = "w.adam_m"}
// CHECK: %[[C:.+]] = nn.cast %[[W]] : tensor<4x4xf32> to tensor<4x4xbf16>
// CHECK-NEXT: %[[WHOLE:.+]] = dist.sharding_constraint %[[C]] <@mesh, [{?}, {?}], replicated={"dp"}>
// CHECK-NEXT: nn.dot %{{.+}}, %[[WHOLE]]
// CHECK-NEXT: nn.dot %{{.+}}, %[[WHOLE]]
// CHECK-NOT: dist.sharding_constraint %[[C]]
dist.mesh @mesh ["dp"=2]
func.func @step(%w: tensor<4x4xf32> {nn.param = "w"},
                %m: tensor<4x4xf32> {nn.state = "w.adam_m"},
                %v: tensor<4x4xf32> {nn.state = "w.adam_v"},
                %t: tensor<i64> {nn.state = "step"},
                %x: tensor<2x4xbf16> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<4x4xf32> {nn.updates = 0 : i64}, tensor<4x4xf32> {nn.updates = 1 : i64},
        tensor<4x4xf32> {nn.updates = 2 : i64}, tensor<2x4xbf16>) {
  %c = nn.cast %w : tensor<4x4xf32> to tensor<4x4xbf16>
  %y = nn.dot %x, %c contracting_dims = [1] x [0] : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
  %dx = nn.dot %y, %c contracting_dims = [1] x [1] : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
  %dw = nn.dot %x, %dx contracting_dims = [0] x [0] : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<4x4xbf16>
  %g = nn.cast %dw : tensor<4x4xbf16> to tensor<4x4xf32>
  %w2, %m2, %v2 = nn.adamw %w, %g, %m, %v, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  return %w2, %m2, %v2, %y : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xbf16>
}
