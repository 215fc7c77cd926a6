// RUN: not tessera-opt %s --tessera-schedule 2>&1 | FileCheck %s --check-prefix=UNPARTITIONED
// RUN: not tessera-opt %s --tessera-schedule=prefetch=-1 2>&1 | FileCheck %s --check-prefix=OPTION

// Tests that --tessera-schedule wants a partitioned program and options of
// 0 or more.
// UNPARTITIONED: error: --tessera-schedule runs on a partitioned program (run --tessera-partition first)
// OPTION: error: --tessera-schedule takes prefetch, bucket-bytes and memory-limit of 0 or more
dist.mesh @mesh ["dp"=2]
func.func @step(%x: tensor<8xf32>) -> tensor<8xf32> {
  %c = dist.sharding_constraint %x <@mesh, [{"dp"}]> : tensor<8xf32>
  return %c : tensor<8xf32>
}
