// RUN: tessera-opt %s -split-input-file --tessera-train-step | FileCheck %s
// RUN: tessera-opt %s -split-input-file "--tessera-train-step=optimizer=sgd lr=0.5" | FileCheck %s --check-prefix=SGD

// Tests that AdamW adds the moments and the step counter as arguments and
// returns the new parameters, moments and loss, each update naming the
// argument it replaces.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[^:]+]]: tensor<8x2xf32> {nn.param = "w"}
// CHECK-SAME: %[[M:[^:]+]]: tensor<8x2xf32> {nn.state = "w.adam_m"}
// CHECK-SAME: %[[V:[^:]+]]: tensor<8x2xf32> {nn.state = "w.adam_v"}
// CHECK-SAME: %[[T:[^:]+]]: tensor<i64> {nn.state = "step"}
// CHECK-SAME: -> (tensor<8x2xf32> {nn.updates = 1 : i64}, tensor<8x2xf32> {nn.updates = 2 : i64}, tensor<8x2xf32> {nn.updates = 3 : i64}, tensor<f32>)
// CHECK: %[[P:.+]], %[[NM:.+]], %[[NV:.+]] = nn.adamw %[[W]], %{{.+}}, %[[M]], %[[V]], %[[T]] lr = 1.000000e-03
// CHECK: return %[[P]], %[[NM]], %[[NV]], %{{.+}}

// SGD-LABEL: func.func @step
// SGD-SAME: -> (tensor<8x2xf32> {nn.updates = 1 : i64}, tensor<f32>)
// SGD: %[[P:.+]] = nn.sgd %arg1, %{{.+}} lr = 5.000000e-01
// SGD: return %[[P]], %{{.+}}
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
