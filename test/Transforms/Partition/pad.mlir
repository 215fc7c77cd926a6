// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-pad | FileCheck %s
// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-pad --tessera-partition | FileCheck %s --check-prefix=LOCAL

// Tests that --tessera-pad grows each dim its mesh axes do not divide to a
// multiple of them, masks the padding where an op would mix it into real
// elements, and records the shapes before padding at the boundary (issue
// 17: GSPMD and Shardy pad; Tessera reported an error).

// A batch of 6 over 4 devices grows to 8 (2 rows each). exp turns the
// runtime's zero padding into ones: they are set to zeros (one mask, used
// twice) before the dot sums over the batch and before the mean, which is
// then scaled from the 128 padded elements to the 96 real ones.
// CHECK-LABEL: func.func @batch
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x16xf32> {{{.*}}dist.unpadded_shape = array<i64: 6, 16>}
// CHECK-NEXT: %[[H:.+]] = nn.exp %[[X]]
// CHECK-NEXT: %[[I:.+]] = nn.iota dim = 0 {{.*}} : tensor<8xi64>
// CHECK-NEXT: %[[N:.+]] = nn.constant {{.*}} dense<6> : tensor<8xi64>
// CHECK-NEXT: %[[LT:.+]] = nn.compare lt, %[[I]], %[[N]]
// CHECK-NEXT: %[[REAL:.+]] = nn.broadcast %[[LT]] dims = [0] {{.*}} : tensor<8xi1> -> tensor<8x16xi1>
// CHECK-NEXT: %[[ZERO:.+]] = nn.constant {{.*}} dense<0.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %[[M:.+]] = nn.select %[[REAL]], %[[H]], %[[ZERO]]
// CHECK-NEXT: nn.dot %[[M]], %[[M]] contracting_dims = [0] x [0]
// CHECK-NEXT: %[[MEAN:.+]] = nn.reduce_mean %[[M]] dims = [0, 1]
// CHECK-NEXT: %[[SCALE:.+]] = nn.constant {{.*}} dense<1.33333337> : tensor<f32>
// CHECK-NEXT: nn.mul %[[MEAN]], %[[SCALE]]
// LOCAL-LABEL: func.func @batch
// LOCAL-SAME: tensor<2x16xf32>
dist.mesh @m ["x"=4]
func.func @batch(%x: tensor<6x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>})
    -> (tensor<16x16xf32>, tensor<f32>) {
  %h = nn.exp %x : tensor<6x16xf32>
  %g = nn.dot %h, %h contracting_dims = [0] x [0] : (tensor<6x16xf32>, tensor<6x16xf32>) -> tensor<16x16xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<6x16xf32> -> tensor<f32>
  return %g, %l : tensor<16x16xf32>, tensor<f32>
}

// -----

