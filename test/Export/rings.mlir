// RUN: tessera-opt %S/../Transforms/Pipeline/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=zb-h1" --tessera-export="text=true output=-" | FileCheck %s

// Tests that a pipeline stage's values that live across units get rings of
// copies by microbatch, as many as their lifetimes overlap (two under ZB-H1
// at p = 2, for what the deferred W reads), and that the schedule's entries
// then address no slots of their own (slot 0 is not printed).
// CHECK: programs {
// CHECK: slots: 2
// CHECK-NEXT: slot_stride_bytes:
// CHECK-NEXT: slot_by_microbatch: true
// CHECK-NOT: slots: 3
// CHECK-NOT: {{^ *}}slot: {{[0-9]}}
// CHECK: source_model
