// RUN: tessera-opt %s --split-input-file --tessera-zero -verify-diagnostics | FileCheck %s
// RUN: tessera-opt %s --split-input-file --tessera-zero --tessera-propagate --tessera-partition -verify-diagnostics | FileCheck %s --check-prefix=PARTITIONED

// Tests that ZeRO-1 splits AdamW's moments over "dp" on the first dim the
// parameter leaves whole, pins the gradient to that split and keeps the
// parameter whole over "dp" (replicated={"dp"}); the gradient stays a
// partial sum over "dp" until just before the update. Partitioned, it is
// reduce-scattered there, the update runs on a quarter of the rows and the
// new parameter is all-gathered back. The bias (2 rows) is not divisible by
// 4: its state is stored flat, padded to 4 elements, one per device; its
// gradient is padded and reduce-scattered, the update runs on that element
// and the new bias is gathered and cut back to 2.
dist.mesh @mesh ["dp"=4, "tp"=2]
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:.+]]: tensor<8x6xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}], replicated={"dp"}>}
// CHECK-SAME: tensor<8x6xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: tensor<8x6xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: %[[B:.+]]: tensor<2xf32> {dist.sharding = #dist.sharding<@mesh, [{?}], replicated={"dp"}>}
// CHECK-SAME: tensor<2xf32> {dist.sharding = #dist.sharding<@mesh, [{?}], flat={"dp"}>}
// CHECK-SAME: tensor<2xf32> {dist.sharding = #dist.sharding<@mesh, [{?}], flat={"dp"}>}
// CHECK: %[[P:.+]] = dist.sharding_constraint %{{.+}} <@mesh, [{}, {"tp"}], unreduced={"dp"}> : tensor<8x6xf32>
// CHECK-NEXT: %[[G:.+]] = dist.sharding_constraint %[[P]] <@mesh, [{"dp"}, {"tp"}]> : tensor<8x6xf32>
// CHECK: nn.adamw %[[W]], %[[G]],
// CHECK: %[[PB:.+]] = dist.sharding_constraint %{{.+}} <@mesh, [{?}], unreduced={"dp"}> : tensor<2xf32>
// CHECK-NEXT: %[[GB:.+]] = dist.sharding_constraint %[[PB]] <@mesh, [{?}], flat={"dp"}> : tensor<2xf32>
// CHECK: nn.adamw %[[B]], %[[GB]],
// PARTITIONED-LABEL: func.func @step
// PARTITIONED-SAME: %[[LB:[^:]+]]: tensor<2xf32> {dist.sharding = #dist.sharding<@mesh, [{}], replicated={"dp"}>}
// PARTITIONED-SAME: tensor<1xf32> {dist.global_shape = array<i64: 2>, dist.sharding = #dist.sharding<@mesh, [{}], flat={"dp"}>}
// PARTITIONED: %[[ZEROS:.+]] = nn.constant dense<0.000000e+00> : tensor<2xf32>
// PARTITIONED: dist.reduce_scatter %{{.+}} on @mesh ["dp"] dim = 0 sum : tensor<8x3xf32> -> tensor<2x3xf32>
// PARTITIONED: %[[NEW:.+]], %{{.+}}, %{{.+}} = nn.adamw {{.+}} : tensor<2x3xf32>, tensor<2x3xf32>, tensor<i64>
// PARTITIONED: %[[PADDED:.+]] = nn.concat %{{.+}}, %[[ZEROS]] dim = 0 : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
// PARTITIONED: %[[GSHARE:.+]] = dist.reduce_scatter %[[PADDED]] on @mesh ["dp"] dim = 0 sum : tensor<4xf32> -> tensor<1xf32>
// PARTITIONED: %[[BPADDED:.+]] = nn.concat %[[LB]], %[[ZEROS]] dim = 0
// PARTITIONED: %[[BSHARE:.+]] = dist.all_slice %[[BPADDED]] on @mesh ["dp"] dim = 0 : tensor<4xf32> -> tensor<1xf32>
// PARTITIONED: %[[NEWB:.+]], %{{.+}}, %{{.+}} = nn.adamw %[[BSHARE]], %[[GSHARE]], {{.+}} : tensor<1xf32>, tensor<1xf32>, tensor<i64>
// PARTITIONED: %[[FULL:.+]] = dist.all_gather %[[NEW]] on @mesh ["dp"] dim = 0 : tensor<2x3xf32> -> tensor<8x3xf32>
// PARTITIONED: %[[FULLB:.+]] = dist.all_gather %[[NEWB]] on @mesh ["dp"] dim = 0 : tensor<1xf32> -> tensor<4xf32>
// PARTITIONED: %[[CUT:.+]] = nn.slice %[[FULLB]] start = [0] limit = [2] : tensor<4xf32> -> tensor<2xf32>
// PARTITIONED: return %[[FULL]], %{{.+}}, %{{.+}}, %[[CUT]],
func.func @step(%w: tensor<8x6xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
                %wm: tensor<8x6xf32>, %wv: tensor<8x6xf32>,
                %b: tensor<2xf32>, %bm: tensor<2xf32>, %bv: tensor<2xf32>,
                %x: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                %db: tensor<4x2xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                %t: tensor<i64>)
    -> (tensor<8x6xf32> {nn.updates = 0 : i64}, tensor<8x6xf32> {nn.updates = 1 : i64}, tensor<8x6xf32> {nn.updates = 2 : i64},
        tensor<2xf32> {nn.updates = 3 : i64}, tensor<2xf32> {nn.updates = 4 : i64}, tensor<2xf32> {nn.updates = 5 : i64}) {
  // dL/dw = x^T · ones: partial sums over the batch split by "dp".
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %g = nn.dot %x, %y contracting_dims = [0] x [0] : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  %gb = nn.reduce_sum %db dims = [0] : tensor<4x2xf32> -> tensor<2xf32>
  %w2, %wm2, %wv2 = nn.adamw %w, %g, %wm, %wv, %t lr = 1.0e-03 : tensor<8x6xf32>, tensor<8x6xf32>, tensor<i64>
  %b2, %bm2, %bv2 = nn.adamw %b, %gb, %bm, %bv, %t lr = 1.0e-03 : tensor<2xf32>, tensor<2xf32>, tensor<i64>
  return %w2, %wm2, %wv2, %b2, %bm2, %bv2 : tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Tests that on a mesh with "cp" the default axes are "dp" and "cp":
// context parallelism splits the sequence, so the gradient sums over both,
// and the state shards over both, as Megatron-LM's distributed optimizer
// shards over dp x cp.
dist.mesh @mesh ["dp"=2, "cp"=2, "tp"=1]
// CHECK-LABEL: func.func @context_parallel
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"dp", "cp"}]>}
// PARTITIONED-LABEL: func.func @context_parallel
// PARTITIONED: dist.reduce_scatter %{{.+}} on @mesh ["dp", "cp"] dim = 0 sum : tensor<8xf32> -> tensor<2xf32>
// PARTITIONED: nn.adamw {{.+}} : tensor<2xf32>
// PARTITIONED: dist.all_gather %{{.+}} on @mesh ["dp", "cp"] dim = 0 : tensor<2xf32> -> tensor<8xf32>
func.func @context_parallel(%b: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>,
                            %db: tensor<4x6x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"cp"}, {}]>},
                            %t: tensor<i64>) -> (tensor<8xf32> {nn.updates = 0 : i64}) {
  %g = nn.reduce_sum %db dims = [0, 1] : tensor<4x6x8xf32> -> tensor<8xf32>
  %b2, %m2, %v2 = nn.adamw %b, %g, %m, %v, %t lr = 1.0e-03 : tensor<8xf32>, tensor<8xf32>, tensor<i64>
  return %b2 : tensor<8xf32>
}

