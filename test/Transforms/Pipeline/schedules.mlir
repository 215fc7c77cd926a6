// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=gpipe" | FileCheck %s --check-prefix=GPIPE
// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=1f1b" | FileCheck %s --check-prefix=ONEFONEB
// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=interleaved virtual=2" | FileCheck %s --check-prefix=INTERLEAVED
// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=zb-h1" | FileCheck %s --check-prefix=ZB

// Tests the order in which each pipeline rank runs its units, read off its
// transfers, on a four-layer MLP in four microbatches over two ranks. The
// forward output of microbatch m leaves rank 0 with tag m, and its gradient
// comes back with tag 4 + m.

// GPipe: all forwards, then all backwards. Rank 0's sends complete once the
// first gradient arrives (rank 1 has received them all by then).
// GPIPE-LABEL: func.func @mlp_stage0
// GPIPE-SAME: dist.pipeline_rank = 0
// Each unit's first op names it, and microbatch m reads rows 2m, 2m + 1.
// GPIPE: nn.slice %arg0 start = [0, 0] limit = [2, 4] {dist.unit = "F0.0"}
// GPIPE: %[[S0:.+]] = dist.send %{{.+}} on @mesh "pp" to 1 tag 0 {dist.stream = 1 : i64} : tensor<2x4xf32>
// GPIPE: dist.send {{.*}} tag 1
// GPIPE: dist.send {{.*}} tag 2
// GPIPE: dist.send {{.*}} tag 3
// GPIPE: dist.recv on @mesh "pp" from 1 tag 4 {dist.unit = "B0.0"} : tensor<2x4xf32>
// GPIPE-NEXT: dist.wait %[[S0]]
// GPIPE: dist.recv {{.*}} tag 5
// GPIPE: dist.recv {{.*}} tag 6
// GPIPE: dist.recv {{.*}} tag 7
// The gradients of all microbatches are summed before the one update.
// GPIPE: %[[SUM:.+]] = nn.add %{{.+}}, %{{.+}} : tensor<4x4xf32>
// GPIPE: nn.transpose %[[SUM]]
// GPIPE: nn.sgd
// GPIPE-LABEL: func.func @mlp_stage1
// GPIPE: dist.recv {{.*}} tag 0
// GPIPE: dist.recv {{.*}} tag 1
// GPIPE: dist.recv {{.*}} tag 2
// GPIPE: dist.recv {{.*}} tag 3
// GPIPE: dist.send {{.*}} tag 4
// GPIPE: dist.send {{.*}} tag 5
// GPIPE: dist.send {{.*}} tag 6
// GPIPE: dist.send {{.*}} tag 7
// The loss is the mean of the microbatches' means, on the last stage.
// GPIPE: %[[QUARTER:.+]] = nn.constant {dist.unit = "update"} dense<2.500000e-01> : tensor<f32>
// GPIPE: %[[LOSS:.+]] = nn.mul %{{.+}}, %[[QUARTER]] : tensor<f32>
// GPIPE: return {{.*}}%[[LOSS]] : {{.*}}tensor<f32>

// One forward, one backward: rank 0 warms up with 2 - 0 - 1 = 1 extra forward, then alternates;
// rank 1 alternates from the start.
// ONEFONEB-LABEL: func.func @mlp_stage0
// ONEFONEB: dist.send {{.*}} tag 0
// ONEFONEB: dist.send {{.*}} tag 1
// ONEFONEB: dist.recv {{.*}} tag 4
// ONEFONEB: dist.send {{.*}} tag 2
// ONEFONEB: dist.recv {{.*}} tag 5
// ONEFONEB: dist.send {{.*}} tag 3
// ONEFONEB: dist.recv {{.*}} tag 6
// ONEFONEB: dist.recv {{.*}} tag 7
// ONEFONEB-LABEL: func.func @mlp_stage1
// ONEFONEB: dist.recv {{.*}} tag 0
// ONEFONEB: dist.send {{.*}} tag 4
// ONEFONEB: dist.recv {{.*}} tag 1
// ONEFONEB: dist.send {{.*}} tag 5
// ONEFONEB: dist.recv {{.*}} tag 2
// ONEFONEB: dist.send {{.*}} tag 6
// ONEFONEB: dist.recv {{.*}} tag 3
// ONEFONEB: dist.send {{.*}} tag 7

