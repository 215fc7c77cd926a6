// RUN: tessera-opt %s -split-input-file --tessera-propagate | FileCheck %s

// Tests that a flat layout moves forward through pointwise ops whose
// operands are laid out as their results (a cast, an add with a whole
// operand, which the partitioner cuts to the share), and not through an op
// that is not pointwise (a reduction) or into a constraint.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @flat_forward
// CHECK: nn.cast %arg0 {dist.sharding = [#dist.sharding<@mesh, [{}, {}], flat={"dp"}>]}
// CHECK: nn.add %{{.+}}, %arg1 {dist.sharding = [#dist.sharding<@mesh, [{}, {}], flat={"dp"}>]}
// CHECK: nn.reduce_sum %{{.+}} {dist.sharding = [#dist.sharding<@mesh, [{}]>]}
// CHECK: dist.sharding_constraint %{{.+}} <@mesh, [{}, {}]>
func.func @flat_forward(
    %w: tensor<5x6xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}], flat={"dp"}>},
    %b: tensor<5x6xbf16>) -> (tensor<6xbf16>, tensor<5x6xbf16>) {
  %c = nn.cast %w : tensor<5x6xf32> to tensor<5x6xbf16>
  %s = nn.add %c, %b : tensor<5x6xbf16>
  %r = nn.reduce_sum %s dims = [0] : tensor<5x6xbf16> -> tensor<6xbf16>
  %whole = dist.sharding_constraint %s <@mesh, [{}, {}]> : tensor<5x6xbf16>
  return %r, %whole : tensor<6xbf16>, tensor<5x6xbf16>
}

// -----

// Tests that operands stored flat over different axes give no flat result.
dist.mesh @mesh ["x"=2, "y"=2]
// CHECK-LABEL: func.func @disagree
// CHECK: nn.add %arg0, %arg1 {dist.sharding = [#dist.sharding<@mesh, [{}]>]}
func.func @disagree(
    %a: tensor<6xf32> {dist.sharding = #dist.sharding<@mesh, [{}], flat={"x"}>},
    %b: tensor<6xf32> {dist.sharding = #dist.sharding<@mesh, [{}], flat={"y"}>}) -> tensor<6xf32> {
  %s = nn.add %a, %b : tensor<6xf32>
  return %s : tensor<6xf32>
}
