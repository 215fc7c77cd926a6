// RUN: tessera-opt %s --split-input-file --tessera-export="text=true output=-" | FileCheck %s

// Tests that an nn.slice of a run of a buffer's bytes (a gathered flat
// piece cut to its elements, a unit's member of its gathered buffer)
// exports as a view of that buffer, with no instruction.
// CHECK: id: 1
// CHECK: arena_offset_bytes: [[R:[0-9]+]]
// CHECK: id: 2
// CHECK: shape: 15
// CHECK-NEXT: arena_offset_bytes: [[R]]
// CHECK-NEXT: view_of: 1
// CHECK-NOT: op: "nn.slice"
// CHECK: source_model: "cut"
func.func @cut(%x: tensor<16xf32>) -> tensor<15xf32> {
  %r = nn.relu %x : tensor<16xf32>
  %c = nn.slice %r start = [0] limit = [15] : tensor<16xf32> -> tensor<15xf32>
  %e = nn.exp %c : tensor<15xf32>
  return %e : tensor<15xf32>
}

// -----

// Tests that rows of a matrix are a view, from their first byte on (the
// later rows 64 bytes in), but a slice of some of its columns is copied.
// CHECK: id: 1
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 4
// CHECK-NEXT: shape: 8
// CHECK-NEXT: arena_offset_bytes: [[R:[0-9]+]]
// CHECK: id: 2
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 2
// CHECK-NEXT: shape: 8
// CHECK-NEXT: arena_offset_bytes: [[R]]
// CHECK-NEXT: view_of: 1
// CHECK: id: 4
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 2
// CHECK-NEXT: shape: 8
// CHECK-NEXT: arena_offset_bytes: [[LATER:[0-9]+]]
// CHECK-NEXT: view_of: 1
// CHECK-NEXT: view_offset_bytes: 64
// CHECK: op: "nn.slice"
// CHECK-NOT: op: "nn.slice"
// CHECK: source_model: "rows"
func.func @rows(%x: tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>) {
  %r = nn.relu %x : tensor<4x8xf32>
  %rows = nn.slice %r start = [0, 0] limit = [2, 8] : tensor<4x8xf32> -> tensor<2x8xf32>
  %cols = nn.slice %r start = [0, 0] limit = [4, 4] : tensor<4x8xf32> -> tensor<4x4xf32>
  %later = nn.slice %r start = [2, 0] limit = [4, 8] : tensor<4x8xf32> -> tensor<2x8xf32>
  %a = nn.exp %rows : tensor<2x8xf32>
  %b = nn.exp %cols : tensor<4x4xf32>
  %c = nn.exp %later : tensor<2x8xf32>
  return %a, %b, %c : tensor<2x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>
}

// -----

// Tests that a value padded with zeros where it dies (a flat gradient
// before its reduce-scatter) is padded in place: the padded buffer
// overwrites the value's, whose bytes the memory plan grows to hold it.
// CHECK: id: 1
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 3
// CHECK-NEXT: shape: 5
// CHECK-NEXT: arena_offset_bytes: [[P:[0-9]+]]
// CHECK: id: 4
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 16
// CHECK-NEXT: arena_offset_bytes: [[P]]
// CHECK-NEXT: overwrites: 1
// CHECK: source_model: "pad"
func.func @pad(%x: tensor<3x5xf32>) -> tensor<16xf32> {
  %r = nn.relu %x : tensor<3x5xf32>
  %flat = nn.reshape %r : tensor<3x5xf32> -> tensor<15xf32>
  %zero = nn.constant dense<0.0> : tensor<1xf32>
  %padded = nn.concat %flat, %zero dim = 0 : tensor<15xf32>, tensor<1xf32> -> tensor<16xf32>
  %e = nn.exp %padded : tensor<16xf32>
  return %e : tensor<16xf32>
}

// -----

// Tests that a transpose that moves only dims of one element (a unit's row
// laid out as its member again) is a view too, and one that moves others is
// a kernel.
// CHECK: id: 2
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 1
// CHECK-NEXT: shape: 2
// CHECK-NEXT: shape: 4
// CHECK-NEXT: arena_offset_bytes: [[T:[0-9]+]]
// CHECK-NEXT: view_of: 1
// CHECK: op: "nn.transpose"
// CHECK-NOT: op: "nn.transpose"
// CHECK: source_model: "unit_dims"
func.func @unit_dims(%x: tensor<2x1x4xf32>) -> (tensor<1x2x4xf32>, tensor<4x1x2xf32>) {
  %r = nn.relu %x : tensor<2x1x4xf32>
  %moved = nn.transpose %r permutation = [1, 0, 2] : tensor<2x1x4xf32> -> tensor<1x2x4xf32>
  %swapped = nn.transpose %r permutation = [2, 1, 0] : tensor<2x1x4xf32> -> tensor<4x1x2xf32>
  %a = nn.exp %moved : tensor<1x2x4xf32>
  %b = nn.exp %swapped : tensor<4x1x2xf32>
  return %a, %b : tensor<1x2x4xf32>, tensor<4x1x2xf32>
}
