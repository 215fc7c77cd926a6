// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition | FileCheck %s

// Tests that a partial sum a constraint keeps unreduced stays pending through
// linear ops (transpose, add) from its producers, and is reduce-scattered
// once at the constraint that splits it.
// CHECK-LABEL: func.func @pending
// CHECK-NOT: dist.all_reduce
// CHECK: %[[A:.+]] = nn.dot
// CHECK: %[[B:.+]] = nn.dot
// CHECK-NEXT: %[[T:.+]] = nn.transpose %[[B]]
// CHECK-NEXT: %[[S:.+]] = nn.add %[[A]], %[[T]] : tensor<4x4xf32>
// CHECK-NEXT: dist.reduce_scatter %[[S]] on @mesh_dp_2 ["dp"] dim = 0 sum : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NOT: dist.all_reduce
dist.mesh @mesh_dp_2 ["dp"=2]
func.func @pending(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh_dp_2, [{"dp"}, {}]>},
                   %y: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh_dp_2, [{"dp"}, {}]>})
    -> tensor<4x4xf32> {
  %a = nn.dot %x, %y contracting_dims = [0] x [0] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %b = nn.dot %y, %x contracting_dims = [0] x [0] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %t = nn.transpose %b permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %s = nn.add %a, %t : tensor<4x4xf32>
  %p = dist.sharding_constraint %s <@mesh_dp_2, [{}, {}], unreduced={"dp"}> : tensor<4x4xf32>
  %g = dist.sharding_constraint %p <@mesh_dp_2, [{"dp"}, {}]> : tensor<4x4xf32>
  return %g : tensor<4x4xf32>
}

// -----

// Tests that a linear op whose other operand is whole does not keep the sum
// pending: the partial operand is all-reduced before it.
// CHECK-LABEL: func.func @mixed
// CHECK: %[[A:.+]] = nn.dot
// CHECK-NEXT: %[[R:.+]] = dist.all_reduce %[[A]] on @mesh_dp_2 ["dp"] sum
// CHECK-NEXT: nn.add %[[R]], %arg2
dist.mesh @mesh_dp_2 ["dp"=2]
func.func @mixed(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh_dp_2, [{"dp"}, {}]>},
                 %y: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh_dp_2, [{"dp"}, {}]>},
                 %z: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = nn.dot %x, %y contracting_dims = [0] x [0] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %s = nn.add %a, %z : tensor<4x4xf32>
  %p = dist.sharding_constraint %s <@mesh_dp_2, [{}, {}], unreduced={"dp"}> : tensor<4x4xf32>
  %g = dist.sharding_constraint %p <@mesh_dp_2, [{"dp"}, {}]> : tensor<4x4xf32>
  return %g : tensor<4x4xf32>
}
