// RUN: tessera-opt %s -split-input-file -canonicalize | FileCheck %s

// Tests that collectives over a group of one device fold to their operand.
dist.mesh @mesh_x_1_y_4 ["x"=1, "y"=4]
// CHECK-LABEL: func.func @single_device_group
// CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>)
func.func @single_device_group(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK-NOT: dist.
  %0 = dist.all_reduce %x on @mesh_x_1_y_4 ["x"] avg : tensor<8x16xf32>
  %1 = dist.all_gather %x on @mesh_x_1_y_4 ["x"] dim = 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %2 = dist.reduce_scatter %x on @mesh_x_1_y_4 ["x"] dim = 0 sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %3 = dist.all_to_all %x on @mesh_x_1_y_4 ["x"] split_dim = 0 concat_dim = 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %4 = dist.all_slice %x on @mesh_x_1_y_4 ["x"] dim = 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %5 = dist.broadcast %x on @mesh_x_1_y_4 ["x"] root = 0 : tensor<8x16xf32>
  %6 = dist.collective_permute %x on @mesh_x_1_y_4 ["x"] pairs = [0, 0] : tensor<8x16xf32>
  // CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
  return %0, %1, %2, %3, %4, %5, %6 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Tests that collectives over real groups stay, and that a permutation that
// sends nothing is not the identity even on one device.
dist.mesh @mesh_x_1_y_4 ["x"=1, "y"=4]
// CHECK-LABEL: func.func @real_groups_stay
func.func @real_groups_stay(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x64xf32>) {
  // CHECK: dist.all_reduce %{{.+}} on @mesh_x_1_y_4 ["x", "y"] sum
  %0 = dist.all_reduce %x on @mesh_x_1_y_4 ["x", "y"] sum : tensor<8x16xf32>
  // CHECK: dist.collective_permute %{{.+}} on @mesh_x_1_y_4 ["x"] pairs = []
  %1 = dist.collective_permute %x on @mesh_x_1_y_4 ["x"] pairs = [] : tensor<8x16xf32>
  // CHECK: dist.all_gather %{{.+}} on @mesh_x_1_y_4 ["y"] dim = 1
  %2 = dist.all_gather %x on @mesh_x_1_y_4 ["y"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  return %0, %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x64xf32>
}

// -----

// Tests that a slice gathered back over the same axes and dim cancels, and
// that so does an all_to_all followed by its inverse.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @cancelling_pairs
// CHECK-SAME: (%[[A:.+]]: tensor<8x8xf32>)
func.func @cancelling_pairs(%a: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) {
  // CHECK-NOT: dist.
  %s = dist.all_slice %a on @mesh_x_2_y_2 ["x"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %g = dist.all_gather %s on @mesh_x_2_y_2 ["x"] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %g2 = dist.all_gather %s on @mesh_x_2_y_2 ["x"] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %s2 = dist.all_slice %g2 on @mesh_x_2_y_2 ["x"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %t1 = dist.all_to_all %a on @mesh_x_2_y_2 ["x"] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  %t2 = dist.all_to_all %t1 on @mesh_x_2_y_2 ["x"] split_dim = 0 concat_dim = 1 : tensor<16x4xf32> -> tensor<8x8xf32>
  // CHECK: %[[S:.+]] = dist.all_slice %[[A]] on @mesh_x_2_y_2 ["x"] dim = 0
  // CHECK: return %[[A]], %[[S]], %[[A]]
  return %g, %s2, %t2 : tensor<8x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>
}

// -----

// Tests that runs of all_reduces, all_gathers and all_slices merge into one
// collective over the union of their axes, major axis first.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @merging_runs
// CHECK-SAME: (%[[A:.+]]: tensor<8x8xf32>, %[[B:.+]]: tensor<2x8xf32>)
func.func @merging_runs(%a: tensor<8x8xf32>, %b: tensor<2x8xf32>) -> (tensor<8x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>) {
  // CHECK: %[[R:.+]] = dist.all_reduce %[[A]] on @mesh_x_2_y_2 ["x", "y"] sum
  %r1 = dist.all_reduce %a on @mesh_x_2_y_2 ["x"] sum : tensor<8x8xf32>
  %r2 = dist.all_reduce %r1 on @mesh_x_2_y_2 ["y"] sum : tensor<8x8xf32>
  // CHECK: %[[S:.+]] = dist.all_slice %[[A]] on @mesh_x_2_y_2 ["x", "y"] dim = 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  %s1 = dist.all_slice %a on @mesh_x_2_y_2 ["x"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %s2 = dist.all_slice %s1 on @mesh_x_2_y_2 ["y"] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  // A dim split over ["x", "y"] gathers its minor axis first.
  // CHECK: %[[G:.+]] = dist.all_gather %[[B]] on @mesh_x_2_y_2 ["x", "y"] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %g1 = dist.all_gather %b on @mesh_x_2_y_2 ["y"] dim = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %g2 = dist.all_gather %g1 on @mesh_x_2_y_2 ["x"] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  // CHECK: return %[[R]], %[[S]], %[[G]]
  return %r2, %s2, %g2 : tensor<8x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>
}

// -----

// Tests that all_reduces of different kinds do not merge.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @different_kinds
func.func @different_kinds(%a: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: dist.all_reduce %{{.+}} ["x"] sum
  // CHECK: dist.all_reduce %{{.+}} ["y"] max
  %r1 = dist.all_reduce %a on @mesh_x_2_y_2 ["x"] sum : tensor<8xf32>
  %r2 = dist.all_reduce %r1 on @mesh_x_2_y_2 ["y"] max : tensor<8xf32>
  return %r2 : tensor<8xf32>
}

// -----

// Tests that a slice gathered back after other ops, whose input nothing
// reads at or after the gather, stays: folding would keep the whole input
// alive in between (ZeRO-3 keeps such a piece to save memory).
dist.mesh @mesh_x_2 ["x"=2]
// CHECK-LABEL: func.func @held_slice
// CHECK: %[[S:.+]] = dist.all_slice
// CHECK-NEXT: nn.relu
// CHECK-NEXT: dist.all_gather %[[S]]
func.func @held_slice(%a: tensor<8x8xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<8x8xf32>) {
  %s = dist.all_slice %a on @mesh_x_2 ["x"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %r = nn.relu %b : tensor<4xf32>
  %g = dist.all_gather %s on @mesh_x_2 ["x"] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  return %r, %g : tensor<4xf32>, tensor<8x8xf32>
}
