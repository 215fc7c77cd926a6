// RUN: tessera-opt %s --tessera-propagate --tessera-partition | FileCheck %s

// Tests that nn.attention with ring, its sequence split over "cp", is
// computed as a ring: each device keeps its queries, the keys and values
// pass along the ring (each step's sent before the block that does not read
// them computes), and the blocks combine by their log-sum-exps (the
// combined log-sum-exp, which only a gradient reads, is left out here).
dist.mesh @mesh ["dp"=2, "cp"=2]
// CHECK-LABEL: func.func @ring
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x4x8xf32> {{.*}}, %[[K:.+]]: tensor<1x1x4x8xf32> {{.*}}, %[[V:.+]]: tensor<1x1x4x8xf32>
func.func @ring(
    %q: tensor<2x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %k: tensor<2x1x8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %v: tensor<2x1x8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>})
    -> (tensor<2x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>}) {
  // CHECK-NOT: dist.all_gather
  // CHECK: %[[I:.+]] = dist.axis_index @mesh {{\[\[}}"cp"]] : tensor<1xi64>
  // CHECK-NEXT: %[[K1:.+]] = dist.collective_permute %[[K]] on @mesh ["cp"] pairs = [0, 1, 1, 0] : tensor<1x1x4x8xf32>
  // CHECK-NEXT: %[[V1:.+]] = dist.collective_permute %[[V]] on @mesh ["cp"] pairs = [0, 1, 1, 0] : tensor<1x1x4x8xf32>
  // CHECK-NEXT: %[[O0:.+]], %[[L0:.+]] = nn.attention_block %[[Q]], %[[K]], %[[V]] index %[[I]] causal = true scale = 3.500000e-01 ring_step = 0 ring_size = 2 : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1xi64>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  // CHECK-NEXT: %[[O1:.+]], %[[L1:.+]] = nn.attention_block %[[Q]], %[[K1]], %[[V1]] index %[[I]] causal = true scale = 3.500000e-01 ring_step = 1 ring_size = 2
  // CHECK-NEXT: %[[M:.+]] = nn.max %[[L0]], %[[L1]] : tensor<1x2x4xf32>
  // CHECK-COUNT-2: nn.broadcast
  // CHECK: %[[O:.+]] = nn.add
  // CHECK-NEXT: return %[[O]] : tensor<1x2x4x8xf32>
  %o = nn.attention %q, %k, %v causal = true scale = 0.35 ring = true : (tensor<2x2x8x8xf32>, tensor<2x1x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  return %o : tensor<2x2x8x8xf32>
}


// In zigzag order (--tessera-zigzag-context) every block compares its rows'
// positions: the blocks carry the order.
dist.mesh @mesh_zigzag ["cp"=2]
// CHECK-LABEL: func.func @zigzag
func.func @zigzag(
    %q: tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_zigzag, [{}, {}, {"cp"}, {}]>})
    -> (tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_zigzag, [{}, {}, {"cp"}, {}]>}) {
  // CHECK: nn.attention_block {{.*}} causal = true scale = 3.500000e-01 ring_step = 0 ring_size = 2 zigzag = 2 :
  // CHECK: nn.attention_block {{.*}} causal = true scale = 3.500000e-01 ring_step = 1 ring_size = 2 zigzag = 2 :
  %o = nn.attention %q, %q, %q causal = true scale = 0.35 ring = true zigzag = 2 : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  return %o : tensor<1x2x8x8xf32>
}


// Tests that the gradient of ring attention reuses its forward's rows'
// log-sum-exps: the forward's ring is built once (as many blocks as the ring
// has devices), and every block of the gradient's ring reads its combined
// log-sum-exp rather than a second forward ring's.
dist.mesh @mesh_cp_2 ["cp"=2]
// CHECK-LABEL: func.func @ring_gradient
func.func @ring_gradient(
    %q: tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
    %k: tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
    %v: tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
    %do: tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>})
    -> (tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
        tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
        tensor<1x2x8x8xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>}) {
  // CHECK-COUNT-2: nn.attention_block %
  // CHECK-NEXT: %[[M:.+]] = nn.max
  // CHECK: %[[LOG:.+]] = nn.log
  // CHECK-NEXT: %[[LSE:.+]] = nn.add %[[M]], %[[LOG]] : tensor<1x2x4xf32>
  // CHECK-NOT: nn.attention_block %
  // CHECK: nn.attention_block_grad {{.*}}, %[[LSE]] index {{.*}} ring_step = 0 ring_size = 2 :
  // CHECK-NOT: nn.attention_block %
  // CHECK: nn.attention_block_grad {{.*}}, %[[LSE]] index {{.*}} ring_step = 1 ring_size = 2 :
  // CHECK-NOT: nn.attention_block %
  // CHECK: return
  %o = nn.attention %q, %k, %v causal = true scale = 0.35 ring = true : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %do causal = true scale = 0.35 ring = true : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>)
  return %dq, %dk, %dv : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>
}
