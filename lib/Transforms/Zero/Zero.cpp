//===- Zero.cpp - ZeRO stages 1-3 as shardings (--tessera-zero) -----------===//
//
// ZeRO as shardings rather than a rewrite. Each stage splits one more part of
// the model state of every optimizer update with state (OptimizerOpInterface:
// AdamW) over the data-parallel axes, on the leading dim where the group
// divides it and stored flat (padded, FSDP's FlatParameter) where not:
//
//  1. the state (AdamW's moments); the gradient is pinned to their split
//     just before the update, so the whole gradient lives until then;
//  2. also the gradient, pinned where it is complete: its partial sums are
//     reduce-scattered at once and the whole gradient dies there;
//  3. also the parameter at rest; every phase (forward, backward) that reads
//     it gathers it first, or one gather serves both
//     (reshard-after-forward=false).
//
// Propagation and partitioning then derive the collectives, and the export's
// liveness frees what is no longer read. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

namespace tessera {
#define GEN_PASS_DEF_ZEROPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-zero"

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

/// The first and last users of `uses` (all in one block).
std::pair<Operation *, Operation *>
getFirstAndLastUser(ArrayRef<OpOperand *> uses) {
  Operation *first = uses.front()->getOwner(), *last = first;
  for (OpOperand *use : uses) {
    if (use->getOwner()->isBeforeInBlock(first))
      first = use->getOwner();
    if (last->isBeforeInBlock(use->getOwner()))
      last = use->getOwner();
  }
  return {first, last};
}

/// Pins the uses in `uses` (of one value, all in one block) to `sharding`
/// with one constraint placed before the first of them; returns it.
Value pinUses(ArrayRef<OpOperand *> uses, dist::ShardingAttr sharding) {
  if (uses.empty())
    return {};
  Operation *first = getFirstAndLastUser(uses).first;
  OpBuilder builder(first);
  Value pinned = dist::ShardingConstraintOp::create(
      builder, first->getLoc(), uses.front()->get(), sharding);
  for (OpOperand *use : uses)
    use->set(pinned);
  return pinned;
}

/// How stage 3 reads a parameter in the backward pass.
struct Regather {
  enum Kind {
    /// Gathered again from the shard at rest (FSDP's FULL_SHARD).
    FromShard,
    /// The forward's gather is kept (SHARD_GRAD_OP).
    KeepForward,
    /// The forward's gather is cut to a split over `innerAxes` after its
    /// last forward read and gathered over those alone (FSDP2's
    /// reshard_after_forward=int: a smaller, faster group).
    FromInnerGroup,
  } kind;
  AxisList innerAxes;
};

struct ZeroPass : tessera::impl::ZeroPassBase<ZeroPass> {
  using ZeroPassBase::ZeroPassBase;

