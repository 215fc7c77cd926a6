// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-decompose-split-reductions | FileCheck %s

// Tests that a cross-entropy over logits split on the classes becomes the
// ops it is made of, each with its sharding: the rows' max and sum over the
// split dim, the label's logit through a one-hot of the same split.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%logits: tensor<4x8x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}, {"tp"}]>},
                         %labels: tensor<4x8xi32>) -> tensor<4x8xf32> {
  // CHECK-NOT: nn.cross_entropy
  // CHECK: %[[M:.+]] = nn.reduce_max %arg0 dims = [2] {dist.sharding = [#dist.sharding<@mesh, [{}, {}]>]}
  // CHECK: %[[MB:.+]] = nn.broadcast %[[M]] dims = [0, 1] {dist.sharding = [#dist.sharding<@mesh, [{}, {}, {"tp"}]>]}
  // CHECK: %[[S:.+]] = nn.sub %arg0, %[[MB]] {dist.sharding = [#dist.sharding<@mesh, [{}, {}, {"tp"}]>]}
  // CHECK: %[[E:.+]] = nn.exp %[[S]] {dist.sharding = [#dist.sharding<@mesh, [{}, {}, {"tp"}]>]}
  // CHECK: %[[Z:.+]] = nn.reduce_sum %[[E]] dims = [2] {dist.sharding = [#dist.sharding<@mesh, [{}, {}]>]}
  // CHECK: %[[H:.+]] = nn.one_hot %arg1 {dist.sharding = [#dist.sharding<@mesh, [{}, {}, {"tp"}]>]} : tensor<4x8xi32> -> tensor<4x8x64xf32>
  // CHECK: %[[P:.+]] = nn.mul %[[S]], %[[H]]
  // CHECK: %[[T:.+]] = nn.reduce_sum %[[P]] dims = [2]
  // CHECK: %[[L:.+]] = nn.log %[[Z]]
  // CHECK: %[[R:.+]] = nn.sub %[[L]], %[[T]] {dist.sharding = [#dist.sharding<@mesh, [{}, {}]>]}
  // CHECK: return %[[R]]
  %l = nn.cross_entropy %logits, %labels : tensor<4x8x64xf32>, tensor<4x8xi32>
  return %l : tensor<4x8xf32>
}

// -----

// Tests softmax (scaled too) and log-softmax over a split dim, and that ops
// whose dim is whole, or a causal softmax, stay as they are.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @softmaxes
func.func @softmaxes(%x: tensor<4x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
                     %y: tensor<4x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
                     %s: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>})
    -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<8x8xf32>) {
  // CHECK: %[[E:.+]] = nn.exp
  // CHECK: %[[Z:.+]] = nn.reduce_sum %[[E]] dims = [1]
  // CHECK: %[[ZB:.+]] = nn.broadcast %[[Z]] dims = [0]
  // CHECK: nn.div %[[E]], %[[ZB]]
  %a = nn.softmax %x dim = 1 : tensor<4x64xf32>
  // CHECK: %[[LS:.+]] = nn.sub %arg0
  // CHECK: %[[LZ:.+]] = nn.reduce_sum
  // CHECK: %[[LOG:.+]] = nn.log %[[LZ]]
  // CHECK: %[[LB:.+]] = nn.broadcast %[[LOG]]
  // CHECK: nn.sub %[[LS]], %[[LB]]
  %b = nn.log_softmax %x dim = 1 : tensor<4x64xf32>
  // CHECK: %[[SCALE:.+]] = nn.constant {dist.sharding = [#dist.sharding<@mesh, [{}, {"tp"}]>]} dense<1.250000e-01> : tensor<4x64xf32>
  // CHECK: %[[SCALED:.+]] = nn.mul %arg0, %[[SCALE]]
  // CHECK: nn.reduce_max %[[SCALED]] dims = [1]
  // CHECK: nn.div
  %e = nn.softmax %x dim = 1 scale = 0.125 : tensor<4x64xf32>
  // CHECK: nn.softmax %arg1 dim = 1
  %c = nn.softmax %y dim = 1 : tensor<4x64xf32>
  // CHECK: nn.softmax %arg2 dim = 1 causal = true
  %d = nn.softmax %s dim = 1 causal = true : tensor<8x8xf32>
  return %a, %b, %e, %c, %d : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<8x8xf32>
}

