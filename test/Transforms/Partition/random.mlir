// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition | FileCheck %s

// Tests that a split dropout draws for its piece: the piece's index along
// each dim from the device's coordinates, and the global shape.
dist.mesh @mesh ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:.+]]: tensor<4x2xf32> {{.*}}, %[[S:.+]]: tensor<i64>
func.func @dropout(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>},
                   %step: tensor<i64>) -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>}) {
  // CHECK: %[[I:.+]] = dist.axis_index @mesh {{\[}}["dp"], ["tp"]] : tensor<2xi64>
  // CHECK: nn.dropout %[[X]] step %[[S]] piece %[[I]] rate = 5.000000e-01 seed = 3 {global_shape = array<i64: 8, 8>} : tensor<4x2xf32>, tensor<i64>, tensor<2xi64>
  %y = nn.dropout %x step %step rate = 0.5 seed = 3 : tensor<8x8xf32>, tensor<i64>
  return %y : tensor<8x8xf32>
}

// -----

// Tests that a random op split over no axis draws for the whole tensor.
dist.mesh @mesh ["dp"=2]
// CHECK-LABEL: func.func @replicated
// CHECK-NOT: dist.axis_index
// CHECK: nn.random_uniform step %{{.+}} seed = 0 : tensor<i64> -> tensor<8x8xf32>
func.func @replicated(%step: tensor<i64>) -> tensor<8x8xf32> {
  %u = nn.random_uniform step %step seed = 0 : tensor<i64> -> tensor<8x8xf32>
  return %u : tensor<8x8xf32>
}

// -----

// Tests that a piece over two axes of one dim (and none of the other) is
// indexed row-major over them.
dist.mesh @mesh ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @two_axes
// CHECK: %[[I:.+]] = dist.axis_index @mesh {{\[}}["dp", "tp"], []] : tensor<2xi64>
// CHECK: nn.random_uniform step %{{.+}} piece %[[I]] seed = 1 {global_shape = array<i64: 8, 4>} : tensor<i64>, tensor<2xi64> -> tensor<2x4xf32>
func.func @two_axes(%step: tensor<i64>) -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", "tp"}, {}]>}) {
  %u = nn.random_uniform step %step seed = 1 : tensor<i64> -> tensor<8x4xf32>
  return %u : tensor<8x4xf32>
}

// -----

// Tests that attention's dropout draws for its piece of the probabilities
// [b, heads, s, t]: the batch over "dp", the (kv) heads over "tp", the keys
// whole.
dist.mesh @mesh ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @attention
// CHECK: %[[I:.+]] = dist.axis_index @mesh {{\[}}["dp"], ["tp"], [], []] : tensor<4xi64>
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} step %{{.+}} piece %[[I]] causal = true scale = 2.500000e-01 dropout = 1.000000e-01 seed = 2 {global_shape = array<i64: 4, 4, 8, 8>} : (tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32>, tensor<i64>, tensor<4xi64>)
func.func @attention(%q: tensor<4x4x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}, {}, {}]>},
                     %kv: tensor<4x2x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}, {}, {}]>},
                     %step: tensor<i64>) -> (tensor<4x4x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}, {}, {}]>}) {
  %o = nn.attention %q, %kv, %kv step %step causal = true scale = 0.25 dropout = 0.1 seed = 2
      : (tensor<4x4x8x16xf32>, tensor<4x2x8x16xf32>, tensor<4x2x8x16xf32>, tensor<i64>) -> tensor<4x4x8x16xf32>
  return %o : tensor<4x4x8x16xf32>
}
