// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition | FileCheck %s

// Classic parallelism patterns, from annotations through propagation to the
// per-device program: each case checks the local shapes and that exactly the
// expected collectives appear (`= dist.` matches any inserted dist op).

// Tests that a Megatron MLP (column-parallel, gelu, row-parallel) needs one
// all_reduce of the partial sums over "tp" and nothing else.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @megatron_mlp(
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x16xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x16xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<16x16xf32>
// CHECK-SAME: -> (tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[H:.+]] = nn.dot %[[X]], %[[W1]] contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[A:.+]] = nn.gelu %[[H]] : tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[A]], %[[W2]] contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[R:.+]] = dist.all_reduce %[[Y]] on @mesh_tp_4 ["tp"] sum : tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: return %[[R]] : tensor<8x16xf32>
func.func @megatron_mlp(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {}]>},
    %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>})
    -> tensor<8x16xf32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %a = nn.gelu %h : tensor<8x64xf32>
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Tests that Megatron attention with column-split q/k/v projections keeps
// 4/tp = 2 heads per device through the head reshapes, scores, softmax and
// context, and needs one all_reduce after the row-split output projection.
dist.mesh @mesh_tp_2 ["tp"=2]
// CHECK-LABEL: func.func @megatron_attention(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x8x64xf32>
// CHECK-SAME: %[[WQ:[^:]+]]: tensor<64x32xf32>
// CHECK-SAME: %[[WK:[^:]+]]: tensor<64x32xf32>
// CHECK-SAME: %[[WV:[^:]+]]: tensor<64x32xf32>
// CHECK-SAME: %[[WO:[^:]+]]: tensor<32x64xf32>
// CHECK-SAME: -> (tensor<2x8x64xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Q:.+]] = nn.dot %[[X]], %[[WQ]] {{.*}} -> tensor<2x8x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[K:.+]] = nn.dot %[[X]], %[[WK]] {{.*}} -> tensor<2x8x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[V:.+]] = nn.dot %[[X]], %[[WV]] {{.*}} -> tensor<2x8x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Q4:.+]] = nn.reshape %[[Q]] : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[K4:.+]] = nn.reshape %[[K]] : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[V4:.+]] = nn.reshape %[[V]] : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[QH:.+]] = nn.transpose %[[Q4]] {{.*}} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[KH:.+]] = nn.transpose %[[K4]] {{.*}} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[VH:.+]] = nn.transpose %[[V4]] {{.*}} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[S:.+]] = nn.dot %[[QH]], %[[KH]] {{.*}} : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x8xf32>
// CHECK-NOT: = dist.
// CHECK: %[[P:.+]] = nn.softmax %[[S]] dim = 3 : tensor<2x2x8x8xf32>
// CHECK-NOT: = dist.
// CHECK: %[[C:.+]] = nn.dot %[[P]], %[[VH]] {{.*}} : (tensor<2x2x8x8xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[CT:.+]] = nn.transpose %[[C]] {{.*}} : tensor<2x2x8x16xf32> -> tensor<2x8x2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[C3:.+]] = nn.reshape %[[CT]] : tensor<2x8x2x16xf32> -> tensor<2x8x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[C3]], %[[WO]] {{.*}} : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
// CHECK-NOT: = dist.
// CHECK: %[[R:.+]] = dist.all_reduce %[[Y]] on @mesh_tp_2 ["tp"] sum : tensor<2x8x64xf32>
// CHECK-NOT: = dist.
// CHECK: return %[[R]] : tensor<2x8x64xf32>
func.func @megatron_attention(
    %x: tensor<2x8x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_2, [{}, {}, {}]>},
    %wq: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_2, [{}, {"tp"}]>},
    %wk: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_2, [{}, {"tp"}]>},
    %wv: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_2, [{}, {"tp"}]>},
    %wo: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_2, [{"tp"}, {}]>})
    -> tensor<2x8x64xf32> {
  %q = nn.dot %x, %wq contracting_dims = [2] x [0]
      : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  %k = nn.dot %x, %wk contracting_dims = [2] x [0]
      : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  %v = nn.dot %x, %wv contracting_dims = [2] x [0]
      : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  %q4 = nn.reshape %q : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %k4 = nn.reshape %k : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %v4 = nn.reshape %v : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %qh = nn.transpose %q4 permutation = [0, 2, 1, 3]
      : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kh = nn.transpose %k4 permutation = [0, 2, 1, 3]
      : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %vh = nn.transpose %v4 permutation = [0, 2, 1, 3]
      : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %s = nn.dot %qh, %kh batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [3]
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %p = nn.softmax %s dim = 3 : tensor<2x4x8x8xf32>
  %c = nn.dot %p, %vh batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [2]
      : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %ct = nn.transpose %c permutation = [0, 2, 1, 3]
      : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %c3 = nn.reshape %ct : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
  %y = nn.dot %c3, %wo contracting_dims = [2] x [0]
      : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// Tests that the partial sums of a row-parallel dot whose result is
// constrained to be sequence-split over "tp" become a reduce_scatter, not an
// all_reduce, and that the constraint disappears.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @row_parallel_into_sequence_parallel(
// CHECK-SAME: %[[A:[^:]+]]: tensor<8x16xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<16x16xf32>
// CHECK-SAME: -> (tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[A]], %[[W2]] {{.*}} -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[YS:.+]] = dist.reduce_scatter %[[Y]] on @mesh_tp_4 ["tp"] dim = 0 sum : tensor<8x16xf32> -> tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: return %[[YS]] : tensor<2x16xf32>
func.func @row_parallel_into_sequence_parallel(
    %a: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>})
    -> tensor<8x16xf32> {
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %ys = dist.sharding_constraint %y <@mesh_tp_4, [{"tp"}, {}]> : tensor<8x16xf32>
  return %ys : tensor<8x16xf32>
}