// Interleaved, two stages per rank: stage k (one layer each) runs on rank
// k mod 2. Rank 0 runs Megatron-LM's order: warm-up F(0,0) F(0,1) F(2,0)
// F(2,1), then F(0,2) B(2,0) F(0,3) B(2,1) F(2,2) B(0,0) F(2,3) B(0,1),
// then B(2,2) B(2,3) B(0,2) B(0,3). Stage 1 sends its outputs with tags
// 4-7, stage 2 with 8-11; gradients come back from stage 3 with 12-15, go
// from stage 2 to stage 1 with 16-19 and arrive from stage 1 with 20-23.
// INTERLEAVED-LABEL: func.func @mlp_stage0
// INTERLEAVED: dist.send {{.*}} tag 0
// INTERLEAVED: dist.send {{.*}} tag 1
// INTERLEAVED: dist.recv {{.*}} tag 4
// INTERLEAVED: dist.send {{.*}} tag 8
// INTERLEAVED: dist.recv {{.*}} tag 5
// INTERLEAVED: dist.send {{.*}} tag 9
// INTERLEAVED: dist.send {{.*}} tag 2
// INTERLEAVED: dist.recv {{.*}} tag 12
// INTERLEAVED: dist.send {{.*}} tag 16
// INTERLEAVED: dist.send {{.*}} tag 3
// INTERLEAVED: dist.recv {{.*}} tag 13
// INTERLEAVED: dist.send {{.*}} tag 17
// INTERLEAVED: dist.recv {{.*}} tag 6
// INTERLEAVED: dist.send {{.*}} tag 10
// INTERLEAVED: dist.recv {{.*}} tag 20
// INTERLEAVED: dist.recv {{.*}} tag 7
// INTERLEAVED: dist.send {{.*}} tag 11
// INTERLEAVED: dist.recv {{.*}} tag 21
// INTERLEAVED: dist.recv {{.*}} tag 14
// INTERLEAVED: dist.send {{.*}} tag 18
// INTERLEAVED: dist.recv {{.*}} tag 15
// INTERLEAVED: dist.send {{.*}} tag 19
// INTERLEAVED: dist.recv {{.*}} tag 22
// INTERLEAVED: dist.recv {{.*}} tag 23
// INTERLEAVED: nn.sgd
// INTERLEAVED-LABEL: func.func @mlp_stage1

// ZB-H1: the backward splits into B, the ops that make the gradient the
// previous stage needs, and W, the weight gradients, which rank 0 runs one
// backward late (rank 1 at once) so that they fill the cool-down. Rank 0
// sends no gradient, so all its backward ops are W: F0 F1 F2 W0 F3 W1 W2 W3.
// ZB-LABEL: func.func @mlp_stage0
// ZB: dist.send {{.*}} tag 0
// ZB: dist.send {{.*}} tag 1
// ZB: dist.send {{.*}} tag 2
// ZB: dist.recv {{.*}} tag 4 {dist.unit = "W0.0"}
// ZB: dist.send {{.*}} tag 3
// ZB: dist.recv {{.*}} tag 5 {dist.unit = "W0.1"}
// ZB: dist.recv {{.*}} tag 6 {dist.unit = "W0.2"}
// ZB: dist.recv {{.*}} tag 7 {dist.unit = "W0.3"}
// Rank 1 sends each gradient before it computes the weight gradients.
// ZB-LABEL: func.func @mlp_stage1
// ZB: dist.recv {{.*}} tag 0
// ZB: {dist.unit = "B1.0"}
// ZB: dist.send {{.*}} tag 4
// ZB-NEXT: {dist.unit = "W1.0"}
// ZB: dist.recv {{.*}} tag 1
// ZB: dist.send {{.*}} tag 5
// ZB-NEXT: {dist.unit = "W1.1"}
