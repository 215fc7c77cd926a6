// RUN: tessera-opt %s --tessera-sharding-pipeline="mesh=dp=2,tp=2" | FileCheck %s
// RUN: tessera-opt %s --tessera-sharding-pipeline="mesh=dp=2,tp=2 train=sgd lr=0.5" | FileCheck %s --check-prefix=TRAIN

// Tests that the registered sharding pipeline sizes the mesh, propagates and
// partitions (Megatron's row-parallel dot leaves a sum over "tp", the mean
// over the split batch a mean over "dp"), and with train= builds the train
// step first.
// CHECK: dist.mesh @mesh ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @mlp
// CHECK: nn.dot {{.*}} -> tensor<2x4xf32>
// CHECK: dist.all_reduce %{{.+}} on @mesh ["tp"] sum : tensor<2x4xf32>
// CHECK: nn.reduce_mean
// CHECK-NEXT: dist.all_reduce %{{.+}} on @mesh ["dp"] avg : tensor<f32>
// TRAIN-LABEL: func.func @mlp
// TRAIN: nn.sgd {{.*}}lr = 5.000000e-01
dist.mesh @mesh ["dp"=1, "tp"=1]

func.func @mlp(%x: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "w1"},
               %w2: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "w2"})
    -> tensor<f32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = nn.relu %h : tensor<4x16xf32>
  %y = nn.dot %r, %w2 contracting_dims = [1] x [0] : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
