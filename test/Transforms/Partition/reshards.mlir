// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition | FileCheck %s

// Tests that a split dim that the op cannot split is gathered: softmax over
// a dim split by "y".
dist.mesh @mesh_x_2_y_4 ["x"=2, "y"=4]
// CHECK-LABEL: func.func @all_gather
// CHECK-SAME: (%[[A:.+]]: tensor<4x2xf32>
func.func @all_gather(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{"x"}, {"y"}]>}) -> tensor<8x8xf32> {
  // CHECK: %[[G:.+]] = dist.all_gather %[[A]] on @mesh_x_2_y_4 ["y"] dim = 1 : tensor<4x2xf32> -> tensor<4x8xf32>
  // CHECK: nn.softmax %[[G]] dim = 1 : tensor<4x8xf32>
  %p = nn.softmax %a dim = 1 : tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

// -----

// Tests that a replicated operand of a split op is sliced locally.
dist.mesh @mesh_x_2_y_4 ["x"=2, "y"=4]
// CHECK-LABEL: func.func @all_slice
// CHECK-SAME: (%[[A:.+]]: tensor<4x8xf32> {{.*}}, %[[B:.+]]: tensor<8x8xf32>
func.func @all_slice(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{"x"}, {}]>},
                     %b: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{}, {}]>}) -> tensor<8x8xf32> {
  // CHECK: %[[S:.+]] = dist.all_slice %[[B]] on @mesh_x_2_y_4 ["x"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  // CHECK: nn.add %[[A]], %[[S]] : tensor<4x8xf32>
  %c = nn.add %a, %b : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// Tests that moving a split from one dim to another is one all_to_all.
dist.mesh @mesh_x_2_y_4 ["x"=2, "y"=4]
// CHECK-LABEL: func.func @all_to_all
// CHECK-SAME: (%[[A:.+]]: tensor<2x8xf32>
func.func @all_to_all(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{"y"}, {}]>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{}, {"y"}]>}) {
  // CHECK: %[[T:.+]] = dist.all_to_all %[[A]] on @mesh_x_2_y_4 ["y"] split_dim = 1 concat_dim = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
  // CHECK: nn.softmax %[[T]] dim = 0 : tensor<8x2xf32>
  // CHECK-NOT: = dist.
  %p = nn.softmax %a dim = 0 : tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

// -----

// Tests that axes moving from one dim to another in the same order move
// with one all_to_all over all of them: [{"a", "b"}, {}] to
// [{}, {"a", "b"}] on a 2x2x2 mesh receives 3/4 of a device's 16 elements
// (before: an all_gather of 48 and a slice). Under "c" too, and one axis of
// two moving (a regroup) is the single-axis all_to_all.
dist.mesh @mesh_2x2x2 ["a"=2, "b"=2, "c"=2]
// CHECK-LABEL: func.func @all_to_all_two_axes
// CHECK-SAME: (%[[A:.+]]: tensor<2x8xf32>
func.func @all_to_all_two_axes(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_2x2x2, [{"a", "b"}, {}]>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_2x2x2, [{}, {"a", "b"}]>}) {
  // CHECK: %[[T:.+]] = dist.all_to_all %[[A]] on @mesh_2x2x2 ["a", "b"] split_dim = 1 concat_dim = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
  // CHECK: nn.softmax %[[T]] dim = 0 : tensor<8x2xf32>
  // CHECK-NOT: = dist.
  %p = nn.softmax %a dim = 0 : tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}
