//===- ParameterServer.cpp - A train step's worker or server program ------===//
//
// --tessera-parameter-server: keeps the workers' side (forward and backward,
// returning the loss and the gradients as unreduced partial sums) or the
// servers' side (the optimizer updates, on a mesh of servers) of a
// data-parallel train step.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/OptimizerOpInterface.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/BitVector.h"

namespace tessera {
#define GEN_PASS_DEF_PARAMETERSERVERPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-parameter-server"

using namespace mlir;
using namespace tessera;

namespace {

/// The servers' mesh axis.
constexpr StringLiteral kServerAxis = "ps";

/// One update of the step: the parameter's argument and its name.
struct Update {
  OptimizerOpInterface op;
  BlockArgument param;
  StringAttr name;
};

/// The step's updates, each of a parameter argument, reading nothing beyond
/// its parameter, gradient, state and the step counter: a global gradient
/// norm or loss scale reads every gradient, which no server holds.
FailureOr<SmallVector<Update>> getUpdates(func::FuncOp function) {
  SmallVector<Update> updates;
  WalkResult walked = function.walk([&](OptimizerOpInterface op) {
    auto param = dyn_cast<BlockArgument>(op.getParameter());
    StringAttr name = param ? function.getArgAttrOfType<StringAttr>(
                                  param.getArgNumber(), nn::kParamAttrName)
                            : StringAttr();
    if (!name) {
      op->emitError("parameter-server training updates parameters that are "
                    "arguments of the step ('nn.param')");
      return WalkResult::interrupt();
    }
    SmallVector<Value> state = op.getState();
    for (OpOperand &operand : op->getOpOperands()) {
      Value value = operand.get();
      auto arg = dyn_cast<BlockArgument>(value);
      auto stateName = arg ? function.getArgAttrOfType<StringAttr>(
                                 arg.getArgNumber(), nn::kStateAttrName)
                           : StringAttr();
      if (value == op.getParameter() || &operand == &op.getGradientOperand() ||
          llvm::is_contained(state, value) ||
          (stateName && stateName.getValue() == "step"))
        continue;
      op->emitError("parameter-server training cannot split an update that "
                    "reads operand #")
          << operand.getOperandNumber()
          << " beyond its parameter, gradient, state and step (a global "
             "gradient norm or loss scale reads every gradient, which no "
             "server holds: drop --clip-grad and --loss-scale)";
      return WalkResult::interrupt();
    }
    updates.push_back({op, param, name});
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();
  if (updates.empty())
    return function.emitError("parameter-server training splits a train "
                              "step, but this function updates no parameter "
                              "(compile it with --train)");
  return updates;
}

/// Erases the ops whose results nothing reads, last first.
void eraseDeadOps(func::FuncOp function) {
  for (Operation &op : llvm::make_early_inc_range(
           llvm::reverse(function.getBody().front().getOperations())))
    if (isOpTriviallyDead(&op))
      op.erase();
}

/// Marks every argument with its index in the step, where none says so yet:
/// a run generates an argument's values by that index.
void markSourceIndices(func::FuncOp function) {
  StringRef name = dist::DistDialect::kSourceIndexAttrName;
  Builder builder(function.getContext());
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    if (!function.getArgAttr(i, name))
      function.setArgAttr(i, name, builder.getI64IntegerAttr(i));
}

/// Erases the arguments that `erase` marks, and renumbers the results'
/// `nn.updates` to the arguments left.
LogicalResult eraseArguments(func::FuncOp function,
                             const llvm::BitVector &erase) {
  SmallVector<int64_t> newIndex(function.getNumArguments(), -1);
  int64_t next = 0;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    if (!erase.test(i)) {
      newIndex[i] = next++;
      continue;
    }
    if (!function.getArgument(i).use_empty())
      return function.emitError("parameter-server training: argument #")
             << i << " is still read after the split";
  }
  Builder builder(function.getContext());
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    if (auto updates =
            function.getResultAttrOfType<IntegerAttr>(i, nn::kUpdatesAttrName))
      function.setResultAttr(
          i, nn::kUpdatesAttrName,
          builder.getI64IntegerAttr(newIndex[updates.getInt()]));
  if (failed(function.eraseArguments(erase)))
    return failure();
  return success();
}

/// The sharding of a value of `type` on `mesh`: replicated, with pending
/// sums over `unreduced`, or split over `split` at `splitDim`.
dist::ShardingAttr getSharding(RankedTensorType type, FlatSymbolRefAttr mesh,
                               ArrayRef<StringAttr> unreduced,
                               ArrayRef<StringAttr> split = {},
                               int64_t splitDim = -1) {
  MLIRContext *context = mesh.getContext();
  SmallVector<dist::DimShardingAttr> dims;
  for (int64_t dim = 0; dim < type.getRank(); ++dim)
    dims.push_back(dist::DimShardingAttr::get(
        context, dim == splitDim ? split : ArrayRef<StringAttr>(),
        /*isOpen=*/false, std::nullopt));
  return dist::ShardingAttr::get(context, mesh, dims, {}, unreduced, {});
}

struct ParameterServerPass
    : tessera::impl::ParameterServerPassBase<ParameterServerPass> {
  using ParameterServerPassBase::ParameterServerPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (servers < 1) {
      module.emitError("expects 1 or more servers, got ") << servers.getValue();
      return signalPassFailure();
    }
    auto functions = llvm::to_vector(llvm::make_filter_range(
        module.getOps<func::FuncOp>(),
        [](func::FuncOp function) { return !function.isExternal(); }));
    if (functions.size() != 1) {
      module.emitError("parameter-server training splits one train step, "
                       "got ")
          << functions.size() << " functions";
      return signalPassFailure();
    }
    func::FuncOp function = functions.front();
    FailureOr<SmallVector<Update>> updates = getUpdates(function);
    if (failed(updates) ||
        failed(part == ServerPart::Worker ? makeWorker(function, *updates)
                                          : makeServer(function, *updates)))
      return signalPassFailure();
  }

  /// The forward and backward: the loss and the gradients, unreduced over
  /// the data axes.
  LogicalResult makeWorker(func::FuncOp function,
                           MutableArrayRef<Update> updates) {
    StringRef attrName = dist::DistDialect::kShardingAttrName;
    FailureOr<dist::MeshOp> mesh = getFunctionMesh(function);
    if (failed(mesh))
      return failure();
    // Every worker holds whole parameters; the axes that split the data are
    // the workers.
    SmallVector<StringAttr> dataAxes;
    if (*mesh)
      for (auto [name, size] :
           llvm::zip((*mesh).getAxisNames(), (*mesh).getShape()))
        if (size > 1)
          dataAxes.push_back(cast<StringAttr>(name));
    for (Update &update : updates) {
      auto sharding = function.getArgAttrOfType<dist::ShardingAttr>(
          update.param.getArgNumber(), attrName);
      if (!sharding)
        continue;
      for (StringAttr axis : sharding.getAllAxes())
        if (llvm::is_contained(dataAxes, axis))
          return function.emitError("parameter-server workers hold whole "
                                    "parameters, but parameter '")
                 << update.name.getValue() << "' is split over \""
                 << axis.getValue()
                 << "\" (the workers are the data-parallel replicas: give "
                    "the mesh only data axes)";
    }
    markSourceIndices(function);

    // The loss (and whatever else updates nothing), then the gradients.
    auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
    OpBuilder builder(returnOp);
    FlatSymbolRefAttr meshName =
        *mesh ? FlatSymbolRefAttr::get((*mesh).getSymNameAttr())
              : FlatSymbolRefAttr();
    // Pinned as partial sums over the workers: no collective.
    auto pin = [&](Value value) -> Value {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!meshName || !type)
        return value;
      return dist::ShardingConstraintOp::create(
          builder, value.getLoc(), value,
          getSharding(type, meshName, dataAxes));
    };
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
      if (function.getResultAttr(index, nn::kUpdatesAttrName))
        continue;
      results.push_back(pin(value));
      resultAttrs.push_back(function.getResultAttrDict(index));
    }
    for (Update &update : updates) {
      results.push_back(pin(update.op.getGradient()));
      resultAttrs.push_back(builder.getDictionaryAttr(
          builder.getNamedAttr(nn::kGradOfAttrName, update.name)));
    }
    func::ReturnOp::create(builder, returnOp.getLoc(), results);
    returnOp.erase();
    for (Update &update : updates)
      update.op->erase();
    eraseDeadOps(function);
    function.setType(FunctionType::get(function.getContext(),
                                       function.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
    function.setAllResultAttrs(resultAttrs);
    // Set after the attributes: the constraints pin the results.
    for (unsigned i = 0; i < function.getNumResults(); ++i)
      if (auto type = dyn_cast<RankedTensorType>(function.getResultTypes()[i]);
          type && meshName)
        function.setResultAttr(i, attrName,
                               getSharding(type, meshName, dataAxes));

    // The optimizer state is the servers', and so is the step counter
    // unless the forward draws random numbers by it.
    llvm::BitVector erase(function.getNumArguments());
    for (unsigned i = 0; i < function.getNumArguments(); ++i)
      if (function.getArgAttr(i, nn::kStateAttrName) &&
          function.getArgument(i).use_empty())
        erase.set(i);
    return eraseArguments(function, erase);
  }

  /// The updates, each reading its gradient from an argument, on a mesh of
  /// servers.
  LogicalResult makeServer(func::FuncOp function,
                           MutableArrayRef<Update> updates) {
    MLIRContext *context = function.getContext();
    StringRef attrName = dist::DistDialect::kShardingAttrName;
    markSourceIndices(function);
    Builder builder(context);
    for (Update &update : updates) {
      Value gradient = update.op.getGradient();
      unsigned index = function.getNumArguments();
      if (failed(function.insertArgument(
              index, gradient.getType(),
              builder.getDictionaryAttr(
                  builder.getNamedAttr(nn::kGradOfAttrName, update.name)),
              gradient.getLoc())))
        return failure();
      update.op.getGradientOperand().set(function.getArgument(index));
    }
    // The new parameters and state alone.
    auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
      if (!function.getResultAttr(index, nn::kUpdatesAttrName))
        continue;
      results.push_back(value);
      resultAttrs.push_back(function.getResultAttrDict(index));
    }
    OpBuilder atReturn(returnOp);
    func::ReturnOp::create(atReturn, returnOp.getLoc(), results);
    returnOp.erase();
    // Constraints of the forward go with it; none pins an update's values.
    function.walk([&](dist::ShardingConstraintOp constraint) {
      constraint.replaceAllUsesWith(constraint.getInput());
      constraint.erase();
    });
    eraseDeadOps(function);
    function.setType(FunctionType::get(context, function.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
    function.setAllResultAttrs(resultAttrs);
    llvm::BitVector erase(function.getNumArguments());
    for (BlockArgument arg : function.getArguments())
      if (arg.use_empty())
        erase.set(arg.getArgNumber());
    if (failed(eraseArguments(function, erase)))
      return failure();

    // The servers' mesh; the workers' is not this program's.
    ModuleOp module = getOperation();
    for (auto mesh : llvm::make_early_inc_range(module.getOps<dist::MeshOp>()))
      mesh.erase();
    OpBuilder atStart = OpBuilder::atBlockBegin(module.getBody());
    auto mesh = dist::MeshOp::create(
        atStart, module.getLoc(), kServerAxis,
        atStart.getStrArrayAttr({kServerAxis}),
        atStart.getDenseI64ArrayAttr({static_cast<int64_t>(servers)}));
    auto meshName = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    StringAttr axis = StringAttr::get(context, kServerAxis);
    // Server s holds its piece of every tensor: the first dim the servers
    // divide, else dim 0 (padded); a scalar whole on each.
    auto split = [&](RankedTensorType type) {
      if (type.getRank() == 0)
        return getSharding(type, meshName, {});
      int64_t dim = 0;
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (type.getDimSize(d) % servers == 0) {
          dim = d;
          break;
        }
      return getSharding(type, meshName, {}, {axis}, dim);
    };
    function.walk([&](Operation *op) { op->removeAttr(attrName); });
    for (BlockArgument arg : function.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type)
        continue;
      function.setArgAttr(arg.getArgNumber(), attrName, split(type));
    }
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      auto updates =
          function.getResultAttrOfType<IntegerAttr>(i, nn::kUpdatesAttrName);
      function.setResultAttr(i, attrName,
                             function.getArgAttr(updates.getInt(), attrName));
    }
    function.setSymName((function.getSymName() + "_server").str());
    return success();
  }
};

} // namespace