// -----

// Tests that a parameter split by tensor parallelism on its only dim has
// its state split further over "dp", minor to "tp", when the pieces allow:
// the gradient is reduce-scattered within each "tp" piece and the new
// parameter gathered back over "dp" alone.
dist.mesh @mesh ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @tp_split_bias
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"tp", "dp"}]>}
// PARTITIONED-LABEL: func.func @tp_split_bias
// PARTITIONED: dist.reduce_scatter %{{.+}} on @mesh ["dp"] dim = 0 sum : tensor<4xf32> -> tensor<2xf32>
// PARTITIONED: nn.adamw {{.+}} : tensor<2xf32>
// PARTITIONED: dist.all_gather %{{.+}} on @mesh ["dp"] dim = 0 : tensor<2xf32> -> tensor<4xf32>
func.func @tp_split_bias(%b: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>},
                         %m: tensor<8xf32>, %v: tensor<8xf32>,
                         %db: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>},
                         %t: tensor<i64>) -> (tensor<8xf32> {nn.updates = 0 : i64}) {
  %g = nn.reduce_sum %db dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %b2, %m2, %v2 = nn.adamw %b, %g, %m, %v, %t lr = 1.0e-03 : tensor<8xf32>, tensor<8xf32>, tensor<i64>
  return %b2 : tensor<8xf32>
}
