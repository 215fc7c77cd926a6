// RUN: tessera-opt %s --tessera-set-mesh="pipeline-stages=2" | FileCheck %s

// Tests that a model without a mesh gets one of the pipeline axis alone.
// CHECK-LABEL: module
// CHECK: dist.mesh @mesh ["pp"=2]
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
