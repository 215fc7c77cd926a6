// RUN: tessera-opt %s --tessera-propagate --tessera-decompose-split-reductions --tessera-partition | FileCheck %s

// Tests Megatron-LM's vocab-parallel embedding and cross-entropy, from the
// table's split alone: each device looks up its rows (a piece index from
// its coordinate along "tp"), the partial lookups are all-reduced, the tied
// LM head makes logits split on the vocabulary, and the cross-entropy
// all-reduces the rows' max and sums; neither the table nor the logits is
// gathered.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @lm(
// CHECK-SAME: %[[IDS:.+]]: tensor<4x8xi32> {{.*}}, %[[LABELS:.+]]: tensor<4x8xi32> {{.*}}, %[[WTE:.+]]: tensor<32x16xf32>
// CHECK-NOT: dist.all_gather
// CHECK: %[[I:.+]] = dist.axis_index @mesh {{\[}}["tp"]] : tensor<1xi64>
// CHECK: %[[E:.+]] = nn.embedding %[[WTE]], %[[IDS]] piece %[[I]] : tensor<32x16xf32>, tensor<4x8xi32>, tensor<1xi64>
// CHECK: dist.all_reduce %[[E]] on @mesh ["tp"] sum : tensor<4x8x16xf32>
// CHECK: nn.dot {{.*}} -> tensor<4x8x32xf32>
// CHECK: %[[M:.+]] = nn.reduce_max {{.*}} -> tensor<4x8xf32>
// CHECK: dist.all_reduce %[[M]] on @mesh ["tp"] max : tensor<4x8xf32>
// CHECK: dist.all_reduce {{.*}} on @mesh ["tp"] sum : tensor<4x8xf32>
// CHECK: %[[J:.+]] = dist.axis_index @mesh {{\[}}["tp"]] : tensor<1xi64>
// CHECK: nn.one_hot %[[LABELS]] piece %[[J]] : tensor<4x8xi32>, tensor<1xi64> -> tensor<4x8x32xf32>
// CHECK: dist.all_reduce {{.*}} on @mesh ["tp"] sum : tensor<4x8xf32>
// CHECK-NOT: dist.all_gather
func.func @lm(%ids: tensor<4x8xi32>, %labels: tensor<4x8xi32>,
              %wte: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "wte"}) -> tensor<f32> {
  %x = nn.embedding %wte, %ids : tensor<64x16xf32>, tensor<4x8xi32>
  %logits = nn.dot %x, %wte contracting_dims = [2] x [1] : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %l = nn.cross_entropy %logits, %labels : tensor<4x8x64xf32>, tensor<4x8xi32>
  %loss = nn.reduce_mean %l dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
