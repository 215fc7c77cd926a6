// RUN: tessera-opt %s --tessera-recompute=mode=selective | FileCheck %s

// Tests that selective recomputation clones the attention core (scores,
// scaling with its own constant, mask, softmax) right before the first
// backward op that reads the probabilities, which then reads the clone, and
// keeps the core's output (what the rest of the forward reads).
// CHECK-LABEL: func.func @attention
// CHECK: %[[S:.+]] = nn.dot %arg0, %arg1
// CHECK: %[[P:.+]] = nn.softmax
// CHECK: %[[O:.+]] = nn.dot %[[P]], %arg2
// CHECK: %[[L:.+]] = nn.reduce_sum %[[O]]
// CHECK: %[[S2:.+]] = nn.dot %arg0, %arg1
// CHECK-NEXT: %[[C2:.+]] = nn.constant dense<2.500000e-01>
// CHECK-NEXT: %[[M2:.+]] = nn.mul %[[S2]], %[[C2]]
// CHECK-NEXT: %[[K2:.+]] = nn.causal_mask %[[M2]]
// CHECK-NEXT: %[[P2:.+]] = nn.softmax %[[K2]] dim = 2
// CHECK-NEXT: %[[DV:.+]] = nn.dot %[[P2]], %arg3
// CHECK-NOT: nn.dot %[[P]]
// CHECK: return %[[DV]], %[[L]]
func.func @attention(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>,
                     %v: tensor<2x4x8xf32>, %do: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32> {nn.updates = 2 : i64}, tensor<f32>) {
  %s = nn.dot %q, %k batching_dims = [0] x [0] contracting_dims = [2] x [2] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %c = nn.constant dense<2.500000e-01> : tensor<2x4x4xf32>
  %m = nn.mul %s, %c : tensor<2x4x4xf32>
  %masked = nn.causal_mask %m : tensor<2x4x4xf32>
  %p = nn.softmax %masked dim = 2 : tensor<2x4x4xf32>
  %o = nn.dot %p, %v batching_dims = [0] x [0] contracting_dims = [2] x [1] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = nn.reduce_sum %o dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  // The backward reads the probabilities.
  %dv = nn.dot %p, %do batching_dims = [0] x [0] contracting_dims = [1] x [1] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %dv, %l : tensor<2x4x8xf32>, tensor<f32>
}

// An annotated layout puts sharding constraints between the core's ops: on
// the scale and on the probabilities, which reach the product through one.
// The core (with the constraints inside it) is found and remade all the
// same.
// CHECK-LABEL: func.func @constrained
// CHECK: nn.softmax
// CHECK-NEXT: %[[CP:.+]] = dist.sharding_constraint
// CHECK-NEXT: nn.dot %[[CP]], %arg2
// CHECK: %[[CS2:.+]] = nn.dot %arg0, %arg1
// CHECK-NEXT: nn.constant
// CHECK-NEXT: dist.sharding_constraint
// CHECK-NEXT: %[[CM2:.+]] = nn.mul %[[CS2]]
// CHECK-NEXT: %[[CP2:.+]] = nn.softmax %[[CM2]] dim = 2
// CHECK-NEXT: %[[CC2:.+]] = dist.sharding_constraint %[[CP2]]
// CHECK-NEXT: nn.dot %[[CC2]], %arg3
dist.mesh @mesh ["tp"=2]
func.func @constrained(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>,
                       %v: tensor<2x4x8xf32>, %do: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32> {nn.updates = 2 : i64}, tensor<f32>) {
  %s = nn.dot %q, %k batching_dims = [0] x [0] contracting_dims = [2] x [2] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %c = nn.constant dense<2.500000e-01> : tensor<2x4x4xf32>
  %cc = dist.sharding_constraint %c <@mesh, [{"tp"}, {}, {}]> : tensor<2x4x4xf32>
  %m = nn.mul %s, %cc : tensor<2x4x4xf32>
  %p = nn.softmax %m dim = 2 : tensor<2x4x4xf32>
  %cp = dist.sharding_constraint %p <@mesh, [{"tp"}, {}, {}]> : tensor<2x4x4xf32>
  %o = nn.dot %cp, %v batching_dims = [0] x [0] contracting_dims = [2] x [1] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = nn.reduce_sum %o dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  %dv = nn.dot %cp, %do batching_dims = [0] x [0] contracting_dims = [1] x [1] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %dv, %l : tensor<2x4x8xf32>, tensor<f32>
}

// The probabilities' dropout belongs to the core: it is remade with it,
// from the same step (the same mask).
// CHECK-LABEL: func.func @dropout
// CHECK: %[[DP:.+]] = nn.dropout %{{.+}} step %arg4 rate = 1.000000e-01 seed = 3
// CHECK-NEXT: nn.dot %[[DP]], %arg2
// CHECK: %[[DS2:.+]] = nn.dot %arg0, %arg1
// CHECK-NEXT: %[[DP2:.+]] = nn.softmax %[[DS2]] dim = 2
// CHECK-NEXT: %[[DD2:.+]] = nn.dropout %[[DP2]] step %arg4 rate = 1.000000e-01 seed = 3
// CHECK-NEXT: nn.dot %[[DD2]], %arg3
func.func @dropout(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>,
                   %v: tensor<2x4x8xf32>, %do: tensor<2x4x8xf32>, %step: tensor<i64>)
    -> (tensor<2x4x8xf32> {nn.updates = 2 : i64}, tensor<f32>) {
  %s = nn.dot %q, %k batching_dims = [0] x [0] contracting_dims = [2] x [2] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %p = nn.softmax %s dim = 2 : tensor<2x4x4xf32>
  %d = nn.dropout %p step %step rate = 0.1 seed = 3 : tensor<2x4x4xf32>, tensor<i64>
  %o = nn.dot %d, %v batching_dims = [0] x [0] contracting_dims = [2] x [1] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = nn.reduce_sum %o dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  %dv = nn.dot %d, %do batching_dims = [0] x [0] contracting_dims = [1] x [1] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %dv, %l : tensor<2x4x8xf32>, tensor<f32>
}
