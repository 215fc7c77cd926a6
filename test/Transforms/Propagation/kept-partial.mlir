// RUN: tessera-opt %s --tessera-propagate | FileCheck %s

// Tests that a value consumed only as a flat store (ZeRO-3's gradient
// constraint) stays partial over the store's axes, but those it is split
// over: a weight's gradient split over tp on its rows is partial over dp
// alone. A pipeline fuzzer finding: it was given unreduced={"dp", "tp"}
// beside its split over tp, an attribute its verifier refuses (an assertion
// where MLIR's asserts are on).
dist.mesh @mesh ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @weight_gradient
// CHECK: nn.dot %arg0, %arg1 {{.*}}{dist.sharding = [#dist.sharding<@mesh, [{"tp"}, {}], unreduced={"dp"}>]}
func.func @weight_gradient(
    %a: tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>},
    %dy: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
    -> tensor<64x16xf32> {
  %g = nn.dot %a, %dy contracting_dims = [0] x [0]
      : (tensor<8x64xf32>, tensor<8x16xf32>) -> tensor<64x16xf32>
  %stored = dist.sharding_constraint %g <@mesh, [{}, {}], flat={"dp", "tp"}> : tensor<64x16xf32>
  return %stored : tensor<64x16xf32>
}