// CHECK-LABEL: func.func @all_to_all_under_c
// CHECK-SAME: (%[[A:.+]]: tensor<4x2x8xf32>
func.func @all_to_all_under_c(%a: tensor<8x8x8xf32> {dist.sharding = #dist.sharding<@mesh_2x2x2, [{"c"}, {"a", "b"}, {}]>})
    -> (tensor<8x8x8xf32> {dist.sharding = #dist.sharding<@mesh_2x2x2, [{"c"}, {}, {"a", "b"}]>}) {
  // CHECK: dist.all_to_all %[[A]] on @mesh_2x2x2 ["a", "b"] split_dim = 2 concat_dim = 1 : tensor<4x2x8xf32> -> tensor<4x8x2xf32>
  // CHECK-NOT: = dist.
  %p = nn.softmax %a dim = 1 : tensor<8x8x8xf32>
  return %p : tensor<8x8x8xf32>
}
// CHECK-LABEL: func.func @regroup
// CHECK-SAME: (%[[A:.+]]: tensor<4x4xf32>
func.func @regroup(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_2x2x2, [{"a"}, {"b"}]>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_2x2x2, [{"a", "b"}, {}]>}) {
  // CHECK: dist.all_to_all %[[A]] on @mesh_2x2x2 ["b"] split_dim = 0 concat_dim = 1 : tensor<4x4xf32> -> tensor<2x8xf32>
  // CHECK-NOT: = dist.
  %p = nn.softmax %a dim = 1 : tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

// -----

// Tests that a reshape splits no factor that is minor to an unsplit one on
// either side: [16, 16] to [32, 8] makes dim 1's major part of 2 the minor
// part of the result's dim 0, whose major 16 is whole, so "z" on it (and
// "y" on the part after it) cannot stay; the reshape computes whole and the
// result is sliced (before: a [16, 16] input reshaped into a [32, 4] local
// result, which the verifier rejected). Found by test/fuzz/random_programs.py.
dist.mesh @mesh_y_z ["y"=2, "z"=2]
// CHECK-LABEL: func.func @split_minor
// CHECK: %[[G:.+]] = dist.all_gather %arg0 on @mesh_y_z ["z", "y"] dim = 1 : tensor<16x4xf32> -> tensor<16x16xf32>
// CHECK: %[[R:.+]] = nn.reshape %[[G]] : tensor<16x16xf32> -> tensor<32x8xf32>
// CHECK: dist.all_slice %[[R]] on @mesh_y_z ["y"] dim = 1 : tensor<32x8xf32> -> tensor<32x4xf32>
func.func @split_minor(%a: tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh_y_z, [{}, {"z", "y"}]>}) -> tensor<32x8xf32> {
  %r = nn.reshape %a : tensor<16x16xf32> -> tensor<32x8xf32>
  return %r : tensor<32x8xf32>
}

// -----

// Tests that a value whose dim keeps its major axis only gathers the minor
// one, never replicating the whole dim (here before the relu, which computes
// in its annotated result sharding).
dist.mesh @mesh_x_2_y_4 ["x"=2, "y"=4]
// CHECK-LABEL: func.func @gather_suffix
// CHECK-SAME: (%[[A:.+]]: tensor<1x8xf32>
func.func @gather_suffix(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{"x", "y"}, {}]>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{"x"}, {}]>}) {
  // CHECK: %[[G:.+]] = dist.all_gather %[[A]] on @mesh_x_2_y_4 ["y"] dim = 0 : tensor<1x8xf32> -> tensor<4x8xf32>
  // CHECK: %[[R:.+]] = nn.relu %[[G]] : tensor<4x8xf32>
  // CHECK: return %[[R]]
  %r = nn.relu %a : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Tests that a split reduced dim gives partial results combined by the
// reduction's own kind: max for reduce_max, avg for reduce_mean.
dist.mesh @mesh_x_2_y_4 ["x"=2, "y"=4]
// CHECK-LABEL: func.func @partial_kinds
func.func @partial_kinds(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{}, {"y"}]>}) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK: nn.reduce_max %{{.+}} dims = [1] : tensor<8x2xf32> -> tensor<8xf32>
  // CHECK: dist.all_reduce %{{.+}} on @mesh_x_2_y_4 ["y"] max
  %m = nn.reduce_max %a dims = [1] : tensor<8x8xf32> -> tensor<8xf32>
  // CHECK: nn.reduce_mean %{{.+}} dims = [1] : tensor<8x2xf32> -> tensor<8xf32>
  // CHECK: dist.all_reduce %{{.+}} on @mesh_x_2_y_4 ["y"] avg
  %n = nn.reduce_mean %a dims = [1] : tensor<8x8xf32> -> tensor<8xf32>
  return %m, %n : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that slices keep their local limits on split dims and that splat
