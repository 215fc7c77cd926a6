//===- Zero.cpp - ZeRO-1 optimizer-state sharding (--tessera-zero) --------===//
//
// ZeRO as shardings rather than a rewrite: the optimizer state of each AdamW
// update is split over the data-parallel axes, the gradient is pinned to the
// same split before the update and the parameter stays as it is. Propagation
// and partitioning then derive the collectives: the gradient's partial sums
// become a reduce_scatter, the update runs on a shard, and the new parameter
// is all-gathered back to the layout it is read in (see the nn.updates rule
// of --tessera-propagate). See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_ZEROPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// The sharding an argument is annotated with, or open.
TensorSharding getArgSharding(func::FuncOp function, BlockArgument arg) {
  auto type = cast<RankedTensorType>(arg.getType());
  if (auto attr = function.getArgAttrOfType<dist::ShardingAttr>(
          arg.getArgNumber(), dist::DistDialect::kShardingAttrName))
    return TensorSharding::fromAttr(attr);
  return TensorSharding::getOpen(type.getRank());
}

struct ZeroPass : tessera::impl::ZeroPassBase<ZeroPass> {
  using ZeroPassBase::ZeroPassBase;

  void runOnOperation() override {
    if (stage == 0)
      return;
    if (stage != 1) {
      emitError(getOperation().getLoc(), "ZeRO stage ")
          << static_cast<int64_t>(stage)
          << " is not built yet: --tessera-zero takes stage 0 or 1 (stages "
             "2 and 3 are issue #6)";
      return signalPassFailure();
    }
    WalkResult result = getOperation().walk([&](func::FuncOp function) {
      return failed(shard(function)) ? WalkResult::interrupt()
                                     : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult shard(func::FuncOp function) {
    SmallVector<nn::AdamWOp> updates =
        llvm::to_vector(function.getOps<nn::AdamWOp>());
    if (updates.empty())
      return success();
    FailureOr<dist::MeshOp> meshOp = getFunctionMesh(function);
    if (failed(meshOp))
      return failure();
    if (!*meshOp)
      return function.emitError(
          "ZeRO needs a mesh: annotate the train step's data-parallel axis");
    MeshShape mesh(*meshOp);
    SmallVector<std::string> names(dataAxes.begin(), dataAxes.end());
    if (names.empty())
      names.push_back("dp");
    AxisList axes;
    for (const std::string &name : names) {
      StringAttr axis = StringAttr::get(&getContext(), name);
      if (!llvm::is_contained(mesh.getAxes(), axis))
        return function.emitError("ZeRO axis \"")
               << name << "\" is not an axis of mesh " << mesh.getName();
      axes.push_back(axis);
    }
    int64_t devices = mesh.getGroupSize(axes);

    for (nn::AdamWOp update : updates) {
      auto param = dyn_cast<BlockArgument>(update.getParam());
      auto m = dyn_cast<BlockArgument>(update.getM());
      auto v = dyn_cast<BlockArgument>(update.getV());
      if (!param || !m || !v || param.getOwner() != &function.front())
        return update.emitError(
            "ZeRO expects the parameter and moments of nn.adamw to be "
            "arguments of the train step");
      // The first dim the parameter does not split and the data-parallel
      // group divides. A parameter without one (a bias already split by
      // tensor parallelism, or one smaller than the group) keeps replicated
      // state; DeepSpeed flattens and pads instead.
      TensorSharding sharding = getArgSharding(function, param);
      if (llvm::any_of(axes, [&](StringAttr axis) {
            return sharding.usesAxis(axis);
          }))
        return update.emitError("ZeRO axes already split parameter #")
               << param.getArgNumber();
      ArrayRef<int64_t> shape =
          cast<RankedTensorType>(param.getType()).getShape();
      std::optional<int64_t> dim;
      for (int64_t d = 0, e = shape.size(); d < e && !dim; ++d)
        if (sharding.dims[d].axes.empty() && shape[d] % devices == 0)
          dim = d;
      FlatSymbolRefAttr meshName = mesh.getName();
      // The parameter itself stays whole over the ZeRO axes (that would be
      // stage 3); its other dims propagate as before.
      TensorSharding replicated = sharding;
      llvm::append_range(replicated.replicated, axes);
      function.setArgAttr(param.getArgNumber(),
                          dist::DistDialect::kShardingAttrName,
                          replicated.toAttr(meshName));
      if (!dim)
        continue;
      TensorSharding state = sharding;
      state.dims[*dim].axes = axes;
      state.dims[*dim].isOpen = false;
      dist::ShardingAttr stateAttr = state.toAttr(meshName);
      for (BlockArgument moment : {m, v})
        function.setArgAttr(moment.getArgNumber(),
                            dist::DistDialect::kShardingAttrName, stateAttr);
      OpBuilder builder(update);
      Value grad = dist::ShardingConstraintOp::create(
          builder, update.getLoc(), update.getGrad(), stateAttr);
      update.getGradMutable().assign(grad);
    }
    return success();
  }
};
} // namespace