// -----

// Tests that a sequence-split input of a column-parallel dot is all-gathered
// along the sequence and the weight stays split.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @sequence_parallel_into_column_parallel(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x16xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x16xf32>
// CHECK-SAME: -> (tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[XG:.+]] = dist.all_gather %[[X]] on @mesh_tp_4 ["tp"] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[H:.+]] = nn.dot %[[XG]], %[[W1]] {{.*}} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: return %[[H]] : tensor<8x16xf32>
func.func @sequence_parallel_into_column_parallel(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>},
    %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>})
    -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>}) {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %h : tensor<8x64xf32>
}

// -----

// Tests a whole Megatron sequence-parallel MLP block: the norm runs on the
// sequence-split input, its output is all-gathered into the column-parallel
// dot, the row-parallel partial sums are reduce-scattered back onto the
// sequence, and the weights are never gathered.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @sequence_parallel_mlp(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x16xf32>
// CHECK-SAME: %[[G:[^:]+]]: tensor<16xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x16xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<16x16xf32>
// CHECK-SAME: -> (tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[N:.+]] = nn.rms_norm %[[X]], %[[G]] {{.*}}: tensor<2x16xf32>, tensor<16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[NG:.+]] = dist.all_gather %[[N]] on @mesh_tp_4 ["tp"] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[H:.+]] = nn.dot %[[NG]], %[[W1]] {{.*}} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[A:.+]] = nn.gelu %[[H]] : tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[A]], %[[W2]] {{.*}} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[YS:.+]] = dist.reduce_scatter %[[Y]] on @mesh_tp_4 ["tp"] dim = 0 sum : tensor<8x16xf32> -> tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[R:.+]] = nn.add %[[YS]], %[[X]] : tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: return %[[R]] : tensor<2x16xf32>
func.func @sequence_parallel_mlp(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>},
    %g: tensor<16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}]>},
    %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>}) {
  %n = nn.rms_norm %x, %g : tensor<8x16xf32>, tensor<16xf32>
  %h = nn.dot %n, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %a = nn.gelu %h : tensor<8x64xf32>
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %ys = dist.sharding_constraint %y <@mesh_tp_4, [{"tp"}, {}]> : tensor<8x16xf32>
  %r = nn.add %ys, %x : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Tests that pure data parallelism (batch split over "dp", weights
// replicated) needs no collective in the forward body.
dist.mesh @mesh_dp_4 ["dp"=4]
// CHECK-LABEL: func.func @data_parallel(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x16xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x64xf32>
// CHECK-SAME: %[[B1:[^:]+]]: tensor<64xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<64x16xf32>
// CHECK-SAME: -> (tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[H:.+]] = nn.dot %[[X]], %[[W1]] {{.*}} : (tensor<2x16xf32>, tensor<16x64xf32>) -> tensor<2x64xf32>
// CHECK-NOT: = dist.
// CHECK: %[[BB:.+]] = nn.broadcast %[[B1]] dims = [1] : tensor<64xf32> -> tensor<2x64xf32>
// CHECK-NOT: = dist.
// CHECK: %[[HB:.+]] = nn.add %[[H]], %[[BB]] : tensor<2x64xf32>
// CHECK-NOT: = dist.
// CHECK: %[[A:.+]] = nn.relu %[[HB]] : tensor<2x64xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[A]], %[[W2]] {{.*}} : (tensor<2x64xf32>, tensor<64x16xf32>) -> tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: return %[[Y]] : tensor<2x16xf32>
func.func @data_parallel(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_4, [{"dp"}, {}]>},
    %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_4, [{}, {}]>},
    %b1: tensor<64xf32> {dist.sharding = #dist.sharding<@mesh_dp_4, [{}]>},
    %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_4, [{}, {}]>})
    -> tensor<8x16xf32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %bb = nn.broadcast %b1 dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
  %hb = nn.add %h, %bb : tensor<8x64xf32>
  %a = nn.relu %hb : tensor<8x64xf32>
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Tests that under pure data parallelism the only collective is the loss
// reduction: the local means are averaged over "dp".
dist.mesh @mesh_dp_4 ["dp"=4]
// CHECK-LABEL: func.func @data_parallel_loss(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x16xf32>
// CHECK-SAME: %[[T:[^:]+]]: tensor<2x16xf32>
// CHECK-SAME: %[[W:[^:]+]]: tensor<16x16xf32>
// CHECK-SAME: -> (tensor<f32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[X]], %[[W]] {{.*}} : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[D:.+]] = nn.sub %[[Y]], %[[T]] : tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[SQ:.+]] = nn.mul %[[D]], %[[D]] : tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[M:.+]] = nn.reduce_mean %[[SQ]] dims = [0, 1] : tensor<2x16xf32> -> tensor<f32>
// CHECK-NOT: = dist.
// CHECK: %[[L:.+]] = dist.all_reduce %[[M]] on @mesh_dp_4 ["dp"] avg : tensor<f32>
// CHECK-NOT: = dist.
// CHECK: return %[[L]] : tensor<f32>
func.func @data_parallel_loss(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_4, [{"dp"}, {}]>},
    %target: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_4, [{"dp"}, {}]>},
    %w: tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_4, [{}, {}]>})
    -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %d = nn.sub %y, %target : tensor<8x16xf32>
  %sq = nn.mul %d, %d : tensor<8x16xf32>
  %loss = nn.reduce_mean %sq dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that 2-D parallelism (batch over "dp", Megatron MLP over "tp") needs
