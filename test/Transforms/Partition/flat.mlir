// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition | FileCheck %s
// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition=explain -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN

// Tests that a value stored flat (a [5, 6] tensor split on dim 1 over "tp"
// and each 15-element piece flat over "dp" = 4: 4 elements a device, the
// last holding 3 and a zero) is read whole by gathering its share, cutting
// the padding off and reshaping it back, with nothing else copied; that a
// pointwise op on flat operands computes on the shares; and that a partial
// sum stored flat is padded and reduce-scattered. A value annotated
// replicated over the flat axis is computed whole.
dist.mesh @mesh ["dp"=4, "tp"=2]
// CHECK-LABEL: func.func @flat
// CHECK-SAME: %[[A:[^:]+]]: tensor<4xf32> {dist.global_shape = array<i64: 5, 6>, dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}], flat={"dp"}>}
// CHECK-SAME: %[[B:[^:]+]]: tensor<4xf32> {dist.global_shape = array<i64: 5, 6>, dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}], flat={"dp"}>}
// CHECK-SAME: -> (tensor<5x3xf32> {{.*}}, tensor<4xf32> {dist.global_shape = array<i64: 5, 6>, dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}], flat={"dp"}>})
// CHECK: %[[SUM:.+]] = nn.add %[[A]], %[[B]] : tensor<4xf32>
// CHECK: %[[ROW:.+]] = nn.reshape %{{.+}} : tensor<5x3xf32> -> tensor<15xf32>
// CHECK-NEXT: %[[PAD:.+]] = nn.concat %[[ROW]], %{{.+}} dim = 0 : tensor<15xf32>, tensor<1xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[SHARE:.+]] = dist.reduce_scatter %[[PAD]] on @mesh ["dp"] dim = 0 sum : tensor<16xf32> -> tensor<4xf32>
// CHECK: %[[ALL:.+]] = dist.all_gather %[[SUM]] on @mesh ["dp"] dim = 0 : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[CUT:.+]] = nn.slice %[[ALL]] start = [0] limit = [15] : tensor<16xf32> -> tensor<15xf32>
// CHECK-NEXT: %[[WHOLE:.+]] = nn.reshape %[[CUT]] : tensor<15xf32> -> tensor<5x3xf32>
// CHECK: return %[[WHOLE]], %[[SHARE]]
// EXPLAIN: remark: reduce-scattered a flat piece over {"dp"}
// EXPLAIN: remark: gathered a flat piece over {"dp"}
func.func @flat(
    %a: tensor<5x6xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}], flat={"dp"}>},
    %b: tensor<5x6xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}], flat={"dp"}>},
    %x: tensor<8x5xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
    %y: tensor<8x6xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>})
    -> (tensor<5x6xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
        tensor<5x6xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}], flat={"dp"}>}) {
  %sum = nn.add %a, %b : tensor<5x6xf32>
  // Partial sums over the batch, which "dp" splits.
  %g = nn.dot %x, %y contracting_dims = [0] x [0] : (tensor<8x5xf32>, tensor<8x6xf32>) -> tensor<5x6xf32>
  %flat = dist.sharding_constraint %g <@mesh, [{}, {"tp"}], flat={"dp"}> : tensor<5x6xf32>
  return %sum, %flat : tensor<5x6xf32>, tensor<5x6xf32>
}

// -----

// Tests that a whole value is cut to its flat share locally: padded and
// sliced, no communication.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @slice_to_flat
// CHECK: %[[PAD:.+]] = nn.concat %{{.+}}, %{{.+}} dim = 0 : tensor<6xf32>, tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT: dist.all_slice %[[PAD]] on @mesh ["dp"] dim = 0 : tensor<8xf32> -> tensor<2xf32>
func.func @slice_to_flat(%w: tensor<6xf32>)
    -> (tensor<6xf32> {dist.sharding = #dist.sharding<@mesh, [{}], flat={"dp"}>}) {
  %r = nn.relu %w : tensor<6xf32>
  return %r : tensor<6xf32>
}

// -----

// Tests that a pointwise op whose result is annotated replicated over the
// flat axis computes whole, on its gathered operands.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @replicated_result
// CHECK: dist.all_gather %arg0 on @mesh ["dp"] dim = 0 : tensor<2xf32> -> tensor<8xf32>
// CHECK: nn.relu %{{.+}} : tensor<6xf32>
func.func @replicated_result(
    %w: tensor<6xf32> {dist.sharding = #dist.sharding<@mesh, [{}], flat={"dp"}>})
    -> (tensor<6xf32> {dist.sharding = #dist.sharding<@mesh, [{}], replicated={"dp"}>}) {
  %r = nn.relu %w : tensor<6xf32>
  return %r : tensor<6xf32>
}

// -----

// Tests that an op that is not pointwise computes laid out by its dims and
// stores a result wanted flat after: the column sums, padded and sliced.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @reduce_then_flat
// CHECK: %[[S:.+]] = nn.reduce_sum %arg0 dims = [0] : tensor<8x6xf32> -> tensor<6xf32>
// CHECK: %[[PAD:.+]] = nn.concat %[[S]], %{{.+}} dim = 0 : tensor<6xf32>, tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT: dist.all_slice %[[PAD]] on @mesh ["dp"] dim = 0 : tensor<8xf32> -> tensor<2xf32>
func.func @reduce_then_flat(%x: tensor<8x6xf32>)
    -> (tensor<6xf32> {dist.sharding = #dist.sharding<@mesh, [{}], flat={"dp"}>}) {
  %s = nn.reduce_sum %x dims = [0] : tensor<8x6xf32> -> tensor<6xf32>
  return %s : tensor<6xf32>
}
