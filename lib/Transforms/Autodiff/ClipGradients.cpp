//===- ClipGradients.cpp - Global-norm clipping (--tessera-clip-gradients) ===//
//
// The global norm of every gradient the step's updates read, computed once
// and read by each update, which scales its gradient by it. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Autodiff/ClipGradients.h"
#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

namespace tessera {
#define GEN_PASS_DEF_CLIPGRADIENTSPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// Dynamic loss scaling's state arguments (nn::kLossScaleLog2Name, then
/// nn::kLossScaleGoodStepsName).
FailureOr<std::pair<BlockArgument, BlockArgument>>
getLossScaleState(func::FuncOp function) {
  BlockArgument log2, goodSteps;
  for (BlockArgument arg : function.getArguments())
    if (auto name = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                          nn::kStateAttrName)) {
      if (name.getValue() == nn::kLossScaleLog2Name)
        log2 = arg;
      if (name.getValue() == nn::kLossScaleGoodStepsName)
        goodSteps = arg;
    }
  if (!log2 || !goodSteps)
    return function.emitError("the updates scale the loss, but the step has "
                              "no loss-scale state (nn.state = \"")
           << nn::kLossScaleLog2Name << "\" and \""
           << nn::kLossScaleGoodStepsName << "\")";
  return std::make_pair(log2, goodSteps);
}

/// The loss scale's next state, as PyTorch's GradScaler: a norm that is not
/// finite (an overflow; the updates skip the step) halves the scale, and
/// `window` steps in a row without one double it.
template <typename AddResult>
void updateLossScale(OpBuilder &builder, Location loc, Value norm,
                     BlockArgument log2, BlockArgument goodSteps,
                     int64_t window, AddResult addResult) {
  auto scalar = cast<RankedTensorType>(log2.getType());
  auto constant = [&](double value) {
    return nn::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(
            scalar, builder.getF32FloatAttr(static_cast<float>(value))));
  };
  // NaN compares false, as +inf does.
  Value finite =
      nn::CompareOp::create(builder, loc, nn::ComparePredicate::lt, norm,
                            constant(std::numeric_limits<double>::infinity()));
  Value one = constant(1.0), zero = constant(0.0);
  Value counted = nn::AddOp::create(builder, loc, goodSteps, one);
  Value grow = nn::CompareOp::create(builder, loc, nn::ComparePredicate::ge,
                                     counted, constant(window));
  Value nextLog2 = nn::SelectOp::create(
      builder, loc, finite,
      nn::SelectOp::create(builder, loc, grow,
                           nn::AddOp::create(builder, loc, log2, one), log2),
      nn::SubOp::create(builder, loc, log2, one));
  Value nextGood = nn::SelectOp::create(
      builder, loc, finite,
      nn::SelectOp::create(builder, loc, grow, zero, counted), zero);
  auto updates = [&](BlockArgument arg) {
    return builder.getNamedAttr(nn::kUpdatesAttrName,
                                builder.getI64IntegerAttr(arg.getArgNumber()));
  };
  addResult(nextLog2, updates(log2));
  addResult(nextGood, updates(goodSteps));
}

