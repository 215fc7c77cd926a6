//===- AssignStages.cpp - The pipeline's stages and ranks of each op ------===//
//
// The phases of --tessera-pipeline that place ops: the forward cut into
// stages (at dist.stage marks, or balanced at layer boundaries), the
// parameters' gathers moved to the stages that read them, the backward
// placed where its gradients flow, ZB-H1's weight gradients split off, and
// the ranks of every op, pre and post ops included.
//
//===----------------------------------------------------------------------===//

#include "PipelineState.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/StageCuts.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/IR/Builders.h"

#include <functional>

using namespace mlir;
using namespace tessera;
using namespace tessera::pipeline;

bool pipeline::moveGathersIntoUnits(PipelineState &state) {
  // A parameter's gather (an all_gather of it or of its cast, with the
  // views and broadcasts the model reads of it: a flat piece's cut of its
  // padding, a unit's members) that only one phase reads:
  // in reverse, so that an op's readers are classified before it.
  auto isParameter = [&](Value value) {
    if (auto cast = value.getDefiningOp<nn::CastOp>())
      value = cast.getInput();
    auto arg = dyn_cast<BlockArgument>(value);
    return arg &&
           state.function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName);
  };
  auto isGathered = [&](Operation *op) {
    while (
        op &&
        isa<nn::TransposeOp, nn::ReshapeOp, nn::BroadcastOp, nn::SliceOp>(op))
      op = op->getOperand(0).getDefiningOp();
    return isa_and_nonnull<dist::AllGatherOp>(op) &&
           isParameter(op->getOperand(0));
  };
  DenseMap<Operation *, bool> movedForward;
  SmallVector<Operation *> ops;
  for (Operation &op : state.body->without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (state.classes.lookup(op) != OpClass::Pre || !isGathered(op) ||
        op->use_empty())
      continue;
    std::optional<bool> forward;
    bool oneBodyPhase = llvm::all_of(op->getUsers(), [&](Operation *user) {
      if (state.classes.lookup(user) != OpClass::Body)
        return false;
      auto moved = movedForward.find(user);
      bool isForward = moved != movedForward.end()
                           ? moved->second
                           : state.forwardOps.contains(user);
      if (forward && *forward != isForward)
        return false;
      forward = isForward;
      return true;
    });
    if (!oneBodyPhase)
      continue;
    state.classes[op] = OpClass::Body;
    movedForward[op] = *forward;
    if (*forward)
      state.forwardGathers.insert(op);
  }
  if (movedForward.empty())
    return false;
  state.bodyOps.clear();
  for (Operation *op : ops)
    if (state.classes.lookup(op) == OpClass::Body)
      state.bodyOps.push_back(op);
  return true;
}

/// Stage k starts at the first op with dist.stage = k.
static LogicalResult cutAtAnnotations(PipelineState &state,
                                      ArrayRef<Operation *> forward) {
  int64_t stages = state.spec.getNumStages();
  StringRef stageAttr = dist::DistDialect::kStageAttrName;
  int64_t current = 0;
  for (Operation *op : forward) {
    if (auto mark = op->getAttrOfType<IntegerAttr>(stageAttr)) {
      if (mark.getInt() < current || mark.getInt() >= stages)
        return op->emitError("pipeline stage ")
               << mark.getInt() << " does not follow stage " << current
               << " of " << stages
               << " (stage annotations must increase in program order)";
      current = mark.getInt();
    }
    state.stageOf[op] = current;
  }
  if (current != stages - 1)
    return state.function.emitError("the dist.stage annotations cut ")
           << current + 1 << " stages, but the pipeline has " << stages;
  return success();
}

