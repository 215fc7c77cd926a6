// RUN: tessera-opt %S/Inputs/mlp4.mlir --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=4 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=4 schedule=interleaved virtual=2" | FileCheck %s

// Tests that interleaved 1F1B with two stages per rank runs Megatron-LM's
// order, on a four-layer MLP (Inputs/mlp4.mlir) in four microbatches, read
// off each rank's transfers: stage k (one layer each) runs on rank k mod 2.
// Rank 0 runs the warm-up F(0,0) F(0,1) F(2,0) F(2,1), then F(0,2) B(2,0)
// F(0,3) B(2,1) F(2,2) B(0,0) F(2,3) B(0,1), then B(2,2) B(2,3) B(0,2)
// B(0,3). Stage 0 sends its outputs with tags 0-3, stage 1 with 4-7, stage 2
// with 8-11; gradients come back from stage 3 with 12-15, go from stage 2 to
// stage 1 with 16-19 and arrive from stage 1 with 20-23.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK: dist.send {{.*}} tag 0
// CHECK: dist.send {{.*}} tag 1
// CHECK: dist.recv {{.*}} tag 4
// CHECK: dist.send {{.*}} tag 8
// CHECK: dist.recv {{.*}} tag 5
// CHECK: dist.send {{.*}} tag 9
// CHECK: dist.send {{.*}} tag 2
// CHECK: dist.recv {{.*}} tag 12
// CHECK: dist.send {{.*}} tag 16
// CHECK: dist.send {{.*}} tag 3
// CHECK: dist.recv {{.*}} tag 13
// CHECK: dist.send {{.*}} tag 17
// CHECK: dist.recv {{.*}} tag 6
// CHECK: dist.send {{.*}} tag 10
// CHECK: dist.recv {{.*}} tag 20
// CHECK: dist.recv {{.*}} tag 7
// CHECK: dist.send {{.*}} tag 11
// CHECK: dist.recv {{.*}} tag 21
// CHECK: dist.recv {{.*}} tag 14
// CHECK: dist.send {{.*}} tag 18
// CHECK: dist.recv {{.*}} tag 15
// CHECK: dist.send {{.*}} tag 19
// CHECK: dist.recv {{.*}} tag 22
// CHECK: dist.recv {{.*}} tag 23
// CHECK: nn.sgd
// CHECK-LABEL: func.func @mlp_stage1
