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
