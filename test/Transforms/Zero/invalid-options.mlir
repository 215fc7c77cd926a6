// RUN: not tessera-opt %s --tessera-zero=stage=4 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not tessera-opt %s --tessera-zero="stage=3 reshard-after-forward=sometimes" 2>&1 | FileCheck %s --check-prefix=RESHARD
// RUN: not tessera-opt %s --tessera-zero=axes=data 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not tessera-opt %s --tessera-zero=axes=dp,dp 2>&1 | FileCheck %s --check-prefix=TWICE

// Tests that --tessera-zero rejects a stage that does not exist, a
// reshard-after-forward it does not build, an axis the mesh lacks and an
// axis given twice (which made the pass loop forever).
// STAGE: for the --stage option: got '4', expected 0, 1, 2 or 3
// RESHARD: for the --reshard-after-forward option: 'sometimes' is not supported: it takes true (gather the parameter again for the backward), false (keep the forward's gather) or the size of the group to reshard to after the forward
// AXIS: error: ZeRO axis "data" is not an axis of mesh @mesh
// TWICE: error: ZeRO axis "dp" is given twice
dist.mesh @mesh ["dp"=2]
func.func @step(%w: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}]>}, %g: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %t: tensor<i64>) -> tensor<8xf32> {
  %w2, %m2, %v2 = nn.adamw %w, %g, %m, %v, %t lr = 1.0e-03 : tensor<8xf32>, tensor<8xf32>, tensor<i64>
  return %w2 : tensor<8xf32>
}
