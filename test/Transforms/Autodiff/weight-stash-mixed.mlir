// RUN: tessera-opt %s "--tessera-train-step=precision=mixed" --tessera-weight-stash | FileCheck %s --check-prefix=MIXED

// Tests that a mixed-precision step casts the f32 stash down for the model,
// and that AdamW's decay reads the parameter, not the stash.
// MIXED-LABEL: func.func @bf16_step
// MIXED-SAME: %[[W:[^:]+]]: tensor<8x2xf32> {nn.param = "w"}
// MIXED-SAME: %[[S:[^:]+]]: tensor<8x2xf32> {nn.state = "w.stash", nn.version_of = "w"}
// MIXED: nn.cast %[[S]] : tensor<8x2xf32> to tensor<8x2xbf16>
// MIXED: nn.adamw %[[W]],
// MIXED: return {{.*}}, %[[W]] :
func.func @bf16_step(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16> {nn.param = "w"}) -> tensor<bf16> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4x2xbf16> -> tensor<bf16>
  return %l : tensor<bf16>
}
