// RUN: tessera-opt %s --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition | FileCheck %s

// Tests that after microbatching, propagation and partition give every value
// its one-microbatch shape and average the loss over "mb" as over "dp".
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%arg0: tensor<2x4xf32> {{.*}}, %arg1: tensor<4x4xf32>
// CHECK: nn.reduce_mean %{{.+}} : tensor<2x4xf32> -> tensor<f32>
// CHECK: dist.all_reduce %{{.+}} on @mesh ["dp", "mb"] avg : tensor<f32>
dist.mesh @mesh ["dp"=2]
func.func @step(%x: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>},
                %w: tensor<4x4xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<16x4xf32>, tensor<4x4xf32>) -> tensor<16x4xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<16x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
