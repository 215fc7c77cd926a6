// RUN: tessera-opt %s -split-input-file --tessera-propagate | FileCheck %s

// Tests that shardings flow forward from the arguments through a dot and
// elementwise ops to the result.
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>})
func.func @forward(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {}]>},
                   %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{}, {"tp"}]>})
    -> tensor<8x64xf32> {
  // CHECK: nn.dot {{.*}} {dist.sharding = [#dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>]}
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  // CHECK: nn.relu {{.*}} {dist.sharding = [#dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>]}
  %r = nn.relu %y : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}

// -----

// Tests that a result annotation flows backward to unannotated arguments.
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @backward
// CHECK-SAME: %{{[^:]+}}: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>}
// CHECK-SAME: %{{[^:]+}}: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>}
func.func @backward(%a: tensor<8x64xf32>, %b: tensor<8x64xf32>)
    -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>}) {
  %s = nn.add %a, %b : tensor<8x64xf32>
  %e = nn.exp %s : tensor<8x64xf32>
  return %e : tensor<8x64xf32>
}

// -----

// Tests that closed dims never change while open dims gain axes.
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @closed_and_open
// CHECK-SAME: %{{[^:]+}}: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>}
// CHECK-SAME: %{{[^:]+}}: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{}, {}]>}
// CHECK-SAME: %{{[^:]+}}: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>}
func.func @closed_and_open(
    %a: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>},
    %closed: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{}, {}]>},
    %open: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{?}, {?}]>})
    -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %0 = nn.add %a, %closed : tensor<8x64xf32>
  %1 = nn.add %a, %open : tensor<8x64xf32>
  return %0, %1 : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Tests that an open dim with axes is extended, never rewritten.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @extend_open
// CHECK-SAME: %{{[^:]+}}: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x", "y"}]>}
func.func @extend_open(
    %a: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x", ?}]>},
    %b: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x", "y"}]>})
    -> tensor<8xf32> {
  %0 = nn.add %a, %b : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that a sharding constraint seeds its neighbours in both directions
// and that shardings pass through reshapes onto the matching factor.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @constraint_and_reshape
// CHECK-SAME: %{{[^:]+}}: tensor<2x8x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {}, {"tp"}]>}
func.func @constraint_and_reshape(%x: tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: nn.relu {{.*}}[{}, {}, {"tp"}]
  %r = nn.relu %x : tensor<2x8x64xf32>
  %c = dist.sharding_constraint %r <@mesh_tp_4, [{}, {}, {"tp"}]> : tensor<2x8x64xf32>
  // CHECK: nn.reshape {{.*}}[{}, {}, {"tp"}, {}]
  %h = nn.reshape %c : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  return %h : tensor<2x8x4x16xf32>
}

// -----

// Tests that a factor the op cannot split takes no axes: the softmax dim stays
// whole while the other dims follow the operand.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @need_replication
func.func @need_replication(%s: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>}) -> tensor<4x8xf32> {
  // CHECK: nn.softmax {{.*}} {dist.sharding = [#dist.sharding<@mesh_x_2_y_2, [{"x"}, {}]>]}
  %p = nn.softmax %s dim = 1 : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// Tests that a contracting dim split on both operands leaves the result
// unsplit on it (the partial sums are the partitioner's business).
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @row_parallel
// CHECK-SAME: -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {}]>})
func.func @row_parallel(%a: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>},
                        %w: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %y = nn.dot %a, %w contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Tests that lower priorities run first: the p0 annotation of %a reaches %c
// before the p1 annotation of %b does, so %c follows %a.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @priorities
// CHECK-SAME: -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {}]>})
func.func @priorities(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}p0, {}]>},
                      %b: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"y"}p1, {}]>}) -> tensor<8x8xf32> {
  %c = nn.add %a, %b : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// Tests the same program with the priorities swapped.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @priorities_swapped
// CHECK-SAME: -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"y"}, {}]>})
func.func @priorities_swapped(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}p1, {}]>},
                              %b: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"y"}p0, {}]>}) -> tensor<8x8xf32> {
  %c = nn.add %a, %b : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// Tests that functions without any sharding are left alone.
// CHECK-LABEL: func.func @unsharded
// CHECK-NOT: dist.sharding
func.func @unsharded(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = nn.relu %a : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that the open dims of a sharding constraint take what propagation
// gives them, so that the partitioner reshards only its closed dims: the
// batch split over "dp" passes the constraint, which moves "tp" only.
dist.mesh @mesh_dp_2_tp_2 ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @open_constraint
// CHECK: dist.sharding_constraint %{{.+}} <@mesh_dp_2_tp_2, [{"dp"}, {"tp"}, {}]>
func.func @open_constraint(
    %x: tensor<4x8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"dp"}, {}, {}]>})
    -> tensor<4x8x16xf32> {
  %c = dist.sharding_constraint %x <@mesh_dp_2_tp_2, [{?}, {"tp"}, {}]> : tensor<4x8x16xf32>
  %y = nn.gelu %c : tensor<4x8x16xf32>
  return %y : tensor<4x8x16xf32>
}
