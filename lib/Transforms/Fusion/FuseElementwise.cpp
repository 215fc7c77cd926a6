//===- FuseElementwise.cpp - Elementwise fusion (--tessera-fuse-elementwise) =//
//
// One scan of each function's block in order. A fusible op joins the open
// groups that made its operands (merging them) and a group closes when an
// op outside it reads one of its values: its ops then run where its last op
// ran, and nothing in between needed their values earlier. A group becomes
// one nn.fused op at its last op.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistDialect.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace tessera {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-fuse-elementwise"

using namespace mlir;
using namespace tessera;

namespace {
/// The most ops (copied constants and broadcasts included), inputs and
/// broadcasts of one fused op: what the CUDA backend passes to a kernel
/// (kFusedMaxSteps, kFusedMaxInputs, kFusedMaxBroadcasts in
/// runtime/src/cuda/FusedMath.h).
constexpr size_t kMaxOps = 64;
constexpr size_t kMaxInputs = 16;
constexpr size_t kMaxBroadcasts = 16;

/// Splat constants and broadcasts: copied into each group that reads them.
bool isCopied(Operation *op) {
  return isa<nn::ConstantOp, nn::BroadcastOp>(op) && nn::isFusible(op) &&
         !op->hasAttr(dist::DistDialect::kUnitAttrName);
}

/// Ops no group spans: a collective, wait or transfer keeps its place in
/// the schedule, and a pipeline unit starts where its first op is.
bool isBoundary(Operation *op) {
  return !isa_and_nonnull<nn::NNDialect>(op->getDialect()) ||
         op->hasAttr(dist::DistDialect::kUnitAttrName);
}

/// Ops that make up a group's compute.
bool isMember(Operation *op) {
  return !isBoundary(op) && !isCopied(op) && nn::isFusible(op);
}

/// A group of ops to fuse, in block order.
struct Group {
  SmallVector<Operation *> ops;
  bool open = true;
};

/// What a fused op of `ops` (in block order) holds besides them: the
/// constants and broadcasts it copies, and its inputs.
struct Body {
  llvm::SetVector<Operation *> copies;
  llvm::SetVector<Value> inputs;

  explicit Body(ArrayRef<Operation *> ops) {
    llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
    for (Operation *op : ops)
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && members.contains(def))
          continue;
        if (def && isCopied(def)) {
          copies.insert(def);
          inputs.insert(def->operand_begin(), def->operand_end());
          continue;
        }
        inputs.insert(operand);
      }
  }

  bool fits(size_t numOps) const {
    return numOps + copies.size() <= kMaxOps && inputs.size() <= kMaxInputs &&
           llvm::count_if(copies, llvm::IsaPred<nn::BroadcastOp>) <=
               static_cast<int64_t>(kMaxBroadcasts);
  }
};

class Fuser {
public:
  explicit Fuser(Block &block) : block(block) {}

  void run(Operation *first) {
    for (Operation &op : llvm::make_range(
             first ? first->getIterator() : block.begin(), block.end())) {
      if (isBoundary(&op)) {
        for (auto &group : groups)
          group->open = false;
      } else if (isMember(&op)) {
        add(&op);
      } else {
        for (Value operand : op.getOperands())
          close(operand);
      }
    }
    for (auto &group : groups)
      fuse(group->ops);
  }

private:
  /// Closes the group that made `value`, which an op outside it reads.
  void close(Value value) {
    if (Group *group = groupOf.lookup(value.getDefiningOp()))
      group->open = false;
  }

  /// Puts `op` in a group with the open groups of its operands, when they
  /// fit one fused op together; otherwise in a group of its own, and its
  /// operands' groups close.
  void add(Operation *op) {
    llvm::SetVector<Group *> joined;
    for (Value operand : op->getOperands())
      if (Group *group = groupOf.lookup(operand.getDefiningOp());
          group && group->open)
        joined.insert(group);
    SmallVector<Operation *> ops = {op};
    for (Group *group : joined)
      ops.append(group->ops);
    llvm::sort(
        ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    Group *target;
    if (!joined.empty() && Body(ops).fits(ops.size())) {
      target = joined[0];
      target->ops = ops;
      for (Group *group : joined.getArrayRef().drop_front())
        group->ops.clear();
    } else {
      for (Group *group : joined)
        group->open = false;
      target = groups.emplace_back(std::make_unique<Group>()).get();
      target->ops = {op};
    }
    for (Operation *member : target->ops)
      groupOf[member] = target;
  }

  /// Replaces `ops` (in block order) by one nn.fused op at the last of
  /// them, unless there is nothing to fuse.
  void fuse(ArrayRef<Operation *> ops) {
    if (ops.empty())
      return;
    Body body(ops);
    if (ops.size() + body.copies.size() < 2)
      return;
    llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
    SmallVector<Value> results;
    SmallVector<Location> locs;
    for (Operation *op : ops) {
      locs.push_back(op->getLoc());
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !members.contains(user);
            }))
          results.push_back(result);
    }
    if (results.empty())
      return;

    OpBuilder builder(ops.back());
    Location loc = builder.getFusedLoc(locs);
    auto fused =
        nn::FusedOp::create(builder, loc, ValueRange(results).getTypes(),
                            body.inputs.getArrayRef());
    SmallVector<Location> argLocs(body.inputs.size(), loc);
    Block *entry = builder.createBlock(
        &fused.getBody(), {}, ValueRange(body.inputs.getArrayRef()).getTypes(),
        argLocs);
    IRMapping mapping;
    mapping.map(body.inputs.getArrayRef(), entry->getArguments());
    for (Operation *op : ops) {
      for (Value operand : op->getOperands())
        if (body.copies.contains(operand.getDefiningOp()) &&
            !mapping.contains(operand))
          builder.clone(*operand.getDefiningOp(), mapping);
      builder.clone(*op, mapping);
    }
    SmallVector<Value> yielded;
    for (Value result : results)
      yielded.push_back(mapping.lookup(result));
    nn::YieldOp::create(builder, loc, yielded);

    for (auto [result, replacement] : llvm::zip(results, fused.getResults()))
      result.replaceAllUsesWith(replacement);
    for (Operation *op : llvm::reverse(ops))
      op->erase();
    for (Operation *copy : body.copies)
      if (copy->use_empty())
        copy->erase();
  }

  Block &block;
  SmallVector<std::unique_ptr<Group>> groups;
  DenseMap<Operation *, Group *> groupOf;
};

struct FuseElementwisePass
    : tessera::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        fuseElementwise(function.getBody().front());
  }
};
} // namespace

void tessera::fuseElementwise(Block &block, Operation *first) {
  Fuser(block).run(first);
}
