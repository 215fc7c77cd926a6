// RUN: tessera-opt %s --tessera-zigzag-context | FileCheck %s

// Tests ring attention's causal load balance: on "cp"=2 the sequence of 8
// is stored as 4 chunks of 2 in zigzag order (chunks 0, 3, 1, 2), so that
// device 0 holds chunks 0 and 3 and device 1 chunks 1 and 2. The token ids
// are gathered whole, permuted where first read and pinned to their split;
// the position table is permuted before its broadcast over the batch, the
// rotary-style positions right after the iota that makes them (what only
// feeds the attention's operand is made from them in zigzag order), and the
// causal ring attention compares positions.
dist.mesh @mesh ["cp"=2]

// CHECK-LABEL: func.func @balanced
func.func @balanced(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                    %table: tensor<16x4xf32> {nn.param = "table"},
                    %pos: tensor<8x4xf32> {nn.param = "pos"}) -> tensor<f32> {
  // CHECK: %[[WHOLEIDS:.+]] = dist.sharding_constraint %arg0 <@mesh, [{?}, {}]>
  // CHECK-NEXT: %[[C0:.+]] = nn.slice %[[WHOLEIDS]] start = [0, 0] limit = [2, 2]
  // CHECK-NEXT: %[[C1:.+]] = nn.slice %[[WHOLEIDS]] start = [0, 6] limit = [2, 8]
  // CHECK-NEXT: %[[C2:.+]] = nn.slice %[[WHOLEIDS]] start = [0, 2] limit = [2, 4]
  // CHECK-NEXT: %[[C3:.+]] = nn.slice %[[WHOLEIDS]] start = [0, 4] limit = [2, 6]
  // CHECK-NEXT: %[[Z:.+]] = nn.concat %[[C0]], %[[C1]], %[[C2]], %[[C3]] dim = 1
  // CHECK-NEXT: %[[IDS:.+]] = dist.sharding_constraint %[[Z]] <@mesh, [{?}, {"cp"}]>
  // CHECK-NEXT: nn.embedding %arg1, %[[IDS]]
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  // CHECK: %[[WHOLEPOS:.+]] = dist.sharding_constraint %arg2 <@mesh, [{}, {?}]>
  // CHECK-NEXT: nn.slice %[[WHOLEPOS]] start = [0, 0] limit = [2, 4]
  // CHECK-NEXT: nn.slice %[[WHOLEPOS]] start = [6, 0] limit = [8, 4]
  // CHECK: %[[P:.+]] = nn.concat {{.*}} dim = 0
  // CHECK-NEXT: %[[PW:.+]] = dist.sharding_constraint %[[P]] <@mesh, [{}, {?}]>
  // CHECK-NEXT: nn.broadcast %[[PW]] dims = [1, 2]
  %p = nn.broadcast %pos dims = [1, 2] : tensor<8x4xf32> -> tensor<2x8x4xf32>
  %h = nn.add %x, %p : tensor<2x8x4xf32>
  %r = nn.reshape %h : tensor<2x8x4xf32> -> tensor<2x8x1x4xf32>
  %q = nn.transpose %r permutation = [0, 2, 1, 3] : tensor<2x8x1x4xf32> -> tensor<2x1x8x4xf32>
  // CHECK: %[[IOTA:.+]] = nn.iota dim = 0 : tensor<8x4xf32>
  // CHECK-NEXT: dist.sharding_constraint %[[IOTA]] <@mesh, [{}, {?}]>
  // CHECK: %[[ANGLES:.+]] = dist.sharding_constraint {{.*}} <@mesh, [{}, {?}]>
  // CHECK-NEXT: nn.cos %[[ANGLES]]
  %i = nn.iota dim = 0 : tensor<8x4xf32>
  %c = nn.cos %i : tensor<8x4xf32>
  %cb = nn.broadcast %c dims = [2, 3] : tensor<8x4xf32> -> tensor<2x1x8x4xf32>
  %qr = nn.mul %q, %cb : tensor<2x1x8x4xf32>
  // CHECK: nn.attention {{.*}} causal = true scale = 5.000000e-01 ring = true zigzag = 2
  %o = nn.attention %qr, %qr, %qr causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %l = nn.reduce_mean %o dims = [0, 1, 2, 3] : tensor<2x1x8x4xf32> -> tensor<f32>
  // CHECK-NOT: nn.slice
  // CHECK: return
  return %l : tensor<f32>
}

// A result that keeps the sequence is permuted back: stored chunks 0, 2,
// 3, 1 are chunks 0, 1, 2, 3. A non-causal attention needs no positions.
// CHECK-LABEL: func.func @returned
func.func @returned(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                    %table: tensor<16x4xf32> {nn.param = "table"})
    -> (tensor<2x8x4xf32>, tensor<2x1x8x4xf32>) {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  %r = nn.reshape %x : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  // CHECK: nn.attention {{.*}} zigzag = 2
  // CHECK: %[[U:.+]] = nn.attention {{.*}} scale = 5.000000e-01 ring = true :
  %u = nn.attention %o, %o, %o scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  // CHECK: %[[XW:.+]] = dist.sharding_constraint %[[X:.+]] <@mesh, [{?}, {}, {?}]>
  // CHECK-NEXT: nn.slice %[[XW]] start = [0, 0, 0] limit = [2, 2, 4]
  // CHECK-NEXT: nn.slice %[[XW]] start = [0, 4, 0] limit = [2, 6, 4]
  // CHECK-NEXT: nn.slice %[[XW]] start = [0, 6, 0] limit = [2, 8, 4]
  // CHECK-NEXT: nn.slice %[[XW]] start = [0, 2, 0] limit = [2, 4, 4]
  // CHECK: %[[UW:.+]] = dist.sharding_constraint %[[U]] <@mesh, [{?}, {?}, {}, {?}]>
  // CHECK: return %{{.+}}, %{{.+}} : tensor<2x8x4xf32>, tensor<2x1x8x4xf32>
  return %x, %u : tensor<2x8x4xf32>, tensor<2x1x8x4xf32>
}
