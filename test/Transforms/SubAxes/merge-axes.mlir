// RUN: tessera-opt %s -split-input-file --tessera-merge-axes | FileCheck %s

// Tests that sub-axes every list names together, in order, are the axis
// again: in the mesh, the shardings and the collectives.
// CHECK-LABEL: dist.mesh @mesh ["dp"=2, "tp"=4]
dist.mesh @mesh ["dp"=2, "tp:(1)2"=2, "tp:(2)2"=2]
// CHECK: func.func @together(%{{.+}}: tensor<4x2xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>})
func.func @together(%x: tensor<4x2xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp:(1)2", "tp:(2)2"}]>}) -> tensor<4x2xf32> {
  // CHECK: dist.all_reduce %{{.+}} on @mesh ["dp", "tp"] sum
  %r = dist.all_reduce %x on @mesh ["dp", "tp:(1)2", "tp:(2)2"] sum : tensor<4x2xf32>
  // CHECK: dist.axis_index @mesh {{\[}}["tp"], []]
  %i = dist.axis_index @mesh [["tp:(1)2", "tp:(2)2"], []] : tensor<2xi64>
  return %r : tensor<4x2xf32>
}

// -----

// Tests that a sub-axis used alone (the kv heads') keeps the parts as
// axes of their own everywhere.
// CHECK-LABEL: dist.mesh @mesh ["tp:(1)2"=2, "tp:(2)2"=2]
dist.mesh @mesh ["tp:(1)2"=2, "tp:(2)2"=2]
// CHECK: func.func @alone(%{{.+}}: tensor<2x1x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp:(1)2"}, {}]>}, %{{.+}}: tensor<2x2x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp:(1)2", "tp:(2)2"}, {}]>})
func.func @alone(%k: tensor<2x1x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp:(1)2"}, {}]>},
                 %q: tensor<2x2x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp:(1)2", "tp:(2)2"}, {}]>}) -> tensor<2x1x8xf32> {
  // CHECK: dist.all_reduce %{{.+}} on @mesh ["tp:(2)2"] sum
  %r = dist.all_reduce %k on @mesh ["tp:(2)2"] sum : tensor<2x1x8xf32>
  return %r : tensor<2x1x8xf32>
}

// -----

// Tests that parts named minor before major do not merge.
// CHECK-LABEL: dist.mesh @mesh ["tp:(1)2"=2, "tp:(2)2"=2]
dist.mesh @mesh ["tp:(1)2"=2, "tp:(2)2"=2]
func.func @reversed(%x: tensor<4xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp:(2)2", "tp:(1)2"}]>}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that names only resembling sub-axes, or parts that do not cover an
// axis from its first block, stay.
// CHECK-LABEL: dist.mesh @mesh ["a:(2)2"=2, "a:(4)2"=2, "b:(x)2"=2]
dist.mesh @mesh ["a:(2)2"=2, "a:(4)2"=2, "b:(x)2"=2]
