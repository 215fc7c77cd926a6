// RUN: tessera-opt %s --tessera-export="text=true output=-" | FileCheck %s

// Tests that nn.reshape exports as a view: a buffer of the new shape with
// `view_of` its operand's buffer (a view of a view names the first), at the
// same arena offset, with no instruction; the viewed buffer lives until the
// last read of any view and is never freed through a view.
// CHECK: id: 1
// CHECK: arena_offset_bytes: [[R:[0-9]+]]
// CHECK: id: 2
// CHECK: shape: 4
// CHECK-NEXT: shape: 4
// CHECK-NEXT: arena_offset_bytes: [[R]]
// CHECK-NEXT: view_of: 1
// CHECK: id: 3
// CHECK: shape: 16
// CHECK-NEXT: arena_offset_bytes: [[R]]
// CHECK-NEXT: view_of: 1
// CHECK: instructions {
// CHECK-NEXT: kernel {
// CHECK-NEXT: op: "nn.relu"
// CHECK-NEXT: inputs: 0
// CHECK-NEXT: outputs: 1
// CHECK: frees: 0
// CHECK: instructions {
// CHECK-NEXT: kernel {
// CHECK-NEXT: op: "nn.exp"
// CHECK-NEXT: inputs: 3
// CHECK-NEXT: outputs: 4
// CHECK: frees: 1
// CHECK-NOT: op: "nn.reshape"
func.func @views(%x: tensor<2x8xf32>) -> tensor<16xf32> {
  %r = nn.relu %x : tensor<2x8xf32>
  %v = nn.reshape %r : tensor<2x8xf32> -> tensor<4x4xf32>
  %w = nn.reshape %v : tensor<4x4xf32> -> tensor<16xf32>
  %e = nn.exp %w : tensor<16xf32>
  return %e : tensor<16xf32>
}
