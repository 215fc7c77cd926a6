// RUN: tessera-opt %s --tessera-auto-shard="batch-axes=dp" | FileCheck %s
// RUN: tessera-opt %s --tessera-auto-shard | FileCheck %s --check-prefix=FREE

// Tests that batch axes split the batch only: "dp" goes to each data
// argument's first dim and to what the ops make of it, and to the position
// table broadcast into the batch to be added to it (computed there, not
// sliced), never to a parameter; "tp" never splits the batch (here it splits
// the sequence). Unconstrained, the ILP splits the sequence over both axes
// (FREE), which microbatches over dp could not split. The constraints in the
// body stay open to axes the mesh gains later (the microbatches').
dist.mesh @mesh ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @embed_mlp
// CHECK-SAME: %{{.+}}: tensor<64x1024xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NOT: "dp"{{[^>]*}}>, nn.param
// CHECK: dist.sharding_constraint %arg0 <@mesh, [{"dp", ?}, {"tp", ?}]>
// CHECK-NEXT: nn.embedding
// CHECK-NEXT: dist.sharding_constraint %{{.+}} <@mesh, [{"dp", ?}, {"tp", ?}, {?}]>
// CHECK-NEXT: nn.broadcast
// CHECK-NEXT: dist.sharding_constraint %{{.+}} <@mesh, [{"dp", ?}, {"tp", ?}, {?}]>
// CHECK: nn.dot
// CHECK-NEXT: dist.sharding_constraint %{{.+}} <@mesh, [{"dp", ?}, {"tp", ?}, {?}]>
// FREE-LABEL: func.func @embed_mlp
// FREE: nn.embedding
// FREE-NEXT: dist.sharding_constraint %{{.+}} <@mesh, [{}, {"dp", "tp"}, {}]>
func.func @embed_mlp(%tokens: tensor<64x1024xi32>,
                     %table: tensor<1024x4096xf32> {nn.param = "table"},
                     %positions: tensor<1024x4096xf32> {nn.param = "positions"},
                     %w: tensor<4096x4096xf32> {nn.param = "w"}) -> tensor<f32> {
  %e = nn.embedding %table, %tokens : tensor<1024x4096xf32>, tensor<64x1024xi32>
  %p = nn.broadcast %positions dims = [1, 2] : tensor<1024x4096xf32> -> tensor<64x1024x4096xf32>
  %x = nn.add %e, %p : tensor<64x1024x4096xf32>
  %y = nn.dot %x, %w contracting_dims = [2] x [0] : (tensor<64x1024x4096xf32>, tensor<4096x4096xf32>) -> tensor<64x1024x4096xf32>
  %loss = nn.reduce_mean %y dims = [0, 1, 2] : tensor<64x1024x4096xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
