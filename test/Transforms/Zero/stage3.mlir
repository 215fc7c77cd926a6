// RUN: tessera-opt %s --tessera-zero=stage=3 | FileCheck %s
// RUN: tessera-opt %s --tessera-zero=stage=3 --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PARTITIONED

// Tests that ZeRO-3 also splits %w at rest and gathers it before the forward's
// read and again before the backward's, on a train step whose forward pass
// (what the returned %y depends on) reads %w once and whose backward pass reads
// it again.
// Partitioned, the parameter stays a shard from argument to result: gathered
// twice for reading, never after the update. Its gradient, summed over the
// batch, is reduce-scattered (on a batch of 2 rather than 8, moving the
// activations would send less).
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]+]]: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>, nn.param = "w"}
// CHECK: %[[FW:.+]] = dist.sharding_constraint %[[W]] <@mesh, [{?}, {?}], replicated={"dp"}>
// CHECK-NEXT: %[[Y:.+]] = nn.dot %[[X:.+]], %[[FW]]
// CHECK-NEXT: %[[BW:.+]] = dist.sharding_constraint %[[W]] <@mesh, [{?}, {?}], replicated={"dp"}>
// CHECK-NEXT: nn.dot %[[Y]], %[[BW]] contracting_dims = [1] x [1]
// CHECK: nn.adamw %[[W]],

// PARTITIONED-LABEL: func.func @step
// PARTITIONED-SAME: %[[W:[^:]+]]: tensor<2x4xf32>
// PARTITIONED: dist.all_gather %[[W]] on @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// PARTITIONED: dist.all_gather %[[W]] on @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// PARTITIONED: dist.reduce_scatter %{{.+}} on @mesh ["dp"] dim = 0 sum : tensor<4x4xf32> -> tensor<2x4xf32>
// PARTITIONED: %[[NEW:.+]], %{{.+}}, %{{.+}} = nn.adamw %[[W]], {{.+}} : tensor<2x4xf32>
// PARTITIONED-NOT: dist.all_gather
// PARTITIONED: return %[[NEW]],
dist.mesh @mesh ["dp"=2]
func.func @step(%w: tensor<4x4xf32> {nn.param = "w"},
                %m: tensor<4x4xf32> {nn.state = "w.adam_m"},
                %v: tensor<4x4xf32> {nn.state = "w.adam_v"},
                %t: tensor<i64> {nn.state = "step"},
                %x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<4x4xf32> {nn.updates = 0 : i64}, tensor<4x4xf32> {nn.updates = 1 : i64},
        tensor<4x4xf32> {nn.updates = 2 : i64}, tensor<8x4xf32>) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %dx = nn.dot %y, %w contracting_dims = [1] x [1] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %dw = nn.dot %x, %dx contracting_dims = [0] x [0] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %other = nn.add %dw, %dw : tensor<4x4xf32>
  %w2, %m2, %v2 = nn.adamw %w, %dw, %m, %v, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  return %w2, %m2, %v2, %y : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
}
