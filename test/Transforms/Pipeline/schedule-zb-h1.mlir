// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=zb-h1" | FileCheck %s

// Tests that ZB-H1 splits the backward into B, the ops that make the gradient
// the previous stage needs, and W, the weight gradients, which rank 0 runs
// one backward late (rank 1 at once) so that they fill the cool-down; on a
// four-layer MLP (Inputs/mlp4.mlir) in four microbatches over two ranks, read
// off each rank's transfers: the forward output of microbatch m leaves rank 0
// with tag m, and its gradient comes back with tag 4 + m. Rank 0 sends no
// gradient, so all its backward ops are W: F0 F1 F2 W0 F3 W1 W2 W3.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK: dist.send {{.*}} tag 0
// CHECK: dist.send {{.*}} tag 1
// CHECK: dist.send {{.*}} tag 2
// CHECK: dist.recv {{.*}} tag 4 {dist.unit = "W0.0"}
// CHECK: dist.send {{.*}} tag 3
// CHECK: dist.recv {{.*}} tag 5 {dist.unit = "W0.1"}
// CHECK: dist.recv {{.*}} tag 6 {dist.unit = "W0.2"}
// CHECK: dist.recv {{.*}} tag 7 {dist.unit = "W0.3"}
// Rank 1 sends each gradient before it computes the weight gradients.
// CHECK-LABEL: func.func @mlp_stage1
// CHECK: dist.recv {{.*}} tag 0
// CHECK: {dist.unit = "B1.0"}
// CHECK: dist.send {{.*}} tag 4
// CHECK-NEXT: {dist.unit = "W1.0"}
// CHECK: dist.recv {{.*}} tag 1
// CHECK: dist.send {{.*}} tag 5
// CHECK-NEXT: {dist.unit = "W1.1"}
