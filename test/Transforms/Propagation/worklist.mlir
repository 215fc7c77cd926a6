// RUN: tessera-opt %s -split-input-file --tessera-propagate | FileCheck %s

// Tests that a sharding annotated only on the result travels backward through
// a chain of ops to the argument.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @backward_chain
// CHECK-SAME: %{{.+}}: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>}
func.func @backward_chain(%a: tensor<8x8xf32>)
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>}) {
  // CHECK: nn.relu %{{.+}} {dist.sharding = [#dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>]}
  %b = nn.relu %a : tensor<8x8xf32>
  %c = nn.relu %b : tensor<8x8xf32>
  %d = nn.relu %c : tensor<8x8xf32>
  return %d : tensor<8x8xf32>
}

// -----

// Tests that a later priority round carries its annotation past the
// annotated value's users: the p1 axis of %b reaches %e, three ops away.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @later_round_chain
// CHECK-SAME: -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>})
func.func @later_round_chain(
    %a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}p0, {}]>},
    %b: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{?}, {"y"}p1]>})
    -> tensor<8x8xf32> {
  %c = nn.add %a, %b : tensor<8x8xf32>
  %d = nn.relu %c : tensor<8x8xf32>
  // CHECK: nn.relu %{{.+}} {dist.sharding = [#dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>]}
  %e = nn.relu %d : tensor<8x8xf32>
  return %e : tensor<8x8xf32>
}
