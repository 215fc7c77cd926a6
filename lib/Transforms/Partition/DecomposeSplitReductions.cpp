//===- DecomposeSplitReductions.cpp - Row reductions on pieces ------------===//
//
// nn.softmax, nn.log_softmax and nn.cross_entropy reduce over a dim that
// their rules keep whole. Where propagation left that dim split (the vocab
// dim of a tied LM head's logits, split with the table), the partitioner
// would gather it. This pass rewrites each such op into the reductions and
// elementwise ops it is made of, each annotated with its propagated
// sharding, which partition on pieces: the row's max and its sum of
// exponentials all-reduced over the dim's axes and, for cross-entropy, the
// label's logit picked by a one-hot of the device's classes. That is
// Megatron-LM's vocab-parallel cross-entropy, and the backward's softmax
// gets the same. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/NN/IR/NNOps.h"

#include "mlir/IR/Builders.h"

namespace tessera {
#define GEN_PASS_DEF_DECOMPOSESPLITREDUCTIONSPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// Builds one op's decomposition, giving each new value its sharding.
class Decomposer {
public:
  Decomposer(Operation *op, FlatSymbolRefAttr mesh)
      : builder(op), loc(op->getLoc()), mesh(mesh) {}

  /// The input's dims' axes (`whole`), and those dims without the reduced
  /// one (`row`): the shardings of input-shaped and of reduced values.
  void setLayout(const TensorSharding &input, int64_t dim) {
    whole = TensorSharding::getReplicated(input.getRank());
    for (auto [index, sharding] : llvm::enumerate(input.dims))
      whole.dims[index].axes = sharding.axes;
    row = whole;
    row.dims.erase(row.dims.begin() + dim);
    reduced = dim;
  }

  Value annotate(Value value, const TensorSharding &sharding) {
    value.getDefiningOp()->setAttr(
        dist::DistDialect::kShardingAttrName,
        builder.getArrayAttr({sharding.toAttr(mesh)}));
    return value;
  }
  /// The max of `x` along the reduced dim, and `x` less it.
  Value shift(Value x) {
    Value max =
        annotate(nn::ReduceMaxOp::create(
                     builder, loc, x, builder.getDenseI64ArrayAttr({reduced})),
                 row);
    return annotate(nn::SubOp::create(builder, loc, x, expand(max, x)), whole);
  }
  Value exp(Value x) {
    return annotate(nn::ExpOp::create(builder, loc, x), whole);
  }
  Value log(Value x) {
    return annotate(nn::LogOp::create(builder, loc, x), row);
  }
  Value sum(Value x) {
    return annotate(
        nn::ReduceSumOp::create(builder, loc, x,
                                builder.getDenseI64ArrayAttr({reduced})),
        row);
  }
  /// A reduced value broadcast back to the shape of `like`.
  Value expand(Value x, Value like) {
    auto type = cast<RankedTensorType>(like.getType());
    SmallVector<int64_t> kept;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      if (dim != reduced)
        kept.push_back(dim);
    return annotate(nn::BroadcastOp::create(builder, loc, type, x,
                                            builder.getDenseI64ArrayAttr(kept)),
                    whole);
  }

