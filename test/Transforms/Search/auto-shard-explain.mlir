// RUN: tessera-opt %s --tessera-auto-shard="explain=true" -o /dev/null 2>&1 | FileCheck %s

// Tests that explain=true gives each op's sharding with its factors' axes,
// its cost and its runner-up's, says which ops follow their operand, and
// sums the program up at the function.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-DAG: auto-shard-explain.mlir:[[@LINE+1]]:1: remark: auto-shard over {"tp"}: {{[0-9.]+}} us per step, {{[0-9.]+}} MB of collectives, {{[0-9.]+}} MB per device; {{[0-9]+}} variables, {{[0-9]+}} constraints for 7 nodes (6 distinct); solved in
func.func @megatron_mlp(%x: tensor<4096x4096xf32>,
                        %w1: tensor<4096x16384xf32> {nn.param = "w1"},
                        %w2: tensor<16384x4096xf32> {nn.param = "w2"})
    -> tensor<4096x4096xf32> {
  // CHECK-DAG: auto-shard-explain.mlir:[[@LINE+1]]:8: remark: sharded #dist.sharding<@mesh_tp_4, [{}, {"tp"}]> (j={"tp"}) at {{[0-9.]+}} us; runner-up #dist.sharding<@mesh_tp_4, [{}, {"tp"}]> (k={"tp"}) costs {{[0-9.]+}} us more
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) -> tensor<4096x16384xf32>
  // CHECK-DAG: auto-shard-explain.mlir:[[@LINE+1]]:8: remark: sharded #dist.sharding<@mesh_tp_4, [{}, {"tp"}]> (j={"tp"}) at {{[0-9.]+}} us; follows its operand
  %r = nn.relu %h : tensor<4096x16384xf32>
  // CHECK-DAG: auto-shard-explain.mlir:[[@LINE+1]]:8: remark: sharded #dist.sharding<@mesh_tp_4, [{}, {}]> (k={"tp"}) at
  %y = nn.dot %r, %w2 contracting_dims = [1] x [0] : (tensor<4096x16384xf32>, tensor<16384x4096xf32>) -> tensor<4096x4096xf32>
  return %y : tensor<4096x4096xf32>
}
