// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition -verify-diagnostics

// Tests that an argument dim that its mesh axis does not divide is an error
// naming the argument, the dim and the axis.
dist.mesh @mesh_tp_4 ["tp"=4]
// expected-error @+1 {{cannot partition argument #0: dim 0 of size 6 is not divisible by mesh axes "tp" (4 devices)}}
func.func @indivisible_argument(
    %x: tensor<6x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>})
    -> tensor<6x16xf32> {
  %y = nn.relu %x : tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// -----

// Tests that a dim split over two axes must be divisible by their product,
// and that the error names both axes.
dist.mesh @mesh_dp_2_tp_2 ["dp"=2, "tp"=2]
// expected-error @+1 {{cannot partition argument #1: dim 1 of size 6 is not divisible by mesh axes "dp", "tp" (4 devices)}}
func.func @indivisible_two_axes(
    %a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"dp"}, {}]>},
    %x: tensor<8x6xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{}, {"dp", "tp"}]>})
    -> tensor<8x6xf32> {
  %y = nn.relu %x : tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

// Tests that a split its mesh axis does not divide is an error without
// --tessera-pad, at the first op that has it (propagation carried the
// constraint's back to the relu).
dist.mesh @mesh_tp_4 ["tp"=4]
func.func @indivisible_constraint(
    %x: tensor<6x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {}]>})
    -> tensor<6x16xf32> {
  // expected-error @+1 {{cannot partition: dim 0 of size 6 is not divisible by mesh axes "tp" (4 devices); --tessera-pad pads it}}
  %y = nn.relu %x : tensor<6x16xf32>
  %c = dist.sharding_constraint %y <@mesh_tp_4, [{"tp"}, {}]> : tensor<6x16xf32>
  return %c : tensor<6x16xf32>
}

// -----

// Tests that the shardings of one function must name one mesh.
dist.mesh @mesh_dp_2 ["dp"=2]
dist.mesh @mesh_tp_2 ["tp"=2]
// expected-error @+1 {{expects the shardings of one function on one mesh, got @mesh_dp_2 and @mesh_tp_2}}
func.func @two_meshes(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2, [{"dp"}, {}]>},
    %w: tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_2, [{}, {"tp"}]>})
    -> tensor<8x16xf32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Tests that a random op that is already a device's piece is not split again.
dist.mesh @mesh ["dp"=2]
func.func @random_piece(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                        %step: tensor<i64>, %piece: tensor<2xi64>) -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) {
  // expected-error @+1 {{'nn.dropout' op is already a device's piece; partition the global program once}}
  %y = nn.dropout %x step %step piece %piece rate = 0.5 seed = 0 {global_shape = array<i64: 16, 8>} : tensor<8x8xf32>, tensor<i64>, tensor<2xi64>
  return %y : tensor<8x8xf32>
}

// -----

// Tests that a lookup that is already a device's piece of a vocab-split
// table is not split again.
dist.mesh @mesh ["tp"=2]
func.func @embedding_piece(%t: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
                           %i: tensor<2x8xi32>, %piece: tensor<1xi64>) -> tensor<2x8x4xf32> {
  // expected-error @+1 {{'nn.embedding' op is already a device's piece; partition the global program once}}
  %e = nn.embedding %t, %i piece %piece : tensor<16x4xf32>, tensor<2x8xi32>, tensor<1xi64>
  return %e : tensor<2x8x4xf32>
}

// -----

// Tests that a sequence in zigzag order for another ring is refused: 2
// chunks do not split over a ring of 4.
dist.mesh @mesh_cp_4 ["cp"=4]
func.func @zigzag_other_ring(
    %q: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh_cp_4, [{}, {}, {"cp"}, {}]>}) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{'nn.attention' op stores its sequence in zigzag order of 2 chunks, which a ring of 4 devices does not split into whole chunks (it was balanced for a ring of 1)}}
  %o = nn.attention %q, %q, %q causal = true scale = 0.5 ring = true zigzag = 1 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that ring attention that drops its probabilities is refused where
// it would be partitioned into a ring.
dist.mesh @mesh_cp_2 ["cp"=2]
func.func @ring_dropout(
    %q: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
    %k: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
    %v: tensor<1x2x8x4xf32> {dist.sharding = #dist.sharding<@mesh_cp_2, [{}, {}, {"cp"}, {}]>},
    %step: tensor<i64>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{'nn.attention' op with ring and dropout is not built: drop the ring (the keys are then gathered) or the dropout}}
  %o = nn.attention %q, %k, %v step %step causal = true scale = 0.5 dropout = 0.1 ring = true : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<i64>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}
