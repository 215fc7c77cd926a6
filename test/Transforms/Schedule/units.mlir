// RUN: tessera-opt %s --tessera-schedule=prefetch=0 | FileCheck %s
// RUN: tessera-opt %s --tessera-schedule="prefetch=0 gather-units=false" | FileCheck %s --check-prefix=OFF

// Tests that the parameter all_gathers of one unit ("blocks.0": a weight
// gathered along dim 1 and a bias) become one all_gather of their
// concatenation at the first of them, each parameter sliced out and laid
// back along its gather dim, while the next unit's gather stays apart.
dist.mesh @mesh ["dp"=2]
// CHECK-LABEL: func.func @units
// CHECK: %[[VW:.+]] = nn.reshape %arg1 : tensor<4x2xf32> -> tensor<1x8xf32>
// CHECK-NEXT: %[[VB:.+]] = nn.reshape %arg2 : tensor<2xf32> -> tensor<1x2xf32>
// CHECK-NEXT: %[[P:.+]] = nn.concat %[[VW]], %[[VB]] dim = 1 : tensor<1x8xf32>, tensor<1x2xf32> -> tensor<1x10xf32>
// CHECK-NEXT: %[[G:.+]] = dist.all_gather %[[P]] on @mesh ["dp"] dim = 0 : tensor<1x10xf32> -> tensor<2x10xf32>
// CHECK-NEXT: %[[SW:.+]] = nn.slice %[[G]] start = [0, 0] limit = [2, 8] : tensor<2x10xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[RW:.+]] = nn.reshape %[[SW]] : tensor<2x8xf32> -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[TW:.+]] = nn.transpose %[[RW]] permutation = [1, 0, 2] : tensor<2x4x2xf32> -> tensor<4x2x2xf32>
// CHECK-NEXT: %[[W:.+]] = nn.reshape %[[TW]] : tensor<4x2x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[SB:.+]] = nn.slice %[[G]] start = [0, 8] limit = [2, 10] : tensor<2x10xf32> -> tensor<2x2xf32>
// CHECK-NEXT: %[[B:.+]] = nn.reshape %[[SB]] : tensor<2x2xf32> -> tensor<4xf32>
// CHECK-NEXT: nn.dot %arg0, %[[W]]
// CHECK: nn.broadcast %[[B]]
// CHECK: dist.all_gather %arg3 on @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>

// OFF-COUNT-3: dist.all_gather %arg
// OFF-NOT: nn.concat
func.func @units(%x: tensor<2x4xf32>,
                 %w0: tensor<4x2xf32> {nn.param = "blocks.0.mlp.w"},
                 %b0: tensor<2xf32> {nn.param = "blocks.0.mlp.b"},
                 %w1: tensor<2x4xf32> {nn.param = "blocks.1.mlp.w"}) -> tensor<2x4xf32> {
  %gw0 = dist.all_gather %w0 on @mesh ["dp"] dim = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  %y0 = nn.dot %x, %gw0 contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gb0 = dist.all_gather %b0 on @mesh ["dp"] dim = 0 : tensor<2xf32> -> tensor<4xf32>
  %bb = nn.broadcast %gb0 dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %h0 = nn.add %y0, %bb : tensor<2x4xf32>
  %gw1 = dist.all_gather %w1 on @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %y1 = nn.dot %h0, %gw1 contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y1 : tensor<2x4xf32>
}