/// The cut points among `boundaries` (indices into `forward`) that are not
/// inside a unit's flat buffer (the ZeRO pass's packing): between the
/// first and the last forward read of one, a cut would have both stages
/// hold it. Where that leaves too few cuts, any layer boundary serves.
static SmallVector<int64_t>
keepCutsOutsideUnits(ArrayRef<Operation *> forward,
                     SmallVector<int64_t> boundaries, int64_t stages) {
  int64_t forwardCount = forward.size();
  SmallVector<int64_t> unitReads(forwardCount + 1, 0);
  DenseMap<BlockArgument, std::pair<int64_t, int64_t>> unitSpan;
  for (auto [i, op] : llvm::enumerate(forward))
    for (Value operand : op->getOperands())
      if (BlockArgument unit = getFlatBuffer(operand)) {
        auto [it, added] = unitSpan.try_emplace(unit, i, i);
        it->second.second = i;
      }
  for (auto &[unit, span] : unitSpan) {
    unitReads[span.first + 1] += 1;
    unitReads[span.second + 1] -= 1;
  }
  for (int64_t i = 1; i <= forwardCount; ++i)
    unitReads[i] += unitReads[i - 1];
  SmallVector<int64_t> outsideUnits;
  for (int64_t i : boundaries)
    if (unitReads[i] == 0)
      outsideUnits.push_back(i);
  if (static_cast<int64_t>(outsideUnits.size()) >= stages)
    return outsideUnits;
  return boundaries;
}

/// The cut points among `starts` where the backward reads what crosses (a
/// checkpoint): inside a layer that full recomputation remakes, a later
/// stage's backward would remake the earlier stage's ops there, and the
/// ops between would run on the earlier stage. Where that leaves too few
/// cuts, the others serve. A scalar that crosses (a layer's load-balancing
/// loss, added to the loss at the end) is no layer's value: it keeps no cut
/// out.
static SmallVector<int64_t> keepCheckpointCuts(const PipelineState &state,
                                               ArrayRef<Operation *> forward,
                                               SmallVector<int64_t> starts,
                                               int64_t stages) {
  int64_t forwardCount = forward.size();
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(forward))
    position[op] = i;
  SmallVector<int64_t> unread(forwardCount + 1, 0);
  for (auto [i, op] : llvm::enumerate(forward))
    for (Value result : op->getResults()) {
      if (auto type = dyn_cast<RankedTensorType>(result.getType());
          type && type.getRank() == 0)
        continue;
      int64_t last = i;
      bool readBackward = false;
      for (Operation *user : result.getUsers()) {
        if (auto it = position.find(user); it != position.end())
          last = std::max<int64_t>(last, it->second);
        readBackward |= state.classes.lookup(user) == OpClass::Body &&
                        !state.forwardOps.contains(user);
      }
      if (!readBackward && last > static_cast<int64_t>(i)) {
        unread[i + 1] += 1;
        unread[last + 1] -= 1;
      }
    }
  for (int64_t i = 1; i <= forwardCount; ++i)
    unread[i] += unread[i - 1];
  SmallVector<int64_t> checkpoints;
  for (int64_t i : starts)
    if (unread[i] == 0)
      checkpoints.push_back(i);
  if (static_cast<int64_t>(checkpoints.size()) >= stages)
    return checkpoints;
  return starts;
}

/// Cuts `forward` into stages: at the dist.stage marks where there are any,
/// else at the layer boundaries that balance the stages' costs.
static LogicalResult cutForward(PipelineState &state,
                                ArrayRef<Operation *> forward) {
  int64_t stages = state.spec.getNumStages();
  int64_t forwardCount = forward.size();
  if (forwardCount < stages)
    return state.function.emitError("cannot cut ")
           << forwardCount << " forward ops into " << stages
           << " pipeline stages";
  if (llvm::any_of(forward, [&](Operation *op) {
        return op->hasAttr(dist::DistDialect::kStageAttrName);
      }))
    return cutAtAnnotations(state, forward);

  // Cut points: the layer boundaries of the forward.
  SmallVector<int64_t> starts = keepCheckpointCuts(
      state, forward,
      keepCutsOutsideUnits(forward, getLayerBoundaries(forward), stages),
      stages);
  if (static_cast<int64_t>(starts.size()) < stages)
    return state.function.emitError("the forward pass has ")
           << starts.size()
           << " places where one value crosses (layer boundaries) to cut "
           << "between, too few for " << stages
           << " pipeline stages; mark the cuts with dist.stage";
  SmallVector<double> costs;
  for (auto [k, start] : llvm::enumerate(starts)) {
    int64_t end = k + 1 < starts.size() ? starts[k + 1] : forwardCount;
    double cost = 0;
    for (int64_t i = start; i < end; ++i) {
      cost += 1; // every op costs a launch
      if (auto costOp = dyn_cast<CostOpInterface>(forward[i]))
        cost += costOp.getFlops();
    }
    costs.push_back(cost);
  }
  StageCuts cuts = balanceStages(costs, stages);
  for (int64_t stage = 0; stage < stages; ++stage) {
    int64_t begin = starts[cuts.starts[stage]];
    int64_t end =
        stage + 1 < stages ? starts[cuts.starts[stage + 1]] : forward.size();
    for (int64_t i = begin; i < end; ++i)
      state.stageOf[forward[i]] = stage;
  }
  return success();
}

