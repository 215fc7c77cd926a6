// RUN: tessera-opt %s --split-input-file --tessera-schedule | FileCheck %s --check-prefix=ONE
// RUN: tessera-opt %s --split-input-file --tessera-schedule=prefetch=2 | FileCheck %s --check-prefix=TWO
// RUN: tessera-opt %s --split-input-file --tessera-schedule="prefetch=2 memory-limit=256" | FileCheck %s --check-prefix=LIMIT
// RUN: tessera-opt %s --split-input-file --tessera-schedule=prefetch=0 | FileCheck %s --check-prefix=NONE

// Tests the order of starts and waits for three layers that each gather
// their weight (as under ZeRO-3):
// - prefetch=1: the first gather has nothing to overlap; each next one
//   starts right after the previous wait and runs during the previous
//   layer's compute;
// - prefetch=2: two gathers in flight, so the third starts one layer
//   earlier;
// - a memory limit of one gathered weight (256 bytes) holds prefetch=2
//   back to one in flight;
// - prefetch=0 leaves every collective blocking.
dist.mesh @mesh ["dp"=4]

// ONE-LABEL: func.func @layers
// ONE: %[[G0:.+]] = dist.all_gather %arg1 {{.+}} {dist.stream = 1 : i64}
// ONE-NEXT: %[[W0:.+]] = dist.wait %[[G0]]
// ONE-NEXT: %[[G1:.+]] = dist.all_gather %arg2 {{.+}} {dist.stream = 1 : i64}
// ONE-NEXT: nn.dot %arg0, %[[W0]]
// ONE-NEXT: nn.relu
// ONE-NEXT: %[[W1:.+]] = dist.wait %[[G1]]
// ONE-NEXT: %[[G2:.+]] = dist.all_gather %arg3 {{.+}} {dist.stream = 1 : i64}
// ONE-NEXT: nn.dot %{{.+}}, %[[W1]]
// ONE-NEXT: nn.relu
// ONE-NEXT: %[[W2:.+]] = dist.wait %[[G2]]
// ONE-NEXT: nn.dot %{{.+}}, %[[W2]]

// TWO-LABEL: func.func @layers
// TWO: %[[G0:.+]] = dist.all_gather %arg1
// TWO-NEXT: %[[G1:.+]] = dist.all_gather %arg2
// TWO-NEXT: dist.wait %[[G0]]
// TWO-NEXT: %[[G2:.+]] = dist.all_gather %arg3
// TWO-NEXT: nn.dot
// TWO-NEXT: nn.relu
// TWO-NEXT: dist.wait %[[G1]]
// TWO-NEXT: nn.dot
// TWO-NEXT: nn.relu
// TWO-NEXT: dist.wait %[[G2]]

// LIMIT-LABEL: func.func @layers
// LIMIT: %[[G0:.+]] = dist.all_gather %arg1
// LIMIT-NEXT: dist.wait %[[G0]]
// LIMIT-NEXT: %[[G1:.+]] = dist.all_gather %arg2
// LIMIT-NEXT: nn.dot
// LIMIT-NEXT: nn.relu
// LIMIT-NEXT: dist.wait %[[G1]]
// LIMIT-NEXT: dist.all_gather %arg3

// NONE-LABEL: func.func @layers
// NONE-NOT: dist.stream
// NONE-NOT: dist.wait
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
// ONE-LABEL: func.func @backward
// ONE: %[[G:.+]] = nn.dot
// ONE-NEXT: %[[S:.+]] = dist.reduce_scatter %[[G]] {{.+}} {dist.stream = 1 : i64}
// ONE-NEXT: nn.dot
// ONE-NEXT: nn.relu
// ONE-NEXT: %[[W:.+]] = dist.wait %[[S]]
// ONE-NEXT: nn.sgd %{{.+}}, %[[W]]
func.func @backward(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>, %w: tensor<2x8xf32>, %v: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %g = nn.dot %x, %dy contracting_dims = [0] x [0] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %s = dist.reduce_scatter %g on @mesh ["dp"] dim = 0 sum : tensor<8x8xf32> -> tensor<2x8xf32>
  %dx = nn.dot %dy, %v contracting_dims = [1] x [1] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r = nn.relu %dx : tensor<2x8xf32>
  %w2 = nn.sgd %w, %s lr = 1.0e-01 : tensor<2x8xf32>
  return %w2, %r : tensor<2x8xf32>, tensor<2x8xf32>
}
