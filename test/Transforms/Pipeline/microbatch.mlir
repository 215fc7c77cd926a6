// RUN: tessera-opt %s --tessera-microbatch=microbatches=4 | FileCheck %s

// Tests that microbatching adds the time axis "mb" as the most minor mesh
// axis and splits the batch of the data arguments (not the parameters) over
// it after "dp".
// CHECK: dist.mesh @mesh ["dp"=2, "mb"=4]
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%arg0: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", "mb"}, {?}]>}, %arg1: tensor<4x4xf32> {nn.param = "w"})
dist.mesh @mesh ["dp"=2]
func.func @step(%x: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {?}]>},
                %w: tensor<4x4xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<16x4xf32>, tensor<4x4xf32>) -> tensor<16x4xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<16x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
