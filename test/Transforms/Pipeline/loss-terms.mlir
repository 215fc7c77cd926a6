// RUN: tessera-opt %s --tessera-train-step=optimizer=sgd --tessera-microbatch=microbatches=2 --tessera-propagate --tessera-partition --tessera-pipeline="stages=2 microbatches=2" | FileCheck %s

// Tests that a loss summing a term of each stage (a mixture of experts'
// balance loss per layer) is made once, on the last stage: the first stage
// sends its term's sum over the microbatches there after the schedule.
// CHECK-LABEL: func.func @mlp_stage0
// CHECK: %[[SUM:.+]] = dist.accumulate %{{.+}} : tensor<f32>
// CHECK: dist.send %[[SUM]] on @mesh "pp" to 1 tag {{[0-9]+}} {{.*}}dist.unit = "update"
// CHECK-NOT: nn.add %{{.+}} : tensor<f32>
// CHECK-LABEL: func.func @mlp_stage1
// CHECK: %[[TERM:.+]] = dist.recv on @mesh "pp" from 0 tag {{[0-9]+}} {dist.unit = "update"} : tensor<f32>
// CHECK: %[[MEAN:.+]] = nn.mul %[[TERM]]
// CHECK: %[[WEIGHTED:.+]] = nn.mul %[[MEAN]]
// CHECK: nn.add %{{.+}}, %[[WEIGHTED]] : tensor<f32>
dist.mesh @mesh ["pp"=2]
func.func @mlp(%x: tensor<8x4xf32>, %y: tensor<8x4xf32>,
               %w0: tensor<4x4xf32> {nn.param = "w0"},
               %w1: tensor<4x4xf32> {nn.param = "w1"}) -> tensor<f32> {
  %0 = nn.dot %x, %w0 contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %1 = nn.relu %0 : tensor<8x4xf32>
  %sq = nn.mul %1, %1 : tensor<8x4xf32>
  %aux = nn.reduce_mean %sq dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  %2 = nn.dot %1, %w1 contracting_dims = [1] x [0] {dist.stage = 1 : i64} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %3 = nn.sub %2, %y : tensor<8x4xf32>
  %4 = nn.mul %3, %3 : tensor<8x4xf32>
  %5 = nn.reduce_mean %4 dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  %c = nn.constant dense<0.5> : tensor<f32>
  %6 = nn.mul %aux, %c : tensor<f32>
  %7 = nn.add %5, %6 : tensor<f32>
  return %7 : tensor<f32>
}
