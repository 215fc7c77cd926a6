// RUN: tessera-opt %s "--tessera-train-step=loss-scale=1" "--tessera-clip-gradients=max-norm=0 loss-scale-window=100" | FileCheck %s
// RUN: tessera-opt %s "--tessera-train-step=loss-scale=1 initial-loss-scale=1024" --tessera-clip-gradients | FileCheck %s --check-prefix=INITIAL

// Tests dynamic loss scaling: the step differentiates the loss times
// S = 2^16 · 2^log2 (new state, starting at 0) and returns the loss itself;
// each update reads S with the norm of the scaled gradients; the state is
// updated as PyTorch's GradScaler updates it (an overflow, a norm that is
// not finite, halves S; 100 steps without one double it); the true norm
// and S are the step's metrics.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[LOG2:[^:]+]]: tensor<f32> {nn.state = "loss_scale.log2"}, %[[GOOD:[^:]+]]: tensor<f32> {nn.state = "loss_scale.good_steps"}
// CHECK-SAME: tensor<f32> {nn.updates = 2 : i64}, tensor<f32> {nn.updates = 3 : i64}, tensor<f32> {nn.metric = "grad_norm"}, tensor<f32> {nn.metric = "loss_scale"})
// CHECK: %[[EXP:.+]] = nn.add %[[LOG2]], %{{.+}} : tensor<f32>
// CHECK: %[[S:.+]] = nn.pow %{{.+}}, %[[EXP]] : tensor<f32>
// CHECK: %[[LOSS:.+]] = nn.reduce_mean
// CHECK: %[[NORM:.+]] = nn.sqrt
// CHECK: %[[TRUE:.+]] = nn.div %[[NORM]], %[[S]]
// CHECK: %[[FINITE:.+]] = nn.compare lt, %[[NORM]], %{{.+}} : tensor<f32>
// CHECK: %[[COUNT:.+]] = nn.add %[[GOOD]], %{{.+}}
// CHECK: %[[GROW:.+]] = nn.compare ge, %[[COUNT]], %{{.+}}
// CHECK: %[[NEXT:.+]] = nn.select %[[FINITE]], %{{.+}}, %{{.+}}
// CHECK: %[[NEXTGOOD:.+]] = nn.select %[[FINITE]], %{{.+}}, %{{.+}}
// CHECK: nn.adamw {{.*}} norm %[[NORM]] scale %[[S]] lr = 1.000000e-03
// CHECK: return {{.*}}, %[[LOSS]], %[[NEXT]], %[[NEXTGOOD]], %[[TRUE]], %[[S]]

// INITIAL: %[[LOG2_1024:.+]] = nn.constant dense<1.000000e+01> : tensor<f32>
// INITIAL: nn.add %{{.+}}, %[[LOG2_1024]]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
