// RUN: tessera-opt %s --tessera-auto-shard="axes=tp" | FileCheck %s

// Tests that with only some axes solved, the others are left to propagation:
// dims stay open, what the user gave of "dp" is kept, and values that do not
// use "tp" are marked replicated over it.
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @some_axes
// CHECK-SAME: %{{.+}}: tensor<4096x4096xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {?}], replicated={"tp"}>}
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{?}, {"tp", ?}]>, nn.param = "w1"}
func.func @some_axes(%x: tensor<4096x4096xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {?}]>},
                     %w1: tensor<4096x16384xf32> {nn.param = "w1"},
                     %w2: tensor<16384x4096xf32> {nn.param = "w2"})
    -> tensor<4096x4096xf32> {
  // CHECK: dist.sharding_constraint %{{.+}} <@mesh_dp_2_tp_4, [{?}, {"tp", ?}]>
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) -> tensor<4096x16384xf32>
  %y = nn.dot %h, %w2 contracting_dims = [1] x [0] : (tensor<4096x16384xf32>, tensor<16384x4096xf32>) -> tensor<4096x4096xf32>
  return %y : tensor<4096x4096xf32>
}
