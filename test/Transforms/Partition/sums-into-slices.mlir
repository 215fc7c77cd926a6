// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition | FileCheck %s

// Tests that partial sums added together are summed locally and reduced
// once (the gradients of q, k and v meeting at a layer norm): wanted split
// (under sequence parallelism), reduce-scattered; wanted whole,
// all-reduced; rather than all-reduced term by term.
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

dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @sum_stays_whole
// CHECK-NOT: dist.all_reduce
// CHECK: %[[A:.+]] = nn.dot
// CHECK: %[[B:.+]] = nn.dot
// CHECK: %[[AB:.+]] = nn.add %[[A]], %[[B]] : tensor<8x16xf32>
// CHECK-NEXT: dist.all_reduce %[[AB]] on @mesh ["tp"] sum : tensor<8x16xf32>
// CHECK-NOT: dist.all_reduce
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

// -----

// Tests that a parameter's gradient of two terms (a tied embedding's) that
// an update reads whole keeps one all_reduce per term: the first term's
// runs behind the rest of the backward pass.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @gradient_terms
// CHECK: dist.all_reduce
// CHECK: dist.all_reduce
// CHECK: nn.add
// CHECK: nn.sgd
func.func @gradient_terms(
    %x: tensor<8x32xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
    %wa: tensor<32x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
    %wb: tensor<32x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
    %p: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>}) {
  %a = nn.dot %x, %wa contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %b = nn.dot %x, %wb contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %ab = nn.add %a, %b : tensor<8x16xf32>
  %new = nn.sgd %p, %ab lr = 1.0e-01 : tensor<8x16xf32>
  return %new : tensor<8x16xf32>
}
