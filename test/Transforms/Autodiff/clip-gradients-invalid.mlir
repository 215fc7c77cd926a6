// Tests the errors of --tessera-clip-gradients.
// RUN: not tessera-opt %s "--tessera-train-step=optimizer=sgd" --tessera-clip-gradients 2>&1 | FileCheck %s --check-prefix=SGD
// SGD: error: gradient clipping needs an AdamW train step (--train adamw)
// RUN: not tessera-opt %s --tessera-clip-gradients 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: error: gradient clipping needs a train step: run --tessera-train-step first
// RUN: not tessera-opt %s --tessera-train-step "--tessera-clip-gradients=max-norm=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: gradient clipping needs a max-norm of 0 (none) or more and a loss-scale-window of 1 or more, got -1.000000e+00 and 2000
// RUN: not tessera-opt %s "--tessera-train-step=optimizer=sgd loss-scale=1" 2>&1 | FileCheck %s --check-prefix=SGDSCALE
// SGDSCALE: error: dynamic loss scaling needs an AdamW train step
// RUN: not tessera-opt %s --tessera-train-step --tessera-clip-gradients --tessera-clip-gradients 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: is clipped already: run --tessera-clip-gradients once
// RUN: not tessera-opt %s "--tessera-train-step=optimizer=sgd lr-schedule=linear decay-steps=5" 2>&1 | FileCheck %s --check-prefix=SGDLR
// SGDLR: error: a learning-rate schedule reads the step counter of an AdamW train step; SGD has none
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
