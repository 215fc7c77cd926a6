// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=gpipe" | FileCheck %s

// Tests that GPipe runs all forwards, then all backwards, on a four-layer MLP
// (Inputs/mlp4.mlir) in four microbatches over two ranks, read off each
// rank's transfers: the forward output of microbatch m leaves rank 0 with tag
// m, and its gradient comes back with tag 4 + m. Rank 0's sends complete once
// the first gradient arrives (rank 1 has received them all by then).
// CHECK-LABEL: func.func @mlp_stage0
// CHECK-SAME: dist.pipeline_rank = 0
// Each unit's first op names it, and microbatch m reads rows 2m, 2m + 1.
// CHECK: nn.slice %arg0 start = [0, 0] limit = [2, 4] {dist.unit = "F0.0"}
// CHECK: %[[S0:.+]] = dist.send %{{.+}} on @mesh "pp" to 1 tag 0 {dist.stream = 1 : i64} : tensor<2x4xf32>
// CHECK: dist.send {{.*}} tag 1
// CHECK: dist.send {{.*}} tag 2
// CHECK: dist.send {{.*}} tag 3
// CHECK: dist.recv on @mesh "pp" from 1 tag 4 {dist.unit = "B0.0"} : tensor<2x4xf32>
// CHECK-NEXT: dist.wait %[[S0]]
// CHECK: dist.recv {{.*}} tag 5
// CHECK: dist.recv {{.*}} tag 6
// CHECK: dist.recv {{.*}} tag 7
// The gradients of all microbatches are summed before the one update.
// CHECK: %[[SUM:.+]] = nn.add %{{.+}}, %{{.+}} : tensor<4x4xf32>
// CHECK: nn.transpose %[[SUM]]
// CHECK: nn.sgd
// CHECK-LABEL: func.func @mlp_stage1
// CHECK: dist.recv {{.*}} tag 0
// CHECK: dist.recv {{.*}} tag 1
// CHECK: dist.recv {{.*}} tag 2
// CHECK: dist.recv {{.*}} tag 3
// CHECK: dist.send {{.*}} tag 4
// CHECK: dist.send {{.*}} tag 5
// CHECK: dist.send {{.*}} tag 6
// CHECK: dist.send {{.*}} tag 7
// The loss is the mean of the microbatches' means, on the last stage.
// CHECK: %[[QUARTER:.+]] = nn.constant {dist.unit = "update"} dense<2.500000e-01> : tensor<f32>
// CHECK: %[[LOSS:.+]] = nn.mul %{{.+}}, %[[QUARTER]] : tensor<f32>
// CHECK: return {{.*}}%[[LOSS]] : {{.*}}tensor<f32>
