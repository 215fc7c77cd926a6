//===- NNOps.td - nn dialect operations --------------------*- tablegen -*-===//

#ifndef TESSERA_NN_OPS
#define TESSERA_NN_OPS

include "dialects/NN/IR/NNBase.td"
include "dialects/Interfaces/CostOpInterface.td"
include "dialects/Interfaces/GradientOpInterface.td"
include "dialects/Interfaces/OptimizerOpInterface.td"
include "dialects/Interfaces/RowReductionOpInterface.td"
include "dialects/Interfaces/SequenceOrderOpInterface.td"
include "dialects/Interfaces/ShardingRuleOpInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// Every nn op is pure and implements the sharding-rule, cost and gradient
/// interfaces next to its definition (NNShardingRules.cpp, NNCost.cpp,
/// NNGradients.cpp; the ops that partition themselves, NNPartition.cpp; how
/// ops compute on padded dims, NNPadding.cpp).
/// `costMethods` and `shardingMethods` list the CostOpInterface and
/// ShardingRuleOpInterface methods with defaults that the op overrides.
class NN_ModelOp<string mnemonic, list<Trait> traits = [],
                 list<string> costMethods = [],
                 list<string> shardingMethods = []>
    : NN_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<ShardingRuleOpInterface, shardingMethods>,
        DeclareOpInterfaceMethods<CostOpInterface, costMethods>,
        DeclareOpInterfaceMethods<GradientOpInterface>])>;


/// Ops that draw from the counter-based generator: a value at each element
/// of the tensor they draw for, keyed by `seed`, the step and the element's
/// index in the global tensor (see nn.random_uniform).
def NN_RandomOpInterface : OpInterface<"RandomOpInterface"> {
  let cppNamespace = "::tessera::nn";
  let description = [{
    A random op draws for its result's shape. On a device's piece of it,
    `piece` holds the piece's index along each dim (from
    `dist.axis_index`) and `global_shape` the whole tensor's shape, which
    the partitioner sets; without them the op draws for the whole tensor.
  }];
  let methods = [
    // Plain values: an op's absent optional operand is a null value, which
    // converting to another TypedValue would cast (and, with MLIR's
    // asserts on, dereference).
    InterfaceMethod<"The step counter the draw is keyed by.",
        "::mlir::Value", "getStep">,
    InterfaceMethod<"The piece's index along each dim, if any.",
        "::mlir::Value", "getPiece">,
    InterfaceMethod<"", "::mlir::MutableOperandRange", "getPieceMutable">,
    InterfaceMethod<"The global shape, on a piece.",
        "std::optional<::llvm::ArrayRef<int64_t>>", "getGlobalShape">,
    InterfaceMethod<"", "void", "setGlobalShapeAttr",
        (ins "::mlir::DenseI64ArrayAttr":$shape)>,
    InterfaceMethod<"The per-op stream of the generator.", "uint64_t",
        "getSeed">,
    InterfaceMethod<[{
        Whether the op draws numbers (attention only with dropout): true by
        default.
      }], "bool", "drawsNumbers", (ins), "", [{ return true; }]>,
    InterfaceMethod<[{
        The dims of the draw whose piece index the op reads even where it
        does not draw (no step): it positions by them (causal attention on a
        piece of the queries). None by default.
      }], "::llvm::SmallVector<int64_t>", "getPositionedDims", (ins), "", [{
        return {};
      }]>,
    InterfaceMethod<[{
        The shape of the tensor drawn for here: result 0's by default.
      }], "::llvm::SmallVector<int64_t>", "getDrawShape", (ins), "", [{
        return ::llvm::SmallVector<int64_t>(::llvm::cast<::mlir::ShapedType>(
            $_op->getResult(0).getType()).getShape());
      }]>,
    InterfaceMethod<[{
        For each dim of the draw, the dim of result 0 whose split it shares,
        or -1 where the draw is whole on every device: result 0's dims by
        default.
      }], "::llvm::SmallVector<int64_t>", "getDrawDims", (ins), "", [{
        ::llvm::SmallVector<int64_t> dims(::llvm::cast<::mlir::ShapedType>(
            $_op->getResult(0).getType()).getRank());
        for (auto [index, dim] : ::llvm::enumerate(dims))
          dim = index;
        return dims;
      }]>,
  ];
}

