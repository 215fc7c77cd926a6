//===- ClipGradients.cpp - Global-norm clipping (--tessera-clip-gradients) ===//
//
// The global norm of every gradient the step's updates read, computed once
// and read by each update, which scales its gradient by it. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_CLIPGRADIENTSPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

LogicalResult clipGradients(func::FuncOp function, dist::MeshOp mesh,
                            double maxNorm) {
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
  Value norm = nn::SqrtOp::create(builder, loc, total);
  for (nn::AdamWOp update : updates) {
    if (update->isBeforeInBlock(norm.getDefiningOp()))
      update->moveAfter(norm.getDefiningOp());
    update.getGradNormMutable().assign(norm);
    update.setMaxGradNormAttr(builder.getF32FloatAttr(maxNorm));
  }
  // The norm is returned after the loss.
  auto returnOp = cast<func::ReturnOp>(block.getTerminator());
  SmallVector<Value> results(returnOp.getOperands());
  results.push_back(norm);
  SmallVector<DictionaryAttr> attrs;
  function.getAllResultAttrs(attrs);
  // Where ZeRO packed units, each result records its index in the step as
  // written: the norm's is after all of them.
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
  SmallVector<NamedAttribute> normAttrs = {builder.getNamedAttr(
      nn::kMetricAttrName, builder.getStringAttr("grad_norm"))};
  if (recorded)
    normAttrs.push_back(
        builder.getNamedAttr(dist::DistDialect::kSourceIndexAttrName,
                             builder.getI64IntegerAttr(written)));
  attrs.push_back(builder.getDictionaryAttr(normAttrs));
  returnOp->setOperands(results);
  SmallVector<Type> types(function.getResultTypes());
  types.push_back(norm.getType());
  function.setType(builder.getFunctionType(function.getArgumentTypes(), types));
  function.setAllResultAttrs(attrs);
  return success();
}

struct ClipGradientsPass
    : tessera::impl::ClipGradientsPassBase<ClipGradientsPass> {
  using ClipGradientsPassBase::ClipGradientsPassBase;

  void runOnOperation() override {
    if (!(maxNorm > 0)) {
      getOperation().emitError("gradient clipping needs a positive max-norm, "
                               "got ")
          << maxNorm.getValue();
      return signalPassFailure();
    }
    auto meshes = llvm::to_vector(getOperation().getOps<dist::MeshOp>());
    dist::MeshOp mesh = meshes.empty() ? dist::MeshOp() : meshes.front();
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() &&
          failed(clipGradients(function, mesh, maxNorm)))
        return signalPassFailure();
  }
};

} // namespace
