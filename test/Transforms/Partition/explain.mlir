// RUN: tessera-opt %s --tessera-propagate --tessera-partition=explain=true -verify-diagnostics -o /dev/null

// Tests that explain mode names the reason and the collectives of every
// reshard: partial sums of a split contracting dim, a dim the op cannot
// split, and a result wanted split.
dist.mesh @mesh_tp_4 ["tp"=4]
func.func @reasons(%a: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>},
                   %w: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>},
                   %s: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>}, tensor<8x16xf32>) {
  // expected-remark @+1 {{result #0 resharded from #dist.sharding<@mesh_tp_4, [{}, {}], unreduced={"tp"}> to #dist.sharding<@mesh_tp_4, [{}, {}]>: all_reduce over {"tp"};}}
  %y = nn.dot %a, %w contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  // expected-remark @+1 {{result #0 resharded from #dist.sharding<@mesh_tp_4, [{}, {}]> to #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>: all_slice over {"tp"} on dim 0;}}
  %p = nn.softmax %y dim = 0 : tensor<8x16xf32>
  // expected-remark @+1 {{operand #0 resharded from #dist.sharding<@mesh_tp_4, [{"tp"}, {}]> to #dist.sharding<@mesh_tp_4, [{}, {}]>: all_gather over {"tp"} on dim 0;}}
  %q = nn.log_softmax %s dim = 0 : tensor<8x16xf32>
  return %p, %q : tensor<8x16xf32>, tensor<8x16xf32>
}

// Tests that explain mode shows a vocab-split embedding table's lookup as
// Megatron-LM's: each device's rows, the partial lookups all-reduced.
dist.mesh @mesh_tp_2 ["tp"=2]
func.func @vocab_split(%table: tensor<16x8xf32> {dist.sharding = #dist.sharding<@mesh_tp_2, [{"tp"}, {}]>},
                       %ids: tensor<4xi32>) -> tensor<4x8xf32> {
  // expected-remark @+1 {{result #0 resharded from #dist.sharding<@mesh_tp_2, [{}, {}], unreduced={"tp"}> to #dist.sharding<@mesh_tp_2, [{}, {}]>: all_reduce over {"tp"};}}
  %e = nn.embedding %table, %ids : tensor<16x8xf32>, tensor<4xi32>
  return %e : tensor<4x8xf32>
}
