// RUN: tessera-opt %s --tessera-microbatch=microbatches=2 | FileCheck %s

// Tests that where the batch splits over "ep" (expert parallelism's data),
// the microbatch axis is its major split, so that "ep" stays the minor
// split of a microbatch, which the experts' all_to_all exchanges.
// CHECK: dist.mesh @mesh ["dp"=2, "ep"=2, "mb"=2]
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%arg0: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"mb", "dp", "ep"}, {?}]>}
dist.mesh @mesh ["dp"=2, "ep"=2]
func.func @step(%x: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", "ep"}, {?}]>},
                %w: tensor<4x4xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<16x4xf32>, tensor<4x4xf32>) -> tensor<16x4xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<16x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
