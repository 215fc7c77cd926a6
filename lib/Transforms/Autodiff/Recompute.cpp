//===- Recompute.cpp - Activation recomputation (--tessera-recompute) -----===//
//
// Groups of forward ops whose values the backward recomputes rather than
// keeps: the attention core (selective) or whole layers (full). See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/NN/IR/NNOps.h"
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

/// Adds to `group` the constants (splat fills, masks) that only its ops
/// read: cheap to remake, and as large as the tensors they fill.
void addOwnConstants(Group &group) {
  for (Operation *op : group.takeVector()) {
    for (Value operand : op->getOperands())
      if (auto constant = operand.getDefiningOp<nn::ConstantOp>())
        if (llvm::all_of(constant->getUsers(), [&](Operation *user) {
              return group.contains(user) || user == op;
            }))
          group.insert(constant);
    group.insert(op);
  }
}

/// The attention cores of the forward pass: each nn.softmax with the chain
/// that makes its input from a product (nn.dot of queries and keys, through
/// one-input ops and ops whose other inputs are constants: scaling, masks),
/// and the products that read its probabilities.
SmallVector<Group>
getAttentionCores(const llvm::SetVector<Operation *> &forward) {
  SmallVector<Group> cores;
  for (Operation *op : forward) {
    auto softmax = dyn_cast<nn::SoftmaxOp>(op);
    if (!softmax)
      continue;
    Group core;
    core.insert(softmax);
    Operation *producer = softmax.getInput().getDefiningOp();
    while (producer && forward.contains(producer)) {
      core.insert(producer);
      if (isa<nn::DotOp>(producer))
        break;
      // Follow the one input that is not a constant.
      Operation *next = nullptr;
      for (Value operand : producer->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && isa<nn::ConstantOp>(def))
          continue;
        if (next || !def) {
          next = nullptr;
          break;
        }
        next = def;
      }
      producer = next;
    }
    if (!producer || !isa<nn::DotOp>(producer))
      continue;
    // Attention weighs values by the probabilities; a softmax that feeds
    // no product (a loss's) is not a core.
    bool weighs = false;
    for (Operation *user : softmax->getUsers())
      if (forward.contains(user) && isa<nn::DotOp>(user)) {
        core.insert(user);
        weighs = true;
      }
    if (!weighs)
      continue;
    addOwnConstants(core);
    cores.push_back(std::move(core));
  }
  return cores;
}

/// The repeated layers of the forward pass: from the first op that reads a
/// parameter of a numbered unit ("blocks.3") to the next op that reads
/// another unit's, in program order.
SmallVector<Group> getLayers(const llvm::SetVector<Operation *> &forward) {
  SmallVector<Group> layers;
  StringRef current;
  for (Operation *op : forward) {
    StringRef unit;
    for (Value operand : op->getOperands())
      if (StringRef name = getParamName(operand); !name.empty())
        unit = getParameterUnit(name);
    if (!unit.empty() && unit != current) {
      current = isNumberedUnit(unit) ? unit : StringRef();
      if (!current.empty())
        layers.emplace_back();
    }
    // A parameter read through nn.cast (mixed precision) belongs to the
    // layer that reads the cast.
    if (!current.empty() && !isa<nn::CastOp>(op))
      layers.back().insert(op);
  }
  return layers;
}

/// Recomputes the values of `group` that the backward reads and the rest of
/// the forward does not.
void recompute(const Group &group, const llvm::SetVector<Operation *> &forward,
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
    return;

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
      SmallVector<Group> groups = mode == Recompute::Full
                                      ? getLayers(forward)
                                      : getAttentionCores(forward);
      // Asked for, recomputing nothing is worth saying: the model has no
      // attention core or numbered layers the pass knows.
      if (groups.empty() && !forward.empty())
        function.emitWarning()
            << "recompute=" << getEnumName(kRecomputeNames, mode.getValue())
            << " finds "
            << (mode == Recompute::Full
                    ? "no layers (ops reading numbered parameters such as "
                      "blocks.0.*)"
                    : "no attention core (a product, softmax and product)")
            << ": nothing is recomputed";
      Operation *terminator = function.getBody().front().getTerminator();
      for (const Group &group : groups)
        recompute(group, forward, terminator);
    }
  }
};

} // namespace
