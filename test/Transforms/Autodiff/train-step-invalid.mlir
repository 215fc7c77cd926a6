// RUN: not tessera-opt %s --tessera-train-step=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not tessera-opt %s --tessera-train-step=precision=fp8 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: not tessera-opt %s --tessera-train-step=precision=mixed 2>&1 | FileCheck %s --check-prefix=MIXED

// Tests that an unknown optimizer or precision is rejected, and that mixed
// precision needs 16-bit parameters.
// OPTIMIZER: for the --optimizer option: got 'lamb', expected adamw or sgd
// PRECISION: for the --precision option: got 'fp8', expected model or mixed
// MIXED: error: precision=mixed needs a model with bf16 or f16 parameters
func.func @f32_model(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
