// RUN: tessera-opt %s --tessera-auto-shard="zero=1" | FileCheck %s

// Tests that with ZeRO over "dp" no parameter's dims use "dp" (ZeRO stores
// the state split over it, and the ZeRO pass rejects a parameter it splits).
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @zero_mlp
// CHECK-NOT: "dp"{{.*}}nn.param
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{}, {"tp"}]>, nn.param = "w1"}
func.func @zero_mlp(%x: tensor<4096x4096xf32>,
                    %w1: tensor<4096x16384xf32> {nn.param = "w1"},
                    %w2: tensor<16384x4096xf32> {nn.param = "w2"})
    -> tensor<4096x4096xf32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) -> tensor<4096x16384xf32>
  %y = nn.dot %h, %w2 contracting_dims = [1] x [0] : (tensor<4096x16384xf32>, tensor<16384x4096xf32>) -> tensor<4096x4096xf32>
  return %y : tensor<4096x4096xf32>
}
