// RUN: tessera-opt %s --split-input-file --tessera-export="text=true output=-" | FileCheck %s

// Tests that the inputs of a concatenation made for it alone (a unit's
// gradient, its members' in a row) are made where the result holds them:
// each is placed in it at its offset, its arena offset the result's plus
// that, and costs no memory of its own; the result lives from the first
// input's making.
// CHECK: id: 2
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 4
// CHECK-NEXT: shape: 4
// CHECK-NEXT: arena_offset_bytes: [[R:[0-9]+]]
// CHECK-NEXT: placed_in: 5
// CHECK: id: 4
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 4
// CHECK-NEXT: arena_offset_bytes:
// CHECK-NEXT: placed_in: 5
// CHECK-NEXT: placed_offset_bytes: 64
// CHECK: id: 5
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: shape: 20
// CHECK-NEXT: arena_offset_bytes: [[R]]
// CHECK: source_model: "gradient"
func.func @gradient(%x: tensor<4x4xf32>, %y: tensor<4xf32>) -> tensor<20xf32> {
  %a = nn.relu %x : tensor<4x4xf32>
  %fa = nn.reshape %a : tensor<4x4xf32> -> tensor<16xf32>
  %b = nn.exp %y : tensor<4xf32>
  %g = nn.concat %fa, %b dim = 0 : tensor<16xf32>, tensor<4xf32> -> tensor<20xf32>
  return %g : tensor<20xf32>
}

// -----

// Tests that an input read after the concatenation, or an argument, is
// copied into it.
// CHECK-NOT: placed_in
// CHECK: op: "nn.concat"
// CHECK: source_model: "read_after"
func.func @read_after(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %a = nn.relu %x : tensor<4xf32>
  %g = nn.concat %a, %y dim = 0 : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>
  %b = nn.exp %a : tensor<4xf32>
  return %g, %b : tensor<8xf32>, tensor<4xf32>
}
