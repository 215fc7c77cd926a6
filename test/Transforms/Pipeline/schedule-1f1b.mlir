// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=1f1b" | FileCheck %s

// Tests that 1F1B (one forward, one backward) warms rank 0 up with
// 2 - 0 - 1 = 1 extra forward and then alternates, and that rank 1 alternates
// from the start, on a four-layer MLP (Inputs/mlp4.mlir) in four microbatches
// over two ranks, read off each rank's transfers: the forward output of
// microbatch m leaves rank 0 with tag m, and its gradient comes back with
// tag 4 + m.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK: dist.send {{.*}} tag 0
// CHECK: dist.send {{.*}} tag 1
// CHECK: dist.recv {{.*}} tag 4
// CHECK: dist.send {{.*}} tag 2
// CHECK: dist.recv {{.*}} tag 5
// CHECK: dist.send {{.*}} tag 3
// CHECK: dist.recv {{.*}} tag 6
// CHECK: dist.recv {{.*}} tag 7
// CHECK-LABEL: func.func @mlp_stage1
// CHECK: dist.recv {{.*}} tag 0
// CHECK: dist.send {{.*}} tag 4
// CHECK: dist.recv {{.*}} tag 1
// CHECK: dist.send {{.*}} tag 5
// CHECK: dist.recv {{.*}} tag 2
// CHECK: dist.send {{.*}} tag 6
// CHECK: dist.recv {{.*}} tag 3
// CHECK: dist.send {{.*}} tag 7
