// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-weight-stash --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=1 schedule=pipedream" | FileCheck %s
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=1 schedule=pipedream" 2>&1 | FileCheck %s --check-prefix=UNSTASHED
// RUN: not tessera-opt %S/Inputs/mlp4.mlir --tessera-pipeline="stages=2 microbatches=2 schedule=pipedream" 2>&1 | FileCheck %s --check-prefix=MICROBATCHES

// Tests PipeDream (1F1B without a flush over steps of one microbatch) on the
// four-layer MLP of a stashed SGD step. Rank 0 runs its forward, then the
// backward of the step before (entry_steps -1), after which it updates that
// step (post_after = 1): its weights lag one update (weight_delay = 1). The
// last rank runs its step's forward and backward and updates it at once
// (weight_delay = 0). On both, a stash's next value is the updated
// parameter: a step reads the rank's latest weights, and its backward the
// copy its forward read.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: entries = array<i64: 0, 0, 0, 1, 0, 0>, entry_steps = array<i64: 0, -1>, microbatches = 1 : i64, post_after = 1 : i64,
// CHECK-SAME: steady
// CHECK-SAME: weight_delay = 1 : i64
// CHECK: nn.dot %arg0, %arg3 {{.*}}dist.unit = "F0"
// CHECK: %[[W0:.+]] = nn.sgd %arg1, {{.*}}dist.unit = "deferred-update"
// CHECK: %[[W1:.+]] = nn.sgd %arg2
// CHECK: return %[[W0]], %[[W1]], %[[W0]], %[[W1]] :
// CHECK-LABEL: func.func @mlp_stage1
// CHECK-SAME: entry_steps = array<i64: 0, 0>
// CHECK-SAME: post_after = -1 : i64
// CHECK-SAME: weight_delay = 0 : i64
// CHECK: %[[W2:.+]] = nn.sgd %arg1, {{.*}}dist.unit = "update"
// CHECK: %[[W3:.+]] = nn.sgd %arg2
// CHECK: return %[[W2]], %[[W3]], %{{.+}}, %[[W2]], %[[W3]] :

// UNSTASHED: error: the pipedream schedule runs each step at a stashed version of the weights: parameter 'w0' is read by the forward or backward (compile with --weight-stash)
// MICROBATCHES: error: the pipedream schedule updates the weights after each microbatch's backward: a step is one microbatch, got 2 (2bw updates once per step of several)
