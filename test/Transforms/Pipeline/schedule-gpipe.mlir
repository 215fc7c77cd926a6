// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=gpipe" | FileCheck %s

// Tests that GPipe runs all forwards, then all backwards, on a four-layer MLP
// (Inputs/mlp4.mlir) in four microbatches over two ranks. Each rank holds its
// units once, and its schedule runs them per microbatch: `entries` are
// (unit, microbatch, slot) triples. GPipe holds all four microbatches
// between a forward and its backward, so each takes a slot of its own.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: dist.pipeline_rank = 0
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 0, 1, 1, 0, 2, 2, 0, 3, 3, 1, 0, 0, 1, 1, 1, 1, 2, 2, 1, 3, 3>, microbatches = 4 : i64,
// Rank 0's sends of the four forward outputs complete once the first
// gradient has arrived (rank 1 has received them all by then), after entry
// 4 (B0.0): four copies of the sent value, one per microbatch in flight.
// CHECK-SAME: send_waits = array<i64: 4, 0, 0, 4, 0, 1, 4, 0, 2, 4, 0, 3>, unit_stages = array<i64: 0, 0>, units = ["F0", "B0"]}
// Each unit's first op names it; a run reads its microbatch's rows; one tag
// per value that crosses, reused by every microbatch.
// CHECK: dist.microbatch_slice %arg0 of 4 {dist.unit = "F0"} : tensor<8x4xf32> -> tensor<2x4xf32>
// CHECK: dist.send %{{.+}} on @mesh "pp" to 1 tag 0 {dist.stream = 1 : i64} : tensor<2x4xf32>
// CHECK-NOT: dist.wait
// CHECK: dist.recv on @mesh "pp" from 1 tag 1 {dist.unit = "B0"} : tensor<2x4xf32>
// The gradients of all microbatches are summed before the one update.
// CHECK: %[[SUM:.+]] = dist.accumulate %{{.+}} : tensor<4x4xf32>
// CHECK: nn.transpose %[[SUM]]
// CHECK-SAME: dist.unit = "update"
// CHECK: nn.sgd
// CHECK-LABEL: func.func @mlp_stage1
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 0, 1, 1, 0, 2, 2, 0, 3, 3, 1, 0, 0, 1, 1, 1, 1, 2, 2, 1, 3, 3>
// CHECK-SAME: units = ["F1", "B1"]
// CHECK: dist.recv {{.*}} tag 0 {dist.unit = "F1"}
// CHECK: dist.accumulate
// CHECK: dist.send {{.*}} tag 1
// The loss is the mean of the microbatches' means, on the last stage.
// CHECK: %[[QUARTER:.+]] = nn.constant {dist.unit = "update"} dense<2.500000e-01> : tensor<f32>
// CHECK: %[[LOSS:.+]] = nn.mul %{{.+}}, %[[QUARTER]] : tensor<f32>
// CHECK: return {{.*}}%[[LOSS]] : {{.*}}tensor<f32>
