// RUN: tessera-opt %s -split-input-file --tessera-autodiff | FileCheck %s

// Tests that the function returns the loss and one gradient per parameter,
// in argument order, each named after its parameter.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: -> (tensor<f32>, tensor<8x2xf32> {nn.grad_of = "w"}, tensor<2xf32> {nn.grad_of = "b"})
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w"},
                  %b: tensor<2xf32> {nn.param = "b"}) -> tensor<f32> {
  // CHECK: %[[Y:.+]] = nn.dot
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<2xf32> -> tensor<4x2xf32>
  %s = nn.add %y, %bb : tensor<4x2xf32>
  // CHECK: %[[L:.+]] = nn.reduce_sum
  %l = nn.reduce_sum %s dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  // The seed, spread back over the reduced dims.
  // CHECK: %[[ONE:.+]] = nn.constant dense<1.000000e+00> : tensor<f32>
  // CHECK: %[[DS:.+]] = nn.broadcast %[[ONE]] dims = [] : tensor<f32> -> tensor<4x2xf32>
  // The bias gradient sums the broadcast dim away.
  // CHECK-DAG: %[[DB:.+]] = nn.reduce_sum %[[DS]] dims = [0] : tensor<4x2xf32> -> tensor<2xf32>
  // CHECK-DAG: %[[DW:.+]] = nn.transpose {{.*}} -> tensor<8x2xf32>
  // CHECK: return %[[L]], %[[DW]], %[[DB]]
  return %l : tensor<f32>
}

// -----

// Tests that data-only paths get no gradient and that a value used twice
// sums its gradients.
// CHECK-LABEL: func.func @shared_use
func.func @shared_use(%a: tensor<4xf32> {nn.param = "a"}, %d: tensor<4xf32>) -> tensor<f32> {
  // The forward exp only: none in the backward.
  // CHECK: nn.exp
  // CHECK-NOT: nn.exp
  %e = nn.exp %d : tensor<4xf32>
  %m = nn.mul %a, %a : tensor<4xf32>
  %s = nn.add %m, %e : tensor<4xf32>
  %l = nn.reduce_sum %s dims = [0] : tensor<4xf32> -> tensor<f32>
  // d(a*a) = dy*a + dy*a.
  // CHECK: %[[DY:.+]] = nn.broadcast
  // CHECK: %[[G1:.+]] = nn.mul %[[DY]], %arg0
  // CHECK: %[[G2:.+]] = nn.mul %[[DY]], %arg0
  // CHECK: %[[SUM:.+]] = nn.add %[[G1]], %[[G2]]
  // CHECK: return %{{.+}}, %[[SUM]]
  return %l : tensor<f32>
}

// -----

// Tests that a parameter the loss does not depend on gets a zero gradient.
// CHECK-LABEL: func.func @unused
// CHECK: %[[Z:.+]] = nn.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %{{.+}}, %{{.+}}, %[[Z]]
func.func @unused(%a: tensor<4xf32> {nn.param = "a"}, %u: tensor<3xf32> {nn.param = "u"}) -> tensor<f32> {
  %l = nn.reduce_sum %a dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the embedding's gradient is a scatter-add and cross-entropy's a
// softmax minus one-hot.
// CHECK-LABEL: func.func @lookup
func.func @lookup(%t: tensor<10x4xf32> {nn.param = "t"}, %ids: tensor<2x3xi32>,
                  %labels: tensor<2x3xi32>, %w: tensor<4x10xf32>) -> tensor<f32> {
  %e = nn.embedding %t, %ids : tensor<10x4xf32>, tensor<2x3xi32>
  %z = nn.dot %e, %w contracting_dims = [2] x [0] : (tensor<2x3x4xf32>, tensor<4x10xf32>) -> tensor<2x3x10xf32>
  %ce = nn.cross_entropy %z, %labels : tensor<2x3x10xf32>, tensor<2x3xi32>
  %l = nn.reduce_mean %ce dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  // CHECK: nn.softmax %{{.+}} dim = 2
  // CHECK: nn.one_hot %arg2 : tensor<2x3xi32> -> tensor<2x3x10xf32>
  // CHECK: nn.embedding_grad %{{.+}}, %arg1 vocab = 10
  return %l : tensor<f32>
}

// -----

// Tests that a causal mask's gradient is the output gradient masked with 0:
// no mask of kept entries is made or kept for the backward.
// CHECK-LABEL: func.func @causal_mask
func.func @causal_mask(%s: tensor<2x4x4xf32> {nn.param = "s"}) -> tensor<f32> {
  // CHECK: nn.causal_mask %arg0 : tensor<2x4x4xf32>
  %m = nn.causal_mask %s : tensor<2x4x4xf32>
  %l = nn.reduce_sum %m dims = [0, 1, 2] : tensor<2x4x4xf32> -> tensor<f32>
  // CHECK: %[[DM:.+]] = nn.broadcast
  // CHECK-NEXT: %[[DS:.+]] = nn.causal_mask %[[DM]] fill = 0.000000e+00 : tensor<2x4x4xf32>
  // CHECK-NOT: nn.compare
  // CHECK: return %{{.+}}, %[[DS]]
  return %l : tensor<f32>
}

// -----

// Tests that a layer norm's input gradient is one fused op, and that gamma's
// and beta's gradients sum dy · x̂ and dy over the leading dims.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: -> (tensor<f32>, tensor<8xf32> {nn.grad_of = "g"}, tensor<8xf32> {nn.grad_of = "b"})
func.func @layer_norm(%x: tensor<2x4x8xf32>, %g: tensor<8xf32> {nn.param = "g"},
                      %b: tensor<8xf32> {nn.param = "b"}) -> tensor<f32> {
  // CHECK: %[[Y:.+]] = nn.layer_norm %[[X:[^,]+]], %[[G:[^,]+]], %{{[^ ]+}} epsilon = [[EPS:[^ ]+]] :
  %y = nn.layer_norm %x, %g, %b epsilon = 1.0e-03 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %l = nn.reduce_sum %y dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  // CHECK: %[[DY:.+]] = nn.broadcast
  // CHECK: %{{.+}}, %[[XHAT:.+]] = nn.layer_norm_grad %[[X]], %[[G]], %[[DY]] epsilon = [[EPS]] :
  // CHECK: %[[P:.+]] = nn.mul %[[DY]], %[[XHAT]]
  // CHECK-DAG: %[[DG:.+]] = nn.reduce_sum %[[P]] dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  // CHECK-DAG: %[[DB:.+]] = nn.reduce_sum %[[DY]] dims = [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  // CHECK: return %{{.+}}, %[[DG]], %[[DB]]
  return %l : tensor<f32>
}
