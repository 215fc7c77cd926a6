// RUN: tessera-opt %s --tessera-zero="stage=1 axes=dp,ep" | FileCheck %s

// Tests that ZeRO splits each parameter's state over the ZeRO axes that do
// not split it already: a dense weight over "dp" and "ep", an expert's
// weights (split over "ep") over "dp" alone, and a parameter every ZeRO axis
// splits keeps its layout.
// CHECK-LABEL: func.func @step
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"dp", "ep"}, {?}]>, nn.state = "w.adam_m"}
// CHECK-SAME: %[[E:[^:]+]]: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"ep"}, {}], replicated={"dp"}>, nn.param = "e"}
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"ep", "dp"}, {}]>, nn.state = "e.adam_m"}
// CHECK-SAME: %[[S:[^:]+]]: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", "ep"}]>, nn.param = "s"}
// CHECK-SAME: %{{[^:]+}}: tensor<4xf32> {nn.state = "s.adam_m"}
// CHECK: dist.sharding_constraint %{{.+}} <@mesh, [{"ep"}, {}], unreduced={"dp"}>
// CHECK-NEXT: dist.sharding_constraint %{{.+}} <@mesh, [{"ep", "dp"}, {}]>
// CHECK-NEXT: nn.adamw %[[E]]
// CHECK-NOT: dist.sharding_constraint
// CHECK: nn.adamw %[[S]]
dist.mesh @mesh ["dp"=2, "ep"=2]
func.func @step(%w: tensor<4x4xf32> {nn.param = "w"},
                %wm: tensor<4x4xf32> {nn.state = "w.adam_m"},
                %wv: tensor<4x4xf32> {nn.state = "w.adam_v"},
                %e: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"ep"}, {}]>, nn.param = "e"},
                %em: tensor<4x8xf32> {nn.state = "e.adam_m"},
                %ev: tensor<4x8xf32> {nn.state = "e.adam_v"},
                %s: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", "ep"}]>, nn.param = "s"},
                %sm: tensor<4xf32> {nn.state = "s.adam_m"},
                %sv: tensor<4xf32> {nn.state = "s.adam_v"},
                %t: tensor<i64> {nn.state = "step"},
                %gw: tensor<4x4xf32>, %ge: tensor<4x8xf32>, %gs: tensor<4xf32>)
    -> (tensor<4x4xf32> {nn.updates = 0 : i64}, tensor<4x8xf32> {nn.updates = 3 : i64},
        tensor<4xf32> {nn.updates = 6 : i64}) {
  %w2, %wm2, %wv2 = nn.adamw %w, %gw, %wm, %wv, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  %e2, %em2, %ev2 = nn.adamw %e, %ge, %em, %ev, %t lr = 1.0e-03 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>
  %s2, %sm2, %sv2 = nn.adamw %s, %gs, %sm, %sv, %t lr = 1.0e-03 : tensor<4xf32>, tensor<4xf32>, tensor<i64>
  return %w2, %e2, %s2 : tensor<4x4xf32>, tensor<4x8xf32>, tensor<4xf32>
}
