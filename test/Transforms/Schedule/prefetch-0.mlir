// RUN: tessera-opt %s --tessera-schedule=prefetch=0 | FileCheck %s

// Tests that prefetch=0 leaves every collective blocking: the gathers of three
// layers that each gather their weight (as under ZeRO-3).
// CHECK-LABEL: func.func @layers
// CHECK-NOT: dist.stream
// CHECK-NOT: dist.wait
dist.mesh @mesh ["dp"=4]
func.func @layers(%x: tensor<2x8xf32>, %w0: tensor<2x8xf32>, %w1: tensor<2x8xf32>, %w2: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %g0 = dist.all_gather %w0 on @mesh ["dp"] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %y0 = nn.dot %x, %g0 contracting_dims = [1] x [0] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r0 = nn.relu %y0 : tensor<2x8xf32>
  %g1 = dist.all_gather %w1 on @mesh ["dp"] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %y1 = nn.dot %r0, %g1 contracting_dims = [1] x [0] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r1 = nn.relu %y1 : tensor<2x8xf32>
  %g2 = dist.all_gather %w2 on @mesh ["dp"] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %y2 = nn.dot %r1, %g2 contracting_dims = [1] x [0] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %y2 : tensor<2x8xf32>
}
