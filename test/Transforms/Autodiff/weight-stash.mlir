// RUN: tessera-opt %s "--tessera-train-step=optimizer=sgd lr=0.5" --tessera-weight-stash | FileCheck %s

// Tests that the forward and backward read each parameter's stash, sharded
// as the parameter is, while the update reads the parameter; the step
// returns the parameter as the stash's next value.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x2xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "w"}
// CHECK-SAME: %[[S:[^:]+]]: tensor<8x2xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.state = "w.stash", nn.version_of = "w"})
// CHECK-SAME: -> (tensor<8x2xf32> {nn.updates = 1 : i64}, tensor<f32>, tensor<8x2xf32> {nn.updates = 2 : i64})
// CHECK-NOT: %[[W]]
// CHECK: nn.dot %[[X]], %[[S]]
// CHECK-NOT: %[[W]]
// CHECK: %[[NEW:.+]] = nn.sgd %[[W]], %{{.+}} lr = 5.000000e-01
// CHECK: return %[[NEW]], %{{.+}}, %[[W]] :
dist.mesh @mesh ["tp"=2]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w", dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %z = nn.mul %y, %y : tensor<4x2xf32>
  %l = nn.reduce_mean %z dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
