// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=zb-h1" | FileCheck %s

// Tests that ZB-H1 splits the backward into B, the ops that make the gradient
// the previous stage needs, and W, the weight gradients, which rank r runs r
// backwards late (rank 0 at once), the last r at the end; on a four-layer MLP
// (Inputs/mlp4.mlir) in four microbatches over two ranks, read off each
// rank's transfers: the forward output of microbatch m leaves rank 0 with tag
// m, and its gradient comes back with tag 4 + m. Rank 0 sends no gradient, so
// all its backward ops are W, run as 1F1B runs its backwards:
// F0 F1 W0 F2 W1 F3 W2 W3.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK: dist.send {{.*}} tag 0
// CHECK: dist.send {{.*}} tag 1
// CHECK: dist.recv {{.*}} tag 4 {dist.unit = "W0.0"}
// CHECK: dist.send {{.*}} tag 2
// CHECK: dist.recv {{.*}} tag 5 {dist.unit = "W0.1"}
// CHECK: dist.send {{.*}} tag 3
// CHECK: dist.recv {{.*}} tag 6 {dist.unit = "W0.2"}
// CHECK: dist.recv {{.*}} tag 7 {dist.unit = "W0.3"}
// Rank 1 sends each gradient before it computes any weight gradient, and
// runs microbatch m's weight gradients after the gradient of m + 1:
// F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3.
// CHECK-LABEL: func.func @mlp_stage1
// CHECK: dist.recv {{.*}} tag 0
// CHECK: {dist.unit = "B1.0"}
// CHECK: dist.send {{.*}} tag 4
// CHECK-NOT: dist.unit = "W1.0"
// CHECK: dist.recv {{.*}} tag 1
// CHECK-NOT: dist.unit = "W1.0"
// CHECK: {dist.unit = "B1.1"}
// CHECK: dist.send {{.*}} tag 5
// CHECK-NEXT: {dist.unit = "W1.0"}
// CHECK: dist.recv {{.*}} tag 2
// CHECK: {dist.unit = "B1.2"}
// CHECK: dist.send {{.*}} tag 6
// CHECK-NEXT: {dist.unit = "W1.1"}
// CHECK: dist.recv {{.*}} tag 3
// CHECK: {dist.unit = "B1.3"}
// CHECK: dist.send {{.*}} tag 7
// CHECK-NEXT: {dist.unit = "W1.2"}
// CHECK: {dist.unit = "W1.3"}