LogicalResult clipGradients(func::FuncOp function, dist::MeshOp mesh,
                            double maxNorm, int64_t window) {
  SmallVector<nn::AdamWOp> updates;
  for (Operation &op : function.getBody().front()) {
    if (isa<nn::SgdOp>(op))
      return op.emitError("gradient clipping needs an AdamW train step "
                          "(--train adamw)");
    if (auto update = dyn_cast<nn::AdamWOp>(op)) {
      if (update.getGradNorm())
        return op.emitError("is clipped already: run --tessera-clip-gradients "
                            "once");
      updates.push_back(update);
    }
  }
  if (updates.empty())
    return function.emitError("gradient clipping needs a train step: run "
                              "--tessera-train-step first");
  Block &block = function.getBody().front();
  // The norm reads every gradient, so it comes after the last of them is
  // made, and the updates after it.
  Operation *last = nullptr;
  for (nn::AdamWOp update : updates)
    if (Operation *producer = update.getGrad().getDefiningOp())
      if (!last || last->isBeforeInBlock(producer))
        last = producer;
  OpBuilder builder(function.getContext());
  if (last)
    builder.setInsertionPointAfter(last);
  else
    builder.setInsertionPointToStart(&block);
  Location loc = function.getLoc();
  Value total;
  for (nn::AdamWOp update : updates) {
    Value gradient = update.getGrad();
    // One complete gradient for the norm and the update, unless ZeRO pinned
    // the one the update reads.
    if (mesh && !gradient.getDefiningOp<dist::ShardingConstraintOp>()) {
      auto type = cast<RankedTensorType>(gradient.getType());
      gradient = dist::ShardingConstraintOp::create(
          builder, update.getLoc(), gradient,
          TensorSharding::getOpen(type.getRank())
              .toAttr(FlatSymbolRefAttr::get(mesh.getSymNameAttr())));
      update.getGradMutable().assign(gradient);
    }
    Value squares =
        nn::SumSquaresOp::create(builder, update.getLoc(), gradient);
    total = total ? nn::AddOp::create(builder, loc, total, squares) : squares;
  }
  // Marked, so that the passes after this one (--tessera-pipeline) find the
  // norm by what it is rather than by its shape.
  auto normOp = nn::SqrtOp::create(builder, loc, total);
  normOp->setAttr(kGlobalNormAttrName, builder.getUnitAttr());
  Value norm = normOp;
  for (nn::AdamWOp update : updates) {
    if (update->isBeforeInBlock(norm.getDefiningOp()))
      update->moveAfter(norm.getDefiningOp());
    update.getGradNormMutable().assign(norm);
    update.setMaxGradNormAttr(builder.getF32FloatAttr(maxNorm));
  }
  auto returnOp = cast<func::ReturnOp>(block.getTerminator());
  SmallVector<Value> results(returnOp.getOperands());
  SmallVector<DictionaryAttr> attrs;
  function.getAllResultAttrs(attrs);
  // Where ZeRO packed units, each result records its index in the step as
  // written: the new ones' come after all of them.
  int64_t written = 0;
  bool recorded = false;
  for (DictionaryAttr dict : attrs) {
    auto members =
        dict ? dict.getAs<ArrayAttr>(dist::DistDialect::kMembersAttrName)
             : ArrayAttr();
    written += members ? members.size() : 1;
    recorded |=
        members || (dict && dict.get(dist::DistDialect::kSourceIndexAttrName));
  }
  auto addResult = [&](Value value, NamedAttribute attr) {
    SmallVector<NamedAttribute> list = {attr};
    if (recorded)
      list.push_back(
          builder.getNamedAttr(dist::DistDialect::kSourceIndexAttrName,
                               builder.getI64IntegerAttr(written++)));
    results.push_back(value);
    attrs.push_back(builder.getDictionaryAttr(list));
  };
  auto metric = [&](StringRef name) {
    return builder.getNamedAttr(nn::kMetricAttrName,
                                builder.getStringAttr(name));
  };

  // Dynamic loss scaling: the gradients are S times the true ones.
  Value scale = updates.front().getLossScale();
  if (llvm::any_of(updates, [&](nn::AdamWOp update) {
        return update.getLossScale() != scale;
      }))
    return updates.front().emitError("the updates read different loss scales");
  Value trueNorm = norm;
  if (scale) {
    FailureOr<std::pair<BlockArgument, BlockArgument>> state =
        getLossScaleState(function);
    if (failed(state))
      return failure();
    trueNorm = nn::DivOp::create(builder, loc, norm, scale);
    updateLossScale(builder, loc, norm, state->first, state->second, window,
                    addResult);
  }
  addResult(trueNorm, metric("grad_norm"));
  if (scale)
    addResult(scale, metric("loss_scale"));

  returnOp->setOperands(results);
  SmallVector<Type> types;
  for (Value value : results)
    types.push_back(value.getType());
  function.setType(builder.getFunctionType(function.getArgumentTypes(), types));
  function.setAllResultAttrs(attrs);
  return success();
}

struct ClipGradientsPass
    : tessera::impl::ClipGradientsPassBase<ClipGradientsPass> {
  using ClipGradientsPassBase::ClipGradientsPassBase;

  void runOnOperation() override {
    if (!(maxNorm >= 0) || window < 1) {
      getOperation().emitError("gradient clipping needs a max-norm of 0 (none) "
                               "or more and a loss-scale-window of 1 or more, "
                               "got ")
          << maxNorm.getValue() << " and " << window.getValue();
      return signalPassFailure();
    }
    auto meshes = llvm::to_vector(getOperation().getOps<dist::MeshOp>());
    dist::MeshOp mesh = meshes.empty() ? dist::MeshOp() : meshes.front();
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() &&
          failed(clipGradients(function, mesh, maxNorm, window)))
        return signalPassFailure();
  }
};

} // namespace
