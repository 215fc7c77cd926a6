//===- ShardingRuleOpInterface.td - factor sharding rules --*- tablegen -*-===//

#ifndef TESSERA_INTERFACES_SHARDINGRULEOPINTERFACE
#define TESSERA_INTERFACES_SHARDINGRULEOPINTERFACE

include "mlir/IR/OpBase.td"

def ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::tessera";
  let description = [{
    Describes how an op's tensors may be split, in the factor form of Shardy.

    A *factor* is one loop dimension of the op's iteration space. The rule lists
    every factor with its size and kind, and says, for every operand and result
    dimension, which factors it is made of (major to minor). Two tensor
    dimensions that share a factor must be split the same way, so propagation
    moves shardings along factors and the partitioner reads from the kinds what
    communication a split factor costs:

    - `parallel`: splitting the factor needs no communication;
    - `reduction`: the factor is reduced over (a contracting dimension, a
      reduced dimension); a split one leaves partial results that an
      all-reduce of the op's combining kind completes (a sum for `nn.dot`);
    - `need_replication`: the op cannot compute a split factor locally (a
      softmax axis, a sliced or concatenated dimension); it must be gathered.

    For `nn.dot` with `lhs : 8x16`, `rhs : 16x64` and one contracting pair the
    rule reads `([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16} reduction={k}`.
  }];

  let methods = [
    InterfaceMethod<[{
        Returns the factor sharding rule of this op, built from its operand and
        result types and its attributes. The rule always verifies against them.
      }],
      "::tessera::ShardingRule", "getShardingRule", (ins)>,
    InterfaceMethod<[{
        Returns how the partial results of a split reduction factor combine:
        a sum by default (`nn.dot`, `nn.reduce_sum`), the maximum for
        `nn.reduce_max`, the mean for `nn.reduce_mean`.
      }],
      "::tessera::PartialCombiner", "getPartialCombiner", (ins), "",
      [{ return ::tessera::PartialCombiner::Sum; }]>,
    InterfaceMethod<[{
        Returns whether the partitioner may compute this op on a split of
        `factor`. Propagation still moves shardings along every factor the rule
        allows; a factor the op cannot partition yet (a vocab-split
        embedding needs each device's vocab offset) is gathered before the
        op instead. All factors by default.
      }],
      "bool", "isFactorPartitionable", (ins "int64_t":$factor), "",
      [{ return true; }]>,
    InterfaceMethod<[{
        Called by the partitioner once the op's results have their local
        types: updates the attributes that depend on sizes (a slice's limits,
        a splat constant's value). Nothing by default.
      }],
      "void", "updateLocalAttributes", (ins), "", [{ return; }]>,
    InterfaceMethod<[{
        Returns whether the op is linear in its operands together
        (`f(a1 + a2, b1 + b2) = f(a1, b1) + f(a2, b2)`: a sum, a difference,
        a transpose, a reshape): applied to the partial sums of a value it
        gives the partial sums of its result, so the partitioner may carry a
        pending sum across it rather than complete it first (ZeRO-1 sums whole
        gradients over the microbatches and reduce-scatters them once). False
        by default.
      }],
      "bool", "isLinear", (ins), "", [{ return false; }]>,
  ];
}

#endif // TESSERA_INTERFACES_SHARDINGRULEOPINTERFACE
