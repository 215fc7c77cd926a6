//===- TrainStep.cpp - The parts of a train step passes ask for -----------===//

#include "tessera/Analysis/TrainStep.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Analysis/SliceAnalysis.h"

using namespace mlir;
using namespace tessera;

func::FuncOp tessera::getModelFunction(ModuleOp module) {
  func::FuncOp function;
  for (auto candidate : module.getOps<func::FuncOp>())
    if (!candidate.isExternal())
      function = candidate;
  return function;
}

llvm::SetVector<Operation *> tessera::getForwardOps(func::FuncOp function) {
  llvm::SetVector<Operation *> forward;
  Operation *terminator = function.getBody().front().getTerminator();
  BackwardSliceOptions options;
  options.inclusive = true;
  for (OpOperand &operand : terminator->getOpOperands()) {
    if (function.getResultAttr(operand.getOperandNumber(),
                               nn::kUpdatesAttrName))
      continue;
    if (Operation *op = operand.get().getDefiningOp())
      (void)getBackwardSlice(op, &forward, options);
  }
  // Program order: the slices of several results interleave.
  llvm::SetVector<Operation *> ordered;
  for (Operation &op : function.getBody().front())
    if (forward.contains(&op))
      ordered.insert(&op);
  return ordered;
}

StringRef tessera::getParamName(Value value) {
  if (auto cast = value.getDefiningOp<nn::CastOp>())
    value = cast.getInput();
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return {};
  auto function = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  auto name = function ? function.getArgAttrOfType<StringAttr>(
                             arg.getArgNumber(), nn::kParamAttrName)
                       : StringAttr();
  return name ? name.getValue() : StringRef();
}

StringRef tessera::getParameterUnit(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  size_t end = 0;
  for (auto [index, part] : llvm::enumerate(parts)) {
    end += part.size() + (index ? 1 : 0);
    int64_t number;
    if (!part.getAsInteger(10, number))
      return name.take_front(end);
  }
  return parts.size() > 1 ? name.take_front(name.rfind('.')) : name;
}

bool tessera::isNumberedUnit(StringRef unit) {
  int64_t number;
  return !unit.rsplit('.').second.getAsInteger(10, number);
}

BlockArgument tessera::getFlatBuffer(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<nn::CastOp, nn::SliceOp, nn::ReshapeOp, nn::TransposeOp,
             nn::BroadcastOp, dist::AllGatherOp>(op))
      return {};
    value = op->getOperand(0);
  }
  auto arg = cast<BlockArgument>(value);
  auto function = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return function && function.getArgAttr(arg.getArgNumber(),
                                         dist::DistDialect::kMembersAttrName)
             ? arg
             : BlockArgument();
}

bool tessera::isMasterWeight(BlockArgument param) {
  auto type = dyn_cast<RankedTensorType>(param.getType());
  if (!type || !type.getElementType().isF32())
    return false;
  bool updated = false, read = false;
  for (Operation *user : param.getUsers()) {
    if (auto update = dyn_cast<OptimizerOpInterface>(user);
        update && update.getParameter() == param) {
      updated = true;
      continue;
    }
    auto cast = dyn_cast<nn::CastOp>(user);
    if (!cast)
      return false;
    Type narrow = cast.getType().getElementType();
    if (!narrow.isBF16() && !narrow.isF16())
      return false;
    read = true;
  }
  return updated && read;
}

llvm::SmallVector<llvm::SetVector<Operation *>>
tessera::getAttentionCores(const llvm::SetVector<Operation *> &forward) {
  llvm::SmallVector<llvm::SetVector<Operation *>> cores;
  for (Operation *op : forward) {
    auto softmax = dyn_cast<nn::SoftmaxOp>(op);
    if (!softmax)
      continue;
    llvm::SetVector<Operation *> core;
    core.insert(softmax);
    Operation *producer = softmax.getInput().getDefiningOp();
    while (producer && forward.contains(producer)) {
      core.insert(producer);
      if (isa<nn::DotOp>(producer))
        break;
      // Follow the one input that is not a constant (one an annotated
      // layout constrains included).
      Operation *next = nullptr;
      for (Value operand : producer->getOperands()) {
        Operation *def = operand.getDefiningOp();
        Operation *made = def;
        while (auto constraint =
                   dyn_cast_or_null<dist::ShardingConstraintOp>(made))
          made = constraint.getInput().getDefiningOp();
        if (made && isa<nn::ConstantOp>(made))
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
    // no product (a loss's) is not a core. The probabilities may reach it
    // through sharding constraints (an annotated layout) and their dropout,
    // which is remade with them (Megatron's core attention includes it).
    bool weighs = false;
    SmallVector<Operation *> readers(softmax->getUsers());
    while (!readers.empty()) {
      Operation *user = readers.pop_back_val();
      if (!forward.contains(user))
        continue;
      if (isa<dist::ShardingConstraintOp, nn::DropoutOp>(user)) {
        core.insert(user);
        readers.append(user->user_begin(), user->user_end());
      } else if (isa<nn::DotOp>(user)) {
        core.insert(user);
        weighs = true;
      }
    }
    if (!weighs)
      continue;
    cores.push_back(std::move(core));
  }
  return cores;
}
