// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition | FileCheck %s

// Tests that partial sums added together and then wanted split are summed
// locally and reduce-scattered once (the gradients of q, k and v meeting at
// a layer norm under sequence parallelism), rather than all-reduced term by
// term and sliced.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @sum_then_split
// CHECK-NOT: dist.all_reduce
// CHECK-NOT: dist.all_slice
// CHECK: %[[A:.+]] = nn.dot
// CHECK: %[[B:.+]] = nn.dot
// CHECK: %[[C:.+]] = nn.dot
// CHECK: %[[AB:.+]] = nn.add %[[A]], %[[B]] : tensor<8x16xf32>
// CHECK-NEXT: %[[ABC:.+]] = nn.add %[[AB]], %[[C]] : tensor<8x16xf32>
// CHECK-NEXT: dist.reduce_scatter %[[ABC]] on @mesh ["tp"] dim = 0 sum : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NOT: dist.all_reduce
// CHECK-NOT: dist.all_slice
func.func @sum_then_split(
    %x: tensor<8x32xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
    %wa: tensor<32x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
    %wb: tensor<32x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
    %wc: tensor<32x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>})
    -> tensor<8x16xf32> {
  %a = nn.dot %x, %wa contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %b = nn.dot %x, %wb contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %c = nn.dot %x, %wc contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %ab = nn.add %a, %b : tensor<8x16xf32>
  %abc = nn.add %ab, %c : tensor<8x16xf32>
  %whole = dist.sharding_constraint %abc <@mesh, [{}, {}]> : tensor<8x16xf32>
  %split = dist.sharding_constraint %whole <@mesh, [{"tp"}, {}]> : tensor<8x16xf32>
  %y = nn.gelu %split : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Tests that a sum of reduced terms that stays whole (a tied embedding's two
// gradient terms) keeps one all_reduce per term: each partial term is freed
// as it is reduced.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @sum_stays_whole
// CHECK: dist.all_reduce
// CHECK: dist.all_reduce
// CHECK: nn.add
func.func @sum_stays_whole(
    %x: tensor<8x32xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
    %wa: tensor<32x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
    %wb: tensor<32x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>}) {
  %a = nn.dot %x, %wa contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %b = nn.dot %x, %wb contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %ab = nn.add %a, %b : tensor<8x16xf32>
  return %ab : tensor<8x16xf32>
}
