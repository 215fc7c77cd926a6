// RUN: tessera-opt %s --split-input-file --tessera-export="text=true output=-" | FileCheck %s

// Tests that an nn.fused op becomes one kernel whose steps are its body's
// ops with their attributes and element types, over values numbered from
// the kernel's inputs on; its results name the yielded values.
// CHECK: op: "nn.fused"
// CHECK-NEXT: inputs: 0
// CHECK-NEXT: inputs: 1
// CHECK-NEXT: outputs: 2
// CHECK-NEXT: outputs: 3
// CHECK-NEXT: fused_steps {
// CHECK-NEXT: op: "nn.broadcast"
// CHECK-NEXT: operands: 1
// CHECK-NEXT: attrs {
// CHECK-NEXT: key: "dims"
// CHECK-NEXT: value {
// CHECK-NEXT: ints {
// CHECK-NEXT: values: 1
// CHECK: dtype: F32
// CHECK-NEXT: }
// CHECK-NEXT: fused_steps {
// CHECK-NEXT: op: "nn.constant"
// CHECK-NEXT: attrs {
// CHECK-NEXT: key: "value"
// CHECK-NEXT: value {
// CHECK-NEXT: dense: "\000\000\000?"
// CHECK: dtype: F32
// CHECK-NEXT: }
// CHECK-NEXT: fused_steps {
// CHECK-NEXT: op: "nn.add"
// CHECK-NEXT: operands: 0
// CHECK-NEXT: operands: 2
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: }
// CHECK-NEXT: fused_steps {
// CHECK-NEXT: op: "nn.mul"
// CHECK-NEXT: operands: 4
// CHECK-NEXT: operands: 3
// CHECK-NEXT: dtype: F32
// CHECK-NEXT: }
// CHECK-NEXT: fused_steps {
// CHECK-NEXT: op: "nn.compare"
// CHECK-NEXT: operands: 5
// CHECK-NEXT: operands: 0
// CHECK-NEXT: attrs {
// CHECK-NEXT: key: "predicate"
// CHECK-NEXT: value {
// CHECK-NEXT: i: 4
// CHECK: dtype: I1
// CHECK-NEXT: }
// CHECK-NEXT: fused_results: 5
// CHECK-NEXT: fused_results: 6
func.func @fused(%x: tensor<8x64xf32>, %b: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xi1>) {
  %0:2 = nn.fused(%x, %b) : (tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xi1>) {
  ^bb0(%a: tensor<8x64xf32>, %c: tensor<64xf32>):
    %bb = nn.broadcast %c dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
    %half = nn.constant dense<0.5> : tensor<8x64xf32>
    %h = nn.add %a, %bb : tensor<8x64xf32>
    %s = nn.mul %h, %half : tensor<8x64xf32>
    %g = nn.compare gt, %s, %a : tensor<8x64xf32>
    nn.yield %s, %g : tensor<8x64xf32>, tensor<8x64xi1>
  }
  return %0#0, %0#1 : tensor<8x64xf32>, tensor<8x64xi1>
}
