// RUN: not tessera-opt %s --tessera-set-mesh="shape=dp=2" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not tessera-opt %s --tessera-set-mesh="shape=dp=2,tp=2,sp=2" 2>&1 | FileCheck %s --check-prefix=EXTRA
// RUN: not tessera-opt %s --tessera-set-mesh="shape=dp=0,tp=2" 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not tessera-opt %s --tessera-set-mesh="pipeline-stages=0" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not tessera-opt %S/Inputs/two-meshes.mlir --tessera-set-mesh="shape=dp=2" 2>&1 | FileCheck %s --check-prefix=TWO

// Tests that --tessera-set-mesh names the axis the sizes lack or the mesh
// lacks, rejects a size that is not a positive integer and fewer than one
// pipeline stage, and needs exactly one mesh.
// MISSING: invalid.mlir:[[@LINE+5]]:1: error: --mesh does not give axis "tp" of mesh @mesh
// EXTRA: error: --mesh gives axis "sp", which mesh @mesh does not have
// SYNTAX: error: --mesh expects axis=size entries like dp=2,tp=4, got 'dp=0'
// STAGES: error: pipeline-stages must be 1 or more, got 0
// TWO: error: --mesh needs a model with exactly one dist.mesh, found 2
dist.mesh @mesh ["dp"=1, "tp"=1]
