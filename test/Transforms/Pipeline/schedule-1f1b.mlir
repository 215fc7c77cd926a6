// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=1f1b" | FileCheck %s

// Tests that 1F1B (one forward, one backward) warms rank 0 up with
// 2 - 0 - 1 = 1 extra forward and then alternates, and that rank 1 alternates
// from the start, on a four-layer MLP (Inputs/mlp4.mlir) in four microbatches
// over two ranks, read off each rank's schedule of (unit, microbatch, slot).
// Rank 0 runs F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3 and holds 2 - 0 = 2
// microbatches, in slots 0 and 1: F0.2 takes the slot B0.0 gave back.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 2, 0, 1, 1, 1, 0, 3, 1, 1, 2, 0, 1, 3, 1>
// Forward output m is waited for once its gradient is back.
// CHECK-SAME: send_waits = array<i64: 2, 0, 0, 4, 0, 1, 6, 0, 2, 7, 0, 3>
// CHECK-SAME: units = ["F0", "B0"]
// Rank 1 runs F1.0 B1.0 F1.1 B1.1 ... in one slot.
// CHECK-LABEL: func.func @mlp_stage1
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 2, 0, 1, 2, 0, 0, 3, 0, 1, 3, 0>
// CHECK-SAME: units = ["F1", "B1"]
