// RUN: tessera-opt %s --tessera-recompute=mode=full | FileCheck %s
// RUN: tessera-opt %s --tessera-recompute=mode=none | FileCheck %s --check-prefix=NONE

// Tests that full recomputation clones what the backward reads inside each
// numbered layer ("blocks.<i>") from the layer's input, before the first
// backward op that reads it, and keeps what the layer hands on (its output)
// and what lies outside the layers (the head).
// CHECK-LABEL: func.func @layers
// CHECK: %[[H0:.+]] = nn.dot %arg0, %arg1
// CHECK: %[[Y0:.+]] = nn.relu %[[H0]]
// CHECK: %[[H1:.+]] = nn.dot %[[Y0]], %arg2
// CHECK: %[[Y1:.+]] = nn.relu %[[H1]]
// CHECK: %[[Z:.+]] = nn.dot %[[Y1]], %arg3
// CHECK: %[[L:.+]] = nn.reduce_sum %[[Z]]
// The backward of the head reads Y1, layer 1's output: kept.
// CHECK: %[[G3:.+]] = nn.dot %[[Y1]], %arg4
// Layer 1's backward reads H1: remade from Y0.
// CHECK: %[[R1:.+]] = nn.dot %[[Y0]], %arg2
// CHECK-NEXT: %[[G2:.+]] = nn.mul %[[R1]], %arg4
// Layer 0's backward reads H0: remade from the input.
// CHECK: %[[R0:.+]] = nn.dot %arg0, %arg1
// CHECK-NEXT: %[[G1:.+]] = nn.mul %[[R0]], %arg4
// CHECK: return %[[G1]], %[[G2]], %[[G3]], %[[L]]
// NONE-LABEL: func.func @layers
// NONE-COUNT-4: nn.dot
// NONE-NOT: nn.dot
func.func @layers(%x: tensor<4x4xf32>,
                  %w0: tensor<4x4xf32> {nn.param = "blocks.0.w"},
                  %w1: tensor<4x4xf32> {nn.param = "blocks.1.w"},
                  %head: tensor<4x4xf32> {nn.param = "head.w"},
                  %dy: tensor<4x4xf32>)
    -> (tensor<4x4xf32> {nn.updates = 1 : i64},
        tensor<4x4xf32> {nn.updates = 2 : i64},
        tensor<4x4xf32> {nn.updates = 3 : i64}, tensor<f32>) {
  %h0 = nn.dot %x, %w0 contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y0 = nn.relu %h0 : tensor<4x4xf32>
  %h1 = nn.dot %y0, %w1 contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y1 = nn.relu %h1 : tensor<4x4xf32>
  %z = nn.dot %y1, %head contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = nn.reduce_sum %z dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  // Stand-ins for the backward: each reads one forward value.
  %g3 = nn.dot %y1, %dy contracting_dims = [0] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g2 = nn.mul %h1, %dy : tensor<4x4xf32>
  %g1 = nn.mul %h0, %dy : tensor<4x4xf32>
  return %g1, %g2, %g3, %l : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>
}
