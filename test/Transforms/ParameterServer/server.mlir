// RUN: tessera-opt %s --tessera-train-step="optimizer=adamw" --tessera-parameter-server="part=server servers=2" | FileCheck %s
// RUN: tessera-opt %s --tessera-train-step="optimizer=adamw" --tessera-parameter-server="part=server servers=2" --tessera-propagate --tessera-pad --tessera-partition | FileCheck %s --check-prefix=PARTITIONED

// Tests the servers' program: the forward, backward, data and loss go; each
// update reads its gradient from a new argument marked nn.grad_of, and the
// results are the new parameters and state, renumbered to the arguments
// left. Every tensor splits its first dim the servers divide (dim 0 padded
// where none does, a scalar whole) over "ps" of the servers' own mesh, and
// partitioned the updates are elementwise on each server's piece.

dist.mesh @mesh ["dp"=2]
// CHECK: dist.mesh @ps ["ps"=2]
// CHECK-NOT: dist.mesh @mesh
// CHECK-LABEL: func.func @mlp_server(
// CHECK-SAME: %arg0: tensor<16x4xf32> {dist.sharding = #dist.sharding<@ps, [{"ps"}, {}]>, dist.source_index = 1 : i64, nn.param = "w"}
// CHECK-SAME: %arg1: tensor<3x4xf32> {dist.sharding = #dist.sharding<@ps, [{}, {"ps"}]>, dist.source_index = 2 : i64, nn.param = "v"}
// CHECK-SAME: %arg2: tensor<3xf32> {dist.sharding = #dist.sharding<@ps, [{"ps"}]>, dist.source_index = 3 : i64, nn.param = "b"}
// CHECK-SAME: nn.state = "w.adam_m"
// CHECK-SAME: %arg9: tensor<i64> {dist.sharding = #dist.sharding<@ps, []>, dist.source_index = 10 : i64, nn.state = "step"}
// CHECK-SAME: %arg10: tensor<16x4xf32> {dist.sharding = #dist.sharding<@ps, [{"ps"}, {}]>, nn.grad_of = "w"}
// CHECK-SAME: %arg11: tensor<3x4xf32> {dist.sharding = #dist.sharding<@ps, [{}, {"ps"}]>, nn.grad_of = "v"}
// CHECK-SAME: %arg12: tensor<3xf32> {dist.sharding = #dist.sharding<@ps, [{"ps"}]>, nn.grad_of = "b"}
// CHECK-SAME: -> (tensor<16x4xf32> {dist.sharding = #dist.sharding<@ps, [{"ps"}, {}]>, nn.updates = 0 : i64}
// CHECK-NOT: nn.dot
// CHECK: nn.adamw %arg0, %arg10, %arg3, %arg4, %arg9
// CHECK: nn.adamw %arg1, %arg11, %arg5, %arg6, %arg9
// CHECK: nn.adamw %arg2, %arg12, %arg7, %arg8, %arg9
// CHECK-NOT: nn.dot
// PARTITIONED-LABEL: func.func @mlp_server(%arg0: tensor<8x4xf32>
// PARTITIONED-SAME: %arg1: tensor<3x2xf32>
// PARTITIONED-SAME: %arg2: tensor<2xf32>
// PARTITIONED-NOT: dist.{{all_|reduce|collective}}
// PARTITIONED: return
func.func @mlp(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
               %w: tensor<16x4xf32> {nn.param = "w"},
               %v: tensor<3x4xf32> {nn.param = "v"},
               %b: tensor<3xf32> {nn.param = "b"}) -> tensor<f32> {
  %h = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %l = nn.reduce_mean %h dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  %sv = nn.reduce_sum %v dims = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  %sb = nn.reduce_sum %b dims = [0] : tensor<3xf32> -> tensor<f32>
  %a = nn.add %l, %sv : tensor<f32>
  %r = nn.add %a, %sb : tensor<f32>
  return %r : tensor<f32>
}
