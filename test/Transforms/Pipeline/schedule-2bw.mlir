// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-weight-stash --tessera-microbatch=microbatches=2 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=2 schedule=2bw" | FileCheck %s
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=2 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=2 schedule=2bw" 2>&1 | FileCheck %s --check-prefix=UNSTASHED
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 microbatches=1 schedule=2bw" 2>&1 | FileCheck %s --check-prefix=FEW

// Tests 2BW (PipeDream-2BW, 1F1B without a flush) on the four-layer MLP of
// a stashed SGD step: rank 0 runs its warm-up forward, then the step
// before's backward of microbatch 1 (entry_steps -1), after which it updates
// that step (post_after = 1, its post ops the deferred part); then one
// forward and one backward in turn. Each microbatch has its own slot. Its
// stashes' next values are the updated parameters (the next run's step
// reads them).
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0>, entry_steps = array<i64: 0, -1, 0, 0>, microbatches = 2 : i64, post_after = 1 : i64,
// CHECK-SAME: steady
// CHECK: nn.transpose {{.*}}dist.unit = "deferred-update"
// CHECK: %[[W0:.+]] = nn.sgd %arg1
// CHECK: %[[W1:.+]] = nn.sgd %arg2
// CHECK: return %[[W0]], %[[W1]], %[[W0]], %[[W1]] :
// The last rank runs the step's own updates at the end; its stashes' next
// values are the parameters it read.
// CHECK-LABEL: func.func @mlp_stage1
// CHECK-SAME: entry_steps = array<i64: 0, 0, 0, 0>
// CHECK-SAME: post_after = -1 : i64
// CHECK: dist.unit = "update"
// CHECK: return {{.*}}, %arg1, %arg2 :

// UNSTASHED: error: the 2bw schedule runs each step at a stashed version of the weights: parameter 'w0' is read by the forward or backward (compile with --weight-stash)
// FEW: error: the 2bw schedule needs at least as many microbatches (1) as stages (2)
