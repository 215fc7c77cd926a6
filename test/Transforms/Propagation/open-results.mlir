// RUN: tessera-opt %s -split-input-file --tessera-propagate | FileCheck %s
// RUN: tessera-opt %s -split-input-file --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PARTITION

// Tests that a result annotation's open dims take the axes the returned
// value has there, so that it leaves as it is: an [a][b] value returned
// through [{?}, {?}] moves nothing (before: two all_gathers, 192 bytes
// received per device); an annotated argument [a][] returned through
// [{?}, {"b", ?}] keeps "a" and is only sliced over "b" (before: an
// all_gather over "a", 128 bytes per device, then the slice).
dist.mesh @mesh ["a"=2, "b"=2]
// CHECK-LABEL: func.func @open
// CHECK-SAME: -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"a"}, {"b"}]>})
// PARTITION-LABEL: func.func @open
// PARTITION-NOT: dist.all_gather
// PARTITION: return
func.func @open(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"a"}, {"b"}]>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{?}, {?}]>}) {
  %y = nn.relu %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
// CHECK-LABEL: func.func @argument
// CHECK-SAME: -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"a"}, {"b"}]>})
// PARTITION-LABEL: func.func @argument
// PARTITION-NOT: dist.all_gather
// PARTITION: dist.all_slice %arg0 on @mesh ["b"] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
// PARTITION-NOT: dist.all_gather
// PARTITION: return
func.func @argument(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"a"}, {}]>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{?}, {"b", ?}]>}) {
  return %x : tensor<8x8xf32>
}

// -----

// Tests that an open dim takes no axis another part of the annotation uses,
// and that closed dims stay as written: the value [a][b] leaves through
// [{?}, {"a"}] as [{}, {"a"}].
dist.mesh @mesh ["a"=2, "b"=2]
// CHECK-LABEL: func.func @taken
// CHECK-SAME: -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"a"}]>})
func.func @taken(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"a"}, {"b"}]>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{?}, {"a"}]>}) {
  %y = nn.relu %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
