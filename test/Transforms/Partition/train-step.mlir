// RUN: tessera-opt %s --tessera-train-step=optimizer=sgd --tessera-propagate --tessera-partition | FileCheck %s

// Tests that a sharded training step needs no help: gradients follow their
// parameters' shardings into the optimizer, and the data-parallel gradient
// all-reduce appears exactly once per weight gradient (the contraction over
// the batch split over "dp"), besides the forward's one tensor-parallel
// all-reduce and the loss's average.
dist.mesh @mesh_dp_2_tp_2 ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %[[W1:[^:]+]]: tensor<16x32xf32> {{.*}}nn.param = "w1"
// CHECK-SAME: %[[W2:[^:]+]]: tensor<32x16xf32> {{.*}}nn.param = "w2"
func.func @mlp(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"dp"}, {}]>},
               %w1: tensor<16x64xf32> {nn.param = "w1", dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{}, {"tp"}]>},
               %w2: tensor<64x16xf32> {nn.param = "w2", dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"tp"}, {}]>})
    -> tensor<f32> {
  // Forward: one all_reduce over "tp", then the loss's average over "dp".
  // CHECK: dist.all_reduce %{{.+}} on @mesh_dp_2_tp_2 ["tp"] sum : tensor<4x16xf32>
  // CHECK: dist.all_reduce %{{.+}} on @mesh_dp_2_tp_2 ["dp"] avg : tensor<f32>
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %a = nn.gelu %h : tensor<8x64xf32>
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %sq = nn.mul %y, %y : tensor<8x16xf32>
  %l = nn.reduce_mean %sq dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  // Backward: each weight gradient, local to its tensor-parallel shard, is
  // summed over the data-parallel ranks.
  // (Both local weight gradients hold 512 elements, one of them transposed.)
  // CHECK-COUNT-2: dist.all_reduce %{{.+}} on @mesh_dp_2_tp_2 ["dp"] sum : tensor<{{16x32|32x16}}xf32>
  // CHECK-NOT: dist.all_reduce
  // CHECK: nn.sgd %[[W1]], %{{.+}} lr = 1.000000e-03 : tensor<16x32xf32>
  // CHECK: nn.sgd %[[W2]], %{{.+}} lr = 1.000000e-03 : tensor<32x16xf32>
  return %l : tensor<f32>
}
