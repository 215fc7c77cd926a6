//===- TestPasses.td - passes that expose analyses to lit --*- tablegen -*-===//

#ifndef TESSERA_TEST_PASSES
#define TESSERA_TEST_PASSES

include "mlir/Pass/PassBase.td"

def TestOpInterfacesPass : Pass<"tessera-test-op-interfaces"> {
  let summary = "Reports every op's sharding rule and cost as remarks";
  let description = [{
    For each op implementing `ShardingRuleOpInterface` or `CostOpInterface`,
    emits a remark with the rule in Shardy's notation and the FLOPs and bytes,
    and an error if the rule does not verify against the op's types; for each
    dist collective, its mesh axes, group size and bytes per device. Lit
    tests check every op's rule and cost through it.

    ```mlir
    // remark: sharding rule: ([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16} reduction={k}
    // remark: cost: flops=16384 bytes=6656
    %y = nn.dot %x, %w contracting_dims = [1] x [0]
        : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    ```
  }];
}

#endif // TESSERA_TEST_PASSES
