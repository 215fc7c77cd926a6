//===- MemoryCategories.cpp - What a program's values hold ----------------===//

#include "tessera/Analysis/MemoryCategories.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/TrainStep.h"

using namespace mlir;
using namespace tessera;

bool tessera::isUnitDimView(Operation *op) {
  if (!isa<nn::ReshapeOp, nn::TransposeOp>(op))
    return false;
  auto nonUnit = [](Value value) {
    SmallVector<int64_t> sizes;
    for (int64_t size : cast<RankedTensorType>(value.getType()).getShape())
      if (size != 1)
        sizes.push_back(size);
    return sizes;
  };
  if (auto transpose = dyn_cast<nn::TransposeOp>(op)) {
    // The dims of more than one element keep their order.
    ArrayRef<int64_t> shape = transpose.getInput().getType().getShape();
    int64_t last = -1;
    for (int64_t d : transpose.getPermutation()) {
      if (shape[d] == 1)
        continue;
      if (d < last)
        return false;
      last = d;
    }
    return true;
  }
  return nonUnit(op->getOperand(0)) == nonUnit(op->getResult(0));
}

DenseMap<Value, MemoryCategory>
tessera::getMemoryCategories(func::FuncOp function) {
  DenseMap<Value, MemoryCategory> categories;
  // A value is what it was made from by collectives (and their waits),
  // constraints and a pipeline's sums over microbatches, and by the 1-d
  // layout ops of a flat piece or a unit's flat
  // buffer: a flattening reshape (or back), the cut of its padding, the
  // padding with zeros, the concatenation of the members.
  auto isFlatLayout = [](Operation *op) {
    // One dim of more than one element (a row of a unit's buffer is [1, n]).
    auto isFlat = [](Value value) {
      return llvm::count_if(cast<RankedTensorType>(value.getType()).getShape(),
                            [](int64_t size) { return size != 1; }) <= 1;
    };
    if (isa<nn::ReshapeOp>(op))
      return isFlat(op->getOperand(0)) || isFlat(op->getResult(0)) ||
             isUnitDimView(op);
    if (isa<nn::TransposeOp>(op))
      return isUnitDimView(op);
    return isa<nn::SliceOp, nn::ConcatOp>(op) && isFlat(op->getResult(0));
  };
  auto mark = [&](Value value, MemoryCategory category) {
    SmallVector<Value> made = {value};
    while (!made.empty()) {
      Value value = made.pop_back_val();
      if (!categories.try_emplace(value, category).second)
        continue;
      Operation *op = value.getDefiningOp();
      if (!op)
        continue;
      if (isa<nn::ConcatOp>(op) && isFlatLayout(op))
        llvm::append_range(made, op->getOperands());
      else if (isa<dist::CollectiveOpInterface, dist::ShardingConstraintOp,
                   dist::WaitOp, dist::AccumulateOp>(op) ||
               isFlatLayout(op))
        made.push_back(op->getOperand(0));
    }
  };
  for (BlockArgument arg : function.getArguments()) {
    if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName)) {
      // A mixed-precision model reads its f32 master weights, which the
      // ZeRO paper counts in the optimizer state, through 16-bit casts: its
      // parameters.
      mark(arg, isMasterWeight(arg) ? MemoryCategory::OptimizerState
                                    : MemoryCategory::Parameter);
      for (Operation *user : arg.getUsers())
        if (isa<nn::CastOp>(user))
          mark(user->getResult(0), MemoryCategory::Parameter);
    } else if (function.getArgAttr(arg.getArgNumber(), nn::kStateAttrName)) {
      mark(arg, MemoryCategory::OptimizerState);
    }
  }
  Operation *terminator = function.getBody().front().getTerminator();
  for (OpOperand &result : terminator->getOpOperands()) {
    if (auto updates = function.getResultAttrOfType<IntegerAttr>(
            result.getOperandNumber(), nn::kUpdatesAttrName))
      if (auto it = categories.find(function.getArgument(updates.getInt()));
          it != categories.end())
        mark(result.get(), it->second);
    // A parameter-server worker returns its gradients.
    if (function.getResultAttr(result.getOperandNumber(), nn::kGradOfAttrName))
      mark(result.get(), MemoryCategory::Gradient);
  }
  // And a server reads them.
  for (BlockArgument arg : function.getArguments())
    if (function.getArgAttr(arg.getArgNumber(), nn::kGradOfAttrName))
      mark(arg, MemoryCategory::Gradient);
  function.walk([&](Operation *op) {
    if (auto update = dyn_cast<OptimizerOpInterface>(op))
      mark(update.getGradient(), MemoryCategory::Gradient);
  });
  // A pipeline stage accumulates its gradients over the microbatches.
  function.walk([&](dist::AccumulateOp op) {
    mark(op.getResult(), MemoryCategory::Gradient);
  });
  // Collective results are communication buffers, and so are their pieces
  // laid out again (a bucket's members sliced and reshaped out of it).
  function.walk([&](Operation *op) {
    if (isa<dist::CollectiveOpInterface>(op)) {
      categories.try_emplace(op->getResult(0), MemoryCategory::Communication);
    } else if (isa<nn::ReshapeOp, nn::SliceOp, nn::TransposeOp>(op) &&
               categories.lookup_or(op->getOperand(0),
                                    MemoryCategory::Activation) ==
                   MemoryCategory::Communication) {
      categories.try_emplace(op->getResult(0), MemoryCategory::Communication);
    }
  });
  return categories;
}
