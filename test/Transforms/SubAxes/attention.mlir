// RUN: tessera-opt %s --tessera-split-axes --tessera-propagate --tessera-partition --tessera-merge-axes | FileCheck %s

// Tests Megatron-LM's replicated kv heads: with 2 kv heads on tp=4, each
// device computes its 2 query heads with its kv head, read whole and not
// gathered; the gradient's dk and dv sum over the devices sharing the kv
// head; and the parts of "tp" stay axes of the mesh, as the kv heads use
// the first alone.
// CHECK: dist.mesh @mesh ["dp"=2, "tp:(1)2"=2, "tp:(2)2"=2]
dist.mesh @mesh ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @gqa
// CHECK-SAME: tensor<1x2x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp:(1)2", "tp:(2)2"}, {}, {}]>}
// CHECK-SAME: tensor<1x1x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp:(1)2"}, {}, {}]>}
func.func @gqa(%q: tensor<2x8x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}, {}, {}]>},
               %k: tensor<2x2x16x8xf32>, %v: tensor<2x2x16x8xf32>,
               %do: tensor<2x8x16x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}, {}, {}]>})
    -> (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) {
  // CHECK-NOT: dist.all_gather
  // CHECK: %[[O:.+]] = nn.attention %{{.+}} : (tensor<1x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<1x2x16x8xf32>
  // CHECK: %{{.+}}, %[[DK:.+]], %[[DV:.+]] = nn.attention_grad
  // CHECK-DAG: dist.all_reduce %[[DK]] on @mesh ["tp:(2)2"] sum : tensor<1x1x16x8xf32>
  // CHECK-DAG: dist.all_reduce %[[DV]] on @mesh ["tp:(2)2"] sum : tensor<1x1x16x8xf32>
  // CHECK-NOT: dist.all_gather
  %o = nn.attention %q, %k, %v causal = true scale = 0.25 : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %do causal = true scale = 0.25 : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x8x16x8xf32>, tensor<2x8x16x8xf32>) -> (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>)
  return %o, %dk, %dv : tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>
}