// tanh keeps the runtime's zero padding zero: nothing to mask.
// CHECK-LABEL: func.func @zeros_kept
// CHECK-NEXT: nn.tanh
// CHECK-NEXT: nn.reduce_sum
// CHECK-NEXT: return
dist.mesh @m ["x"=4]
func.func @zeros_kept(%x: tensor<6x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>})
    -> tensor<f32> {
  %h = nn.tanh %x : tensor<6x16xf32>
  %l = nn.reduce_sum %h dims = [0, 1] : tensor<6x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// 10 classes over 4 devices: 12, the padded logits -inf before the
// softmax. The result leaves with the padding, which the runtime cuts.
// CHECK-LABEL: func.func @classes
// CHECK-SAME: -> (tensor<4x12xf32> {{{.*}}dist.unpadded_shape = array<i64: 4, 10>})
// CHECK: nn.constant {{.*}} dense<10> : tensor<12xi64>
// CHECK: %[[INF:.+]] = nn.constant {{.*}} dense<0xFF800000> : tensor<4x12xf32>
// CHECK-NEXT: %[[M:.+]] = nn.select %{{.+}}, %{{.+}}, %[[INF]]
// CHECK-NEXT: nn.softmax %[[M]] dim = 1
dist.mesh @m ["x"=4]
func.func @classes(%x: tensor<4x10xf32> {dist.sharding = #dist.sharding<@m, [{}, {"x"}]>})
    -> tensor<4x10xf32> {
  %s = nn.softmax %x dim = 1 : tensor<4x10xf32>
  return %s : tensor<4x10xf32>
}

// -----

// 3 heads of 4 over 2 devices: the heads grow to 4 and the merged dim
// with them, to 16 (a whole head of padding at its end), 2 heads each.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: tensor<4x16xf32> {{{.*}}dist.unpadded_shape = array<i64: 4, 12>}
// CHECK-NEXT: nn.reshape {{.*}} : tensor<4x16xf32> -> tensor<4x4x4xf32>
// LOCAL-LABEL: func.func @heads
// LOCAL-NEXT: nn.reshape {{.*}} : tensor<4x8xf32> -> tensor<4x2x4xf32>
dist.mesh @m ["x"=2]
func.func @heads(%x: tensor<4x12xf32> {dist.sharding = #dist.sharding<@m, [{}, {"x"}]>})
    -> tensor<4x3xf32> {
  %r = nn.reshape %x : tensor<4x12xf32> -> tensor<4x3x4xf32>
  %s = nn.reduce_sum %r dims = [2] : tensor<4x3x4xf32> -> tensor<4x3xf32>
  return %s : tensor<4x3xf32>
}

// -----

// An optimizer's gradient is masked to zeros: the parameter's padding
// stays zero.
// CHECK-LABEL: func.func @optimizer
// CHECK: %[[G:.+]] = nn.select
// CHECK-NEXT: nn.sgd %{{.+}}, %[[G]]
dist.mesh @m ["x"=4]
func.func @optimizer(%w: tensor<6x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>})
    -> tensor<6x16xf32> {
  %g = nn.exp %w : tensor<6x16xf32>
  %n = nn.sgd %w, %g lr = 1.0e-01 : tensor<6x16xf32>
  return %n : tensor<6x16xf32>
}

// -----

// A part of a dim that is then split unevenly: sliced as written, grown
// with zeros.
// CHECK-LABEL: func.func @slice_grows
// CHECK-NEXT: %[[S:.+]] = nn.slice %{{.+}} start = [0, 0] limit = [6, 16] {{.*}} -> tensor<6x16xf32>
// CHECK-NEXT: %[[Z:.+]] = nn.constant {{.*}} dense<0.000000e+00> : tensor<2x16xf32>
// CHECK-NEXT: nn.concat %[[S]], %[[Z]] dim = 0 {{.*}} -> tensor<8x16xf32>
dist.mesh @m ["x"=4]
func.func @slice_grows(%x: tensor<8x16xf32>) -> tensor<6x16xf32> {
  %s = nn.slice %x start = [0, 0] limit = [6, 16] : tensor<8x16xf32> -> tensor<6x16xf32>
  %c = dist.sharding_constraint %s <@m, [{"x"}, {}]> : tensor<6x16xf32>
  return %c : tensor<6x16xf32>
}

// -----

// A vocab of 10 over 4 devices: the table grows to 12 rows, and the token
// ids keep the real bound (generated inputs stay below 10).
// CHECK-LABEL: func.func @vocab
// CHECK-SAME: tensor<12x8xf32> {{{.*}}dist.unpadded_shape = array<i64: 10, 8>}
// CHECK-SAME: tensor<4xi32> {dist.index_bound = 10 : i64
dist.mesh @m ["x"=4]
func.func @vocab(%table: tensor<10x8xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>},
                 %ids: tensor<4xi32>) -> tensor<4x8xf32> {
  %e = nn.embedding %table, %ids : tensor<10x8xf32>, tensor<4xi32>
  return %e : tensor<4x8xf32>
}

// -----

// Nothing uneven: nothing changes.
// CHECK-LABEL: func.func @even
// CHECK-SAME: tensor<8x16xf32>
// CHECK-NOT: unpadded
// CHECK-NEXT: nn.exp
// CHECK-NEXT: return
dist.mesh @m ["x"=4]
func.func @even(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>})
    -> tensor<8x16xf32> {
  %h = nn.exp %x : tensor<8x16xf32>
  return %h : tensor<8x16xf32>
}

// -----

// Attention with a step but no dropout draws nothing: its batch pads, the
// step as it is.
// CHECK-LABEL: func.func @attention_without_dropout
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} step %{{.+}} scale = 2.500000e-01 {{.*}} -> tensor<8x2x8x16xf32>
// LOCAL-LABEL: func.func @attention_without_dropout
// LOCAL: nn.attention {{.*}} -> tensor<2x2x8x16xf32>
dist.mesh @m ["x"=4]
func.func @attention_without_dropout(%q: tensor<6x2x8x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}, {}, {}]>},
                                     %kv: tensor<6x2x8x16xf32>, %step: tensor<i64>)
    -> tensor<6x2x8x16xf32> {
  %o = nn.attention %q, %kv, %kv step %step scale = 0.25
      : (tensor<6x2x8x16xf32>, tensor<6x2x8x16xf32>, tensor<6x2x8x16xf32>, tensor<i64>) -> tensor<6x2x8x16xf32>
  return %o : tensor<6x2x8x16xf32>
}
