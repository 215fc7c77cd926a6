// RUN: tessera-opt %s --tessera-zero=stage=1 | FileCheck %s --check-prefix=ONE
// RUN: tessera-opt %s --tessera-zero=stage=2 | FileCheck %s --check-prefix=TWO
// RUN: tessera-opt %s --tessera-zero=stage=3 | FileCheck %s --check-prefix=THREE
// RUN: tessera-opt %s --tessera-zero="stage=3 reshard-after-forward=false" | FileCheck %s --check-prefix=KEEP
// RUN: tessera-opt %s --tessera-zero=stage=3 --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PARTITIONED

// Tests where each ZeRO stage pins what it splits, on a train step whose
// forward pass (what the returned %y depends on) reads %w once and whose
// backward pass reads it again:
// - stage 1 pins the gradient just before the update, stage 2 right where
//   it is computed;
// - stage 3 also splits %w at rest and gathers it before the forward's
//   read and again before the backward's, or once for both with
//   reshard-after-forward=false.
dist.mesh @mesh ["dp"=2]

// ONE-LABEL: func.func @step
// ONE-SAME: %[[W:[^:]+]]: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [{?}, {?}], replicated={"dp"}>, nn.param = "w"}
// ONE-SAME: {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>, nn.state = "w.adam_m"}
// ONE: %[[DW:.+]] = nn.dot %[[X:.+]], %{{.+}} contracting_dims = [0] x [0]
// ONE-NEXT: nn.add
// ONE-NEXT: %[[G:.+]] = dist.sharding_constraint %[[DW]] <@mesh, [{"dp"}, {?}]>
// ONE-NEXT: nn.adamw %[[W]], %[[G]]

// TWO-LABEL: func.func @step
// TWO: %[[DW:.+]] = nn.dot %{{.+}}, %{{.+}} contracting_dims = [0] x [0]
// TWO-NEXT: %[[G:.+]] = dist.sharding_constraint %[[DW]] <@mesh, [{"dp"}, {?}]>
// TWO-NEXT: nn.add
// TWO-NEXT: nn.adamw %{{.+}}, %[[G]]

// THREE-LABEL: func.func @step
// THREE-SAME: %[[W:[^:]+]]: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>, nn.param = "w"}
// THREE: %[[FW:.+]] = dist.sharding_constraint %[[W]] <@mesh, [{?}, {?}], replicated={"dp"}>
// THREE-NEXT: %[[Y:.+]] = nn.dot %[[X:.+]], %[[FW]]
// THREE-NEXT: %[[BW:.+]] = dist.sharding_constraint %[[W]] <@mesh, [{?}, {?}], replicated={"dp"}>
// THREE-NEXT: nn.dot %[[Y]], %[[BW]] contracting_dims = [1] x [1]
// THREE: nn.adamw %[[W]],

// KEEP-LABEL: func.func @step
// KEEP: %[[FW:.+]] = dist.sharding_constraint
// KEEP-NEXT: %[[Y:.+]] = nn.dot %{{.+}}, %[[FW]]
// KEEP-NEXT: nn.dot %[[Y]], %[[FW]] contracting_dims = [1] x [1]
// KEEP-NOT: dist.sharding_constraint %arg0

// The parameter stays a shard from argument to result: gathered twice for
// reading, never after the update.
// PARTITIONED-LABEL: func.func @step
// PARTITIONED-SAME: %[[W:[^:]+]]: tensor<2x4xf32>
// PARTITIONED: dist.all_gather %[[W]] on @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// PARTITIONED: dist.all_gather %[[W]] on @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// PARTITIONED: dist.reduce_scatter %{{.+}} on @mesh ["dp"] dim = 0 sum : tensor<4x4xf32> -> tensor<2x4xf32>
// PARTITIONED: %[[NEW:.+]], %{{.+}}, %{{.+}} = nn.adamw %[[W]], {{.+}} : tensor<2x4xf32>
// PARTITIONED-NOT: dist.all_gather
// PARTITIONED: return %[[NEW]],
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