// one all_reduce over "tp" only: "dp" splits no contracting dim.
dist.mesh @mesh_dp_2_tp_2 ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @dp_tp_mlp(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x16xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x32xf32>
// CHECK-SAME: %[[B1:[^:]+]]: tensor<32xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<32x16xf32>
// CHECK-SAME: -> (tensor<4x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[H:.+]] = nn.dot %[[X]], %[[W1]] {{.*}} : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[BB:.+]] = nn.broadcast %[[B1]] dims = [1] : tensor<32xf32> -> tensor<4x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[HB:.+]] = nn.add %[[H]], %[[BB]] : tensor<4x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[A:.+]] = nn.gelu %[[HB]] : tensor<4x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[A]], %[[W2]] {{.*}} : (tensor<4x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[R:.+]] = dist.all_reduce %[[Y]] on @mesh_dp_2_tp_2 ["tp"] sum : tensor<4x16xf32>
// CHECK-NOT: = dist.
// CHECK: return %[[R]] : tensor<4x16xf32>
func.func @dp_tp_mlp(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"dp"}, {}]>},
    %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{}, {"tp"}]>},
    %b1: tensor<64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"tp"}]>},
    %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"tp"}, {}]>})
    -> tensor<8x16xf32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %bb = nn.broadcast %b1 dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
  %hb = nn.add %h, %bb : tensor<8x64xf32>
  %a = nn.gelu %hb : tensor<8x64xf32>
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Tests that on a 3-D mesh a batch split over {"dp", "sp"} that is
// constrained back to {"dp"} gathers over "sp" only, after the "tp"
// all_reduce, and that no value falls back to the global batch of 8.
dist.mesh @mesh_dp_2_sp_2_tp_2 ["dp"=2, "sp"=2, "tp"=2]
// CHECK-LABEL: func.func @dp_sp_tp_mlp(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x16xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x32xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<32x16xf32>
// CHECK-SAME: -> (tensor<4x16xf32>
// CHECK-NOT: = dist.
// CHECK-NOT: tensor<8x
// CHECK: %[[H:.+]] = nn.dot %[[X]], %[[W1]] {{.*}} : (tensor<2x16xf32>, tensor<16x32xf32>) -> tensor<2x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[A:.+]] = nn.gelu %[[H]] : tensor<2x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[A]], %[[W2]] {{.*}} : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[R:.+]] = dist.all_reduce %[[Y]] on @mesh_dp_2_sp_2_tp_2 ["tp"] sum : tensor<2x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[G:.+]] = dist.all_gather %[[R]] on @mesh_dp_2_sp_2_tp_2 ["sp"] dim = 0 : tensor<2x16xf32> -> tensor<4x16xf32>
// CHECK-NOT: = dist.
// CHECK-NOT: tensor<8x
// CHECK: return %[[G]] : tensor<4x16xf32>
func.func @dp_sp_tp_mlp(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_sp_2_tp_2, [{"dp", "sp"}, {}]>},
    %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_sp_2_tp_2, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_sp_2_tp_2, [{"tp"}, {}]>})
    -> tensor<8x16xf32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %a = nn.gelu %h : tensor<8x64xf32>
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %yc = dist.sharding_constraint %y <@mesh_dp_2_sp_2_tp_2, [{"dp"}, {}]> : tensor<8x16xf32>
  return %yc : tensor<8x16xf32>
}