// -----

// Tests that a narrow float is reduced in f32 (the pieces' max, sums and
// label logit), and the result cast back to the op's type with its
// sharding.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @narrow
func.func @narrow(%logits: tensor<4x8x64xbf16> {dist.sharding = #dist.sharding<@mesh, [{}, {}, {"tp"}]>},
                  %labels: tensor<4x8xi32>) -> tensor<4x8xbf16> {
  // CHECK: %[[X:.+]] = nn.cast %arg0 {dist.sharding = [#dist.sharding<@mesh, [{}, {}, {"tp"}]>]} : tensor<4x8x64xbf16> to tensor<4x8x64xf32>
  // CHECK: nn.reduce_max %[[X]] dims = [2]
  // CHECK: nn.one_hot %arg1 {{.*}} -> tensor<4x8x64xf32>
  // CHECK: %[[R:.+]] = nn.sub {{.*}} : tensor<4x8xf32>
  // CHECK: %[[C:.+]] = nn.cast %[[R]] {dist.sharding = [#dist.sharding<@mesh, [{}, {}]>]} : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK: return %[[C]]
  %l = nn.cross_entropy %logits, %labels : tensor<4x8x64xbf16>, tensor<4x8xi32>
  return %l : tensor<4x8xbf16>
}

// -----

// Tests that a narrow softmax (scaled too) and log-softmax are reduced in
// f32 as cross-entropy is, the scale applied to the widened input, and
// each result cast back with its sharding.
dist.mesh @mesh ["tp"=2]
// CHECK-LABEL: func.func @narrow_softmaxes
func.func @narrow_softmaxes(%x: tensor<4x64xbf16> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>})
    -> (tensor<4x64xbf16>, tensor<4x64xbf16>) {
  // CHECK: %[[X:.+]] = nn.cast %arg0 {dist.sharding = [#dist.sharding<@mesh, [{}, {"tp"}]>]} : tensor<4x64xbf16> to tensor<4x64xf32>
  // CHECK: %[[SCALE:.+]] = nn.constant {{.*}} dense<1.250000e-01> : tensor<4x64xf32>
  // CHECK: %[[SCALED:.+]] = nn.mul %[[X]], %[[SCALE]]
  // CHECK: nn.reduce_max %[[SCALED]] dims = [1]
  // CHECK: %[[D:.+]] = nn.div {{.*}} : tensor<4x64xf32>
  // CHECK: %[[A:.+]] = nn.cast %[[D]] {dist.sharding = [#dist.sharding<@mesh, [{}, {}]>]} : tensor<4x64xf32> to tensor<4x64xbf16>
  %a = nn.softmax %x dim = 1 scale = 0.125 : tensor<4x64xbf16>
  // CHECK: %[[Y:.+]] = nn.cast %arg0 {{.*}} : tensor<4x64xbf16> to tensor<4x64xf32>
  // CHECK: nn.reduce_max %[[Y]] dims = [1]
  // CHECK: %[[L:.+]] = nn.sub {{.*}} {dist.sharding = [#dist.sharding<@mesh, [{}, {}]>]} : tensor<4x64xf32>
  // CHECK: %[[B:.+]] = nn.cast %[[L]] {dist.sharding = [#dist.sharding<@mesh, [{}, {}]>]} : tensor<4x64xf32> to tensor<4x64xbf16>
  // CHECK: return %[[A]], %[[B]]
  %b = nn.log_softmax %x dim = 1 : tensor<4x64xbf16>
  return %a, %b : tensor<4x64xbf16>, tensor<4x64xbf16>
}

// -----

// Tests that a dim split over axes of one device (an annotation for a mesh
// resized to one) is left whole.
dist.mesh @mesh ["dp"=2, "tp"=1]
// CHECK-LABEL: func.func @one_device
func.func @one_device(%logits: tensor<4x8x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}, {"tp"}]>},
                      %labels: tensor<4x8xi32>) -> tensor<4x8xf32> {
  // CHECK: nn.cross_entropy %arg0, %arg1
  %l = nn.cross_entropy %logits, %labels : tensor<4x8x64xf32>, tensor<4x8xi32>
  return %l : tensor<4x8xf32>
}
