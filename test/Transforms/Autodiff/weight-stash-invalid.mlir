// RUN: not tessera-opt %s -split-input-file --tessera-weight-stash 2>&1 | FileCheck %s

// Tests that an update of a value that is not a parameter argument, a
// parameter updated twice and a step stashed already are refused.
// CHECK: error: weight stashing keeps versions of parameters that are arguments of the step ('nn.param')
func.func @not_an_argument(%w: tensor<4xf32> {nn.param = "w"}, %g: tensor<4xf32>) -> tensor<4xf32> {
  %d = nn.add %w, %w : tensor<4xf32>
  %n = nn.sgd %d, %g lr = 0.5 : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// CHECK: error: parameter 'w' is updated twice
func.func @twice(%w: tensor<4xf32> {nn.param = "w"}, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = nn.sgd %w, %g lr = 0.5 : tensor<4xf32>
  %b = nn.sgd %w, %g lr = 0.5 : tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK: error: the train step already stashes its weights
func.func @stashed(%w: tensor<4xf32> {nn.param = "w"}, %s: tensor<4xf32> {nn.state = "w.stash", nn.version_of = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