/// Places the gathers moved into the forward units at the stages that read
/// them.
static void placeGathers(PipelineState &state) {
  // In reverse, so that an op's readers are placed before it: at the first
  // stage that reads it, and cloned for each later one (a tied embedding's
  // gather, for the embedding and for the LM head), so that no stage sends
  // a parameter it gathered to another.
  SmallVector<Operation *> gathers;
  for (Operation &op : state.body->without_terminator())
    if (state.forwardGathers.contains(&op))
      gathers.push_back(&op);
  for (Operation *op : llvm::reverse(gathers)) {
    std::set<int64_t> readers;
    for (Operation *user : op->getUsers())
      if (auto it = state.stageOf.find(user); it != state.stageOf.end())
        readers.insert(it->second);
    if (readers.empty())
      continue;
    state.stageOf[op] = *readers.begin();
    OpBuilder builder(op);
    for (int64_t stage : llvm::drop_begin(readers)) {
      Operation *clone = builder.clone(*op);
      op->replaceUsesWithIf(clone->getResults(), [&](OpOperand &use) {
        return state.stageOf.lookup(use.getOwner()) == stage;
      });
      state.classes[clone] = OpClass::Body;
      state.forwardGathers.insert(clone);
      state.stageOf[clone] = stage;
    }
  }
  // The clones in program order.
  llvm::SetVector<Operation *> forward;
  state.bodyOps.clear();
  for (Operation &op : state.body->without_terminator()) {
    if (state.classes.lookup(&op) != OpClass::Body)
      continue;
    state.bodyOps.push_back(&op);
    if (state.forwardOps.contains(&op) || state.forwardGathers.contains(&op))
      forward.insert(&op);
  }
  state.forwardOps = std::move(forward);
}

LogicalResult pipeline::cutStages(PipelineState &state) {
  // The gathers moved into the forward units carry no activation between
  // layers: they are not cut, and each runs where it is read.
  SmallVector<Operation *> forward;
  for (Operation *op : state.forwardOps)
    if (!state.forwardGathers.contains(op))
      forward.push_back(op);
  if (failed(cutForward(state, forward)))
    return failure();
  placeGathers(state);
  return success();
}