// constants take their local shape.
dist.mesh @mesh_x_2_y_4 ["x"=2, "y"=4]
// CHECK-LABEL: func.func @local_attributes
func.func @local_attributes(%a: tensor<8x192xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{"y"}, {}]>}) -> tensor<8x64xf32> {
  // CHECK-DAG: nn.slice %{{.+}} start = [0, 64] limit = [2, 128] : tensor<2x192xf32> -> tensor<2x64xf32>
  %s = nn.slice %a start = [0, 64] limit = [8, 128] : tensor<8x192xf32> -> tensor<8x64xf32>
  // CHECK-DAG: nn.constant dense<2.000000e+00> : tensor<2x64xf32>
  %c = nn.constant dense<2.0> : tensor<8x64xf32>
  %m = nn.mul %s, %c : tensor<8x64xf32>
  return %m : tensor<8x64xf32>
}

// -----

// Tests that an iota wanted split along its index dim computes its piece,
// placed by the device's coordinate along the dim's axes (no slicing), and
// its other dims their local size.
dist.mesh @mesh_x_2_y_4 ["x"=2, "y"=4]
// CHECK-LABEL: func.func @iota
func.func @iota(%a: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_4, [{"x"}, {"y"}]>}) -> tensor<8x16xf32> {
  // CHECK-NOT: dist.all_slice
  // CHECK-DAG: %[[X:.+]] = dist.axis_index @mesh_x_2_y_4 {{\[}}["x"]] : tensor<1xi64>
  // CHECK-DAG: nn.iota dim = 0 piece %[[X]] : tensor<1xi64> : tensor<4x4xf32>
  // CHECK-DAG: %[[Y:.+]] = dist.axis_index @mesh_x_2_y_4 {{\[}}["y"]] : tensor<1xi64>
  // CHECK-DAG: nn.iota dim = 1 piece %[[Y]] : tensor<1xi64> : tensor<4x4xf32>
  // CHECK-NOT: dist.all_slice
  %r = nn.iota dim = 0 : tensor<8x16xf32>
  %c = nn.iota dim = 1 : tensor<8x16xf32>
  %s = nn.add %r, %a : tensor<8x16xf32>
  %m = nn.mul %s, %c : tensor<8x16xf32>
  return %m : tensor<8x16xf32>
}

// -----

// Tests that fused attention with its kv heads split needs no collective
// (each device holds its kv heads and their query heads), and that a
// causal attention's queries split over "x" stay split: the piece reads
// its place (the queries' positions) from a dist.axis_index.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x8x16xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{}, {"y"}, {"x"}, {}]>},
                     %k: tensor<2x2x8x16xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{}, {"y"}, {}, {}]>},
                     %v: tensor<2x2x8x16xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{}, {"y"}, {}, {}]>})
    -> (tensor<2x4x8x16xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{}, {"y"}, {"x"}, {}]>}) {
  // CHECK-NOT: dist.all_gather
  // CHECK: %[[P:.+]] = dist.axis_index @mesh_x_2_y_2 {{\[\[}}], ["y"], ["x"], []] : tensor<4xi64>
  // CHECK: nn.attention %arg0, %arg1, %arg2 piece %[[P]] causal = true scale = 2.500000e-01 {global_shape = array<i64: 2, 4, 8, 8>} : (tensor<2x2x4x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32>, tensor<4xi64>) -> tensor<2x2x4x16xf32>
  // CHECK-NEXT: return
  %o = nn.attention %q, %k, %v causal = true scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that scatter_add's sources split along its axis give partial sums
// of the whole result, completed by one all_reduce, while a split of
// another dim stays split.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// CHECK-LABEL: func.func @scatter_add
func.func @scatter_add(%s: tensor<4x6xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>},
                       %i: tensor<4x6xi64> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {"y"}]>})
    -> (tensor<4x10xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"x"}, {}]>}) {
  // CHECK: %[[S:.+]] = nn.scatter_add %{{.+}}, %{{.+}} axis = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x10xf32>
  // CHECK: dist.all_reduce %[[S]] {{.*}}["y"]
  %0 = nn.scatter_add %s, %i axis = 1 : (tensor<4x6xf32>, tensor<4x6xi64>) -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}