/// Ops that read integer positions (token ids, labels) against a dim that a
/// device may hold a piece of: the vocab of an embedding table, the classes
/// of a one-hot encoding. Megatron-LM's vocab-parallel embedding and
/// cross-entropy rest on them.
def NN_OffsetOpInterface : OpInterface<"OffsetOpInterface"> {
  let cppNamespace = "::tessera::nn";
  let description = [{
    On a device's piece of the positioned dim, `piece` holds the piece's
    index along it (a `dist.axis_index` over its axes, which the partitioner
    sets): the op works on the positions `piece × size` to
    `(piece + 1) × size` of the whole dim, `size` its local size, and a
    position outside them is one no row or class of the piece matches.
  }];
  let methods = [
    InterfaceMethod<[{
        The factor of the op's sharding rule that holds the positioned dim.
      }], "int64_t", "getOffsetFactor">,
    InterfaceMethod<"The piece's index along the positioned dim, if any.",
        "::mlir::Value", "getPiece">,
    InterfaceMethod<"", "::mlir::MutableOperandRange", "getPieceMutable">,
  ];
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def NN_DotOp : NN_ModelOp<"dot", [InferTypeOpAdaptor], [], ["getPaddingFill"]> {
  let summary = "general dot product with batch and contracting dimensions";
  let description = [{
    Contracts `lhs` and `rhs` over the paired contracting dimensions, for
    every index of the paired batch dimensions. The result dimensions are the
    batch dimensions, then the remaining `lhs` dimensions, then the remaining
    `rhs` dimensions, each in their original order (as StableHLO's
    `dot_general`). Operands share one element type; accumulation is in f32 or
    wider.

    ```mlir
    // A projection: [b, s, h] x [h, f] -> [b, s, f].
    %y = nn.dot %x, %w contracting_dims = [2] x [0]
        : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
    // Attention scores Q·Kᵀ per batch and head: [b, a, s, d] x [b, a, t, d].
    %s = nn.dot %q, %k batching_dims = [0, 1] x [0, 1]
        contracting_dims = [3] x [3]
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
      DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$lhs_batching_dims,
      DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$rhs_batching_dims,
      DenseI64ArrayAttr:$lhs_contracting_dims,
      DenseI64ArrayAttr:$rhs_contracting_dims);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs
    (`batching_dims` `=` $lhs_batching_dims^ `x` $rhs_batching_dims)?
    `contracting_dims` `=` $lhs_contracting_dims `x` $rhs_contracting_dims
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class NN_UnaryOp<string mnemonic, string what, list<Trait> traits = [],
                 list<string> shardingMethods = []>
    : NN_ModelOp<mnemonic, !listconcat(traits,
        [SameOperandsAndResultType, InferTypeOpInterface]), [],
        shardingMethods> {
  let summary = "elementwise " # what;
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class NN_BinaryOp<string mnemonic, string what, list<Trait> traits = [],
                  list<string> shardingMethods = []>
    : NN_ModelOp<mnemonic, !listconcat(traits,
        [SameOperandsAndResultType, InferTypeOpInterface]), [],
        shardingMethods> {
  let summary = "elementwise " # what;
  let description = [{
    Operands and result have one type; broadcasting is explicit
    (`nn.broadcast`).
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def NN_AddOp : NN_BinaryOp<"add", "addition", [Commutative],
                          ["isLinear", "keepsZeroPadding"]>;
def NN_SubOp : NN_BinaryOp<"sub", "subtraction", [],
                          ["isLinear", "keepsZeroPadding"]>;
def NN_MulOp : NN_BinaryOp<"mul", "multiplication", [Commutative],
                          ["keepsZeroPadding"]>;
def NN_DivOp : NN_BinaryOp<"div", "division">;
def NN_MaxOp : NN_BinaryOp<"max", "maximum", [Commutative],
                          ["keepsZeroPadding"]> {
  let description = [{
    The larger operand; NaN if either is NaN (as `torch.maximum`). The
    gradient goes to the larger operand, half to each on a tie.
  }];
}
def NN_MinOp : NN_BinaryOp<"min", "minimum", [Commutative],
                          ["keepsZeroPadding"]> {
  let description = [{
    The smaller operand; NaN if either is NaN (as `torch.minimum`). The
    gradient goes to the smaller operand, half to each on a tie.
  }];
}
def NN_PowOp : NN_BinaryOp<"pow", "power, lhs ** rhs"> {
  let description = [{
    `lhs ** rhs` as C's `powf` computes it (a negative base takes integer
    exponents only). The gradient of the exponent, `y · log(lhs)`, is taken
    as 0 where `lhs <= 0`.
  }];
}

def NN_NegOp : NN_UnaryOp<"neg", "negation", [],
                         ["isLinear", "keepsZeroPadding"]> {
  let hasFolder = 1;
}
def NN_ExpOp : NN_UnaryOp<"exp", "exponential">;
def NN_LogOp : NN_UnaryOp<"log", "natural logarithm">;
def NN_SqrtOp : NN_UnaryOp<"sqrt", "square root">;
def NN_RsqrtOp : NN_UnaryOp<"rsqrt", "reciprocal square root">;
def NN_TanhOp : NN_UnaryOp<"tanh", "hyperbolic tangent", [],
                          ["keepsZeroPadding"]>;
def NN_SinOp : NN_UnaryOp<"sin", "sine", [], ["keepsZeroPadding"]>;
def NN_CosOp : NN_UnaryOp<"cos", "cosine">;
def NN_SigmoidOp : NN_UnaryOp<"sigmoid", "logistic sigmoid, 1 / (1 + exp(-x))">;
def NN_AbsOp : NN_UnaryOp<"abs", "absolute value", [], ["keepsZeroPadding"]>;
def NN_ErfOp : NN_UnaryOp<"erf", "error function", [], ["keepsZeroPadding"]> {
  let description = [{
    `erf(x) = 2/√π ∫₀ˣ exp(-t²) dt`, as in the exact GELU,
    `0.5 · x · (1 + erf(x / √2))`.
  }];
}
def NN_ReluOp : NN_UnaryOp<"relu", "rectified linear unit, max(x, 0)", [],
                          ["keepsZeroPadding"]>;
def NN_GeluOp : NN_UnaryOp<"gelu", "GELU in its tanh form", [],
                          ["keepsZeroPadding"]> {
  let description = [{
    `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`, the form GPT-2 and
    Megatron-LM use.
  }];
}
def NN_SiluOp : NN_UnaryOp<"silu", "SiLU (swish), x · sigmoid(x)", [],
                          ["keepsZeroPadding"]>;

def NN_ClampOp : NN_ModelOp<"clamp",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "elementwise clamp to [min, max]";
  let description = [{
    `min(max(x, min), max)`; either bound may be left out (then ±infinity).
    NaN stays NaN. The gradient passes where `min <= x <= max`.

    ```mlir
    %y = nn.clamp %x min = -1.0 max = 1.0 : tensor<4x8xf32>
    %r = nn.clamp %x min = 0.0 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
      DefaultValuedAttr<F32Attr, "-std::numeric_limits<float>::infinity()">:$min,
      DefaultValuedAttr<F32Attr, "std::numeric_limits<float>::infinity()">:$max);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$input (`min` `=` $min^)? (`max` `=` $max^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_SelectOp : NN_ModelOp<"select", [InferTypeOpAdaptor,
    AllTypesMatch<["on_true", "on_false"]>], [], ["keepsZeroPadding"]> {
  let summary = "elementwise choice between two tensors";
  let description = [{
    Picks `on_true` where `condition` holds and `on_false` elsewhere. The
    condition has the shape of the values.

    ```mlir
    %r = nn.select %c, %a, %b : tensor<4x8xi1>, tensor<4x8xf32>
    ```
  }];
  let arguments = (ins NN_BoolTensor:$condition, NN_AnyTensor:$on_true,
                       NN_AnyTensor:$on_false);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` type($condition) `,`
    type($on_true)
  }];
  let hasVerifier = 1;
}

def NN_CompareOp : NN_ModelOp<"compare", [InferTypeOpAdaptor,
    AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "elementwise comparison";
  let description = [{
    Compares two tensors of one type elementwise and yields an `i1` tensor of
    their shape.

    ```mlir
    %c = nn.compare lt, %a, %b : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins NN_ComparePredicate:$predicate, NN_AnyTensor:$lhs,
                       NN_AnyTensor:$rhs);
  let results = (outs NN_BoolTensor:$result);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
}

def NN_CastOp : NN_ModelOp<"cast", [], [], ["isLinear", "keepsZeroPadding"]> {
  let summary = "elementwise conversion of the element type";
  let description = [{
    Converts each element to the result's element type (rounding to nearest
    even for narrowing float casts, truncating toward zero for float to
    integer). The shape is unchanged; the result type names the target.

    ```mlir
    %h = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_ConstantOp : NN_ModelOp<"constant", [ConstantLike, InferTypeOpAdaptor],
    [], ["isFactorPartitionable", "updateLocalAttributes", "pad"]> {
  let summary = "tensor constant (dense or splat)";
  let description = [{
    A tensor of the given elements; a splat fills the whole shape with one
    value, which is how scales and masks of large models stay small.

    ```mlir
    %scale = nn.constant dense<0.125> : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def NN_IotaOp : NN_ModelOp<"iota", [
    DeclareOpInterfaceMethods<NN_OffsetOpInterface, ["getOffsetFactor"]>], [],
    ["getPaddingFill"]> {
  let summary = "the index along one dimension";
  let description = [{
    Each element is its index along `dim`: `result[i0, ..., in] = i_dim`,
    converted to the element type. Positions and frequencies (rotary
    embeddings) are computed from it in the graph rather than stored as
    tables.

    Every dim splits. On a device's piece of `dim`, `piece` (from
    `dist.axis_index`, nn.OffsetOpInterface) places it: the indices are
    `piece × size` on, `size` the local size.

    ```mlir
    // Positions 0..7 down the rows of a [seq, d/2] table.
    %p = nn.iota dim = 0 : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Optional<1DTensorOf<[I64]>>:$piece, I64Attr:$dim);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = [{
    `dim` `=` $dim (`piece` $piece^ `:` type($piece))? attr-dict `:`
    type($result)
  }];
  let builders = [OpBuilder<(ins "::mlir::Type":$result, "int64_t":$dim), [{
    build($_builder, $_state, result, ::mlir::Value(), dim);
  }]>];
  let hasVerifier = 1;
}

def NN_RandomUniformOp : NN_ModelOp<"random_uniform",
    [NN_RandomOpInterface]> {
  let summary = "uniform random numbers from a counter-based generator";
  let description = [{
    Each element is a number in [0, 1) drawn by Philox-4x32-10 (Salmon et
    al. 2011), keyed by `seed` and the optimizer step `step`, at the
    element's row-major index `i` in the global tensor: the counter is
    `(i / 4, step)`, the key `seed`, and the element takes word `i mod 4`
    of the output, its top 24 bits scaled by 2⁻²⁴. The numbers do not
    depend on how the tensor is split, so a sharded run draws exactly what
    one device draws. Ops with the same seed and step draw the same
    numbers: give each its own seed.

    On a device's piece (after partitioning), `piece` holds the piece's
    index along each dim and `global_shape` the tensor's shape; without
    them the op draws for the whole tensor.

    ```mlir
    %u = nn.random_uniform step %step seed = 3 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins NN_ScalarIndexTensor:$step,
      Optional<1DTensorOf<[I64]>>:$piece, I64Attr:$seed,
      OptionalAttr<DenseI64ArrayAttr>:$global_shape);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    `step` $step (`piece` $piece^)? `seed` `=` $seed attr-dict `:`
    type($step) (`,` type($piece)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_DropoutOp : NN_ModelOp<"dropout", [NN_RandomOpInterface,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "inverted dropout with a counter-based mask";
  let description = [{
    `x / (1 - rate)` where the element's number from the generator (as
    nn.random_uniform with the same `seed`, `step` and shape draws it) is at
    least `rate`, else 0. The mask is not stored: the gradient is the
    dropout of the gradient with the same key, which draws the same mask
    again. Splitting and recomputation leave it unchanged, so `tessera
    verify` stays exact with dropout on.

    ```mlir
    %y = nn.dropout %x step %step rate = 0.1 seed = 7
        : tensor<4x8xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_ScalarIndexTensor:$step,
      Optional<1DTensorOf<[I64]>>:$piece, F32Attr:$rate, I64Attr:$seed,
      OptionalAttr<DenseI64ArrayAttr>:$global_shape);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `step` $step (`piece` $piece^)? `rate` `=` $rate `seed` `=` $seed
    attr-dict `:` type($result) `,` type($step) (`,` type($piece)^)?
  }];
  let hasVerifier = 1;
}

def NN_BroadcastOp : NN_ModelOp<"broadcast"> {
  let summary = "explicit broadcast to a larger shape";
  let description = [{
    Operand dimension `i` becomes result dimension `dims[i]` (increasing);
    it must have the result's size there or size 1 (then it is expanded). The
    other result dimensions are new.

    ```mlir
    // A bias over the last dim of [b, s, h].
    %b2 = nn.broadcast %b dims = [2] : tensor<64xf32> -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class NN_ReduceOp<string mnemonic, string what,
                  list<string> shardingMethods = []>
    : NN_ModelOp<mnemonic, [InferTypeOpAdaptor], [],
                 !listconcat(["getPaddingFill"], shardingMethods)> {
  let summary = what # " over the given dimensions";
  let description = [{
    Reduces `input` over `dims` (distinct, in range); the result keeps the
    other dimensions in order. Reducing every dimension gives a rank-0 tensor.

    ```mlir
    %s = nn.}] # mnemonic # [{ %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
}

def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum", "sum">;
def NN_ReduceMaxOp : NN_ReduceOp<"reduce_max", "maximum",
                                 ["getPartialCombiner"]>;
def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean", "mean",
                                  ["getPartialCombiner"]>;

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def NN_ReshapeOp : NN_ModelOp<"reshape", [], [],
                              ["isLinear", "keepsZeroPadding"]> {
  let summary = "row-major reshape to a shape with as many elements";
  let description = [{
    ```mlir
    // Split the hidden dim into heads.
    %q4 = nn.reshape %q : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_TransposeOp : NN_ModelOp<"transpose", [InferTypeOpAdaptor], [],
                                ["isLinear", "getDimPermutation",
                                 "keepsZeroPadding"]> {
  let summary = "permutation of the dimensions";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.

    ```mlir
    %t = nn.transpose %x permutation = [0, 2, 1, 3]
        : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasFolder = 1;
}

def NN_SliceOp : NN_ModelOp<"slice", [InferTypeOpAdaptor], [],
                            ["updateLocalAttributes", "getPaddingFill",
                             "pad"]> {
  let summary = "static slice with unit strides";
  let description = [{
    Takes elements `start[i] <= index < limit[i]` of each dimension.

    ```mlir
    %q = nn.slice %qkv start = [0, 0, 0] limit = [2, 8, 64]
        : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = [{
    $input `start` `=` $start `limit` `=` $limit attr-dict `:` type($input)
    `->` type($result)
  }];
  let hasFolder = 1;
}

def NN_ConcatOp : NN_ModelOp<"concat", [InferTypeOpAdaptor], [],
                             ["isLinear", "getPaddingFill", "pad"]> {
  let summary = "concatenation along one dimension";
  let description = [{
    ```mlir
    %c = nn.concat %a, %b dim = 1
        : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<4x24xf32>
    ```
  }];
  let arguments = (ins Variadic<NN_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Neural-network layers
//===----------------------------------------------------------------------===//

def NN_SoftmaxOp : NN_ModelOp<"softmax",
    [SameOperandsAndResultType, InferTypeOpInterface,
     DeclareOpInterfaceMethods<RowReductionOpInterface>,
     DeclareOpInterfaceMethods<SequenceOrderOpInterface,
                               ["dependsOnTokenOrder"]>],
    [], ["getPaddingFill"]> {
  let summary = "softmax along one dimension, optionally scaled and causal";
  let description = [{
    Computed stably (the maximum along `dim` is subtracted first), of the
    input times `scale`. With `causal`, `dim` is the last of scores
    `[..., query, key]` and every key after its query is given no weight,
    as nn.causal_mask with its -infinity fill would.

    The folder takes an f32 input multiplied by a splat constant into
    `scale` (in 16 bits the product rounds, so the multiply stays), and a
    causal mask into `causal`: attention that is not fused makes one pass
    over its scores instead of three.

    ```mlir
    %p = nn.softmax %s dim = 3 : tensor<2x4x8x8xf32>
    %q = nn.softmax %s dim = 3 scale = 0.125 causal = true
        : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$dim,
      DefaultValuedAttr<F32Attr, "1.0">:$scale,
      DefaultValuedAttr<BoolAttr, "false">:$causal);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dim (`scale` `=` $scale^)? (`causal` `=` $causal^)?
    attr-dict `:` type($result)
  }];
  let builders = [
    // A plain softmax: unscaled, every entry seen.
    OpBuilder<(ins "::mlir::Value":$input, "uint64_t":$dim), [{
      build($_builder, $_state, input, dim, llvm::APFloat(1.0f), false);
    }]>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_LogSoftmaxOp : NN_ModelOp<"log_softmax",
    [SameOperandsAndResultType, InferTypeOpInterface,
     DeclareOpInterfaceMethods<RowReductionOpInterface>],
    [], ["getPaddingFill"]> {
  let summary = "log of softmax along one dimension";
  let description = [{
    Computed stably (the maximum along `dim` is subtracted first).

    ```mlir
    %p = nn.log_softmax %s dim = 3 : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$dim);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_LayerNormOp : NN_ModelOp<"layer_norm", [InferTypeOpAdaptor]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta`, with the mean and the
    (biased) variance taken over the last dimension; `gamma` and `beta` have
    the size of that dimension.

    ```mlir
    %y = nn.layer_norm %x, %g, %b epsilon = 1.0e-05
        : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
      NN_FloatTensor:$beta, DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta (`epsilon` `=` $epsilon^)? attr-dict `:`
    type($input) `,` type($gamma) `,` type($beta)
  }];
}

def NN_RmsNormOp : NN_ModelOp<"rms_norm", [InferTypeOpAdaptor]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x²) + epsilon) * gamma` over the last dimension.

    ```mlir
    %y = nn.rms_norm %x, %g epsilon = 1.0e-06 : tensor<2x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
      DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma (`epsilon` `=` $epsilon^)? attr-dict `:` type($input) `,`
    type($gamma)
  }];
}

def NN_LayerNormGradOp : NN_ModelOp<"layer_norm_grad", [InferTypeOpAdaptor]> {
  let summary = "input gradient of layer normalization, fused";
  let description = [{
    For `y = nn.layer_norm x, gamma, beta` and the gradient `dy` of `y`,
    computes over the last dimension the input gradient
    `dx = rstd · (g - mean(g) - x̂ · mean(g · x̂))`, where `g = dy · gamma`,
    `x̂ = (x - mean(x)) · rstd` and `rstd = 1 / sqrt(var(x) + epsilon)`,
    and returns `x̂` too (the autodiff sums `dy · x̂` into gamma's gradient).
    One pass per row instead of a dozen elementwise ops and reductions.

    ```mlir
    %dx, %xhat = nn.layer_norm_grad %x, %g, %dy epsilon = 1.0e-05
        : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
      NN_FloatTensor:$result_grad,
      DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$normalized);
  let assemblyFormat = [{
    $input `,` $gamma `,` $result_grad (`epsilon` `=` $epsilon^)? attr-dict
    `:` type($input) `,` type($gamma) `,` type($result_grad)
  }];
}

def NN_RmsNormGradOp : NN_ModelOp<"rms_norm_grad", [InferTypeOpAdaptor]> {
  let summary = "input gradient of RMS normalization, fused";
  let description = [{
    For `y = nn.rms_norm x, gamma` and the gradient `dy` of `y`, computes
    over the last dimension `dx = r · (g - x̂ · mean(g · x̂))`, where
    `g = dy · gamma`, `x̂ = x · r` and `r = 1 / sqrt(mean(x²) + epsilon)`,
    and returns `x̂` too.

    ```mlir
    %dx, %xhat = nn.rms_norm_grad %x, %g, %dy epsilon = 1.0e-06
        : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$gamma,
      NN_FloatTensor:$result_grad,
      DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$normalized);
  let assemblyFormat = [{
    $input `,` $gamma `,` $result_grad (`epsilon` `=` $epsilon^)? attr-dict
    `:` type($input) `,` type($gamma) `,` type($result_grad)
  }];
}

def NN_EmbeddingOp : NN_ModelOp<"embedding", [
    DeclareOpInterfaceMethods<NN_OffsetOpInterface, ["getOffsetFactor"]>,
    InferTypeOpAdaptor], ["getBytesAccessed"], ["getPaddingFill"]> {
  let summary = "row lookup in an embedding table";
  let description = [{
    For a `[vocab, hidden]` table and integer indices of any shape, gives the
    rows of the indices: shape `indices ++ [hidden]`. An index outside
    `[0, vocab)` yields a zero row. The vocab factor is a reduction (a one-hot
    product), so a vocab-split table gives partial sums, as in Megatron-LM's
    vocab-parallel embedding: with `piece` (nn.OffsetOpInterface) a device's
    rows are the table's `piece × vocab` to `(piece + 1) × vocab`, each index
    looks up its row there or gives zeros, and the pieces' sum over the
    vocab's axes is the whole lookup.

    ```mlir
    %e = nn.embedding %wte, %tokens : tensor<512x64xf32>, tensor<2x8xi32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$table, NN_IndexTensor:$indices,
      Optional<1DTensorOf<[I64]>>:$piece);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices (`piece` $piece^)? attr-dict `:` type($table) `,`
    type($indices) (`,` type($piece)^)?
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$table,
                                 "::mlir::Value":$indices), [{
    build($_builder, $_state, table, indices, ::mlir::Value());
  }]>];
}

def NN_GatherOp : NN_ModelOp<"gather", [], [], ["getPaddingFill"]> {
  let summary = "elements picked along one axis by indices";
  let description = [{
    `result[..., j, ...] = input[..., indices[..., j, ...], ...]` with `j` at
    `axis` (as `torch.gather`): `indices` has the input's rank and its dims
    but at `axis`; the result has the shape of `indices`. An index outside
    `[0, input's axis size)` is a runtime error. The gradient is
    nn.scatter_add of the result's gradient.

    ```mlir
    %g = nn.gather %x, %idx axis = 1
        : (tensor<4x10xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IndexTensor:$indices,
      I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `axis` `=` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_ScatterAddOp : NN_ModelOp<"scatter_add", [], [], ["getPaddingFill"]> {
  let summary = "sums of elements sent along one axis by indices";
  let description = [{
    Zeros of the result's type, then
    `result[..., indices[..., j, ...], ...] += source[..., j, ...]` with `j`
    at `axis` (as `torch.Tensor.scatter_add_` into zeros): `indices` has the
    source's shape; the result has it too but at `axis`. An index outside
    `[0, result's axis size)` is a runtime error. The gradient of `source`
    is nn.gather of the result's gradient.

    ```mlir
    %s = nn.scatter_add %src, %idx axis = 1
        : (tensor<4x3xf32>, tensor<4x3xi64>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$source, NN_IndexTensor:$indices,
      I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $source `,` $indices `axis` `=` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_TopKOp : NN_ModelOp<"top_k", [], [], ["getPaddingFill"]> {
  let summary = "the k largest elements along the last dim, and where";
  let description = [{
    The `k` largest elements of each row (the last dim) in descending
    order, NaN above every number and ties by lower index, with their i64
    indices (as `torch.topk`). The gradient sends each value's gradient back
    to its index (nn.scatter_add).

    ```mlir
    %v, %i = nn.top_k %x k = 2 : tensor<4x10xf32> -> (tensor<4x2xf32>, tensor<4x2xi64>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$k);
  let results = (outs NN_FloatTensor:$values, NN_IndexTensor:$indices);
  let assemblyFormat = [{
    $input `k` `=` $k attr-dict `:` type($input) `->`
    `(` type($values) `,` type($indices) `)`
  }];
  let hasVerifier = 1;
}

def NN_MoeDispatchOp : NN_ModelOp<"moe_dispatch", [
    DeclareOpInterfaceMethods<SequenceOrderOpInterface,
                              ["dependsOnTokenOrder"]>], [], ["getPaddingFill"]> {
  let summary = "the expert slot each routed token takes, under a capacity";
  let description = [{
    GShard's dispatch mask (Lepikhin et al. 2020) for tokens routed to
    their top-k experts. `indices` [..., tokens, k] holds each token's k
    experts (as nn.top_k gives them); the result [..., tokens, experts,
    capacity] is 1 where a token takes a slot of an expert, else 0. Slots
    are taken in GShard's order of priority: every token's first choice in
    token order, then every token's second choice, and so on. A choice
    whose expert has no free slot left is dropped (its row is zero), as is
    an index outside `[0, experts)`. Each group (the leading dims) routes
    on its own, and the capacity is the result's last dim.

    Dispatch and combine are then dots with the mask: the experts' inputs
    `[g, e, c, h] = Σ_t mask[g, t, e, c] · x[g, t, h]`, and the layer's
    output `y[g, t, h] = Σ_e,c mask[g, t, e, c] · gate[g, t, e] ·
    out[g, e, c, h]`. The mask depends on indices only: it has no gradient;
    the gates carry the router's.

    ```mlir
    %m = nn.moe_dispatch %topk : tensor<2x16x2xi64> -> tensor<2x16x4x10xf32>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$indices);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $indices attr-dict `:` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_CrossEntropyOp : NN_ModelOp<"cross_entropy", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<RowReductionOpInterface>], [],
                                   ["getPaddingFill"]> {
  let summary = "softmax cross-entropy with integer labels";
  let description = [{
    Per position, `logsumexp(logits) - logits[label]` over the last dimension
    of `logits`; `labels` has the other dimensions of `logits`. The result has
    the shape of `labels`; reduce it (`nn.reduce_mean`) for a scalar loss.

    ```mlir
    %l = nn.cross_entropy %logits, %labels : tensor<2x8x512xf32>, tensor<2x8xi32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$labels);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels)
  }];
}

def NN_CausalMaskOp : NN_ModelOp<"causal_mask",
    [SameOperandsAndResultType, InferTypeOpInterface,
     DeclareOpInterfaceMethods<SequenceOrderOpInterface,
                               ["dependsOnTokenOrder"]>],
    [], ["getPaddingFill"]> {
  let summary = "masks attention scores of future positions";
  let description = [{
    For scores `[..., query, key]`, sets every entry with `key > query` to
    `fill`: by default -infinity, so that softmax gives it no weight. The
    gradient is the output gradient masked with `fill = 0`, so no mask of
    kept entries (as large as the scores) is stored for the backward.

    ```mlir
    %m = nn.causal_mask %s : tensor<2x4x8x8xf32>
    %g = nn.causal_mask %d fill = 0.0 : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
      DefaultValuedAttr<F32Attr,
                        "-std::numeric_limits<float>::infinity()">:$fill);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$input (`fill` `=` $fill^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def NN_AttentionOp : NN_ModelOp<"attention", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<NN_RandomOpInterface,
                              ["getDrawShape", "getDrawDims",
                               "getPositionedDims", "drawsNumbers"]>,
    DeclareOpInterfaceMethods<SequenceOrderOpInterface,
                              ["getSequenceOperands", "getSequenceResults",
                               "comparesPositions", "isRing",
                               "canStoreZigzag", "getZigzagOrder",
                               "setZigzagOrder"]>], [],
    ["partition", "getSubAxisGroups"]> {
  let summary = "fused scaled-dot-product attention";
  let description = [{
    `softmax(scale · q kᵀ) v` per batch and head, without the scores: the
    kernels walk the keys in tiles with an online softmax (FlashAttention,
    Dao et al. 2022), so the extra memory grows with the sequence, not its
    square. `q` is `[b, heads, s, d]`; `k` and `v` are `[b, kv_heads, t, d]`
    and `[b, kv_heads, t, dv]` with `kv_heads` dividing `heads`: query head
    `h` reads kv head `h / (heads / kv_heads)` (grouped-query attention;
    multi-head when they are equal). With `causal`, key `j` is hidden from
    query `i` when `j > i`, as nn.causal_mask does.

    Its gradient is one nn.attention_grad, which recomputes the scores from
    `q` and `k` tile by tile, so nothing of size s · t is kept for the
    backward.

    With `dropout` above 0, the probabilities `[b, heads, s, t]` are
    dropped as nn.dropout of them would (the same numbers: seed `seed`,
    step `step`, each probability's index in the global `[b, heads, s, t]`)
    after the softmax, and the kept ones scaled by `1 / (1 - dropout)`;
    `piece` and `global_shape` place a device's piece as on nn.dropout. The
    backward draws the same mask again.

    With `ring`, a sequence split over some axes is computed as a ring
    (ring attention, Liu et al. 2023): each device keeps its piece of the
    queries, and the keys and values pass around the ring of those axes by
    collective permutes, one nn.attention_block per step, combined by their
    log-sum-exps; the gradient passes the keys' and values' gradients
    around with them. Without, the keys and values are gathered whole.

    With `zigzag = n` above 0, the sequence (the queries' and the keys')
    is stored in zigzag order: as `2n` chunks, the stored chunks being the
    sequence's chunks 0, 2n - 1, 1, 2n - 2, ..., so that the causal mask
    compares the rows' positions, not their places. Split over a ring of
    `n` devices, each holds two opposite chunks and every ring step costs
    each device the same (Megatron-LM's causal load balance, which
    --tessera-zigzag-context sets). It is causal attention's, without
    dropout or a piece, on as many queries as keys.

    Sharding: the batch, the kv heads, `dv` and the query positions split
    freely; the keys and `d` are needed whole (the softmax and the scores
    read every one), and the query heads of one kv head stay together. A
    causal piece of the queries takes its `piece` (and `global_shape`) as a
    dropout does, without a `step` where it does not drop: its queries'
    positions start at `piece[2]` times its queries (context parallelism
    that gathers the keys and values, as Llama 3 trains).

    ```mlir
    // Causal GQA: 8 query heads on 2 kv heads.
    %o = nn.attention %q, %k, %v causal = true scale = 0.125
        : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
           tensor<2x2x16x64xf32>) -> tensor<2x8x16x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
      NN_FloatTensor:$value, Optional<NN_ScalarIndexTensor>:$step,
      Optional<1DTensorOf<[I64]>>:$piece,
      DefaultValuedAttr<BoolAttr, "false">:$causal, F32Attr:$scale,
      DefaultValuedAttr<F32Attr, "0.0f">:$dropout,
      DefaultValuedAttr<I64Attr, "0">:$seed,
      OptionalAttr<DenseI64ArrayAttr>:$global_shape,
      DefaultValuedAttr<BoolAttr, "false">:$ring,
      DefaultValuedAttr<I64Attr, "0">:$zigzag);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`step` $step^)? (`piece` $piece^)?
    (`causal` `=` $causal^)? `scale` `=` $scale (`dropout` `=` $dropout^)?
    (`seed` `=` $seed^)? (`ring` `=` $ring^)? (`zigzag` `=` $zigzag^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward helpers
//===----------------------------------------------------------------------===//

def NN_AttentionGradOp : NN_ModelOp<"attention_grad",
    [AttrSizedOperandSegments,
     DeclareOpInterfaceMethods<NN_RandomOpInterface,
                               ["getDrawShape", "getDrawDims",
                               "getPositionedDims", "drawsNumbers"]>], [],
    ["partition", "getSubAxisGroups"]> {
  let summary = "gradients of nn.attention, fused";
  let description = [{
    For `o = nn.attention q, k, v` and the gradient `do` of `o`, the
    gradients of `q`, `k` and `v`: each tile of scores is recomputed from
    `q` and `k` with the row's log-sum-exp (itself recomputed in a first
    pass), `dv += pᵀ do`, `ds = p · (do vᵀ - rowsum(do · o))`,
    `dq += scale · ds k`, `dk += scale · dsᵀ q`; a kv head's gradients sum
    over the query heads that read it. Memory beyond the operands and
    results grows with the sequence, not its square. With dropout (the
    forward's `step`, `piece`, `dropout`, `seed` and `global_shape`), each
    tile's mask is drawn again: `dv += (z p)ᵀ do` and
    `ds = p · (z · do vᵀ - rowsum(do · o))`, `z` the kept probabilities'
    scale (`1 / (1 - dropout)`, 0 where dropped).

    On a piece of the queries (placed as on nn.attention), `dq` is the
    piece's and `dk` and `dv` are partial sums over the pieces. `zigzag`
    is the forward's.

    ```mlir
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %do causal = true
        scale = 0.125
        : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
           tensor<2x2x16x64xf32>, tensor<2x8x16x64xf32>,
           tensor<2x8x16x64xf32>)
        -> (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
            tensor<2x2x16x64xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
      NN_FloatTensor:$value, NN_FloatTensor:$result,
      NN_FloatTensor:$result_grad, Optional<NN_ScalarIndexTensor>:$step,
      Optional<1DTensorOf<[I64]>>:$piece,
      DefaultValuedAttr<BoolAttr, "false">:$causal, F32Attr:$scale,
      DefaultValuedAttr<F32Attr, "0.0f">:$dropout,
      DefaultValuedAttr<I64Attr, "0">:$seed,
      OptionalAttr<DenseI64ArrayAttr>:$global_shape,
      DefaultValuedAttr<BoolAttr, "false">:$ring,
      DefaultValuedAttr<I64Attr, "0">:$zigzag);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
      NN_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result `,` $result_grad
    (`step` $step^)? (`piece` $piece^)? (`causal` `=` $causal^)?
    `scale` `=` $scale (`dropout` `=` $dropout^)? (`seed` `=` $seed^)?
    (`ring` `=` $ring^)? (`zigzag` `=` $zigzag^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_AttentionBlockOp : NN_ModelOp<"attention_block"> {
  let summary = "one block of ring attention, with its rows' log-sum-exp";
  let description = [{
    A device's queries against the keys and values of one device of a ring
    of `ring_size` (the partitioner's making, for an `nn.attention` with
    `ring` whose sequence is split): on ring step `ring_step`, the device at
    `index` in the ring holds the keys of the device at
    `(index - ring_step) mod ring_size`. Its queries' positions start at
    `index` times its queries and the keys' at that device's index times
    the keys; with `causal`, a key after its query is hidden. With
    `zigzag` above 0, the ring's sequence is stored in zigzag order
    (nn.attention's `zigzag`): the positions are those of the stored
    chunks each device holds, which must be whole.

    The results are the softmax-weighted sum of this block's values per
    query row, normalized over this block alone, and the row's log-sum-exp
    of its scores (-infinity, with a result of 0, for a row that sees no
    key of the block). Blocks combine by their log-sum-exps:
    `o = o1 exp(l1 - l) + o2 exp(l2 - l)`, `l = log(exp(l1) + exp(l2))`.

    ```mlir
    %o, %lse = nn.attention_block %q, %k, %v index %i causal = true
        scale = 0.25 ring_step = 1 ring_size = 2
        : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>,
           tensor<1xi64>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
      NN_FloatTensor:$value, 1DTensorOf<[I64]>:$index,
      DefaultValuedAttr<BoolAttr, "false">:$causal, F32Attr:$scale,
      I64Attr:$ring_step, I64Attr:$ring_size,
      DefaultValuedAttr<I64Attr, "0">:$zigzag);
  let results = (outs NN_FloatTensor:$result, F32Tensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value `index` $index (`causal` `=` $causal^)?
    `scale` `=` $scale `ring_step` `=` $ring_step `ring_size` `=` $ring_size
    (`zigzag` `=` $zigzag^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_AttentionBlockGradOp : NN_ModelOp<"attention_block_grad"> {
  let summary = "one block's terms of ring attention's gradients";
  let description = [{
    For the block nn.attention_block computes (the same operands and
    attributes), given the whole ring's output `result`, its gradient
    `result_grad` and each row's log-sum-exp over every block `lse`: this
    block's term of `dq`, and `dk` and `dv` of its keys and values, as
    nn.attention_grad computes them with the probabilities
    `exp(scale · q kᵀ - lse)`.

    ```mlir
    %dq, %dk, %dv = nn.attention_block_grad %q, %k, %v, %o, %do, %lse
        index %i causal = true scale = 0.25 ring_step = 1 ring_size = 2
        : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>,
           tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8xf32>,
           tensor<1xi64>)
        -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
      NN_FloatTensor:$value, NN_FloatTensor:$result,
      NN_FloatTensor:$result_grad, F32Tensor:$lse, 1DTensorOf<[I64]>:$index,
      DefaultValuedAttr<BoolAttr, "false">:$causal, F32Attr:$scale,
      I64Attr:$ring_step, I64Attr:$ring_size,
      DefaultValuedAttr<I64Attr, "0">:$zigzag);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
      NN_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result `,` $result_grad `,` $lse
    `index` $index (`causal` `=` $causal^)? `scale` `=` $scale
    `ring_step` `=` $ring_step `ring_size` `=` $ring_size
    (`zigzag` `=` $zigzag^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}


def NN_OneHotOp : NN_ModelOp<"one_hot", [
    DeclareOpInterfaceMethods<NN_OffsetOpInterface, ["getOffsetFactor"]>], [],
    ["getPaddingFill", "keepsZeroPadding"]> {
  let summary = "one-hot encoding of integer labels";
  let description = [{
    For labels of any shape gives `labels ++ [depth]` with 1 at each label
    and 0 elsewhere (all 0 for a label outside `[0, depth)`). The gradient of
    cross-entropy uses it. With `piece` (nn.OffsetOpInterface) the result
    is a device's piece of the classes, `piece × depth` to
    `(piece + 1) × depth`.

    ```mlir
    %h = nn.one_hot %labels : tensor<2x8xi32> -> tensor<2x8x512xf32>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$labels,
      Optional<1DTensorOf<[I64]>>:$piece);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $labels (`piece` $piece^)? attr-dict `:` type($labels)
    (`,` type($piece)^)? `->` type($result)
  }];
  let builders = [OpBuilder<(ins "::mlir::Type":$result,
                                 "::mlir::Value":$labels), [{
    build($_builder, $_state, result, labels, ::mlir::Value());
  }]>];
  let hasVerifier = 1;
}

def NN_EmbeddingGradOp : NN_ModelOp<"embedding_grad", [
    DeclareOpInterfaceMethods<NN_OffsetOpInterface, ["getOffsetFactor"]>,
    InferTypeOpAdaptor], [],
    ["updateLocalAttributes", "getPaddingFill", "pad"]> {
  let summary = "gradient of an embedding table: scatter-add of row gradients";
  let description = [{
    Sums the row gradients `grad` (shape `indices ++ [hidden]`) into a
    `[vocab, hidden]` table at their indices; indices outside `[0, vocab)`
    add nothing. With `piece` (nn.OffsetOpInterface) the result is a
    device's rows of the table, `piece × vocab` to `(piece + 1) × vocab`.

    ```mlir
    %d = nn.embedding_grad %dy, %tokens vocab = 512
        : tensor<2x8x64xf32>, tensor<2x8xi32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_IndexTensor:$indices,
      Optional<1DTensorOf<[I64]>>:$piece, I64Attr:$vocab);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices (`piece` $piece^)? `vocab` `=` $vocab attr-dict `:`
    type($grad) `,` type($indices) (`,` type($piece)^)?
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$grad,
                                 "::mlir::Value":$indices, "int64_t":$vocab), [{
    build($_builder, $_state, grad, indices, ::mlir::Value(), vocab);
  }]>];
}

//===----------------------------------------------------------------------===//
// Fused optimizer updates
//===----------------------------------------------------------------------===//

def NN_SgdOp : NN_ModelOp<"sgd", [InferTypeOpAdaptor,
    AllTypesMatch<["param", "grad"]>,
    DeclareOpInterfaceMethods<OptimizerOpInterface>]> {
  let summary = "stochastic gradient descent step";
  let description = [{
    `param - lr · (grad + weight_decay · param)`.

    ```mlir
    %p2 = nn.sgd %p, %g lr = 1.0e-01 : tensor<16x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$param, NN_FloatTensor:$grad, F32Attr:$lr,
      DefaultValuedAttr<F32Attr, "0.0">:$weight_decay);
  let results = (outs NN_FloatTensor:$new_param);
  let assemblyFormat = [{
    $param `,` $grad `lr` `=` $lr attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def NN_AdamWOp : NN_ModelOp<"adamw", [InferTypeOpAdaptor,
    AttrSizedOperandSegments, AllTypesMatch<["m", "v"]>,
    DeclareOpInterfaceMethods<OptimizerOpInterface>]> {
  let summary = "AdamW step with decoupled weight decay";
  let description = [{
    With `t = step` (counting from 1):
    ```
    m' = beta1 · m + (1 - beta1) · g
    v' = beta2 · v + (1 - beta2) · g²
    p' = p - lr(t) · (m' / (1 - beta1^t) / (sqrt(v' / (1 - beta2^t)) + epsilon)
                      + weight_decay · p)
    ```
    The moments may be wider than the parameter (f32 state for bf16 weights)
    but have its shape. The gradient has the parameter's type, or (a
    mixed-precision update of f32 master weights) its shape in a 16-bit
    float type, which the update reads as f32, as fused mixed-precision
    optimizers do.

    The learning rate follows `schedule` from the step counter, as
    Megatron-LM's: `lr · t / warmup_steps` for `t <= warmup_steps`, then
    from `lr` down to `min_lr` over the steps up to `decay_steps`
    (`linear`: in a straight line; `cosine`: along half a cosine), and
    `min_lr` after them; `constant` keeps `lr` after the warmup.

    With `grad_norm` (the global norm of every gradient of the step, see
    `--tessera-clip-gradients`), the update reads the gradient clipped to
    `max_grad_norm`, as PyTorch's `clip_grad_norm_`:
    `g · min(1, max_grad_norm / (grad_norm + 1e-6))` (`max_grad_norm = 0`:
    not clipped). A norm that is not finite (an inf or NaN in some
    gradient) leaves the parameter and moments as they are: the step is
    skipped.

    With `loss_scale` S (dynamic loss scaling, which needs `grad_norm`), the
    gradient and its norm are S times the true ones: the update reads g / S
    and clips by grad_norm / S, in f32.

    ```mlir
    %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %t lr = 1.0e-03
        : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64>
    %q2, %n2, %w2 = nn.adamw %q, %h, %n, %w, %t lr = 1.0e-03
        {schedule = 2 : i32, warmup_steps = 10 : i64, decay_steps = 100 : i64}
        : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64>
          grad tensor<16x64xbf16>
    %r2, %o2, %x2 = nn.adamw %r, %k, %o, %x, %t norm %norm lr = 1.0e-03
        {max_grad_norm = 1.0 : f32}
        : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64> norm tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$param, NN_FloatTensor:$grad,
      NN_FloatTensor:$m, NN_FloatTensor:$v, NN_ScalarIndexTensor:$step,
      Optional<0DTensorOf<[F32]>>:$grad_norm,
      Optional<0DTensorOf<[F32]>>:$loss_scale,
      F32Attr:$lr,
      DefaultValuedAttr<F32Attr, "0.9">:$beta1,
      DefaultValuedAttr<F32Attr, "0.999">:$beta2,
      DefaultValuedAttr<F32Attr, "1.0e-8">:$epsilon,
      DefaultValuedAttr<F32Attr, "0.01">:$weight_decay,
      DefaultValuedAttr<NN_LrSchedule, "LrSchedule::constant">:$schedule,
      DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
      DefaultValuedAttr<I64Attr, "0">:$decay_steps,
      DefaultValuedAttr<F32Attr, "0.0">:$min_lr,
      DefaultValuedAttr<F32Attr, "0.0">:$max_grad_norm);
  let results = (outs NN_FloatTensor:$new_param, NN_FloatTensor:$new_m,
                      NN_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $step (`norm` $grad_norm^)?
    (`scale` $loss_scale^)? `lr` `=` $lr attr-dict `:` type($param) `,`
    type($m) `,` type($step) custom<GradType>(type($grad), ref(type($param)))
    (`norm` type($grad_norm)^)? (`scale` type($loss_scale)^)?
  }];
  let hasVerifier = 1;
}

def NN_SumSquaresOp : NN_ModelOp<"sum_squares", [InferTypeOpAdaptor], [],
                                 ["reducesFlatPieces"]> {
  let summary = "the sum of the squares of every element, in f32";
  let description = [{
    `sum(x²)` over every element of `input`, accumulated in f32 or wider:
    a gradient's part of the global norm that gradient clipping scales by.
    Split over some axes, each device sums its piece and the partial sums
    are summed over those axes; a piece stored flat sums its elements (the
    padding is zeros).

    ```mlir
    %s = nn.sum_squares %g : tensor<16x64xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def NN_FusedOp : NN_Op<"fused", [Pure, IsolatedFromAbove,
    DeclareOpInterfaceMethods<CostOpInterface>]> {
  let summary = "elementwise ops fused into one pass over memory";
  let description = [{
    Elementwise ops that `--tessera-fuse-elementwise` grouped, as XLA's
    loop fusions and Inductor's pointwise kernels do: a backend computes
    each element of the results from the inputs' elements in one pass,
    never writing the body's other values to memory.

    The body's one block takes the inputs and yields the results, which all
    have one shape. Its ops are elementwise `nn` ops of that shape in f32,
    bf16, f16 or (comparisons, a select's condition) i1: the arithmetic and
    transcendental ops, `nn.clamp`, `nn.select`, `nn.compare`, `nn.cast`
    between float types, splat `nn.constant`s, and `nn.broadcast`s of block
    arguments (an input of another shape, read with a stride of 0 along the
    dims it is broadcast over). Each element is computed by the body's ops
    in order, each value rounded to its element type, so a fused program
    computes what its ops would one by one, bit for bit.

    ```mlir
    %y, %g = nn.fused(%x, %b) : (tensor<8x64xf32>, tensor<64xf32>)
        -> (tensor<8x64xf32>, tensor<8x64xf32>) {
    ^bb0(%x0: tensor<8x64xf32>, %b0: tensor<64xf32>):
      %0 = nn.broadcast %b0 dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
      %1 = nn.add %x0, %0 : tensor<8x64xf32>
      %2 = nn.gelu %1 : tensor<8x64xf32>
      nn.yield %1, %2 : tensor<8x64xf32>, tensor<8x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<NN_AnyTensor>:$inputs);
  let results = (outs Variadic<NN_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The shape of every result and every value the body computes.
    ::llvm::ArrayRef<int64_t> getShape() {
      return ::llvm::cast<::mlir::RankedTensorType>(getResult(0).getType())
          .getShape();
    }
  }];
}

def NN_YieldOp : NN_Op<"yield", [Pure, Terminator,
    HasParent<"FusedOp">]> {
  let summary = "the results of an nn.fused body";
  let arguments = (ins Variadic<NN_AnyTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // TESSERA_NN_OPS
