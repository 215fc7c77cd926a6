// RUN: not tessera-opt %s --split-input-file --tessera-microbatch=microbatches=3 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not tessera-opt %s --split-input-file --tessera-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not tessera-opt %s --split-input-file --tessera-microbatch=microbatches=2 2>&1 | FileCheck %s --check-prefix=PARTITIONED

// Tests that microbatching rejects a batch that its shards and microbatches
// do not divide.
// SPLIT: error: cannot split the batch of argument #0 (dim 0 of size 16) into 3 microbatches over its 2 shards
dist.mesh @mesh ["dp"=2]
func.func @step(%x: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<16x4xf32> {
  return %x : tensor<16x4xf32>
}

// -----

// Tests that microbatching rejects a mesh that has the axis "mb" already.
// AXIS: error: mesh @mesh already has the axis "mb" that microbatching adds
dist.mesh @mesh ["mb"=2]
func.func @step(%x: tensor<16x4xf32>) -> tensor<16x4xf32> {
  return %x : tensor<16x4xf32>
}

// -----

// Tests that microbatching refuses a partitioned program: it splits the
// global batch, before the partitioner makes pieces of it.
// PARTITIONED: error: is partitioned: microbatching splits the global batch, so --tessera-microbatch runs before --tessera-partition
dist.mesh @mesh ["dp"=2]
func.func @local(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> attributes {dist.partitioned} {
  return %x : tensor<8x4xf32>
}
