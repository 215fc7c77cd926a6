// RUN: tessera-opt %s --tessera-set-mesh="shape=dp=4,tp=2" | FileCheck %s
// RUN: tessera-opt %s --tessera-set-mesh="pipeline-stages=2" | FileCheck %s --check-prefix=PIPELINE
// RUN: tessera-opt %s --tessera-set-mesh="shape=dp=4,tp=2,pp=2 pipeline-stages=2" | FileCheck %s --check-prefix=BOTH

// Tests that the mesh takes the sizes `shape` gives, and that pipeline
// stages add the most major axis "pp" (the sizes need not give it).
// CHECK-LABEL: module
// CHECK: dist.mesh @mesh ["dp"=4, "tp"=2]
// PIPELINE-LABEL: module
// PIPELINE: dist.mesh @mesh ["pp"=2, "dp"=1, "tp"=1]
// BOTH-LABEL: module
// BOTH: dist.mesh @mesh ["pp"=2, "dp"=4, "tp"=2]
module {
  dist.mesh @mesh ["dp"=1, "tp"=1]
}

