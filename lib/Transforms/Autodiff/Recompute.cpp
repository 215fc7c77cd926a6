//===- Recompute.cpp - Activation recomputation (--tessera-recompute) -----===//
//
// Groups of forward ops whose values the backward recomputes rather than
// keeps: the attention core (selective) or whole layers (full). See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/StageCuts.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/Support/Debug.h"

namespace tessera {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-recompute"

using namespace mlir;
using namespace tessera;

namespace {

using Group = llvm::SetVector<Operation *>;

/// Adds to each group the forward ops outside the data's flow (what
/// parameters and constants alone make: splat fills, masks, broadcast
/// biases and norm scales) that only its ops read: cheap to remake, and as
/// large as the tensors they meet. A parameter's cast (mixed precision)
/// stays where it is, read once per step.
void addOwnInputs(MutableArrayRef<Group> groups,
                  const llvm::SetVector<Operation *> &forward,
                  ArrayRef<Operation *> dataOps) {
  llvm::DenseSet<Operation *> data(dataOps.begin(), dataOps.end());
  for (Group &group : groups)
    for (Operation *op : llvm::reverse(forward))
      if (!data.contains(op) && !isa<nn::CastOp>(op) && !op->use_empty() &&
          !group.contains(op) &&
          llvm::all_of(op->getUsers(),
                       [&](Operation *user) { return group.contains(user); }))
        group.insert(op);
}

/// The layers of the forward pass (its ops that read the data, `ops`), as
/// getRecomputedLayers finds them by its structure. A layer the pipeline
/// cuts (an op marked dist.stage) is two: a later stage's backward does
/// not remake an earlier stage's ops.
SmallVector<Group> getLayers(ArrayRef<Operation *> ops) {
  SmallVector<Group> layers;
  for (ArrayRef<Operation *> layer : getRecomputedLayers(ops)) {
    layers.emplace_back();
    for (Operation *op : layer) {
      if (op->hasAttr(dist::DistDialect::kStageAttrName) &&
          !layers.back().empty())
        layers.emplace_back();
      layers.back().insert(op);
    }
  }
  return layers;
}

/// Recomputes the values of `group` that the backward reads and the rest of
/// the forward does not; whether there were any.
bool recompute(const Group &group, const llvm::SetVector<Operation *> &forward,
               Operation *terminator) {
  // What the backward reads of the group, and from where.
  llvm::SetVector<Value> recomputed;
  SmallVector<OpOperand *> backwardUses;
  for (Operation *op : group)
    for (Value result : op->getResults()) {
      bool checkpoint = llvm::any_of(result.getUsers(), [&](Operation *user) {
        return user == terminator ||
               (forward.contains(user) && !group.contains(user));
      });
      if (checkpoint)
        continue;
      for (OpOperand &use : result.getUses())
        if (!forward.contains(use.getOwner())) {
          recomputed.insert(result);
          backwardUses.push_back(&use);
        }
    }
  if (backwardUses.empty())
    return false;

  // The ops of the group those values need, in program order.
  llvm::SmallPtrSet<Operation *, 16> needed;
  SmallVector<Operation *> worklist;
  for (Value value : recomputed)
    worklist.push_back(value.getDefiningOp());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!needed.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && group.contains(def))
        worklist.push_back(def);
  }

  Operation *first = backwardUses.front()->getOwner();
  for (OpOperand *use : backwardUses)
    if (use->getOwner()->isBeforeInBlock(first))
      first = use->getOwner();
  OpBuilder builder(first);
  IRMapping clones;
  // In program order, which `forward` keeps: each clone after its operands.
  for (Operation *op : forward)
    if (needed.contains(op))
      builder.clone(*op, clones);
  for (OpOperand *use : backwardUses)
    use->set(clones.lookup(use->get()));
  LLVM_DEBUG(llvm::dbgs() << "recompute " << needed.size() << " ops for "
                          << backwardUses.size() << " backward reads before "
                          << first->getName() << " at " << first->getLoc()
                          << "\n");
  return true;
}

struct RecomputePass : tessera::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    if (mode == Recompute::None)
      return;
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      llvm::SetVector<Operation *> forward = getForwardOps(function);
      SmallVector<Operation *> dataOps =
          getDataOps(function, forward.getArrayRef());
      SmallVector<Group> groups = mode == Recompute::Full
                                      ? getLayers(dataOps)
                                      : getAttentionCores(forward);
      addOwnInputs(groups, forward, dataOps);
      Operation *terminator = function.getBody().front().getTerminator();
      bool recomputed = false;
      for (const Group &group : groups)
        recomputed |= recompute(group, forward, terminator);
      // Asked for, recomputing nothing is worth saying: the model has no
      // attention core, or its layers hand the backward nothing but what
      // they hand on.
      if (!recomputed && !forward.empty())
        function.emitWarning()
            << "recompute=" << getEnumName(kRecomputeNames, mode.getValue())
            << " finds "
            << (mode == Recompute::Full
                    ? "no layer whose backward reads a value the forward "
                      "does not hand on"
                    : "no attention core (a product, softmax and product)")
            << ": nothing is recomputed";
    }
  }
};

} // namespace