/// Places each backward op at the latest stage whose forward values it
/// reads, or else with the weights it reads or the earliest stage of the
/// gradients it reads; one that reads none of them runs where it is read.
static void placeBackwardOps(PipelineState &state) {
  // The latest stage whose forward ops read a forward value (a layer's
  // input belongs to the layer, not to the one that made it).
  auto getReaderStage = [&](Value value) {
    int64_t stage = state.stageOf.lookup(value.getDefiningOp());
    for (Operation *user : value.getUsers())
      if (state.forwardOps.contains(user))
        stage = std::max(stage, state.stageOf.lookup(user));
    return stage;
  };
  // Likewise for a weight (a parameter, or pre ops' results made from one,
  // like its transpose or a unit's member): the latest stage whose forward
  // ops read it.
  DenseMap<Value, std::optional<int64_t>> weightStages;
  std::function<std::optional<int64_t>(Value)> getWeightStage =
      [&](Value value) -> std::optional<int64_t> {
    if (auto it = weightStages.find(value); it != weightStages.end())
      return it->second;
    std::optional<int64_t> stage;
    for (Operation *user : value.getUsers()) {
      std::optional<int64_t> through;
      if (state.forwardOps.contains(user))
        through = state.stageOf.lookup(user);
      else if (state.classes.lookup(user) == OpClass::Pre)
        for (Value result : user->getResults())
          if (std::optional<int64_t> next = getWeightStage(result))
            through = through ? std::max(*through, *next) : *next;
      if (through)
        stage = stage ? std::max(*stage, *through) : *through;
    }
    return weightStages[value] = stage;
  };
  // (A weight stash, --tessera-weight-stash, is a version of one.)
  std::function<bool(Value)> isWeight = [&](Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return state.function.getArgAttr(arg.getArgNumber(),
                                       nn::kParamAttrName) ||
             state.function.getArgAttr(arg.getArgNumber(),
                                       nn::kVersionOfAttrName);
    Operation *def = value.getDefiningOp();
    return def && state.classes.lookup(def) == OpClass::Pre &&
           llvm::any_of(def->getOperands(), isWeight);
  };
  // A weight's stage is its parameter's: a view the backward reads (of a
  // unit's buffer, made for the backward) runs where the forward's do.
  std::function<Value(Value)> getParameter = [&](Value value) {
    if (Operation *def = value.getDefiningOp())
      for (Value operand : def->getOperands())
        if (isWeight(operand))
          return getParameter(operand);
    return value;
  };
  SmallVector<Operation *> unplaced;
  for (Operation *op : state.bodyOps) {
    if (state.forwardOps.contains(op))
      continue;
    std::optional<int64_t> fromForward, fromWeights, fromBackward;
    for (Value operand : op->getOperands()) {
      if (!state.isBody(operand)) {
        if (!isWeight(operand))
          continue;
        if (std::optional<int64_t> stage =
                getWeightStage(getParameter(operand)))
          fromWeights = fromWeights ? std::max(*fromWeights, *stage) : *stage;
        continue;
      }
      Operation *def = operand.getDefiningOp();
      if (state.forwardOps.contains(def)) {
        int64_t stage = getReaderStage(operand);
        fromForward = fromForward ? std::max(*fromForward, stage) : stage;
      } else if (auto it = state.stageOf.find(def); it != state.stageOf.end()) {
        fromBackward =
            fromBackward ? std::min(*fromBackward, it->second) : it->second;
      }
    }
    // Gradients flow to earlier stages: a backward op that reads weights
    // (dX = dY W^T) runs with them, unless its gradient operands come
    // from an earlier stage still.
    if (fromWeights && !fromForward)
      fromBackward =
          fromBackward ? std::min(*fromBackward, *fromWeights) : *fromWeights;
    if (fromForward || fromBackward)
      state.stageOf[op] = fromForward ? *fromForward : *fromBackward;
    else
      unplaced.push_back(op);
  }
  // Ops that read only data, pre values and such ops run where they are
  // read.
  for (Operation *op : llvm::reverse(unplaced)) {
    int64_t stage = state.spec.getNumStages() - 1;
    for (Operation *user : op->getUsers())
      if (auto it = state.stageOf.find(user); it != state.stageOf.end())
        stage = std::min(stage, it->second);
    state.stageOf[op] = stage;
  }
}

/// A backward op that only reshapes one gradient (a transpose, a reshape)
/// for ops of one earlier stage runs there: the gradient crosses once, not
/// each of its views.
static void moveViewsToReaders(PipelineState &state) {
  for (Operation *op : llvm::reverse(state.bodyOps)) {
    if (state.forwardOps.contains(op) || op->getNumResults() != 1 ||
        op->getNumOperands() != 1 || !state.isBody(op->getOperand(0)))
      continue;
    std::optional<int64_t> readers;
    bool movable = true;
    for (Operation *user : op->getUsers()) {
      auto it = state.stageOf.find(user);
      if (it == state.stageOf.end() || (readers && *readers != it->second)) {
        movable = false;
        break;
      }
      readers = it->second;
    }
    if (movable && readers && *readers < state.stageOf.lookup(op))
      state.stageOf[op] = *readers;
  }
}

