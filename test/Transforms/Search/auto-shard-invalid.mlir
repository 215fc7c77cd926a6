// RUN: not tessera-opt %s --tessera-auto-shard="axes=zz" 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not tessera-opt %s --tessera-auto-shard="memory-limit=1000" 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: not tessera-opt %s --tessera-auto-shard="batch-axes=dp" 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not tessera-opt %s --tessera-auto-shard="machine=no-such-machine" 2>&1 | FileCheck %s --check-prefix=MACHINE
// RUN: not tessera-opt %S/Inputs/two-meshes.mlir --tessera-auto-shard 2>&1 | FileCheck %s --check-prefix=TWO

// Tests that --tessera-auto-shard names an axis the mesh lacks (to solve or
// as a batch axis), a program no sharding fits in the memory limit (with
// what it takes at least), a machine it cannot load, and an unannotated
// function in a module of several meshes.
// AXIS: auto-shard-invalid.mlir:[[@LINE+6]]:1: error: cannot auto-shard: mesh @mesh_tp_4 has no axis 'zz'
// BATCH: auto-shard-invalid.mlir:[[@LINE+5]]:1: error: cannot auto-shard: the batch axis 'dp' is not a solved axis of mesh @mesh_tp_4
// MEMORY: error: cannot auto-shard: no sharding on {"tp"} fits: the model state and activations take at least 655.36 KB per device, over the limit of 1.00 KB
// MACHINE: error: cannot load machine 'no-such-machine'
// TWO: two-meshes.mlir:{{[0-9]+}}:1: error: cannot auto-shard: the module has 2 meshes and the function's annotations name none
dist.mesh @mesh_tp_4 ["tp"=4]
func.func @mlp(%x: tensor<64x64xf32>,
               %w: tensor<64x2048xf32> {nn.param = "w"}) -> tensor<64x2048xf32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x2048xf32>) -> tensor<64x2048xf32>
  return %y : tensor<64x2048xf32>
}
