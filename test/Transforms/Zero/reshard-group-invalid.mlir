// RUN: not tessera-opt %s --tessera-zero="stage=3 axes=dpo,dpi reshard-after-forward=3" 2>&1 | FileCheck %s

// Tests that reshard-after-forward=N wants a group size that the trailing
// ZeRO axes make up (here 4 = "dpo" x "dpi" or 2 = "dpi").
// CHECK: error: reshard-after-forward=3 is not a group the trailing ZeRO axes make up (they give 4, 2)
dist.mesh @mesh ["dpo"=2, "dpi"=2]
func.func @step(%w: tensor<8x4xf32> {nn.param = "w"},
                %m: tensor<8x4xf32> {nn.state = "w.adam_m"},
                %v: tensor<8x4xf32> {nn.state = "w.adam_v"},
                %t: tensor<i64> {nn.state = "step"},
                %x: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dpo", "dpi"}, {}]>})
    -> (tensor<8x4xf32> {nn.updates = 0 : i64}, tensor<8x4xf32> {nn.updates = 1 : i64},
        tensor<8x4xf32> {nn.updates = 2 : i64}, tensor<4x4xf32>) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %r = nn.relu %y : tensor<4x4xf32>
  %dx = nn.dot %r, %w contracting_dims = [1] x [1] : (tensor<4x4xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  %dw = nn.dot %dx, %r contracting_dims = [0] x [0] : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %w2, %m2, %v2 = nn.adamw %w, %dw, %m, %v, %t lr = 1.0e-03 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<i64>
  return %w2, %m2, %v2, %r : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>
}
