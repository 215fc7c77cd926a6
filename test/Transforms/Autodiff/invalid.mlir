// RUN: tessera-opt %s -split-input-file --tessera-autodiff -verify-diagnostics

// Tests that the loss must be one scalar.
// expected-error @+1 {{expects a function that returns one scalar float loss, got 1 results}}
func.func @not_scalar(%a: tensor<4xf32> {nn.param = "a"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// Tests that there must be parameters.
// expected-error @+1 {{has no 'nn.param' argument to differentiate}}
func.func @no_params(%a: tensor<4xf32>) -> tensor<f32> {
  %l = nn.reduce_sum %a dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an op without a derivative on the path is named.
func.func @foreign(%a: tensor<4xf32> {nn.param = "a"}) -> tensor<f32> {
  // expected-error @+1 {{cannot differentiate through 'arith.addf': it has no gradient}}
  %b = arith.addf %a, %a : tensor<4xf32>
  %l = nn.reduce_sum %b dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that optimizer updates are not differentiated.
func.func @optimizer(%p: tensor<4xf32> {nn.param = "p"}) -> tensor<f32> {
  // expected-error @+1 {{'nn.sgd' op has no derivative}}
  %q = nn.sgd %p, %p lr = 1.0e-01 : tensor<4xf32>
  %l = nn.reduce_sum %q dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
