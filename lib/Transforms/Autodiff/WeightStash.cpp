//===- WeightStash.cpp - PipeDream-2BW's weight versions ------------------===//
//
// --tessera-weight-stash: a train step whose forward and backward read the
// weights of the step before, W(t+1) = W(t) - lr * grad f(W(t-1)), so that a
// pipeline without a flush between steps computes what it computes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/OptimizerOpInterface.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_WEIGHTSTASHPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// Stashes the parameters that `function`'s updates write.
LogicalResult stashWeights(func::FuncOp function) {
  MLIRContext *context = function.getContext();
  for (BlockArgument arg : function.getArguments())
    if (function.getArgAttr(arg.getArgNumber(), nn::kVersionOfAttrName))
      return function.emitError("the train step already stashes its weights");
  // The updates, in program order, each of its own parameter argument.
  SmallVector<std::pair<OptimizerOpInterface, BlockArgument>> updates;
  llvm::SmallDenseSet<BlockArgument> updated;
  WalkResult walked = function.walk([&](OptimizerOpInterface op) {
    auto param = dyn_cast<BlockArgument>(op.getParameter());
    if (!param ||
        !function.getArgAttr(param.getArgNumber(), nn::kParamAttrName)) {
      op->emitError("weight stashing keeps versions of parameters that are "
                    "arguments of the step ('nn.param')");
      return WalkResult::interrupt();
    }
    if (!updated.insert(param).second) {
      op->emitError("parameter '")
          << function
                 .getArgAttrOfType<StringAttr>(param.getArgNumber(),
                                               nn::kParamAttrName)
                 .getValue()
          << "' is updated twice";
      return WalkResult::interrupt();
    }
    updates.emplace_back(op, param);
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();
  if (updates.empty())
    return success();

  auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
  SmallVector<Value> results(returnOp.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  function.getAllResultAttrs(resultAttrs);
  for (auto [op, param] : updates) {
    StringAttr name = function.getArgAttrOfType<StringAttr>(
        param.getArgNumber(), nn::kParamAttrName);
    // The stash is held as its parameter is: its sharding carries over.
    NamedAttrList attrs;
    if (Attribute sharding = function.getArgAttr(
            param.getArgNumber(), dist::DistDialect::kShardingAttrName))
      attrs.append(dist::DistDialect::kShardingAttrName, sharding);
    attrs.append(nn::kStateAttrName,
                 StringAttr::get(context, name.getValue() + ".stash"));
    attrs.append(nn::kVersionOfAttrName, name);
    unsigned index = function.getNumArguments();
    if (failed(function.insertArgument(index, param.getType(),
                                       attrs.getDictionary(context),
                                       param.getLoc())))
      return failure();
    BlockArgument stash = function.getArgument(index);
    Operation *update = op;
    param.replaceUsesWithIf(stash, [&](OpOperand &use) {
      return use.getOwner() != update && use.getOwner() != returnOp;
    });
    // The next step's stash is this step's parameter.
    results.push_back(param);
    resultAttrs.push_back(DictionaryAttr::get(
        context, {NamedAttribute(
                     StringAttr::get(context, nn::kUpdatesAttrName),
                     IntegerAttr::get(IntegerType::get(context, 64), index))}));
  }
  returnOp->setOperands(results);
  function.setType(FunctionType::get(context, function.getArgumentTypes(),
                                     TypeRange(ValueRange(results))));
  function.setAllResultAttrs(resultAttrs);
  return success();
}

struct WeightStashPass : tessera::impl::WeightStashPassBase<WeightStashPass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && failed(stashWeights(function)))
        return signalPassFailure();
  }
};

} // namespace
