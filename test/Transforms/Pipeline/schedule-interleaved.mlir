// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=interleaved virtual=2" | FileCheck %s

// Tests that interleaved 1F1B with two stages per rank runs Megatron-LM's
// order, on a four-layer MLP (Inputs/mlp4.mlir) in four microbatches, read
// off each rank's schedule: stage k (one layer each) runs on rank k mod 2.
// Rank 0's units are F0 F2 B2 B0 (0-3); it runs the warm-up F0.0 F0.1 F2.0
// F2.1, then F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1, then B2.2 B2.3 B0.2
// B0.3. Each stage has slots of its own for the microbatches it holds.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 2, 2, 2, 0, 0, 0, 3, 3, 2, 1, 1, 1, 2, 0, 3, 0, 0, 1, 3, 1, 3, 1, 1, 2, 2, 0, 2, 3, 1, 3, 2, 2, 3, 3, 3>
// CHECK-SAME: unit_stages = array<i64: 0, 2, 2, 0>, units = ["F0", "F2", "B2", "B0"]
// One tag per value that crosses a boundary, in the order of the stages
// that make them: stage 0's output (0), stage 1's (1, which F2 reads),
// stage 2's (2), the gradient from stage 3 (3, which B2 reads), to stage 1
// (4) and from it (5, which B0 reads).
// CHECK: dist.send {{.*}} tag 0 {{.*}}: tensor<2x4xf32>
// CHECK: dist.recv {{.*}} tag 1 {dist.unit = "F2"}
// CHECK: dist.send {{.*}} tag 2
// CHECK: dist.recv {{.*}} tag 3 {dist.unit = "B2"}
// CHECK: dist.send {{.*}} tag 4
// CHECK: dist.recv {{.*}} tag 5 {dist.unit = "B0"}
// CHECK: nn.sgd
// CHECK-LABEL: func.func @mlp_stage1
// CHECK-SAME: units = ["F1", "F3", "B3", "B1"]