  void runOnOperation() override {
    if (stage == ZeroStage::None)
      return;
    WalkResult result = getOperation().walk([&](func::FuncOp function) {
      return failed(shard(function)) ? WalkResult::interrupt()
                                     : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  FailureOr<AxisList> getAxes(func::FuncOp function, const MeshShape &mesh) {
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
    return axes;
  }

  LogicalResult shard(func::FuncOp function) {
    // ZeRO shards optimizer state: updates without any (SGD) keep their
    // layout.
    SmallVector<OptimizerOpInterface> updates;
    for (auto update : function.getOps<OptimizerOpInterface>())
      if (!update.getState().empty())
        updates.push_back(update);
    if (updates.empty())
      return success();
    FailureOr<dist::MeshOp> meshOp = getFunctionMesh(function);
    if (failed(meshOp))
      return failure();
    if (!*meshOp)
      return function.emitError(
          "ZeRO needs a mesh: annotate the train step's data-parallel axis");
    MeshShape mesh(*meshOp);
    FailureOr<AxisList> axes = getAxes(function, mesh);
    if (failed(axes))
      return failure();
    int64_t devices = mesh.getGroupSize(*axes);
    llvm::SetVector<Operation *> forward;
    Regather regather{Regather::FromShard, {}};
    if (stage >= ZeroStage::Parameters) {
      forward = getForwardOps(function);
      FailureOr<Regather> parsed = getRegather(function, mesh, *axes);
      if (failed(parsed))
        return failure();
      regather = *parsed;
    }

    for (OptimizerOpInterface update : updates) {
      auto param = dyn_cast<BlockArgument>(update.getParameter());
      SmallVector<BlockArgument> state;
      for (Value value : update.getState())
        state.push_back(dyn_cast<BlockArgument>(value));
      if (!param || param.getOwner() != &function.front() ||
          llvm::is_contained(state, BlockArgument()))
        return update.emitError("ZeRO expects the parameter and optimizer "
                                "state of ")
               << update->getName() << " to be arguments of the train step";
      // The leading dim when the data-parallel group divides its pieces
      // (after the axes that already split it, which stay major): a
      // device's share of the piece is then one contiguous block, gathered
      // without a copy. Otherwise the piece is stored flat, padded to a
      // multiple of the group (FSDP's FlatParameter), which is the same
      // block where the dim divides. A scalar keeps replicated state.
      TensorSharding sharding = getArgSharding(function, param);
      if (llvm::any_of(
              *axes, [&](StringAttr axis) { return sharding.usesAxis(axis); }))
        return update.emitError("ZeRO axes already split parameter #")
               << param.getArgNumber();
      ArrayRef<int64_t> shape =
          cast<RankedTensorType>(param.getType()).getShape();
      bool leading =
          !shape.empty() &&
          (shape[0] / mesh.getGroupSize(sharding.dims[0].axes)) % devices == 0;
      LLVM_DEBUG(llvm::dbgs() << "zero-" << static_cast<int>(stage.getValue())
                              << ": parameter #" << param.getArgNumber()
                              << (shape.empty() ? " kept whole (a scalar)"
                                  : leading     ? " split on dim 0"
                                                : " stored flat")
                              << "\n");
      FlatSymbolRefAttr meshName = mesh.getName();
      // Whole over the ZeRO axes, other dims propagating as before: how the
      // model reads the parameter.
      TensorSharding whole = sharding;
      llvm::append_range(whole.replicated, *axes);
      dist::ShardingAttr wholeAttr = whole.toAttr(meshName);
      if (shape.empty()) {
        function.setArgAttr(param.getArgNumber(),
                            dist::DistDialect::kShardingAttrName, wholeAttr);
        continue;
      }
      TensorSharding split = sharding;
      if (leading) {
        llvm::append_range(split.dims[0].axes, *axes);
        split.dims[0].isOpen = false;
      } else {
        split.flat = *axes;
      }
      dist::ShardingAttr splitAttr = split.toAttr(meshName);
      for (BlockArgument value : state)
        function.setArgAttr(value.getArgNumber(),
                            dist::DistDialect::kShardingAttrName, splitAttr);

      Value grad = update.getGradient();
      OpBuilder builder(update);
      if (stage >= ZeroStage::Gradients) {
        if (Operation *producer = grad.getDefiningOp())
          builder.setInsertionPointAfter(producer);
        else
          builder.setInsertionPointToStart(&function.front());
      }
      // Stage 1 keeps the gradient whole: its partial sums over the ZeRO
      // axes are summed over the microbatches first and reduce-scattered
      // once, right before the update.
      Value pinned = grad;
      if (stage == ZeroStage::OptimizerState) {
        TensorSharding partial = sharding;
        partial.unreduced.assign(axes->begin(), axes->end());
        pinned = dist::ShardingConstraintOp::create(
            builder, grad.getLoc(), pinned, partial.toAttr(meshName));
      }
      update.getGradientOperand().set(dist::ShardingConstraintOp::create(
          builder, grad.getLoc(), pinned, splitAttr));

      // With mixed precision the f32 master weight is optimizer state (the
      // ZeRO paper's K = 12 counts it), so stages 1 and 2 split it with the
      // moments too: the model reads its 16-bit cast, gathered once per step
      // and kept for the backward, as the paper keeps the 16-bit parameters
      // whole.
      bool master = isMasterWeight(param);
      if (stage < ZeroStage::Parameters && !master) {
        function.setArgAttr(param.getArgNumber(),
                            dist::DistDialect::kShardingAttrName, wholeAttr);
        continue;
      }
      Regather reads = stage < ZeroStage::Parameters
                           ? Regather{Regather::KeepForward, {}}
                           : regather;
      function.setArgAttr(param.getArgNumber(),
                          dist::DistDialect::kShardingAttrName, splitAttr);
      TensorSharding inner = whole;
      llvm::erase_if(inner.replicated, [&](StringAttr axis) {
        return llvm::is_contained(reads.innerAxes, axis);
      });
      if (leading) {
        llvm::append_range(inner.dims[0].axes, reads.innerAxes);
        inner.dims[0].isOpen = false;
      } else {
        inner.flat = reads.innerAxes;
      }
      gatherForUses(param, update, forward, reads, wholeAttr,
                    inner.toAttr(meshName));
    }
    return success();
  }

  /// reshard-after-forward for this mesh: true, false, or a group size
  /// that the trailing ZeRO axes make up.
  FailureOr<Regather> getRegather(func::FuncOp function, const MeshShape &mesh,
                                  const AxisList &axes) {
    const ReshardAfterForward &reshard = reshardAfterForward;
    if (reshard.kind == ReshardAfterForward::Kind::Shard)
      return Regather{Regather::FromShard, {}};
    if (reshard.kind == ReshardAfterForward::Kind::Keep)
      return Regather{Regather::KeepForward, {}};
    int64_t size = reshard.groupSize;
    if (size == 1)
      return Regather{Regather::KeepForward, {}};
    std::string sizes;
    for (size_t first = 0; first < axes.size(); ++first) {
      AxisList trailing(axes.begin() + first, axes.end());
      int64_t group = mesh.getGroupSize(trailing);
      if (group == size)
        return first == 0 ? Regather{Regather::FromShard, {}}
                          : Regather{Regather::FromInnerGroup, trailing};
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(group);
    }
    return function.emitError("reshard-after-forward=")
           << size << " is not a group the trailing ZeRO axes make up (they "
           << "give " << sizes << ")";
  }

  /// Pins every read of a parameter split at rest (but the update's own) to
  /// the whole layout: one gather before the forward's first read, and for
  /// the backward's reads what `regather` says. A parameter read through
  /// nn.cast (mixed precision) is gathered after the cast, in the narrow
  /// type.
  void gatherForUses(BlockArgument param, OptimizerOpInterface update,
                     const llvm::SetVector<Operation *> &forward,
                     const Regather &regather, dist::ShardingAttr wholeAttr,
                     dist::ShardingAttr innerAttr) {
    SmallVector<Value> reads = {param};
    for (Operation *user : param.getUsers())
      if (isa<nn::CastOp>(user))
        reads.push_back(user->getResult(0));
    for (Value read : reads) {
      SmallVector<OpOperand *> forwardUses, backwardUses;
      for (OpOperand &use : read.getUses()) {
        Operation *user = use.getOwner();
        if (user == update.getOperation() ||
            (read == param && isa<nn::CastOp>(user)))
          continue;
        (forward.contains(user) ? forwardUses : backwardUses).push_back(&use);
      }
      if (regather.kind == Regather::KeepForward) {
        llvm::append_range(forwardUses, backwardUses);
        backwardUses.clear();
      }
      Value gathered = pinUses(forwardUses, wholeAttr);
      // The smaller group's piece, cut after the last forward read, is what
      // the backward gathers from; only when the backward comes after.
      if (regather.kind == Regather::FromInnerGroup && gathered &&
          !backwardUses.empty()) {
        Operation *lastForward = getFirstAndLastUser(forwardUses).second;
        Operation *firstBackward = getFirstAndLastUser(backwardUses).first;
        if (lastForward->isBeforeInBlock(firstBackward)) {
          OpBuilder builder(lastForward->getContext());
          builder.setInsertionPointAfter(lastForward);
          Value piece = dist::ShardingConstraintOp::create(
              builder, lastForward->getLoc(), gathered, innerAttr);
          for (OpOperand *use : backwardUses)
            use->set(piece);
        }
      }
      pinUses(backwardUses, wholeAttr);
    }
  }
};
} // namespace
