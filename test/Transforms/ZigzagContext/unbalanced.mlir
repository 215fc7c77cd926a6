// RUN: tessera-opt %s --tessera-zigzag-context --split-input-file --verify-diagnostics | FileCheck %s

// Tests what keeps a ring unbalanced: an op that depends on the tokens'
// order beyond the attention warns, naming it, and leaves the function as
// it is; so does a sequence that is not whole chunks of 2 x cp. Without a
// "cp" axis of more than one device nothing changes, silently.

dist.mesh @mesh ["cp"=2]
// CHECK-LABEL: func.func @drops
// CHECK-NOT: nn.slice
// CHECK: nn.attention {{.*}} ring = true :
func.func @drops(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                 %table: tensor<16x4xf32> {nn.param = "table"}, %step: tensor<i64>) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): the op draws its numbers by place, which the order of the sequence would change}}
  %d = nn.dropout %x step %step rate = 0.1 seed = 3 : tensor<2x8x4xf32>, tensor<i64>
  %r = nn.reshape %d : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %l = nn.reduce_mean %o dims = [0, 1, 2, 3] : tensor<2x1x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["cp"=2]
// A slice along the sequence reads tokens by place (a shift of labels).
func.func @shifts(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                  %table: tensor<16x4xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  %r = nn.reshape %x : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): the op reads operand #0 along the sequence by place, which the order of the sequence would change}}
  %s = nn.slice %o start = [0, 0, 1, 0] limit = [2, 1, 8, 4] : tensor<2x1x8x4xf32> -> tensor<2x1x7x4xf32>
  %l = nn.reduce_mean %s dims = [0, 1, 2, 3] : tensor<2x1x7x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["cp"=2]
// Tests that a causal mask, which hides keys by place, keeps the ring
// unbalanced.
// CHECK-LABEL: func.func @masks
// CHECK-NOT: nn.slice
// CHECK: nn.attention {{.*}} ring = true :
func.func @masks(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                 %table: tensor<16x8xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x8xf32>, tensor<2x8xi32>
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): the op depends on the tokens' order, which the order of the sequence would change}}
  %m = nn.causal_mask %x : tensor<2x8x8xf32>
  %r = nn.reshape %m : tensor<2x8x8xf32> -> tensor<2x1x8x8xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x8xf32>, tensor<2x1x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x1x8x8xf32>
  %l = nn.reduce_mean %o dims = [0, 1, 2, 3] : tensor<2x1x8x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["cp"=2]
// Tests that a causal softmax warns as a causal mask does, and that a
// plain softmax along the features does not.
func.func @causal_softmax(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                          %table: tensor<16x8xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x8xf32>, tensor<2x8xi32>
  %p = nn.softmax %x dim = 2 : tensor<2x8x8xf32>
  %r = nn.reshape %p : tensor<2x8x8xf32> -> tensor<2x1x8x8xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x8xf32>, tensor<2x1x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x1x8x8xf32>
  %b = nn.reshape %o : tensor<2x1x8x8xf32> -> tensor<2x8x8xf32>
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): the op depends on the tokens' order, which the order of the sequence would change}}
  %c = nn.softmax %b dim = 2 causal = true : tensor<2x8x8xf32>
  %l = nn.reduce_mean %c dims = [0, 1, 2] : tensor<2x8x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["cp"=2]
// Tests that expert dispatch, which fills the capacity in token order,
// keeps the ring unbalanced.
func.func @dispatches(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                      %table: tensor<16x4xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  %r = nn.reshape %x : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %h = nn.reshape %o : tensor<2x1x8x4xf32> -> tensor<2x8x4xf32>
  %v, %i = nn.top_k %h k = 2 : tensor<2x8x4xf32> -> (tensor<2x8x2xf32>, tensor<2x8x2xi64>)
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): the op depends on the tokens' order, which the order of the sequence would change}}
  %m = nn.moe_dispatch %i : tensor<2x8x2xi64> -> tensor<2x8x4x4xf32>
  %l = nn.reduce_mean %m dims = [0, 1, 2, 3] : tensor<2x8x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["cp"=2]
// Tests that a causal attention without a ring, which positions its
// queries by place, keeps the ring beside it unbalanced.
func.func @gathered(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                    %table: tensor<16x4xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  %r = nn.reshape %x : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): the op is causal without a ring, or drops its probabilities by place, which the order of the sequence would change}}
  %g = nn.attention %o, %o, %o causal = true scale = 0.5 : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %l = nn.reduce_mean %g dims = [0, 1, 2, 3] : tensor<2x1x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["cp"=2]
// Tests that an attention that finds the sequence in another dim of its
// queries than their rows keeps the ring unbalanced.
func.func @transposed(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                      %table: tensor<16x4xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  %r = nn.reshape %x : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %t = nn.transpose %o permutation = [0, 1, 3, 2] : tensor<2x1x8x4xf32> -> tensor<2x1x4x8xf32>
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): the op holds the sequence elsewhere than dim 2 of operand #0, which the order of the sequence would change}}
  %u = nn.attention %t, %t, %t scale = 0.5 : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x1x4x8xf32>
  %l = nn.reduce_mean %u dims = [0, 1, 2, 3] : tensor<2x1x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["cp"=4]
// 12 tokens are not whole chunks of 8.
func.func @uneven(%ids: tensor<2x12xi32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}]>},
                  %table: tensor<16x4xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x12xi32>
  %r = nn.reshape %x : tensor<2x12x4xf32> -> tensor<2x1x12x4xf32>
  // expected-warning @+1 {{ring attention stays unbalanced (no zigzag order): its sequence of 12 is not one of whole chunks of 2 x cp = 8 in every attention}}
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x12x4xf32>, tensor<2x1x12x4xf32>, tensor<2x1x12x4xf32>) -> tensor<2x1x12x4xf32>
  %l = nn.reduce_mean %o dims = [0, 1, 2, 3] : tensor<2x1x12x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["dp"=2, "cp"=1]
// CHECK-LABEL: func.func @one_device
// CHECK-NOT: nn.slice
// CHECK: nn.attention {{.*}} ring = true :
func.func @one_device(%ids: tensor<2x8xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"cp"}]>},
                      %table: tensor<16x4xf32> {nn.param = "table"}) -> tensor<f32> {
  %x = nn.embedding %table, %ids : tensor<16x4xf32>, tensor<2x8xi32>
  %r = nn.reshape %x : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
  %o = nn.attention %r, %r, %r causal = true scale = 0.5 ring = true : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %l = nn.reduce_mean %o dims = [0, 1, 2, 3] : tensor<2x1x8x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
