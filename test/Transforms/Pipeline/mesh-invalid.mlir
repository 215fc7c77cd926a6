// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=4" 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-pipeline="stages=2 microbatches=2" 2>&1 | FileCheck %s --check-prefix=MB

// Tests that --tessera-pipeline rejects a mesh whose pipeline axis "pp" or
// microbatch axis "mb" does not match the stages and microbatches it is
// given (Inputs/mlp4.mlir has "pp"=2 and no "mb").
// AXIS: error: the mesh axis "pp" has size 2, but stages = 4
// MB: error: the mesh axis "mb" has size 1, but microbatches = 2