// -----

// Tests that on a 3-D mesh with the batch over "dp" and the sequence over
// "sp", the Megatron partial sums are all-reduced over "tp" only and the loss
// is averaged over "dp" and "sp" only.
dist.mesh @mesh_dp_2_sp_2_tp_2 ["dp"=2, "sp"=2, "tp"=2]
// CHECK-LABEL: func.func @dp_sp_tp_loss(
// CHECK-SAME: %[[X:[^:]+]]: tensor<1x4x16xf32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x32xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<32x16xf32>
// CHECK-SAME: -> (tensor<f32>
// CHECK-NOT: = dist.
// CHECK: %[[H:.+]] = nn.dot %[[X]], %[[W1]] {{.*}} : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[A:.+]] = nn.gelu %[[H]] : tensor<1x4x32xf32>
// CHECK-NOT: = dist.
// CHECK: %[[Y:.+]] = nn.dot %[[A]], %[[W2]] {{.*}} : (tensor<1x4x32xf32>, tensor<32x16xf32>) -> tensor<1x4x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[R:.+]] = dist.all_reduce %[[Y]] on @mesh_dp_2_sp_2_tp_2 ["tp"] sum : tensor<1x4x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[SQ:.+]] = nn.mul %[[R]], %[[R]] : tensor<1x4x16xf32>
// CHECK-NOT: = dist.
// CHECK: %[[M:.+]] = nn.reduce_mean %[[SQ]] dims = [0, 1, 2] : tensor<1x4x16xf32> -> tensor<f32>
// CHECK-NOT: = dist.
// CHECK: %[[L:.+]] = dist.all_reduce %[[M]] on @mesh_dp_2_sp_2_tp_2 ["dp", "sp"] avg : tensor<f32>
// CHECK-NOT: = dist.
// CHECK: return %[[L]] : tensor<f32>
func.func @dp_sp_tp_loss(
    %x: tensor<2x8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_sp_2_tp_2, [{"dp"}, {"sp"}, {}]>},
    %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_sp_2_tp_2, [{}, {"tp"}]>},
    %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_sp_2_tp_2, [{"tp"}, {}]>})
    -> tensor<f32> {
  %h = nn.dot %x, %w1 contracting_dims = [2] x [0]
      : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  %a = nn.gelu %h : tensor<2x8x64xf32>
  %y = nn.dot %a, %w2 contracting_dims = [2] x [0]
      : (tensor<2x8x64xf32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  %sq = nn.mul %y, %y : tensor<2x8x16xf32>
  %loss = nn.reduce_mean %sq dims = [0, 1, 2] : tensor<2x8x16xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
