// RUN: not tessera-opt %s --tessera-pipeline="stages=2" 2>&1 | FileCheck %s

// Tests that --tessera-pipeline runs before --tessera-schedule: a program
// whose collectives are already started on a stream is rejected.
// CHECK: error: cannot pipeline a program that is already scheduled: run --tessera-pipeline before --tessera-schedule
dist.mesh @mesh ["pp"=2, "dp"=2]
func.func @step(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = dist.all_reduce %x on @mesh ["dp"] sum {dist.stream = 1 : i64} : tensor<4x4xf32>
  %w = dist.wait %r : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}
