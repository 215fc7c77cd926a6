// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 virtual=2" 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 microbatches=3 schedule=interleaved virtual=2" 2>&1 | FileCheck %s --check-prefix=INTERLEAVED
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 microbatches=2 schedule=interleaved virtual=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=STAGES

// Tests that --tessera-pipeline rejects options it cannot build.
// SCHEDULE: for the --schedule option: got 'zigzag', expected gpipe, 1f1b, interleaved, zb-h1, 2bw or pipedream
// VIRTUAL: error: virtual stages need the interleaved schedule
// INTERLEAVED: error: the interleaved schedule needs microbatches (3) to be a multiple of stages (2)
// Stages times virtual stages overflowed int64 and crashed (issue 28).
// STAGES: error: expects at most 1048576 pipeline stages (2^20), got 2 ranks x 4611686018427387904 virtual stages