/// Forward values flow to later stages, gradients to earlier ones.
static LogicalResult checkDirections(PipelineState &state) {
  for (Operation *op : state.bodyOps) {
    bool forward = state.forwardOps.contains(op);
    for (Value operand : op->getOperands()) {
      if (!state.isBody(operand) || state.isData(operand))
        continue;
      Operation *def = operand.getDefiningOp();
      int64_t from = state.stageOf.lookup(def), to = state.stageOf.lookup(op);
      bool defForward = state.forwardOps.contains(def);
      if ((forward && from > to) || (!forward && !defForward && from < to))
        return op->emitError("cannot pipeline: this op of stage ")
               << to << " reads a value of stage " << from
               << ", against the direction of the "
               << (forward ? "forward" : "backward") << " pass";
    }
  }
  return success();
}

LogicalResult pipeline::assignBackward(PipelineState &state) {
  placeBackwardOps(state);
  moveViewsToReaders(state);
  return checkDirections(state);
}

void pipeline::splitWeightGradients(PipelineState &state) {
  // A backward op is an input-gradient op when a body op of another stage
  // reads its results, or an input-gradient op of its own stage does.
  llvm::DenseSet<Operation *> inputGradient;
  for (Operation *op : llvm::reverse(state.bodyOps)) {
    if (state.forwardOps.contains(op))
      continue;
    int64_t stage = state.stageOf.lookup(op);
    bool needed = llvm::any_of(op->getUsers(), [&](Operation *user) {
      auto it = state.stageOf.find(user);
      return it != state.stageOf.end() &&
             (it->second != stage || inputGradient.contains(user));
    });
    if (needed)
      inputGradient.insert(op);
    else
      state.weightOps.insert(op);
  }
}

/// Adds to `op`'s ranks those of its readers (post readers only
/// `withPost`).
static void addReaderRanks(PipelineState &state, Operation *op, bool withPost) {
  // Gathered apart: a reference into ranksOf would dangle when reading a
  // user's entry grows the map.
  std::set<int64_t> readers;
  for (Operation *user : op->getUsers())
    if (withPost || state.classes.lookup(user) != OpClass::Post)
      if (auto it = state.ranksOf.find(user); it != state.ranksOf.end())
        readers.insert(it->second.begin(), it->second.end());
  state.ranksOf[op].insert(readers.begin(), readers.end());
}

/// Per argument, the ranks whose body or pre ops read it.
static SmallVector<std::set<int64_t>> getArgumentRanks(PipelineState &state) {
  func::FuncOp function = state.function;
  auto returnOp = cast<func::ReturnOp>(state.body->getTerminator());
  SmallVector<std::set<int64_t>> argRanks(function.getNumArguments());
  for (BlockArgument arg : function.getArguments())
    for (Operation *user : arg.getUsers())
      if (state.classes.lookup(user) != OpClass::Post)
        argRanks[arg.getArgNumber()].insert(state.ranksOf[user].begin(),
                                            state.ranksOf[user].end());
  // A parameter returned as its weight stash's next value
  // (--tessera-weight-stash) is held, and updated, where the stash is read.
  for (OpOperand &result : returnOp->getOpOperands())
    if (auto arg = dyn_cast<BlockArgument>(result.get()))
      if (auto updates = function.getResultAttrOfType<IntegerAttr>(
              result.getOperandNumber(), nn::kUpdatesAttrName))
        argRanks[arg.getArgNumber()].insert(argRanks[updates.getInt()].begin(),
                                            argRanks[updates.getInt()].end());
  return argRanks;
}

/// A post op runs where its results are read: on the ranks that hold the
/// argument a result updates (`argRanks`), and where its post readers run.
static void assignPostRanks(PipelineState &state, ArrayRef<Operation *> ops,
                            ArrayRef<std::set<int64_t>> argRanks) {
  auto returnOp = cast<func::ReturnOp>(state.body->getTerminator());
  for (Operation *op : llvm::reverse(ops)) {
    if (state.classes.lookup(op) != OpClass::Post)
      continue;
    std::set<int64_t> &ranks = state.ranksOf[op];
    // A term of a gradient norm runs where the updates that read its
    // gradient run, so that the gradient goes nowhere else.
    if (state.normTerms.contains(op)) {
      for (Operation *user : op->getOperand(0).getUsers())
        if (auto update = dyn_cast<OptimizerOpInterface>(user);
            update && update.getGradient() == op->getOperand(0))
          ranks.insert(state.ranksOf[user].begin(), state.ranksOf[user].end());
      if (!ranks.empty())
        continue;
    }
    for (OpOperand &use : op->getUses()) {
      if (use.getOwner() != returnOp) {
        ranks.insert(state.ranksOf[use.getOwner()].begin(),
                     state.ranksOf[use.getOwner()].end());
      } else if (auto updates = state.function.getResultAttrOfType<IntegerAttr>(
                     use.getOperandNumber(), nn::kUpdatesAttrName)) {
        const std::set<int64_t> &holders = argRanks[updates.getInt()];
        ranks.insert(holders.begin(), holders.end());
      }
    }
  }
}

