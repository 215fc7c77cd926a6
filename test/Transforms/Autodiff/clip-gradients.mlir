// RUN: tessera-opt %s -split-input-file "--tessera-train-step=lr-schedule=cosine warmup-steps=2 decay-steps=10 min-lr=0.0001" "--tessera-clip-gradients=max-norm=0.5" | FileCheck %s
// RUN: tessera-opt %s -split-input-file --tessera-train-step "--tessera-zero=stage=2" --tessera-clip-gradients | FileCheck %s --check-prefix=ZERO
// RUN: tessera-opt %s -split-input-file --tessera-train-step --tessera-zero=stage=2 --tessera-clip-gradients --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PART

// Tests that the train step's updates carry the schedule, and that clipping
// sums the squares of every gradient the updates read into one norm that
// each update reads and the step returns after the loss, marked
// tessera.global_norm for --tessera-pipeline (and still marked once
// partitioned). On a mesh, each gradient is made complete once for the norm
// and the update; after ZeRO, the norm reads the split gradient ZeRO
// pinned, and partitioned, each piece's sum of squares is reduced over the
// axes that split it.
// CHECK-LABEL: func.func @step
// CHECK-SAME: -> (tensor<8x2xf32> {nn.updates = 1 : i64}, tensor<2x3xf32> {nn.updates = 2 : i64}, {{.*}}, tensor<f32>, tensor<f32> {nn.metric = "grad_norm"})
// CHECK-DAG: %[[SW:.+]] = nn.sum_squares %[[GW:[^ ]+]] : tensor<8x2xf32>
// CHECK-DAG: %[[SV:.+]] = nn.sum_squares %[[GV:[^ ]+]] : tensor<2x3xf32>
// CHECK: %[[SUM:.+]] = nn.add
// CHECK: %[[NORM:.+]] = nn.sqrt %[[SUM]] {tessera.global_norm} : tensor<f32>
// CHECK: nn.adamw %arg1, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} norm %[[NORM]] lr = 1.000000e-03 {decay_steps = 10 : i64, max_grad_norm = 5.000000e-01 : f32, min_lr = 9.99999974E-5 : f32, schedule = 2 : i32, warmup_steps = 2 : i64
// CHECK: return {{.*}}, %[[NORM]]

// ZERO: %[[G:.+]] = dist.sharding_constraint %{{.+}} <@mesh, [{"dp"}, {?}]> : tensor<8x2xf32>
// ZERO: nn.sum_squares %[[G]] : tensor<8x2xf32>
// ZERO: nn.adamw %arg1, %[[G]],

// PART: %[[A:.+]] = nn.sum_squares %{{.+}} : tensor<4x2xf32>
// PART: %[[B:.+]] = nn.sum_squares %{{.+}} : tensor<1x3xf32>
// PART: %[[S:.+]] = nn.add %[[A]], %[[B]]
// PART: dist.all_reduce %[[S]] on @mesh ["dp"] sum : tensor<f32>
// PART: nn.sqrt {{.*}}tessera.global_norm
dist.mesh @mesh ["dp"=2]
func.func @step(%x: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %w: tensor<8x2xf32> {nn.param = "w"}, %v: tensor<2x3xf32> {nn.param = "v"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %z = nn.dot %y, %v contracting_dims = [1] x [0] : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %l = nn.reduce_mean %z dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
