// RUN: tessera-opt %s -split-input-file --tessera-split-axes | FileCheck %s

// Tests that an axis of more devices than the attention's kv heads, which
// splits its query heads, becomes its two parts, the kv heads' and the
// group's, in the mesh and in every sharding.
// CHECK-LABEL: dist.mesh @mesh ["dp"=2, "tp:(1)2"=2, "tp:(2)2"=2]
dist.mesh @mesh ["dp"=2, "tp"=4]
// CHECK: func.func @gqa(%{{.+}}: tensor<2x8x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp:(1)2", "tp:(2)2"}, {}, {}]>}, %{{.+}}: tensor<2x2x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {}, {}], replicated={"tp:(1)2", "tp:(2)2"}>}, %{{.+}}: tensor<2x2x16x8xf32>)
func.func @gqa(%q: tensor<2x8x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}, {}, {}]>},
               %k: tensor<2x2x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {}, {}], replicated={"tp"}>},
               %v: tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32> {
  // CHECK: dist.sharding_constraint %{{.+}} <@mesh, [{"dp", ?}, {"tp:(1)2", "tp:(2)2", ?}, {?}, {?}]>
  %c = dist.sharding_constraint %q <@mesh, [{"dp", ?}, {"tp", ?}, {?}, {?}]> : tensor<2x8x16x8xf32>
  %o = nn.attention %c, %k, %v causal = true scale = 0.25 : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32>
  return %o : tensor<2x8x16x8xf32>
}

// -----

// Tests that no axis splits where the kv heads take the axis whole (tp=2),
// where there is one kv head (the group takes it), where the axis does not
// divide the query heads, and that "pp" never splits.
// CHECK-LABEL: dist.mesh @mesh ["pp"=4, "dp"=8, "tp"=2]
dist.mesh @mesh ["pp"=4, "dp"=8, "tp"=2]
func.func @fits(%q: tensor<2x4x16x8xf32>, %k: tensor<2x2x16x8xf32>, %k1: tensor<2x1x16x8xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %o = nn.attention %q, %k, %k causal = true scale = 0.25 : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x16x8xf32>
  %m = nn.attention %q, %k1, %k1 causal = true scale = 0.25 : (tensor<2x4x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %o, %m : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}

// -----

// Tests that the gradient's heads split an axis as the attention's do, and
// that the collectives' axes follow.
// CHECK-LABEL: dist.mesh @mesh ["tp:(1)4"=4, "tp:(4)2"=2]
dist.mesh @mesh ["tp"=8]
func.func @gradient(%q: tensor<1x8x4x8xf32>, %k: tensor<1x4x4x8xf32>, %o: tensor<1x8x4x8xf32>, %do: tensor<1x8x4x8xf32>)
    -> tensor<1x8x4x8xf32> {
  // CHECK: dist.all_reduce %{{.+}} on @mesh ["tp:(1)4", "tp:(4)2"] sum
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %o, %do causal = false scale = 0.25 : (tensor<1x8x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x8x4x8xf32>, tensor<1x8x4x8xf32>) -> (tensor<1x8x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>)
  %r = dist.all_reduce %dq on @mesh ["tp"] sum : tensor<1x8x4x8xf32>
  return %r : tensor<1x8x4x8xf32>
}
