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
    InterfaceMethod<[{
        Partitions the op itself where computing it on the chosen factor
        layout is not what it means on pieces (`nn.attention` with `ring`
        builds a ring of blocks). The partitioner calls it once it has chosen
        the layout of the op's factors, with `builder` before the op; the op
        asks `context` for its operands in the layout it needs and hands it
        each result's piece (`replaceResult`). Answers false to leave the op
        to the factor partitioning, true once every result is replaced (the
        op is erased once the function is partitioned), and fails after an
        error at the op. False by default.
      }],
      "::mlir::FailureOr<bool>", "partition",
      (ins "::tessera::PartitionContext &":$context,
           "::mlir::OpBuilder &":$builder), "",
      [{ return false; }]>,
    InterfaceMethod<[{
        Returns whether the op sums a function of every element of operand 0
        that maps zero to zero into a rank-0 result (`nn.sum_squares`): it
        then computes on a piece stored flat, whose padding is zeros, into a
        partial sum over every axis that splits the piece. False by default.
      }],
      "bool", "reducesFlatPieces", (ins), "", [{ return false; }]>,
    InterfaceMethod<[{
        Returns, for an op that only permutes the dims of its one operand
        (`nn.transpose`), the permutation: result dim `i` is operand dim
        `permutation[i]`. The reshard optimizer sees through it that two
        exchanges move the same value. None by default.
      }],
      "::std::optional<::llvm::SmallVector<int64_t>>", "getDimPermutation",
      (ins), "", [{ return ::std::nullopt; }]>,
    InterfaceMethod<[{
        Returns, for an op with a dim made of groups of members, groups major
        (attention's query heads: the kv heads, each with the query heads
        that read it), the number of groups and the dim's size; none by
        default. `--tessera-split-axes` splits a mesh axis of more devices
        than there are groups (more than one), a multiple of the groups that
        divides the dim, into two sub-axes: the groups split over the major
        one, each group's members over the minor one.
      }],
      "::std::optional<::std::pair<int64_t, int64_t>>", "getSubAxisGroups",
      (ins), "", [{ return ::std::nullopt; }]>,
    InterfaceMethod<[{
        Returns what the padding of a dim of operand `operand` made of a
        factor of kind `kind` must hold for the op to read it, where
        `--tessera-pad` grew the dim: a sum over the factor reads zeros
        (`nn.dot`'s contraction), a maximum the lowest value (`nn.softmax`'s
        axis), an op that computes each element on its own anything. Fails
        where the op cannot compute on padding it reads whole (a
        normalization's dim), which the pass reports. Nothing for a
        `parallel` factor and failure for others by default.
      }],
      "::mlir::FailureOr<::tessera::PaddingFill>", "getPaddingFill",
      (ins "unsigned":$operand, "::tessera::FactorKind":$kind), "",
      [{
        if (kind == ::tessera::FactorKind::Parallel)
          return ::tessera::PaddingFill::None;
        return ::mlir::failure();
      }]>,
    InterfaceMethod<[{
        Returns whether the op's result holds zeros in its padding, given
        which operands are padded (`isPadded`) and which hold zeros in their
        padding or have none (`isZeroPadded`): an elementwise op that maps
        zeros to zeros keeps them (`nn.add`, `nn.relu`). `--tessera-pad` then
        does not mask that padding to zeros again. False by default.
      }],
      "bool", "keepsZeroPadding",
      (ins "::llvm::function_ref<bool(::mlir::Value)>":$isPadded,
           "::llvm::function_ref<bool(::mlir::Value)>":$isZeroPadded), "",
      [{ return false; }]>,
    InterfaceMethod<[{
        Called by `--tessera-pad` once every value has its padded type:
        updates what depends on the padding of the op's tensors (a constant's
        value grown with zeros, a slice's limits, a concat's inputs cut to
        their real size), asking `context` for the shapes before padding and
        for the padding it builds, with `builder`. Nothing by default.
      }],
      "void", "pad",
      (ins "::tessera::PadContext &":$context,
           "::mlir::OpBuilder &":$builder), "",
      [{ return; }]>,
  ];
}

#endif // TESSERA_INTERFACES_SHARDINGRULEOPINTERFACE
