//===- NNDecompositions.cpp - Row reductions as the ops they are made of --===//
//
// nn.softmax, nn.log_softmax and nn.cross_entropy need whole rows, but are
// made of reductions and elementwise ops that compute on pieces of a row
// (RowReductionOpInterface): each builds them here, with the layout of
// every value they build handed to the caller, which owns the sharding, so
// that nn needs neither dist nor the sharding analysis.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

namespace {

/// Builds one row reduction's decomposition at the builder's point, handing
/// each value built to `annotate` with its layout: softmax = e / sum(e),
/// log_softmax = s - log(sum(e)), cross-entropy = log(sum(e)) - s[label],
/// with s = x - max(x) and e = exp(s).
class RowDecomposer {
public:
  RowDecomposer(RowReductionOpInterface op, OpBuilder &builder,
                function_ref<void(Value, RowLayout)> annotate)
      : op(op), builder(builder), loc(op->getLoc()), annotate(annotate) {
    std::optional<RowReduction> reduction = op.getRowReduction();
    assert(reduction && "decomposing an op that has no row reduction");
    reduced = reduction->dim;
  }

  /// `value`, handed to `annotate` with its layout.
  Value annotated(Value value, RowLayout layout) {
    annotate(value, layout);
    return value;
  }

  /// `x` in f32 where it is narrower: narrow floats are reduced in f32, as
  /// the fused kernels accumulate and Megatron-LM's cross-entropy computes,
  /// so that the pieces' sums travel in f32.
  Value widen(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    if (type.getElementType().getIntOrFloatBitWidth() >= 32)
      return x;
    return annotated(
        CastOp::create(builder, loc, type.clone(builder.getF32Type()), x),
        RowLayout::Input);
  }
  /// `x` times `scale` (a scaled softmax's x).
  Value scale(Value x, const APFloat &scale) {
    auto type = cast<RankedTensorType>(x.getType());
    Value splat = annotated(
        ConstantOp::create(
            builder, loc,
            DenseElementsAttr::get(
                type, builder.getFloatAttr(type.getElementType(), scale))),
        RowLayout::Input);
    return annotated(MulOp::create(builder, loc, x, splat), RowLayout::Input);
  }

  /// s, e and sum(e) of a row reduction's input.
  struct Exponentials {
    Value shifted, exps, total;
  };
  Exponentials exponentiate(Value x) {
    Value shifted = shift(x);
    Value exps =
        annotated(ExpOp::create(builder, loc, shifted), RowLayout::Input);
    return {shifted, exps, sum(exps)};
  }

  Value log(Value x) {
    return annotated(LogOp::create(builder, loc, x), RowLayout::Row);
  }
  Value sum(Value x) {
    return annotated(
        ReduceSumOp::create(builder, loc, x,
                            builder.getDenseI64ArrayAttr({reduced})),
        RowLayout::Row);
  }
  /// A reduced value broadcast back to the shape of `like`.
  Value expand(Value x, Value like) {
    auto type = cast<RankedTensorType>(like.getType());
    SmallVector<int64_t> kept;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      if (dim != reduced)
        kept.push_back(dim);
    return annotated(BroadcastOp::create(builder, loc, type, x,
                                         builder.getDenseI64ArrayAttr(kept)),
                     RowLayout::Input);
  }

  /// `result` laid out as the op's result, cast back to the result's type.
  Value finish(Value result) {
    annotate(result, RowLayout::Result);
    Type type = op->getResult(0).getType();
    if (result.getType() == type)
      return result;
    return annotated(CastOp::create(builder, loc, type, result),
                     RowLayout::Result);
  }

private:
  /// `x` less its max along the reduced dim.
  Value shift(Value x) {
    Value max =
        annotated(ReduceMaxOp::create(builder, loc, x,
                                      builder.getDenseI64ArrayAttr({reduced})),
                  RowLayout::Row);
    return annotated(SubOp::create(builder, loc, x, expand(max, x)),
                     RowLayout::Input);
  }

  Operation *op;
  OpBuilder &builder;
  Location loc;
  function_ref<void(Value, RowLayout)> annotate;
  /// The reduced dim.
  int64_t reduced = 0;
};

} // namespace

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

std::optional<RowReduction> SoftmaxOp::getRowReduction() {
  // A causal softmax masks keys by their global positions, which a piece of
  // the row does not know.
  if (getCausal())
    return std::nullopt;
  return RowReduction{getInput(), static_cast<int64_t>(getDim())};
}

Value SoftmaxOp::decomposeRowReduction(
    OpBuilder &builder, function_ref<void(Value, RowLayout)> annotate) {
  RowDecomposer d(*this, builder, annotate);
  Value input = d.widen(getInput());
  if (getScale().convertToDouble() != 1.0)
    input = d.scale(input, getScale());
  auto [shifted, exps, total] = d.exponentiate(input);
  return d.finish(
      DivOp::create(builder, getLoc(), exps, d.expand(total, input)));
}

//===----------------------------------------------------------------------===//
// LogSoftmaxOp
//===----------------------------------------------------------------------===//

std::optional<RowReduction> LogSoftmaxOp::getRowReduction() {
  return RowReduction{getInput(), static_cast<int64_t>(getDim())};
}

Value LogSoftmaxOp::decomposeRowReduction(
    OpBuilder &builder, function_ref<void(Value, RowLayout)> annotate) {
  RowDecomposer d(*this, builder, annotate);
  Value input = d.widen(getInput());
  auto [shifted, exps, total] = d.exponentiate(input);
  return d.finish(
      SubOp::create(builder, getLoc(), shifted, d.expand(d.log(total), input)));
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

std::optional<RowReduction> CrossEntropyOp::getRowReduction() {
  return RowReduction{getLogits(), getLogits().getType().getRank() - 1};
}

Value CrossEntropyOp::decomposeRowReduction(
    OpBuilder &builder, function_ref<void(Value, RowLayout)> annotate) {
  RowDecomposer d(*this, builder, annotate);
  Value input = d.widen(getLogits());
  auto [shifted, exps, total] = d.exponentiate(input);
  // The label's entry of s, picked by a one-hot of the labels: on a piece
  // of the classes, the one-hot covers the piece's.
  Value hot = d.annotated(
      OneHotOp::create(builder, getLoc(), input.getType(), getLabels()),
      RowLayout::Input);
  Value picked = d.sum(d.annotated(
      MulOp::create(builder, getLoc(), shifted, hot), RowLayout::Input));
  return d.finish(SubOp::create(builder, getLoc(), d.log(total), picked));
}