/// What is still nowhere (the loss and the terms it sums: a mixture of
/// experts' balance losses, made on every stage) runs on one rank, the
/// last where its inputs are made, and so do the terms it reads: their
/// accumulated inputs are sent there.
static void placeUnreadPostOps(PipelineState &state,
                               ArrayRef<Operation *> ops) {
  auto returnOp = cast<func::ReturnOp>(state.body->getTerminator());
  SmallVector<Operation *> nowhere;
  for (Operation *op : ops) {
    if (state.classes.lookup(op) != OpClass::Post || !state.ranksOf[op].empty())
      continue;
    nowhere.push_back(op);
    int64_t last = 0;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && state.classes.lookup(def) != OpClass::Pre)
        for (int64_t rank : state.ranksOf[def])
          last = std::max(last, rank);
    state.ranksOf[op] = {last};
  }
  for (Operation *op : llvm::reverse(nowhere)) {
    std::set<int64_t> readers;
    for (Operation *user : op->getUsers())
      if (user != returnOp)
        readers.insert(state.ranksOf[user].begin(), state.ranksOf[user].end());
    if (!readers.empty())
      state.ranksOf[op] = readers;
  }
}

/// An argument read on more ranks than its update runs on (optimizer
/// state that every stage's pre ops read, as the loss scale) is updated
/// on each of them, and the post ops its update reads with it: every copy
/// stays the same.
static void updateWhereRead(PipelineState &state) {
  func::FuncOp function = state.function;
  auto returnOp = cast<func::ReturnOp>(state.body->getTerminator());
  for (bool changed = true; changed;) {
    changed = false;
    for (OpOperand &result : returnOp->getOpOperands()) {
      auto updates = function.getResultAttrOfType<IntegerAttr>(
          result.getOperandNumber(), nn::kUpdatesAttrName);
      Operation *update = result.get().getDefiningOp();
      if (!updates || !update || state.classes.lookup(update) != OpClass::Post)
        continue;
      std::set<int64_t> readers;
      for (Operation *user : function.getArgument(updates.getInt()).getUsers())
        readers.insert(state.ranksOf[user].begin(), state.ranksOf[user].end());
      SmallVector<Operation *> worklist = {update};
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        std::set<int64_t> &ranks = state.ranksOf[op];
        size_t before = ranks.size();
        ranks.insert(readers.begin(), readers.end());
        if (ranks.size() == before)
          continue;
        changed = true;
        // A gradient norm is made on every rank from each rank's terms.
        if (state.normRoots.contains(op))
          continue;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && state.classes.lookup(def) != OpClass::Body)
            worklist.push_back(def);
      }
    }
  }
}

void pipeline::assignRanks(PipelineState &state) {
  for (Operation *op : state.bodyOps)
    state.ranksOf[op] = {state.getRank(state.stageOf.lookup(op))};
  // The ranks whose body or pre ops read an argument; pre ops first get the
  // ranks of their body and pre readers.
  SmallVector<Operation *> ops;
  for (Operation &op : state.body->without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (state.classes.lookup(op) == OpClass::Pre)
      addReaderRanks(state, op, /*withPost=*/false);
  SmallVector<std::set<int64_t>> argRanks = getArgumentRanks(state);
  assignPostRanks(state, ops, argRanks);
  placeUnreadPostOps(state, ops);
  // Pre ops that post ops read run on those ranks too.
  for (Operation *op : llvm::reverse(ops))
    if (state.classes.lookup(op) == OpClass::Pre)
      addReaderRanks(state, op, /*withPost=*/true);
  updateWhereRead(state);
}
