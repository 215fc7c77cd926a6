// RUN: tessera-opt %s --split-input-file --tessera-schedule | FileCheck %s

// Tests that with prefetch=1 (the default), of three layers that each gather
// their weight (as under ZeRO-3), the first gather has nothing to overlap, and
// each next one starts right after the previous wait and runs during the
// previous layer's compute.
// CHECK-LABEL: func.func @layers
// CHECK: %[[G0:.+]] = dist.all_gather %arg1 {{.+}} {dist.stream = 1 : i64}
// CHECK-NEXT: %[[W0:.+]] = dist.wait %[[G0]]
// CHECK-NEXT: %[[G1:.+]] = dist.all_gather %arg2 {{.+}} {dist.stream = 1 : i64}
// CHECK-NEXT: nn.dot %arg0, %[[W0]]
// CHECK-NEXT: nn.relu
// CHECK-NEXT: %[[W1:.+]] = dist.wait %[[G1]]
// CHECK-NEXT: %[[G2:.+]] = dist.all_gather %arg3 {{.+}} {dist.stream = 1 : i64}
// CHECK-NEXT: nn.dot %{{.+}}, %[[W1]]
// CHECK-NEXT: nn.relu
// CHECK-NEXT: %[[W2:.+]] = dist.wait %[[G2]]
// CHECK-NEXT: nn.dot %{{.+}}, %[[W2]]
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

// -----

// Tests that a gradient's reduce_scatter stays in flight during the
// backward compute after it and completes where the update reads it.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @backward
// CHECK: %[[G:.+]] = nn.dot
// CHECK-NEXT: %[[S:.+]] = dist.reduce_scatter %[[G]] {{.+}} {dist.stream = 1 : i64}
// CHECK-NEXT: nn.dot
// CHECK-NEXT: nn.relu
// CHECK-NEXT: %[[W:.+]] = dist.wait %[[S]]
// CHECK-NEXT: nn.sgd %{{.+}}, %[[W]]
func.func @backward(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>, %w: tensor<2x8xf32>, %v: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %g = nn.dot %x, %dy contracting_dims = [0] x [0] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %s = dist.reduce_scatter %g on @mesh ["dp"] dim = 0 sum : tensor<8x8xf32> -> tensor<2x8xf32>
  %dx = nn.dot %dy, %v contracting_dims = [1] x [1] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r = nn.relu %dx : tensor<2x8xf32>
  %w2 = nn.sgd %w, %s lr = 1.0e-01 : tensor<2x8xf32>
  return %w2, %r : tensor<2x8xf32>, tensor<2x8xf32>
}
