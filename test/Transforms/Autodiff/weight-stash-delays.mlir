// RUN: tessera-opt %s "--tessera-train-step=optimizer=sgd lr=0.5" "--tessera-weight-stash=delays=w:2,v:0" | FileCheck %s
// RUN: not tessera-opt %s "--tessera-train-step=optimizer=sgd lr=0.5" "--tessera-weight-stash=delays=w:-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not tessera-opt %s "--tessera-train-step=optimizer=sgd lr=0.5" "--tessera-weight-stash=delays=w:1,w:2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not tessera-opt %s "--tessera-train-step=optimizer=sgd lr=0.5" "--tessera-weight-stash=delays=w:1048576" 2>&1 | FileCheck %s --check-prefix=HUGE

// Tests PipeDream's delays on one device: w is read as it was two steps
// before, through a chain of two stashes (w.stash.1 is the step before's w,
// w.stash the one before that, which the forward and backward read); v,
// with delay 0, is read as is.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x2xf32> {nn.param = "w"}, %[[V:[^:]+]]: tensor<2x2xf32> {nn.param = "v"}
// CHECK-SAME: %[[S1:[^:]+]]: tensor<8x2xf32> {nn.state = "w.stash.1", nn.version_of = "w"}, %[[S2:[^:]+]]: tensor<8x2xf32> {nn.state = "w.stash", nn.version_of = "w"})
// CHECK-SAME: -> (tensor<8x2xf32> {nn.updates = 1 : i64}, tensor<2x2xf32> {nn.updates = 2 : i64}, tensor<f32>, tensor<8x2xf32> {nn.updates = 3 : i64}, tensor<8x2xf32> {nn.updates = 4 : i64})
// CHECK: %[[Y:.+]] = nn.dot %[[X]], %[[S2]]
// CHECK: nn.dot %[[Y]], %[[V]]
// CHECK: %[[NEW:.+]] = nn.sgd %[[W]], %{{.+}} lr = 5.000000e-01
// CHECK: return %[[NEW]], %{{.+}}, %{{.+}}, %[[W]], %[[S1]] :

// NEGATIVE: error: --tessera-weight-stash expects delays as name:d with 0 <= d < 2^20, each name once, got 'w:-1'
// HUGE: error: --tessera-weight-stash expects delays as name:d with 0 <= d < 2^20, each name once, got 'w:1048576'
// TWICE: error: --tessera-weight-stash expects delays as name:d with 0 <= d < 2^20, each name once, got 'w:2'
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w"}, %v: tensor<2x2xf32> {nn.param = "v"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %z = nn.dot %y, %v contracting_dims = [1] x [0] : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %s = nn.mul %z, %z : tensor<4x2xf32>
  %l = nn.reduce_mean %s dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
