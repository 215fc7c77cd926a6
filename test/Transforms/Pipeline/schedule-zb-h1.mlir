// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=zb-h1" | FileCheck %s

// Tests that ZB-H1 splits the backward into B, the ops that make the gradient
// the previous stage needs, and W, the weight gradients, which rank r runs r
// backwards late (rank 0 at once), the last r at the end; on a four-layer MLP
// (Inputs/mlp4.mlir) in four microbatches over two ranks, read off each
// rank's schedule of (unit, microbatch, slot). Rank 0 sends no gradient, so
// its B unit is empty and all its backward ops are W (the gradient from
// rank 1 arrives there), run as 1F1B runs its backwards:
// F0.0 F0.1 B0.0 W0.0 F0.2 B0.1 W0.1 F0.3 B0.2 W0.2 B0.3 W0.3.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0, 0, 2, 0, 1, 1, 1, 2, 1, 1, 0, 3, 1, 1, 2, 0, 2, 2, 0, 1, 3, 1, 2, 3, 1>
// CHECK-SAME: units = ["F0", "B0", "W0"]
// CHECK: dist.recv {{.*}} tag 1 {dist.unit = "W0"}
// Rank 1 sends each gradient before it computes any weight gradient, and
// runs microbatch m's weight gradients after the gradient of m + 1:
// F1.0 B1.0 F1.1 B1.1 W1.0 F1.2 B1.2 W1.1 F1.3 B1.3 W1.2 W1.3. A microbatch
// holds its slot until its W: two slots, as many as rank 0 holds.
// CHECK-LABEL: func.func @mlp_stage1
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 2, 0, 0, 0, 2, 0, 1, 2, 0, 2, 1, 1, 0, 3, 1, 1, 3, 1, 2, 2, 0, 2, 3, 1>
// CHECK-SAME: units = ["F1", "B1", "W1"]
// CHECK: dist.recv {{.*}} tag 0 {dist.unit = "F1"}
// CHECK: {dist.unit = "B1"}
// CHECK: dist.send {{.*}} tag 1
// CHECK-NEXT: {dist.unit = "W1"}
