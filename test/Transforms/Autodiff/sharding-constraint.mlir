// RUN: tessera-opt %s --tessera-autodiff | FileCheck %s

// Tests that the gradient of a dist.sharding_constraint is the same
// constraint on the gradient, without its unreduced axes (a pending sum's
// gradient is the same on every device).
dist.mesh @mesh ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @constrained
// CHECK: dist.sharding_constraint %{{.+}} <@mesh, [{"dp"}, {}], unreduced={"tp"}>
// CHECK: %[[G:.+]] = dist.sharding_constraint %{{.+}} <@mesh, [{"dp"}, {}]> : tensor<4x8xf32>
// CHECK-NEXT: nn.transpose %[[G]]
func.func @constrained(%x: tensor<4x8xf32>,
                       %w: tensor<8x8xf32> {nn.param = "w"}) -> tensor<f32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = dist.sharding_constraint %y <@mesh, [{"dp"}, {}], unreduced={"tp"}> : tensor<4x8xf32>
  %s = nn.mul %c, %c : tensor<4x8xf32>
  %l = nn.reduce_mean %s dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
