//===- WeightStash.cpp - PipeDream-2BW's weight versions ------------------===//
//
// --tessera-weight-stash: a train step whose forward and backward read the
// weights of the step before, W(t+1) = W(t) - lr * grad f(W(t-1)), so that a
// pipeline without a flush between steps computes what it computes; with
// delays per parameter, PipeDream's W(t+1) = W(t) - lr * grad f(W(t-d)).
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

/// Stashes the parameters that `function`'s updates write, each read as it
/// was `getDelay(name)` steps before.
LogicalResult stashWeights(func::FuncOp function,
                           function_ref<int64_t(StringRef)> getDelay) {
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
    int64_t delay = getDelay(name.getValue());
    if (delay == 0)
      continue;
    // The stashes are held as their parameter is: its sharding carries over.
    // Stash k holds the parameter of k steps before; the last is read.
    Value previous = param;
    BlockArgument stash;
    for (int64_t k = 1; k <= delay; ++k) {
      NamedAttrList attrs;
      if (Attribute sharding = function.getArgAttr(
              param.getArgNumber(), dist::DistDialect::kShardingAttrName))
        attrs.append(dist::DistDialect::kShardingAttrName, sharding);
      std::string stashName = (name.getValue() + ".stash").str();
      if (k < delay)
        stashName += "." + std::to_string(k);
      attrs.append(nn::kStateAttrName, StringAttr::get(context, stashName));
      attrs.append(nn::kVersionOfAttrName, name);
      unsigned index = function.getNumArguments();
      if (failed(function.insertArgument(index, param.getType(),
                                         attrs.getDictionary(context),
                                         param.getLoc())))
        return failure();
      stash = function.getArgument(index);
      // The next step's stash k is this step's stash k - 1 (the parameter
      // for the first).
      results.push_back(previous);
      resultAttrs.push_back(DictionaryAttr::get(
          context,
          {NamedAttribute(
              StringAttr::get(context, nn::kUpdatesAttrName),
              IntegerAttr::get(IntegerType::get(context, 64), index))}));
      previous = stash;
    }
    Operation *update = op;
    param.replaceUsesWithIf(stash, [&](OpOperand &use) {
      return use.getOwner() != update && use.getOwner() != returnOp;
    });
  }
  returnOp->setOperands(results);
  function.setType(FunctionType::get(context, function.getArgumentTypes(),
                                     TypeRange(ValueRange(results))));
  function.setAllResultAttrs(resultAttrs);
  return success();
}

struct WeightStashPass : tessera::impl::WeightStashPassBase<WeightStashPass> {
  using WeightStashPassBase::WeightStashPassBase;

  void runOnOperation() override {
    llvm::StringMap<int64_t> delayOf;
    for (StringRef entry : delays) {
      auto [name, count] = entry.rsplit(':');
      int64_t delay;
      // (A delay is a pipeline rank's lag: less than the ranks a mesh has.)
      if (name.empty() || count.getAsInteger(10, delay) || delay < 0 ||
          delay >= dist::kMaxDevices ||
          !delayOf.try_emplace(name, delay).second) {
        getOperation().emitError("--tessera-weight-stash expects delays as "
                                 "name:d with 0 <= d < 2^20, each name once, "
                                 "got '")
            << entry << "'";
        return signalPassFailure();
      }
    }
    // Without delays every parameter is read as of the step before (2BW);
    // with them, a parameter they do not name as is.
    auto getDelay = [&](StringRef name) -> int64_t {
      if (delays.empty())
        return 1;
      return delayOf.lookup(name);
    };
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && failed(stashWeights(function, getDelay)))
        return signalPassFailure();
  }
};

} // namespace
