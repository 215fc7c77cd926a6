// RUN: tessera-opt %s --tessera-schedule --tessera-export="text=true output=-" | FileCheck %s

// Tests that a started collective exports on stream 1 signalling an event,
// and its wait as an instruction that only waits for that event and frees
// the collective's input (which the collective reads until done).
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: instructions {
// CHECK-NEXT: collective {
// CHECK-NEXT: kind: ALL_GATHER
// CHECK-NEXT: mesh_axes: "dp"
// CHECK-NEXT: input: 1
// CHECK-NEXT: output: [[GATHERED:[0-9]+]]
// CHECK: stream: 1
// CHECK-NEXT: signal_events: [[EVENT:[0-9]+]]
// CHECK: kernel {
// CHECK-NEXT: op: "nn.relu"
// CHECK: instructions {
// CHECK-NEXT: wait_events: [[EVENT]]
// CHECK-NEXT: frees: 1
// CHECK-NEXT: }
// CHECK-NEXT: instructions {
// CHECK-NEXT: kernel {
// CHECK-NEXT: op: "nn.dot"
// CHECK-NEXT: inputs: {{[0-9]+}}
// CHECK-NEXT: inputs: [[GATHERED]]
func.func @layer(%x: tensor<2x8xf32>, %w: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %r = nn.relu %x : tensor<2x8xf32>
  %g = dist.all_gather %w on @mesh ["dp"] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %y = nn.dot %r, %g contracting_dims = [1] x [0] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
