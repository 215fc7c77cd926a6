// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition | FileCheck %s

// Tests that an all_to_all repeated on the same value is made once, and
// that one of a transpose of an exchanged value is that exchange
// transposed (the backward of context parallelism reads the forward's
// exchanges, and a gradient is read both ways).
dist.mesh @mesh ["y"=2]
// CHECK-LABEL: func.func @repeated
// CHECK-SAME: (%[[A:.+]]: tensor<4x4xf32>
func.func @repeated(%a: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"y"}]>}) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x4xf32>) {
  // CHECK: %[[X:.+]] = dist.all_to_all %[[A]] on @mesh ["y"] split_dim = 0 concat_dim = 1 : tensor<4x4xf32> -> tensor<2x8xf32>
  // CHECK-NOT: dist.all_to_all
  // CHECK: nn.exp %[[X]]
  // CHECK: nn.tanh %[[X]]
  // CHECK: %[[T:.+]] = nn.transpose %[[X]] permutation = [1, 0] : tensor<2x8xf32> -> tensor<8x2xf32>
  // CHECK: nn.sin %[[T]]
  %c1 = dist.sharding_constraint %a <@mesh, [{"y"}, {}]> : tensor<4x8xf32>
  %e1 = nn.exp %c1 : tensor<4x8xf32>
  %c2 = dist.sharding_constraint %a <@mesh, [{"y"}, {}]> : tensor<4x8xf32>
  %e2 = nn.tanh %c2 : tensor<4x8xf32>
  %t = nn.transpose %a permutation = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %c3 = dist.sharding_constraint %t <@mesh, [{}, {"y"}]> : tensor<8x4xf32>
  %e3 = nn.sin %c3 : tensor<8x4xf32>
  return %e1, %e2, %e3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x4xf32>
}

// -----

// Tests that exchanges of two transposes of one value that split and
// concatenate the same dims of it are one exchange, transposed for the second
// (MoE's backward reads the gradient of the experts' outputs in two layouts).
dist.mesh @mesh ["y"=2]
// CHECK-LABEL: func.func @siblings
func.func @siblings(%a: tensor<4x8x2xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"y"}, {}]>}) -> (tensor<8x4x2xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[T:.+]] = nn.transpose %{{.+}} permutation = [1, 0, 2]
  // CHECK: %[[X:.+]] = dist.all_to_all %[[T]] on @mesh ["y"] split_dim = 1 concat_dim = 0 : tensor<4x4x2xf32> -> tensor<8x2x2xf32>
  // CHECK-NOT: dist.all_to_all
  // CHECK: %[[U:.+]] = nn.transpose %[[X]] permutation = [2, 1, 0] : tensor<8x2x2xf32> -> tensor<2x2x8xf32>
  // CHECK: nn.tanh %[[U]]
  %t1 = nn.transpose %a permutation = [1, 0, 2] : tensor<4x8x2xf32> -> tensor<8x4x2xf32>
  %c1 = dist.sharding_constraint %t1 <@mesh, [{}, {"y"}, {}]> : tensor<8x4x2xf32>
  %e1 = nn.exp %c1 : tensor<8x4x2xf32>
  %t2 = nn.transpose %a permutation = [2, 0, 1] : tensor<4x8x2xf32> -> tensor<2x4x8xf32>
  %c2 = dist.sharding_constraint %t2 <@mesh, [{}, {"y"}, {}]> : tensor<2x4x8xf32>
  %e2 = nn.tanh %c2 : tensor<2x4x8xf32>
  return %e1, %e2 : tensor<8x4x2xf32>, tensor<2x4x8xf32>
}

// -----

// A repeated all_gather stays (ZeRO-3 gathers again on purpose).
dist.mesh @mesh ["y"=2]
// CHECK-LABEL: func.func @gathers
func.func @gathers(%a: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"y"}]>}) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: dist.all_gather
  // CHECK: dist.all_gather
  %c1 = dist.sharding_constraint %a <@mesh, [{}, {}]> : tensor<4x8xf32>
  %e1 = nn.exp %c1 : tensor<4x8xf32>
  %c2 = dist.sharding_constraint %a <@mesh, [{}, {}]> : tensor<4x8xf32>
  %e2 = nn.tanh %c2 : tensor<4x8xf32>
  return %e1, %e2 : tensor<4x8xf32>, tensor<4x8xf32>
}
