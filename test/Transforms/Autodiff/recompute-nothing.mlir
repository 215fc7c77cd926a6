// RUN: tessera-opt %s --split-input-file --tessera-recompute=mode=full -verify-diagnostics
// RUN: tessera-opt %s --split-input-file --tessera-recompute=mode=selective -verify-diagnostics

// Tests that recomputation says when it finds nothing to recompute: no
// layer whose backward reads a value inside it (full: each op here is a
// layer of its own) or attention core (selective) in a forward pass.
// expected-warning @+1 {{finds no}}
func.func @no_layers(%x: tensor<4x4xf32>, %w: tensor<4x4xf32> {nn.param = "fc.w"})
    -> (tensor<4x4xf32> {nn.updates = 1 : i64}, tensor<f32>) {
  %h = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = nn.reduce_sum %h dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %g = nn.mul %h, %x : tensor<4x4xf32>
  return %g, %l : tensor<4x4xf32>, tensor<f32>
}
