// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 virtual=2" 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 microbatches=3 schedule=interleaved virtual=2" 2>&1 | FileCheck %s --check-prefix=INTERLEAVED
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=4" 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-pipeline="stages=2 microbatches=2" 2>&1 | FileCheck %s --check-prefix=MB
// RUN: not tessera-opt %s --split-input-file --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=2 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=2" 2>&1 | FileCheck %s

// Tests that --tessera-pipeline rejects options it cannot build, a mesh that
// does not match them, and programs it cannot cut or split.
// SCHEDULE: error: unknown pipeline schedule 'zigzag', expected gpipe, 1f1b, interleaved or zb-h1
// VIRTUAL: error: virtual stages need the interleaved schedule
// INTERLEAVED: error: the interleaved schedule needs microbatches (3) to be a multiple of stages (2)
// AXIS: error: the mesh axis "pp" has size 2, but stages = 4
// MB: error: the mesh axis "mb" has size 1, but microbatches = 2

// Stage annotations must not decrease.
dist.mesh @mesh ["pp"=2]
func.func @annotations(%x: tensor<8x4xf32>, %w0: tensor<4x4xf32> {nn.param = "w0"},
                       %w1: tensor<4x4xf32> {nn.param = "w1"}) -> tensor<f32> {
  %0 = nn.dot %x, %w0 contracting_dims = [1] x [0] {dist.stage = 1 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  // CHECK: error: pipeline stage 0 does not follow stage 1 of 2 (stage annotations must increase in program order)
  %1 = nn.dot %0, %w1 contracting_dims = [1] x [0] {dist.stage = 0 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %2 = nn.reduce_mean %1 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Normalizing over the batch needs every microbatch at once.
dist.mesh @mesh ["pp"=2]
func.func @batch_norm(%x: tensor<8x4xf32>, %w: tensor<4x4xf32> {nn.param = "w"}) -> tensor<f32> {
  %0 = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.reduce_mean %0 dims = [0] : tensor<8x4xf32> -> tensor<4xf32>
  %2 = nn.broadcast %1 dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  // CHECK: error: cannot split into microbatches: 'nn.sub' reads a per-microbatch value that is not reduced over microbatches (an all_reduce over "mb")
  %3 = nn.sub %0, %2 : tensor<8x4xf32>
  %4 = nn.mul %3, %3 : tensor<8x4xf32>
  %5 = nn.reduce_mean %4 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  return %5 : tensor<f32>
}