  OpBuilder builder;
  Location loc;
  FlatSymbolRefAttr mesh;
  TensorSharding whole, row;
  int64_t reduced = 0;
};

/// The input and reduced dim of an op this pass decomposes; none for others
/// (a causal softmax masks by global positions, which pieces lack).
std::optional<std::pair<Value, int64_t>> getRowReduction(Operation *op) {
  if (auto softmax = dyn_cast<nn::SoftmaxOp>(op);
      softmax && !softmax.getCausal())
    return std::make_pair(softmax.getInput(),
                          static_cast<int64_t>(softmax.getDim()));
  if (auto log = dyn_cast<nn::LogSoftmaxOp>(op))
    return std::make_pair(log.getInput(), static_cast<int64_t>(log.getDim()));
  if (auto entropy = dyn_cast<nn::CrossEntropyOp>(op))
    return std::make_pair(entropy.getLogits(),
                          entropy.getLogits().getType().getRank() - 1);
  return std::nullopt;
}

void decompose(Operation *op, Value input, int64_t dim,
               const TensorSharding &sharding, FlatSymbolRefAttr mesh) {
  Decomposer d(op, mesh);
  d.setLayout(sharding, dim);
  // Narrow floats are reduced in f32, as the fused kernels accumulate and
  // Megatron-LM's cross-entropy computes: the pieces' sums travel in f32.
  auto inputType = cast<RankedTensorType>(input.getType());
  if (inputType.getElementType().getIntOrFloatBitWidth() < 32)
    input = d.annotate(
        nn::CastOp::create(d.builder, d.loc,
                           inputType.clone(d.builder.getF32Type()), input),
        d.whole);
  // softmax = e / sum(e), log_softmax = s - log(sum(e)), cross-entropy =
  // log(sum(e)) - s[label], with s = x - max(x) and e = exp(s); a scaled
  // softmax's x is its input times the scale.
  if (auto softmax = dyn_cast<nn::SoftmaxOp>(op);
      softmax && softmax.getScale().convertToDouble() != 1.0) {
    auto type = cast<RankedTensorType>(input.getType());
    Value scale =
        d.annotate(nn::ConstantOp::create(
                       d.builder, d.loc,
                       DenseElementsAttr::get(
                           type, d.builder.getFloatAttr(type.getElementType(),
                                                        softmax.getScale()))),
                   d.whole);
    input =
        d.annotate(nn::MulOp::create(d.builder, d.loc, input, scale), d.whole);
  }
  Value shifted = d.shift(input);
  Value exps = d.exp(shifted);
  Value total = d.sum(exps);
  Value result;
  if (isa<nn::SoftmaxOp>(op)) {
    result = nn::DivOp::create(d.builder, d.loc, exps, d.expand(total, input));
  } else if (isa<nn::LogSoftmaxOp>(op)) {
    result = nn::SubOp::create(d.builder, d.loc, shifted,
                               d.expand(d.log(total), input));
  } else {
    auto entropy = cast<nn::CrossEntropyOp>(op);
    Value hot =
        d.annotate(nn::OneHotOp::create(d.builder, d.loc, input.getType(),
                                        entropy.getLabels()),
                   d.whole);
    Value picked = d.sum(
        d.annotate(nn::MulOp::create(d.builder, d.loc, shifted, hot), d.whole));
    result = nn::SubOp::create(d.builder, d.loc, d.log(total), picked);
  }
  // The result, cast back to the op's type, keeps its propagated sharding.
  Attribute attr = op->getAttr(dist::DistDialect::kShardingAttrName);
  if (attr)
    result.getDefiningOp()->setAttr(dist::DistDialect::kShardingAttrName, attr);
  if (result.getType() != op->getResult(0).getType()) {
    result = nn::CastOp::create(d.builder, d.loc, op->getResult(0).getType(),
                                result);
    if (attr)
      result.getDefiningOp()->setAttr(dist::DistDialect::kShardingAttrName,
                                      attr);
  }
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
}

struct DecomposeSplitReductionsPass
    : tessera::impl::DecomposeSplitReductionsPassBase<
          DecomposeSplitReductionsPass> {
  void runOnOperation() override {
    if (failed(forEachMeshFunction(getOperation(), [&](func::FuncOp function,
                                                       dist::MeshOp mesh) {
          SmallVector<Operation *> ops;
          function.walk([&](Operation *op) {
            if (getRowReduction(op))
              ops.push_back(op);
          });
          MeshShape shape(mesh);
          for (Operation *op : ops) {
            auto [input, dim] = *getRowReduction(op);
            TensorSharding sharding = getPropagatedSharding(function, input);
            // Axes of one device (an annotation for a mesh resized to
            // them) split nothing.
            if (shape.getGroupSize(sharding.dims[dim].axes) == 1)
              continue;
            decompose(op, input, dim, sharding,
                      FlatSymbolRefAttr::get(mesh.getSymNameAttr()));
          }
          return success();
        })))
      signalPassFailure();
  }
};

} // namespace
