// RUN: tessera-opt %s --tessera-recompute=mode=full | FileCheck %s
// RUN: tessera-opt %s --tessera-recompute=mode=none | FileCheck %s --check-prefix=NONE

// Tests that full recomputation clones what the backward reads inside each
// layer (the repeated blocks of the forward, found by structure: the names
// of the parameters play no part) from the layer's input, before the first
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
// NONE-LABEL: func.func @residual
func.func @layers(%x: tensor<4x4xf32>,
                  %w0: tensor<4x4xf32> {nn.param = "up"},
                  %w1: tensor<4x4xf32> {nn.param = "down"},
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

// A forward that does not repeat: its layers are the runs of ops between
// the places where one value crosses. The residual layer's backward reads
// H, which is remade from its input; the head's chain keeps its values.
// CHECK-LABEL: func.func @residual
// CHECK: %[[E:.+]] = nn.tanh %arg0
// CHECK: %[[H:.+]] = nn.dot %[[E]], %arg1
// CHECK: %[[Z:.+]] = nn.dot
// CHECK: %[[R:.+]] = nn.dot %[[E]], %arg1
// CHECK-NEXT: %[[G:.+]] = nn.mul %[[R]], %arg3
// CHECK: return %[[G]]
func.func @residual(%x: tensor<4x4xf32>,
                    %w: tensor<4x4xf32> {nn.param = "w"},
                    %head: tensor<4x2xf32> {nn.param = "head"},
                    %dy: tensor<4x4xf32>)
    -> (tensor<4x4xf32> {nn.updates = 1 : i64}, tensor<f32>) {
  %e = nn.tanh %x : tensor<4x4xf32>
  %h = nn.dot %e, %w contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = nn.relu %h : tensor<4x4xf32>
  %y = nn.add %r, %e : tensor<4x4xf32>
  %z = nn.dot %y, %head contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %l = nn.reduce_sum %z dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  %g = nn.mul %h, %dy : tensor<4x4xf32>
  return %g, %l : tensor<4x4xf32>, tensor<f32>
}

// A pipeline cut (dist.stage) inside a layer makes it two: H1, which the
// second stage's relu reads, is kept rather than remade by the second
// stage's backward; layer 0 is remade as before.
// CHECK-LABEL: func.func @staged
// CHECK: %[[SH1:.+]] = nn.dot %{{.+}}, %arg2
// CHECK: nn.mul %[[SH1]], %arg4
// CHECK: %[[SR0:.+]] = nn.dot %arg0, %arg1
// CHECK-NEXT: nn.mul %[[SR0]], %arg4
func.func @staged(%x: tensor<4x4xf32>,
                  %w0: tensor<4x4xf32> {nn.param = "blocks.0.w"},
                  %w1: tensor<4x4xf32> {nn.param = "blocks.1.w"},
                  %head: tensor<4x4xf32> {nn.param = "head.w"},
                  %dy: tensor<4x4xf32>)
    -> (tensor<4x4xf32> {nn.updates = 1 : i64},
        tensor<4x4xf32> {nn.updates = 2 : i64}, tensor<f32>) {
  %h0 = nn.dot %x, %w0 contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y0 = nn.relu %h0 : tensor<4x4xf32>
  %h1 = nn.dot %y0, %w1 contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y1 = nn.relu %h1 {dist.stage = 1 : i64} : tensor<4x4xf32>
  %z = nn.dot %y1, %head contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = nn.reduce_sum %z dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %g2 = nn.mul %h1, %dy : tensor<4x4xf32>
  %g1 = nn.mul %h0, %dy : tensor<4x4xf32>
  return %g1, %g2, %l : tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>
}
