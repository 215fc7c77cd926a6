//===- Pipeline.cpp - Pipeline stages and schedules (--tessera-pipeline) --===//
//
// Cuts a partitioned, microbatched step into one program per pipeline rank:
// classes (pre, body, post), stage cuts, transfers, the microbatch schedule
// and gradient accumulation. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Pipeline/Pipeline.h"
#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/PipelineSchedule.h"
#include "tessera/Analysis/StageCuts.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>
#include <map>
#include <set>

namespace tessera {
#define GEN_PASS_DEF_PIPELINEPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-pipeline"

using namespace mlir;
using namespace tessera;

namespace {

// Short names for the schedule's pieces, which this file uses throughout.
using UnitKind = PipelineUnitKind;
using Unit = PipelineUnit;
using Event = PipelineEvent;

enum class OpClass { Pre, Body, Post };

/// A tensor that one rank sends to another: a body value on a microbatch,
/// or (microbatch -1) a value accumulated over all of them. The sends of
/// one value to one rank share a tag: a channel delivers in order.
struct Message {
  Value value;
  int64_t microbatch;
  int64_t from, to, tag;
};

/// A unit of a rank's program, which its schedule runs once per microbatch.
struct UnitTemplate {
  UnitKind kind;
  int64_t stage;
};

/// The index in `templates` of the unit that `unit` runs.
int64_t findTemplate(ArrayRef<UnitTemplate> templates,
                     const PipelineUnit &unit) {
  return llvm::find_if(templates,
                       [&](const UnitTemplate &t) {
                         return t.kind == unit.kind && t.stage == unit.stage;
                       }) -
         templates.begin();
}

class Pipeliner {
public:
  Pipeliner(func::FuncOp function, dist::MeshOp mesh, PipelineSpec spec)
      : function(function), mesh(mesh), spec(spec) {}

  LogicalResult run();

private:
  LogicalResult classify();
  LogicalResult findGradientNorms();
  void findForward();
  bool moveGathersIntoUnits();
  LogicalResult cutStages();
  LogicalResult cutForward(ArrayRef<Operation *> forward);
  void placeGathers();
  LogicalResult assignBackward();
  void splitWeightGradients();
  void assignRanks();
  LogicalResult planMessages();
  LogicalResult simulate();
  /// With 2BW: refuses what a step cannot share with the next.
  LogicalResult checkSteady();
  FailureOr<func::FuncOp> emit(int64_t rank);
  /// Sets `dist.schedule` on `rank`'s function: its units, its schedule
  /// with the slots of each stage's microbatches, and where the units'
  /// sends (numbered by `sendNumber` from their tags) are waited for.
  void setSchedule(func::FuncOp stage, int64_t rank,
                   ArrayRef<UnitTemplate> templates,
                   ArrayRef<StringRef> unitNames,
                   const DenseMap<int64_t, int64_t> &sendNumber);

  /// PipeDream and PipeDream-2BW: no flush between steps, a run also
  /// finishing steps before.
  bool isSteady() const { return tessera::isSteady(spec.schedule); }
  /// Whether a pre op reads an argument (its value differs from step to
  /// step): with 2BW each unit that reads it makes it for its own step.
  bool readsArguments(Operation *op);
  /// With 2BW: the index in `rank`'s schedule of its last backward of the
  /// step before, after which its deferred post ops run (-1: it runs none;
  /// they run after its last entry).
  int64_t getPostAfter(int64_t rank) const;
  /// Without a flush: how many of `rank`'s updates the weights its steps
  /// read lag them. 2BW's steps read the weights of the step before;
  /// PipeDream's read the rank's latest, which lag as many updates as the
  /// rank's backwards lag its forwards.
  int64_t getWeightDelay(int64_t rank) const {
    return spec.schedule == PipelineSchedule::TwoBW
               ? 1
               : getWarmupUnits(spec, rank, /*hasBackward=*/true);
  }

  bool isData(Value value) const {
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && dataArgs.contains(arg.getArgNumber());
  }
  bool isBody(Value value) const {
    Operation *op = value.getDefiningOp();
    return op && classes.lookup(op) == OpClass::Body;
  }
  int64_t getRank(int64_t stage) const { return stage % spec.ranks; }
  /// The kind of unit a body op runs in.
  UnitKind getKind(Operation *op) const {
    return forwardOps.contains(op)  ? UnitKind::Forward
           : weightOps.contains(op) ? UnitKind::Weight
                                    : UnitKind::Backward;
  }
  /// The ranks an op runs on.
  const std::set<int64_t> &getRanks(Operation *op) { return ranksOf[op]; }
  /// Whether `op` is an all_reduce over the microbatch axis.
  static bool isMicrobatchReduction(Operation *op);
  /// The sharding `attr` without the microbatch axis.
  Attribute dropMicrobatchAxis(Attribute attr) const;

  func::FuncOp function;
  dist::MeshOp mesh;
  PipelineSpec spec;
  Block *body = nullptr;
  llvm::DenseSet<unsigned> dataArgs;
  DenseMap<Operation *, OpClass> classes;
  /// Body ops in program order, and the forward ones among them.
  SmallVector<Operation *> bodyOps;
  llvm::SetVector<Operation *> forwardOps;
  /// The parameters' gathers (and their views) moved into the forward
  /// units: they run where they are read.
  llvm::DenseSet<Operation *> forwardGathers;
  /// With ZB-H1: the backward ops that make no gradient another stage reads
  /// (weight gradients), which run in their own units.
  llvm::DenseSet<Operation *> weightOps;
  DenseMap<Operation *, int64_t> stageOf;
  DenseMap<Operation *, std::set<int64_t>> ranksOf;
  /// Body values read by post ops or returned: summed over microbatches on
  /// the rank that makes them.
  llvm::SetVector<Value> accumulated;
  /// Gradient clipping's norms (the nn.sqrt each update reads as its
  /// grad_norm), the ops of the sums under them (nn.add and dist.all_reduce
  /// of scalars) and their terms (nn.sum_squares of a gradient): each rank
  /// sums the terms of the gradients its updates read, and the ranks' sums
  /// meet in one all_reduce over the pipeline axis.
  llvm::SetVector<Operation *> normRoots;
  llvm::DenseSet<Operation *> normSums, normTerms;
  SmallVector<Message> messages;
  /// Per rank, the schedule's units and the events that run them.
  SmallVector<SmallVector<Unit>> units;
  SmallVector<SmallVector<Event>> events;
  /// Per message, the event of its sender after which its send is waited
  /// (-1: at the end of the program).
  SmallVector<int64_t> waitAfter;
  DenseMap<Operation *, bool> argumentReaders;
};

} // namespace

bool Pipeliner::isMicrobatchReduction(Operation *op) {
  auto reduce = dyn_cast<dist::AllReduceOp>(op);
  return reduce && llvm::any_of(reduce.getMeshAxes(), [](Attribute axis) {
           return cast<StringAttr>(axis).getValue() == kMicrobatchAxis;
         });
}

Attribute Pipeliner::dropMicrobatchAxis(Attribute attr) const {
  auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr);
  if (!sharding)
    return attr;
  MLIRContext *context = sharding.getContext();
  SmallVector<dist::DimShardingAttr> dims;
  for (dist::DimShardingAttr dim : sharding.getDims()) {
    SmallVector<StringAttr> axes;
    for (StringAttr axis : dim.getAxes())
      if (axis.getValue() != kMicrobatchAxis)
        axes.push_back(axis);
    dims.push_back(dist::DimShardingAttr::get(context, axes, dim.getIsOpen(),
                                              dim.getPriority()));
  }
  return dist::ShardingAttr::get(
      context, sharding.getMesh(), dims, sharding.getReplicatedAxes(),
      sharding.getUnreducedAxes(), sharding.getFlatAxes());
}

LogicalResult Pipeliner::classify() {
  body = &function.getBody().front();
  for (BlockArgument arg : function.getArguments())
    if (!function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName) &&
        !function.getArgAttr(arg.getArgNumber(), nn::kStateAttrName))
      dataArgs.insert(arg.getArgNumber());
  bool microbatched = spec.microbatches > 1;
  for (Operation &op : body->without_terminator()) {
    if (op.hasAttr(dist::DistDialect::kStreamAttrName) ||
        isa<dist::WaitOp, dist::SendOp, dist::RecvOp>(op))
      return op.emitError("cannot pipeline a program that is already "
                          "scheduled: run --tessera-pipeline before "
                          "--tessera-schedule");
    auto classOf = [&](Value value) -> std::optional<OpClass> {
      if (isData(value))
        return OpClass::Body;
      Operation *def = value.getDefiningOp();
      if (!def)
        return std::nullopt;
      return classes.lookup(def);
    };
    bool readsPost = false, readsBody = false;
    for (Value operand : op.getOperands()) {
      std::optional<OpClass> kind = classOf(operand);
      readsPost |= kind == OpClass::Post;
      readsBody |= kind == OpClass::Body;
    }
    // An index along the microbatches differs from one microbatch to the
    // next, as data does.
    if (auto index = dyn_cast<dist::AxisIndexOp>(op))
      for (unsigned group = 0; group < index.getGroups().size(); ++group)
        readsBody |= llvm::is_contained(index.getGroup(group), kMicrobatchAxis);
    // A sum that is only summed over microbatches is a sum of sums: its
    // terms accumulate where they are made and meet once per step (a tied
    // embedding's gradient from the first and the last stage).
    bool sumOfSums = isa<nn::AddOp>(op) && readsBody && !readsPost &&
                     llvm::all_of(op.getUsers(), [](Operation *user) {
                       auto reduce = dyn_cast<dist::AllReduceOp>(user);
                       return reduce && isMicrobatchReduction(user) &&
                              (reduce.getKind() == dist::ReductionKind::sum ||
                               reduce.getKind() == dist::ReductionKind::avg);
                     });
    // A gradient norm is made after the gradients, as the updates are.
    bool norm = normTerms.contains(&op) || normSums.contains(&op) ||
                normRoots.contains(&op);
    bool post = readsPost || sumOfSums || isMicrobatchReduction(&op) ||
                isa<OptimizerOpInterface>(op) || norm;
    classes[&op] = post        ? OpClass::Post
                   : readsBody ? OpClass::Body
                               : OpClass::Pre;
    if (post) {
      for (Value operand : op.getOperands()) {
        if (classOf(operand) != OpClass::Body)
          continue;
        if (microbatched && !isMicrobatchReduction(&op) && !sumOfSums)
          return op.emitError("cannot split into microbatches: '")
                 << op.getName()
                 << "' reads a per-microbatch value that is not reduced over "
                    "microbatches (an all_reduce over \""
                 << kMicrobatchAxis << "\")";
        if (isData(operand))
          return op.emitError("cannot pipeline: an optimizer update reads a "
                              "data argument");
        accumulated.insert(operand);
      }
      continue;
    }
    if (!readsBody)
      continue;
    bodyOps.push_back(&op);
    if (auto collective = dyn_cast<dist::CollectiveOpInterface>(op))
      for (Attribute axis : collective.getMeshAxes())
        if (cast<StringAttr>(axis).getValue() == kMicrobatchAxis)
          return op.emitError("cannot split into microbatches: this "
                              "collective needs values of other microbatches "
                              "(an op reads the whole batch)");
  }
  auto returnOp = cast<func::ReturnOp>(body->getTerminator());
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    if (isData(operand))
      return returnOp.emitError("cannot pipeline: result #")
             << index << " is a data argument";
    if (!isBody(operand))
      continue;
    if (microbatched)
      return returnOp.emitError("cannot split into microbatches: result #")
             << index << " is a per-microbatch value (reduce it, e.g. to a "
             << "mean, or return it from an unpipelined program)";
    accumulated.insert(operand);
  }
  return success();
}

LogicalResult Pipeliner::findGradientNorms() {
  body = &function.getBody().front();
  for (Operation &op : body->without_terminator())
    if (auto update = dyn_cast<nn::AdamWOp>(op); update && update.getGradNorm())
      if (Operation *root = update.getGradNorm().getDefiningOp())
        normRoots.insert(root);
  for (Operation *root : normRoots) {
    if (!isa<nn::SqrtOp>(root))
      return root->emitError("cannot pipeline: the gradient norm is not the "
                             "square root of a sum of nn.sum_squares");
    SmallVector<Value> worklist = {root->getOperand(0)};
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (isa_and_nonnull<nn::SumSquaresOp>(def)) {
        normTerms.insert(def);
        continue;
      }
      bool sum =
          isa_and_nonnull<nn::AddOp>(def) ||
          (isa_and_nonnull<dist::AllReduceOp>(def) &&
           !isMicrobatchReduction(def) &&
           cast<dist::AllReduceOp>(def).getKind() == dist::ReductionKind::sum);
      if (!sum)
        return root->emitError("cannot pipeline: the gradient norm sums a "
                               "value that is no nn.sum_squares");
      normSums.insert(def);
      llvm::append_range(worklist, def->getOperands());
    }
  }
  return success();
}

void Pipeliner::findForward() {
  // The loss: the first scalar float result that updates no argument. The
  // forward ops are the body ops it depends on; with no loss, all are.
  auto returnOp = cast<func::ReturnOp>(body->getTerminator());
  Value loss;
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!loss && type && type.getRank() == 0 &&
        isa<FloatType>(type.getElementType()) &&
        !function.getResultAttr(index, nn::kUpdatesAttrName))
      loss = operand;
  }
  bool hasUpdates = llvm::any_of(body->without_terminator(), [](Operation &op) {
    return isa<OptimizerOpInterface>(op);
  });
  if (!loss || !hasUpdates) {
    forwardOps.insert(bodyOps.begin(), bodyOps.end());
    return;
  }
  SmallVector<Value> worklist = {loss};
  llvm::DenseSet<Operation *> seen;
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || classes.lookup(def) == OpClass::Pre || !seen.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
  }
  for (Operation *op : bodyOps)
    if (seen.contains(op))
      forwardOps.insert(op);
}

LogicalResult Pipeliner::cutStages() {
  // The gathers moved into the forward units carry no activation between
  // layers: they are not cut, and each runs where it is read.
  SmallVector<Operation *> forward;
  for (Operation *op : forwardOps)
    if (!forwardGathers.contains(op))
      forward.push_back(op);
  if (failed(cutForward(forward)))
    return failure();
  placeGathers();
  return success();
}

void Pipeliner::placeGathers() {
  // In reverse, so that an op's readers are placed before it: at the first
  // stage that reads it, and cloned for each later one (a tied embedding's
  // gather, for the embedding and for the LM head), so that no stage sends
  // a parameter it gathered to another.
  SmallVector<Operation *> gathers;
  for (Operation &op : body->without_terminator())
    if (forwardGathers.contains(&op))
      gathers.push_back(&op);
  for (Operation *op : llvm::reverse(gathers)) {
    std::set<int64_t> readers;
    for (Operation *user : op->getUsers())
      if (auto it = stageOf.find(user); it != stageOf.end())
        readers.insert(it->second);
    if (readers.empty())
      continue;
    stageOf[op] = *readers.begin();
    OpBuilder builder(op);
    for (int64_t stage : llvm::drop_begin(readers)) {
      Operation *clone = builder.clone(*op);
      op->replaceUsesWithIf(clone->getResults(), [&](OpOperand &use) {
        return stageOf.lookup(use.getOwner()) == stage;
      });
      classes[clone] = OpClass::Body;
      forwardGathers.insert(clone);
      stageOf[clone] = stage;
    }
  }
  // The clones in program order.
  llvm::SetVector<Operation *> forward;
  bodyOps.clear();
  for (Operation &op : body->without_terminator()) {
    if (classes.lookup(&op) != OpClass::Body)
      continue;
    bodyOps.push_back(&op);
    if (forwardOps.contains(&op) || forwardGathers.contains(&op))
      forward.insert(&op);
  }
  forwardOps = std::move(forward);
}

LogicalResult Pipeliner::cutForward(ArrayRef<Operation *> forward) {
  int64_t stages = spec.getNumStages();
  int64_t n = forward.size();
  if (n < stages)
    return function.emitError("cannot cut ")
           << n << " forward ops into " << stages << " pipeline stages";

  // Annotated cuts: stage k starts at the first op with dist.stage = k.
  StringRef stageAttr = dist::DistDialect::kStageAttrName;
  if (llvm::any_of(forward,
                   [&](Operation *op) { return op->hasAttr(stageAttr); })) {
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
      stageOf[op] = current;
    }
    if (current != stages - 1)
      return function.emitError("the dist.stage annotations cut ")
             << current + 1 << " stages, but the pipeline has " << stages;
    return success();
  }

  // Cut points: the layer boundaries of the forward.
  SmallVector<int64_t> boundaries = getLayerBoundaries(forward);
  // Not inside a unit's flat buffer (the ZeRO pass's packing): between the
  // first and the last forward read of one, a cut would have both stages
  // hold it. Where that leaves too few cuts, any layer boundary serves.
  SmallVector<int64_t> unitReads(n + 1, 0);
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
  for (int64_t i = 1; i <= n; ++i)
    unitReads[i] += unitReads[i - 1];
  SmallVector<int64_t> starts = boundaries, outsideUnits;
  for (int64_t i : boundaries)
    if (unitReads[i] == 0)
      outsideUnits.push_back(i);
  if (static_cast<int64_t>(outsideUnits.size()) >= stages)
    starts = std::move(outsideUnits);
  // Where the backward reads what crosses (a checkpoint): inside a layer
  // that full recomputation remakes, a later stage's backward would remake
  // the earlier stage's ops there, and the ops between would run on the
  // earlier stage. Where that leaves too few cuts, the others serve. A
  // scalar that crosses (a layer's load-balancing loss, added to the loss at
  // the end) is no layer's value: it keeps no cut out.
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(forward))
    position[op] = i;
  SmallVector<int64_t> unread(n + 1, 0);
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
        readBackward |=
            classes.lookup(user) == OpClass::Body && !forwardOps.contains(user);
      }
      if (!readBackward && last > static_cast<int64_t>(i)) {
        unread[i + 1] += 1;
        unread[last + 1] -= 1;
      }
    }
  for (int64_t i = 1; i <= n; ++i)
    unread[i] += unread[i - 1];
  SmallVector<int64_t> checkpoints;
  for (int64_t i : starts)
    if (unread[i] == 0)
      checkpoints.push_back(i);
  if (static_cast<int64_t>(checkpoints.size()) >= stages)
    starts = std::move(checkpoints);
  if (static_cast<int64_t>(starts.size()) < stages)
    return function.emitError("the forward pass has ")
           << starts.size()
           << " places where one value crosses (layer boundaries) to cut "
           << "between, too few for " << stages
           << " pipeline stages; mark the cuts with dist.stage";
  SmallVector<double> costs;
  for (auto [k, start] : llvm::enumerate(starts)) {
    int64_t end = k + 1 < starts.size() ? starts[k + 1] : n;
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
      stageOf[forward[i]] = stage;
  }
  return success();
}

LogicalResult Pipeliner::assignBackward() {
  // The latest stage whose forward ops read a forward value (a layer's
  // input belongs to the layer, not to the one that made it).
  auto getReaderStage = [&](Value value) {
    int64_t stage = stageOf.lookup(value.getDefiningOp());
    for (Operation *user : value.getUsers())
      if (forwardOps.contains(user))
        stage = std::max(stage, stageOf.lookup(user));
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
      if (forwardOps.contains(user))
        through = stageOf.lookup(user);
      else if (classes.lookup(user) == OpClass::Pre)
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
      return function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName) ||
             function.getArgAttr(arg.getArgNumber(), nn::kVersionOfAttrName);
    Operation *def = value.getDefiningOp();
    return def && classes.lookup(def) == OpClass::Pre &&
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
  for (Operation *op : bodyOps) {
    if (forwardOps.contains(op))
      continue;
    std::optional<int64_t> fromForward, fromWeights, fromBackward;
    for (Value operand : op->getOperands()) {
      if (!isBody(operand)) {
        if (!isWeight(operand))
          continue;
        if (std::optional<int64_t> stage =
                getWeightStage(getParameter(operand)))
          fromWeights = fromWeights ? std::max(*fromWeights, *stage) : *stage;
        continue;
      }
      Operation *def = operand.getDefiningOp();
      if (forwardOps.contains(def)) {
        int64_t stage = getReaderStage(operand);
        fromForward = fromForward ? std::max(*fromForward, stage) : stage;
      } else if (auto it = stageOf.find(def); it != stageOf.end()) {
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
      stageOf[op] = fromForward ? *fromForward : *fromBackward;
    else
      unplaced.push_back(op);
  }
  // Ops that read only data, pre values and such ops run where they are
  // read.
  for (Operation *op : llvm::reverse(unplaced)) {
    int64_t stage = spec.getNumStages() - 1;
    for (Operation *user : op->getUsers())
      if (auto it = stageOf.find(user); it != stageOf.end())
        stage = std::min(stage, it->second);
    stageOf[op] = stage;
  }

  // A backward op that only reshapes one gradient (a transpose, a reshape)
  // for ops of one earlier stage runs there: the gradient crosses once, not
  // each of its views.
  for (Operation *op : llvm::reverse(bodyOps)) {
    if (forwardOps.contains(op) || op->getNumResults() != 1 ||
        op->getNumOperands() != 1 || !isBody(op->getOperand(0)))
      continue;
    std::optional<int64_t> readers;
    bool movable = true;
    for (Operation *user : op->getUsers()) {
      auto it = stageOf.find(user);
      if (it == stageOf.end() || (readers && *readers != it->second)) {
        movable = false;
        break;
      }
      readers = it->second;
    }
    if (movable && readers && *readers < stageOf.lookup(op))
      stageOf[op] = *readers;
  }

  // Forward values flow to later stages, gradients to earlier ones.
  for (Operation *op : bodyOps) {
    bool forward = forwardOps.contains(op);
    for (Value operand : op->getOperands()) {
      if (!isBody(operand) || isData(operand))
        continue;
      Operation *def = operand.getDefiningOp();
      int64_t from = stageOf.lookup(def), to = stageOf.lookup(op);
      bool defForward = forwardOps.contains(def);
      if ((forward && from > to) || (!forward && !defForward && from < to))
        return op->emitError("cannot pipeline: this op of stage ")
               << to << " reads a value of stage " << from
               << ", against the direction of the "
               << (forward ? "forward" : "backward") << " pass";
    }
  }
  return success();
}

void Pipeliner::assignRanks() {
  for (Operation *op : bodyOps)
    ranksOf[op] = {getRank(stageOf.lookup(op))};
  auto returnOp = cast<func::ReturnOp>(body->getTerminator());
  // The ranks whose body or pre ops read an argument; pre ops first get the
  // ranks of their body and pre readers.
  auto addUsers = [&](Operation *op, bool withPost) {
    std::set<int64_t> &ranks = ranksOf[op];
    for (Operation *user : op->getUsers())
      if (withPost || classes.lookup(user) != OpClass::Post)
        ranks.insert(ranksOf[user].begin(), ranksOf[user].end());
  };
  SmallVector<Operation *> ops;
  for (Operation &op : body->without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (classes.lookup(op) == OpClass::Pre)
      addUsers(op, /*withPost=*/false);
  SmallVector<std::set<int64_t>> argRanks(function.getNumArguments());
  for (BlockArgument arg : function.getArguments())
    for (Operation *user : arg.getUsers())
      if (classes.lookup(user) != OpClass::Post)
        argRanks[arg.getArgNumber()].insert(ranksOf[user].begin(),
                                            ranksOf[user].end());
  // A parameter returned as its weight stash's next value
  // (--tessera-weight-stash) is held, and updated, where the stash is read.
  for (OpOperand &result : returnOp->getOpOperands())
    if (auto arg = dyn_cast<BlockArgument>(result.get()))
      if (auto updates = function.getResultAttrOfType<IntegerAttr>(
              result.getOperandNumber(), nn::kUpdatesAttrName))
        argRanks[arg.getArgNumber()].insert(argRanks[updates.getInt()].begin(),
                                            argRanks[updates.getInt()].end());
  // A post op runs where its results are read: on the ranks that hold the
  // argument a result updates, and where its post readers run.
  for (Operation *op : llvm::reverse(ops)) {
    if (classes.lookup(op) != OpClass::Post)
      continue;
    std::set<int64_t> &ranks = ranksOf[op];
    // A term of a gradient norm runs where the updates that read its
    // gradient run, so that the gradient goes nowhere else.
    if (normTerms.contains(op)) {
      for (Operation *user : op->getOperand(0).getUsers())
        if (auto update = dyn_cast<OptimizerOpInterface>(user);
            update && update.getGradient() == op->getOperand(0))
          ranks.insert(ranksOf[user].begin(), ranksOf[user].end());
      if (!ranks.empty())
        continue;
    }
    for (OpOperand &use : op->getUses()) {
      if (use.getOwner() != returnOp) {
        ranks.insert(ranksOf[use.getOwner()].begin(),
                     ranksOf[use.getOwner()].end());
      } else if (auto updates = function.getResultAttrOfType<IntegerAttr>(
                     use.getOperandNumber(), nn::kUpdatesAttrName)) {
        const std::set<int64_t> &holders = argRanks[updates.getInt()];
        ranks.insert(holders.begin(), holders.end());
      }
    }
  }
  // What is still nowhere (the loss and the terms it sums: a mixture of
  // experts' balance losses, made on every stage) runs on one rank, the
  // last where its inputs are made, and so do the terms it reads: their
  // accumulated inputs are sent there.
  SmallVector<Operation *> nowhere;
  for (Operation *op : ops) {
    if (classes.lookup(op) != OpClass::Post || !ranksOf[op].empty())
      continue;
    nowhere.push_back(op);
    int64_t last = 0;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && classes.lookup(def) != OpClass::Pre)
        for (int64_t rank : ranksOf[def])
          last = std::max(last, rank);
    ranksOf[op] = {last};
  }
  for (Operation *op : llvm::reverse(nowhere)) {
    std::set<int64_t> readers;
    for (Operation *user : op->getUsers())
      if (user != returnOp)
        readers.insert(ranksOf[user].begin(), ranksOf[user].end());
    if (!readers.empty())
      ranksOf[op] = readers;
  }
  // Pre ops that post ops read run on those ranks too.
  for (Operation *op : llvm::reverse(ops))
    if (classes.lookup(op) == OpClass::Pre)
      addUsers(op, /*withPost=*/true);
  // An argument read on more ranks than its update runs on (optimizer
  // state that every stage's pre ops read, as the loss scale) is updated
  // on each of them, and the post ops its update reads with it: every copy
  // stays the same.
  for (bool changed = true; changed;) {
    changed = false;
    for (OpOperand &result : returnOp->getOpOperands()) {
      auto updates = function.getResultAttrOfType<IntegerAttr>(
          result.getOperandNumber(), nn::kUpdatesAttrName);
      Operation *update = result.get().getDefiningOp();
      if (!updates || !update || classes.lookup(update) != OpClass::Post)
        continue;
      std::set<int64_t> readers;
      for (Operation *user : function.getArgument(updates.getInt()).getUsers())
        readers.insert(ranksOf[user].begin(), ranksOf[user].end());
      SmallVector<Operation *> worklist = {update};
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        std::set<int64_t> &ranks = ranksOf[op];
        size_t before = ranks.size();
        ranks.insert(readers.begin(), readers.end());
        if (ranks.size() == before)
          continue;
        changed = true;
        // A gradient norm is made on every rank from each rank's terms.
        if (normRoots.contains(op))
          continue;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && classes.lookup(def) != OpClass::Body)
            worklist.push_back(def);
      }
    }
  }
}

void Pipeliner::splitWeightGradients() {
  // A backward op is an input-gradient op when a body op of another stage
  // reads its results, or an input-gradient op of its own stage does.
  llvm::DenseSet<Operation *> inputGradient;
  for (Operation *op : llvm::reverse(bodyOps)) {
    if (forwardOps.contains(op))
      continue;
    int64_t stage = stageOf.lookup(op);
    bool needed = llvm::any_of(op->getUsers(), [&](Operation *user) {
      auto it = stageOf.find(user);
      return it != stageOf.end() &&
             (it->second != stage || inputGradient.contains(user));
    });
    if (needed)
      inputGradient.insert(op);
    else
      weightOps.insert(op);
  }
}

LogicalResult Pipeliner::planMessages() {
  bool hasBackward = forwardOps.size() < bodyOps.size();
  for (int64_t rank = 0; rank < spec.ranks; ++rank)
    units.push_back(getPipelineSchedule(spec, rank, hasBackward));
  // Where each rank runs each (kind, stage, microbatch).
  DenseMap<std::tuple<int64_t, int64_t, int64_t>, int64_t> unitIndex;
  auto getUnit = [&](UnitKind kind, int64_t stage, int64_t microbatch) {
    return unitIndex.lookup({static_cast<int64_t>(kind), stage, microbatch});
  };
  for (auto &rankUnits : units)
    for (auto [index, unit] : llvm::enumerate(rankUnits))
      unitIndex[{static_cast<int64_t>(unit.kind), unit.stage,
                 unit.microbatch}] = index;

  // Per rank and unit, the messages it receives first and sends last.
  SmallVector<DenseMap<int64_t, SmallVector<int64_t>>> recvs(spec.ranks),
      sends(spec.ranks);
  int64_t tag = 0;
  for (Operation *op : bodyOps) {
    int64_t stage = stageOf.lookup(op);
    int64_t from = getRank(stage);
    UnitKind kind = getKind(op);
    for (Value result : op->getResults()) {
      // The first unit of each other rank that reads the value.
      std::map<int64_t, std::pair<UnitKind, int64_t>> readers;
      for (Operation *user : result.getUsers()) {
        auto it = stageOf.find(user);
        if (it == stageOf.end() || getRank(it->second) == from)
          continue;
        std::pair<UnitKind, int64_t> reader = {getKind(user), it->second};
        auto [entry, inserted] =
            readers.try_emplace(getRank(it->second), reader);
        auto position = [&](std::pair<UnitKind, int64_t> unit) {
          return getUnit(unit.first, unit.second, 0);
        };
        if (!inserted && position(reader) < position(entry->second))
          entry->second = reader;
      }
      for (auto [to, reader] : readers) {
        for (int64_t m = 0; m < spec.microbatches; ++m) {
          int64_t index = messages.size();
          messages.push_back({result, m, from, to, tag});
          sends[from][getUnit(kind, stage, m)].push_back(index);
          recvs[to][getUnit(reader.first, reader.second, m)].push_back(index);
        }
        ++tag;
      }
    }
  }
  // After the microbatches: accumulated values that post ops read on other
  // ranks.
  SmallVector<SmallVector<int64_t>> postSends(spec.ranks),
      postRecvs(spec.ranks);
  for (Value value : accumulated) {
    int64_t from = getRank(stageOf.lookup(value.getDefiningOp()));
    std::set<int64_t> readers;
    for (Operation *user : value.getUsers())
      if (classes.lookup(user) == OpClass::Post)
        readers.insert(ranksOf[user].begin(), ranksOf[user].end());
    for (int64_t to : readers) {
      if (to == from)
        continue;
      int64_t index = messages.size();
      messages.push_back({value, -1, from, to, tag++});
      postSends[from].push_back(index);
      postRecvs[to].push_back(index);
    }
  }
  // MPI guarantees tags up to 32767: one per value that crosses.
  if (tag > 32767)
    return function.emitError("the pipeline sends ")
           << tag << " distinct values between ranks, more than the 32768 "
           << "tags MPI guarantees";

  events.resize(spec.ranks);
  for (int64_t rank = 0; rank < spec.ranks; ++rank) {
    for (int64_t unit = 0; unit < static_cast<int64_t>(units[rank].size());
         ++unit) {
      for (int64_t message : recvs[rank].lookup(unit))
        events[rank].push_back({Event::Recv, message, unit});
      events[rank].push_back({Event::Compute, -1, unit});
      for (int64_t message : sends[rank].lookup(unit))
        events[rank].push_back({Event::Send, message, unit});
    }
    for (int64_t message : postSends[rank])
      events[rank].push_back({Event::Send, message, -1});
    for (int64_t message : postRecvs[rank])
      events[rank].push_back({Event::Recv, message, -1});
    events[rank].push_back({Event::Compute, -1, -1});
  }
  return success();
}

bool Pipeliner::readsArguments(Operation *op) {
  auto [it, inserted] = argumentReaders.try_emplace(op, false);
  if (!inserted)
    return it->second;
  bool reads = llvm::any_of(op->getOperands(), [&](Value operand) {
    Operation *def = operand.getDefiningOp();
    return !def || readsArguments(def);
  });
  argumentReaders[op] = reads;
  return reads;
}

int64_t Pipeliner::getPostAfter(int64_t rank) const {
  for (int64_t index = units[rank].size() - 1; index >= 0; --index)
    if (units[rank][index].stepOffset < 0)
      return index;
  return -1;
}

LogicalResult Pipeliner::checkSteady() {
  StringRef name = getEnumName(kPipelineScheduleNames, spec.schedule);
  // Each step reads a version of the weights that it stashed
  // (--weight-stash), so that the next step's forwards need not wait for
  // this step's updates.
  for (BlockArgument arg : function.getArguments()) {
    auto param = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       nn::kParamAttrName);
    if (!param)
      continue;
    for (Operation *user : arg.getUsers())
      if (!isa<func::ReturnOp>(user) && classes.lookup(user) != OpClass::Post)
        return user->emitError("the ")
               << name
               << " schedule runs each step at a stashed version of the "
                  "weights: parameter '"
               << param.getValue()
               << "' is read by the forward or backward (compile with "
                  "--weight-stash)";
  }
  if (!normRoots.empty())
    return normRoots.front()->emitError("the ")
           << name
           << " schedule updates each stage when its own backwards are "
              "done: a gradient norm over all stages (--clip-grad, "
              "--loss-scale) needs them all at once";
  // The ranks that finish a step in the next run update it there, right
  // after its last backward: what their forwards sum over the microbatches
  // would by then hold the next step's terms.
  for (Value value : accumulated) {
    Operation *def = value.getDefiningOp();
    int64_t rank = getRank(stageOf.lookup(def));
    if (forwardOps.contains(def) && getPostAfter(rank) >= 0)
      return def->emitError("the ")
             << name
             << " schedule sums forward values over the microbatches only on "
                "the last pipeline rank; this one's is made on rank "
             << rank << " (a loss term of an earlier stage)";
  }
  // Nor may their post ops read a forward value of their own: it would be
  // the run's step's, not the step they finish (PipeDream's steps of one
  // microbatch read them unsummed).
  for (Operation &op : body->without_terminator()) {
    if (classes.lookup(&op) != OpClass::Post)
      continue;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !forwardOps.contains(def))
        continue;
      int64_t rank = getRank(stageOf.lookup(def));
      if (getPostAfter(rank) >= 0 && getRanks(&op).count(rank))
        return def->emitError("the ")
               << name
               << " schedule finishes a step on this rank a run later, "
                  "after the next step's forward: its updates cannot read "
                  "this forward value (made on rank "
               << rank << ")";
    }
  }
  // PipeDream's stages run a step at versions of their weights as many
  // updates apart as their ranks are from the last: a parameter that two
  // ranks read (an embedding tied to the head) would need both.
  if (spec.schedule == PipelineSchedule::PipeDream)
    for (BlockArgument arg : function.getArguments())
      if (auto param = function.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), nn::kVersionOfAttrName)) {
        std::set<int64_t> ranks;
        for (Operation *user : arg.getUsers())
          if (classes.lookup(user) != OpClass::Post)
            ranks.insert(getRanks(user).begin(), getRanks(user).end());
        if (ranks.size() > 1)
          return function.emitError("the pipedream schedule updates each "
                                    "stage's weights at its own pace: "
                                    "parameter '")
                 << param.getValue() << "' is read on pipeline ranks "
                 << *ranks.begin() << " and " << *ranks.rbegin()
                 << " (a tied embedding; use the 2bw schedule)";
      }
  return success();
}

LogicalResult Pipeliner::simulate() {
  SmallVector<int64_t> receivers = llvm::map_to_vector(
      messages, [](const Message &message) { return message.to; });
  TransferSimulation simulation = simulateTransfers(events, receivers);
  if (simulation.deadlockedRank)
    return function.emitError("the pipeline schedule deadlocks at pipeline "
                              "rank ")
           << *simulation.deadlockedRank
           << " (a receive whose send never comes)";
  waitAfter = std::move(simulation.waitAfter);
  return success();
}

FailureOr<func::FuncOp> Pipeliner::emit(int64_t rank) {
  MLIRContext *context = function.getContext();
  OpBuilder builder(function);
  Location loc = function.getLoc();
  StringRef shardingName = dist::DistDialect::kShardingAttrName;
  auto meshName = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  StringAttr axisName = builder.getStringAttr(kPipelineAxis);
  int64_t m = spec.microbatches;
  auto getAttrs = [](DictionaryAttr dict) {
    return dict ? dict.getValue() : ArrayRef<NamedAttribute>();
  };
  // A message's receive, and its send of `value` (started on the
  // communication stream).
  auto createRecv = [&](const Message &message) -> Value {
    return dist::RecvOp::create(builder, loc, message.value.getType(), meshName,
                                axisName,
                                builder.getI64IntegerAttr(message.from),
                                builder.getI64IntegerAttr(message.tag));
  };
  auto createSend = [&](const Message &message, Value value) {
    auto send = dist::SendOp::create(builder, loc, value, meshName, axisName,
                                     builder.getI64IntegerAttr(message.to),
                                     builder.getI64IntegerAttr(message.tag));
    send->setAttr(dist::DistDialect::kStreamAttrName,
                  builder.getI64IntegerAttr(1));
    return send;
  };

  // The arguments this rank reads, in their order.
  llvm::SetVector<unsigned> used;
  for (Operation &op : body->without_terminator()) {
    if (!getRanks(&op).count(rank))
      continue;
    for (Value operand : op.getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand))
        used.insert(arg.getArgNumber());
  }
  auto returnOp = cast<func::ReturnOp>(body->getTerminator());
  // Results: the updates of arguments this rank holds, and what this rank
  // makes (the loss on the last stage's rank).
  SmallVector<unsigned> results;
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    if (auto updates = function.getResultAttrOfType<IntegerAttr>(
            index, nn::kUpdatesAttrName)) {
      // An argument returned as is (a parameter, its stash's next value)
      // is returned where the argument it updates is read.
      Operation *def = operand.getDefiningOp();
      if (def ? getRanks(def).count(rank) : used.contains(updates.getInt())) {
        used.insert(updates.getInt());
        if (auto arg = dyn_cast<BlockArgument>(operand))
          used.insert(arg.getArgNumber());
        results.push_back(index);
      }
      continue;
    }
    // A metric (the gradient norm, made on every rank) is returned by each
    // rank that makes it, so that the rank that logs the loss has it too.
    Operation *def = operand.getDefiningOp();
    int64_t maker = def ? *getRanks(def).begin() : 0;
    bool metric = function.getResultAttr(index, nn::kMetricAttrName) && def &&
                  getRanks(def).count(rank);
    if (maker == rank || metric)
      results.push_back(index);
  }
  SmallVector<unsigned> args(used.begin(), used.end());
  llvm::sort(args);

  auto stage = func::FuncOp::create(
      builder, loc, (function.getSymName() + "_stage" + Twine(rank)).str(),
      builder.getFunctionType({}, {}));
  stage->setAttr(dist::DistDialect::kPipelineRankAttrName,
                 builder.getI64IntegerAttr(rank));
  if (function->hasAttr(dist::DistDialect::kPartitionedAttrName))
    stage->setAttr(dist::DistDialect::kPartitionedAttrName,
                   builder.getUnitAttr());
  Block *block = stage.addEntryBlock();
  builder.setInsertionPointToStart(block);
  IRMapping shared;
  // A gradient norm: this rank's sum of the terms it is the first to make
  // (a gradient tied across stages is read on several), within the stage
  // summed as the partitioner sums them, then over the pipeline axis.
  std::function<Value(Value)> sumTerms = [&](Value value) -> Value {
    Operation *def = value.getDefiningOp();
    if (normTerms.contains(def))
      return *getRanks(def).begin() == rank ? shared.lookup(value) : Value();
    if (auto add = dyn_cast<nn::AddOp>(def)) {
      Value lhs = sumTerms(add.getLhs()), rhs = sumTerms(add.getRhs());
      if (!lhs || !rhs)
        return lhs ? lhs : rhs;
      return nn::AddOp::create(builder, def->getLoc(), lhs, rhs);
    }
    auto reduce = cast<dist::AllReduceOp>(def);
    Value input = sumTerms(reduce.getInput());
    if (!input)
      return Value();
    return dist::AllReduceOp::create(
        builder, def->getLoc(), input, reduce.getMeshAttr(),
        reduce.getMeshAxesAttr(), reduce.getKindAttr());
  };
  auto emitGradientNorm = [&](Operation *root) {
    Value sum = sumTerms(root->getOperand(0));
    auto scalar = cast<RankedTensorType>(root->getResult(0).getType());
    if (!sum)
      sum = nn::ConstantOp::create(
          builder, root->getLoc(),
          DenseElementsAttr::get(scalar, builder.getF32FloatAttr(0.0f)));
    if (spec.ranks > 1)
      sum = dist::AllReduceOp::create(
          builder, root->getLoc(), sum, meshName,
          builder.getArrayAttr({axisName}),
          dist::ReductionKindAttr::get(context, dist::ReductionKind::sum));
    shared.map(root->getResult(0),
               nn::SqrtOp::create(builder, root->getLoc(), sum).getResult());
  };
  DenseMap<unsigned, unsigned> argIndex;
  for (unsigned index : args) {
    BlockArgument arg = function.getArgument(index);
    Type type = arg.getType();
    if (dataArgs.contains(index)) {
      auto tensor = cast<RankedTensorType>(type);
      if (tensor.getRank() > 0) {
        SmallVector<int64_t> shape(tensor.getShape());
        shape[0] *= m;
        type = tensor.clone(shape);
      }
    }
    argIndex[index] = block->getNumArguments();
    shared.map(arg, block->addArgument(type, arg.getLoc()));
  }

  // A splat constant or a broadcast that only the units read is made in
  // each unit that reads it, not held for the whole step: a bias broadcast
  // to a microbatch's activations is as large as they are, and cheap to
  // make again.
  auto isRemade = [&](Operation *op) {
    // Without a flush a run holds two steps' units (and the updates of the
    // step before): what a pre op makes from the arguments is made for
    // each of them.
    if (isSteady() && classes.lookup(op) == OpClass::Pre && readsArguments(op))
      return true;
    auto constant = dyn_cast<nn::ConstantOp>(op);
    return classes.lookup(op) == OpClass::Pre &&
           (isa<nn::BroadcastOp>(op) ||
            (constant && constant.getValue().isSplat())) &&
           llvm::all_of(op->getUsers(), [&](Operation *user) {
             return classes.lookup(user) == OpClass::Body;
           });
  };
  // Pre ops once.
  for (Operation &op : body->without_terminator())
    if (classes.lookup(&op) == OpClass::Pre && getRanks(&op).count(rank) &&
        !isRemade(&op))
      builder.clone(op, shared);

  // The units: one per (kind, stage) this rank runs, each once, for the
  // schedule to run per microbatch. Forwards by stage up, then backwards
  // and weight units by stage down: every value is made before it is read.
  ArrayRef<Unit> schedule = units[rank];
  SmallVector<UnitTemplate> templates;
  for (const Unit &unit : schedule)
    if (findTemplate(templates, unit) == static_cast<int64_t>(templates.size()))
      templates.push_back({unit.kind, unit.stage});
  llvm::stable_sort(templates, [](const UnitTemplate &a,
                                  const UnitTemplate &b) {
    auto key = [](const UnitTemplate &t) {
      return std::make_pair(static_cast<int>(t.kind),
                            t.kind == UnitKind::Forward ? t.stage : -t.stage);
    };
    return key(a) < key(b);
  });
  // Each unit's run on microbatch 0: its events are the unit's transfers.
  SmallVector<int64_t> firstRun(templates.size(), -1);
  for (auto [index, unit] : llvm::enumerate(schedule))
    if (unit.microbatch == 0)
      firstRun[findTemplate(templates, unit)] = index;

  auto getUnitName = [](const UnitTemplate &t) {
    StringRef kind = t.kind == UnitKind::Forward    ? "F"
                     : t.kind == UnitKind::Backward ? "B"
                                                    : "W";
    return (kind + Twine(t.stage)).str();
  };
  // Names the first op made after `last` (views and constraints make no
  // instruction, the exporter looks further).
  auto nameFrom = [&](Operation *last, StringRef name) {
    Operation *first = last             ? last->getNextNode()
                       : block->empty() ? nullptr
                                        : &block->front();
    if (first)
      first->setAttr(dist::DistDialect::kUnitAttrName,
                     builder.getStringAttr(name));
  };

  // `value`, a remade op's result, made here (its operands first).
  std::function<Value(Value, IRMapping &, DenseMap<Value, Value> &)> remakeIn =
      [&](Value value, IRMapping &into, DenseMap<Value, Value> &made) -> Value {
    if (Value local = made.lookup(value))
      return local;
    Operation *def = value.getDefiningOp();
    for (Value operand : def->getOperands())
      if (Operation *inner = operand.getDefiningOp(); inner && isRemade(inner))
        into.map(operand, remakeIn(operand, into, made));
    Value local = builder.clone(*def, into)
                      ->getResult(cast<OpResult>(value).getResultNumber());
    made[value] = local;
    return local;
  };

  // One run's values, and the unit that made each.
  IRMapping mapping = shared;
  DenseMap<Value, int64_t> madeBy;
  DenseMap<Value, Value> sums;
  // Per tag this rank sends in its units: its send's number among them.
  DenseMap<int64_t, int64_t> sendNumber;
  SmallVector<StringRef> unitNames;
  SmallVector<std::string> nameStorage;
  for (auto entry : llvm::enumerate(templates)) {
    // Named, not bound: lambdas below capture them (C++17).
    size_t index = entry.index();
    const UnitTemplate &unit = entry.value();
    nameStorage.push_back(getUnitName(unit));
    Operation *last = block->empty() ? nullptr : &block->back();
    DenseMap<Value, Value> slices, remade;
    auto remake = [&](Value value) { return remakeIn(value, mapping, remade); };
    auto runOps = [&]() -> LogicalResult {
      for (Operation *op : bodyOps) {
        if (stageOf.lookup(op) != unit.stage || getKind(op) != unit.kind)
          continue;
        for (Value operand : op->getOperands()) {
          if (isData(operand) && m > 1) {
            Value &slice = slices[operand];
            if (!slice)
              slice = dist::MicrobatchSliceOp::create(
                  builder, operand.getLoc(), operand.getType(),
                  shared.lookup(operand), builder.getI64IntegerAttr(m));
            mapping.map(operand, slice);
            continue;
          }
          if (Operation *def = operand.getDefiningOp(); def && isRemade(def)) {
            mapping.map(operand, remake(operand));
            continue;
          }
          auto maker = madeBy.find(operand);
          if (maker != madeBy.end() &&
              templates[maker->second].stage != unit.stage)
            return op->emitError("cannot run pipeline stage ")
                   << unit.stage << " as a loop: it reads a value of stage "
                   << templates[maker->second].stage
                   << " on the same rank without a transfer";
          if (!mapping.lookupOrNull(operand))
            return op->emitError("internal error: pipeline rank ")
                   << rank << " has no value for an operand";
        }
        Operation *clone = builder.clone(*op, mapping);
        clone->removeAttr(dist::DistDialect::kStageAttrName);
        for (auto [result, value] :
             llvm::zip(op->getResults(), clone->getResults())) {
          madeBy[result] = index;
          if (!accumulated.contains(result))
            continue;
          sums[result] = m > 1 ? Value(dist::AccumulateOp::create(
                                     builder, op->getLoc(), value))
                               : Value(value);
        }
      }
      return success();
    };
    for (const Event &event : events[rank]) {
      if (event.unit != firstRun[index])
        continue;
      if (event.kind == Event::Compute) {
        if (failed(runOps()))
          return failure();
        continue;
      }
      const Message &message = messages[event.message];
      if (event.kind == Event::Recv) {
        Value received = createRecv(message);
        mapping.map(message.value, received);
        madeBy[message.value] = index;
        continue;
      }
      createSend(message, mapping.lookup(message.value));
      int64_t number = sendNumber.size();
      sendNumber[message.tag] = number;
    }
    nameFrom(last, nameStorage.back());
  }
  for (const std::string &name : nameStorage)
    unitNames.push_back(name);

  // After the schedule: the accumulated values' transfers and the post ops,
  // once. Their sends are waited for where the simulation placed them.
  Operation *lastOfUnits = block->empty() ? nullptr : &block->back();
  SmallVector<Value> inFlight(messages.size());
  auto waitFor = [&](int64_t event) {
    for (auto [index, message] : llvm::enumerate(messages))
      if (message.from == rank && message.microbatch < 0 &&
          waitAfter[index] == event)
        dist::WaitOp::create(builder, loc, inFlight[index]);
  };
  // Without a flush (2BW) the post ops of a run split in two: those that
  // finish the step before (deferred: on a rank that runs backwards of the
  // step before, all of them, after its last such backward; on the last
  // rank, those that read another rank's sums, at the end) and the rest,
  // the run's own (the loss, the last rank's other updates, its sends),
  // at the end. A rank that updates the step before sends its sums there,
  // and waits for the sends at the end; the last rank sends at the end and
  // waits in the next run's deferred part, where the sums are read.
  bool updatesLater = isSteady() && getPostAfter(rank) >= 0;
  llvm::DenseSet<Operation *> deferredOps;
  if (isSteady()) {
    DenseSet<Value> received;
    for (const Message &message : messages)
      if (message.to == rank && message.microbatch < 0)
        received.insert(message.value);
    for (Operation &op : body->without_terminator()) {
      if (classes.lookup(&op) != OpClass::Post || !getRanks(&op).count(rank))
        continue;
      if (updatesLater || llvm::any_of(op.getOperands(), [&](Value operand) {
            Operation *def = operand.getDefiningOp();
            return received.contains(operand) ||
                   (def && deferredOps.contains(def));
          }))
        deferredOps.insert(&op);
    }
  }
  auto isDeferred = [&](const Event &event) {
    if (!isSteady())
      return false;
    if (event.kind == Event::Recv)
      return true;
    return event.kind == Event::Send && updatesLater;
  };
  auto emitPost = [&](bool deferred) -> LogicalResult {
    // What pre ops make from the arguments is made for each part's step.
    DenseMap<Value, Value> postRemade;
    for (auto [index, event] : llvm::enumerate(events[rank])) {
      if (event.unit >= 0 ||
          (event.kind != Event::Compute && isDeferred(event) != deferred))
        continue;
      if (event.kind == Event::Recv) {
        const Message &message = messages[event.message];
        sums[message.value] = createRecv(message);
      } else if (event.kind == Event::Send) {
        const Message &message = messages[event.message];
        inFlight[event.message] =
            createSend(message, sums.lookup(message.value));
      } else {
        // The post ops, once, on the sums.
        for (Value value : accumulated)
          if (Value sum = sums.lookup(value))
            shared.map(value, sum);
        for (Operation &op : body->without_terminator()) {
          if (classes.lookup(&op) != OpClass::Post ||
              !getRanks(&op).count(rank) ||
              (isSteady() && deferredOps.contains(&op) != deferred))
            continue;
          if (normSums.contains(&op))
            continue;
          if (normRoots.contains(&op)) {
            emitGradientNorm(&op);
            continue;
          }
          if (!isMicrobatchReduction(&op)) {
            for (Value operand : op.getOperands())
              if (Operation *def = operand.getDefiningOp();
                  def && isRemade(def))
                shared.map(operand, remakeIn(operand, shared, postRemade));
            for (Value operand : op.getOperands())
              if (!shared.contains(operand))
                return op.emitError("internal error: pipeline rank ")
                       << rank << " has no value for an operand";
            builder.clone(op, shared);
            continue;
          }
          auto reduce = cast<dist::AllReduceOp>(op);
          Value value = shared.lookup(reduce.getInput());
          if (reduce.getKind() == dist::ReductionKind::avg && m > 1) {
            auto type = cast<RankedTensorType>(value.getType());
            auto scale = nn::ConstantOp::create(
                builder, op.getLoc(),
                DenseElementsAttr::get(
                    type, builder.getFloatAttr(type.getElementType(),
                                               1.0 / static_cast<double>(m))));
            value = nn::MulOp::create(builder, op.getLoc(), value, scale);
          }
          SmallVector<Attribute> axes;
          for (Attribute axis : reduce.getMeshAxes())
            if (cast<StringAttr>(axis).getValue() != kMicrobatchAxis)
              axes.push_back(axis);
          if (!axes.empty())
            value = dist::AllReduceOp::create(
                builder, op.getLoc(), value, reduce.getMeshAttr(),
                builder.getArrayAttr(axes), reduce.getKindAttr());
          shared.map(reduce.getResult(), value);
        }
      }
      waitFor(index);
    }
    return success();
  };
  if (!isSteady()) {
    if (failed(emitPost(false)))
      return failure();
    waitFor(-1);
    nameFrom(lastOfUnits, dist::kUpdateUnitName);
  } else {
    // In the program, the part whose sends the other waits for comes
    // first: on a rank that updates amid its units, the deferred part (its
    // sends are waited for at the run's end, in its own part); on the last
    // rank its own part (its sends are waited for in the next run's deferred
    // part, which the runtime runs there before the rank's own).
    bool first = updatesLater;
    if (failed(emitPost(first)))
      return failure();
    Operation *middle = block->empty() ? nullptr : &block->back();
    if (failed(emitPost(!first)))
      return failure();
    waitFor(-1);
    Operation *last = block->empty() ? nullptr : &block->back();
    StringRef own = dist::kUpdateUnitName,
              deferred = dist::kDeferredUpdateUnitName;
    if (middle != lastOfUnits)
      nameFrom(lastOfUnits, first ? deferred : own);
    if (last != middle)
      nameFrom(middle, first ? own : deferred);
  }
  setSchedule(stage, rank, templates, unitNames, sendNumber);

  // A weight stash's next value is its parameter (the step's weights);
  // where the update is deferred (it updates the step before) that is the
  // updated one: the next run's step reads it. So it is under PipeDream,
  // whose steps read their rank's latest weights.
  auto getReturned = [&](unsigned index) -> Value {
    Value operand = returnOp.getOperand(index);
    auto param = dyn_cast<BlockArgument>(operand);
    if (!param || !isSteady())
      return operand;
    for (auto [other, value] : llvm::enumerate(returnOp.getOperands()))
      if (auto updates = function.getResultAttrOfType<IntegerAttr>(
              other, nn::kUpdatesAttrName);
          updates && updates.getInt() == param.getArgNumber() &&
          (deferredOps.contains(value.getDefiningOp()) ||
           spec.schedule == PipelineSchedule::PipeDream))
        return value;
    return operand;
  };
  SmallVector<Value> returned;
  for (unsigned index : results)
    returned.push_back(shared.lookup(getReturned(index)));
  func::ReturnOp::create(builder, returnOp.getLoc(), returned);
  stage.setType(builder.getFunctionType(block->getArgumentTypes(),
                                        TypeRange(ValueRange(returned))));

  // Each argument and result keeps the index it has in the step as written
  // (the ZeRO pass's packing may have set it), or else gets the cut one's;
  // a unit's flat buffer has its members'.
  StringAttr sourceName =
      StringAttr::get(context, dist::DistDialect::kSourceIndexAttrName);
  auto setSource = [&](NamedAttrList &attrs, int64_t index) {
    if (!attrs.get(sourceName) &&
        !attrs.get(dist::DistDialect::kMembersAttrName))
      attrs.set(sourceName, builder.getI64IntegerAttr(index));
  };
  for (auto [local, index] : llvm::enumerate(args)) {
    NamedAttrList attrs;
    for (NamedAttribute attr : getAttrs(function.getArgAttrDict(index)))
      attrs.push_back(attr.getName() == shardingName
                          ? NamedAttribute(attr.getName(),
                                           dropMicrobatchAxis(attr.getValue()))
                          : attr);
    // The microbatch axis first on the batch of more than itself: the
    // microbatches are major in a rank's piece.
    if (auto sharding =
            function.getArgAttrOfType<dist::ShardingAttr>(index, shardingName);
        sharding && spec.microbatches > 1 && !sharding.getDims().empty()) {
      ArrayRef<StringAttr> batch = sharding.getDims().front().getAxes();
      if (batch.size() > 1 && batch.front().getValue() == kMicrobatchAxis)
        attrs.set(dist::DistDialect::kMicrobatchesMajorAttrName,
                  builder.getI64IntegerAttr(spec.microbatches));
    }
    setSource(attrs, index);
    stage.setArgAttrs(local, attrs.getDictionary(context));
  }
  for (auto [local, index] : llvm::enumerate(results)) {
    NamedAttrList attrs;
    for (NamedAttribute attr : getAttrs(function.getResultAttrDict(index))) {
      if (attr.getName() == shardingName)
        attrs.append(attr.getName(), dropMicrobatchAxis(attr.getValue()));
      else if (attr.getName() == nn::kUpdatesAttrName)
        attrs.append(attr.getName(),
                     builder.getI64IntegerAttr(argIndex.lookup(
                         cast<IntegerAttr>(attr.getValue()).getInt())));
      else
        attrs.push_back(attr);
    }
    setSource(attrs, index);
    stage.setResultAttrs(local, attrs.getDictionary(context));
  }
  return stage;
}

void Pipeliner::setSchedule(func::FuncOp stage, int64_t rank,
                            ArrayRef<UnitTemplate> templates,
                            ArrayRef<StringRef> unitNames,
                            const DenseMap<int64_t, int64_t> &sendNumber) {
  ArrayRef<Unit> schedule = units[rank];
  int64_t entries = schedule.size();
  // After which entry each unit send is waited for: the entry of the event
  // the simulation placed it after, or (after the schedule) the last.
  SmallVector<SmallVector<int64_t>> waits(entries);
  std::map<std::pair<int64_t, int64_t>, int64_t> lastEntry;
  for (auto [index, unit] : llvm::enumerate(schedule)) {
    int64_t &last = lastEntry[{unit.stage, unit.microbatch}];
    last = std::max<int64_t>(last, index);
  }
  for (const Event &event : events[rank]) {
    if (event.kind != Event::Send || event.unit < 0)
      continue;
    const Message &message = messages[event.message];
    int64_t after = waitAfter[event.message];
    int64_t entry = after >= 0 && events[rank][after].unit >= 0
                        ? events[rank][after].unit
                        : entries - 1;
    int64_t number = sendNumber.lookup(message.tag);
    waits[entry].append({number, message.microbatch});
    const Unit &sender = schedule[event.unit];
    // A sent value that a later unit reads holds its microbatch's slot
    // until the wait.
    bool readLater =
        llvm::any_of(message.value.getUsers(), [&](Operation *user) {
          auto it = stageOf.find(user);
          return it != stageOf.end() && getRank(it->second) == rank &&
                 (it->second != sender.stage || getKind(user) != sender.kind);
        });
    if (readLater) {
      int64_t &last = lastEntry[{sender.stage, sender.microbatch}];
      last = std::max(last, entry);
    }
  }
  // Slots: per stage, the lowest free one from a microbatch's first unit
  // until its last entry (or the wait of its last send) is done.
  std::map<std::pair<int64_t, int64_t>, int64_t> slotOf;
  std::map<int64_t, std::set<int64_t>> busy;
  std::multimap<int64_t, std::pair<int64_t, int64_t>> releases;
  SmallVector<int64_t> table;
  SmallVector<int64_t> sendWaits;
  SmallVector<int64_t> entrySteps;
  for (auto [index, unit] : llvm::enumerate(schedule)) {
    std::pair<int64_t, int64_t> key = {unit.stage, unit.microbatch};
    entrySteps.push_back(unit.stepOffset);
    // Without a flush a microbatch's values live from one run into the
    // next: each has its own slot.
    auto [it, inserted] =
        slotOf.try_emplace(key, isSteady() ? unit.microbatch : 0);
    if (inserted && !isSteady()) {
      std::set<int64_t> &taken = busy[unit.stage];
      while (taken.count(it->second))
        ++it->second;
      taken.insert(it->second);
      releases.emplace(lastEntry[key], key);
    }
    table.append({findTemplate(templates, unit), unit.microbatch, it->second});
    for (size_t i = 0; i < waits[index].size(); i += 2)
      sendWaits.append(
          {static_cast<int64_t>(index), waits[index][i], waits[index][i + 1]});
    auto [first, end] = releases.equal_range(index);
    for (auto release = first; release != end; ++release)
      busy[release->second.first].erase(slotOf[release->second]);
  }
  Builder builder(stage.getContext());
  SmallVector<int64_t> stages = llvm::map_to_vector(
      templates, [](const UnitTemplate &t) { return t.stage; });
  SmallVector<NamedAttribute> attrs = {
      builder.getNamedAttr("microbatches",
                           builder.getI64IntegerAttr(spec.microbatches)),
      builder.getNamedAttr("units", builder.getStrArrayAttr(unitNames)),
      builder.getNamedAttr("unit_stages", builder.getDenseI64ArrayAttr(stages)),
      builder.getNamedAttr("entries", builder.getDenseI64ArrayAttr(table)),
      builder.getNamedAttr("send_waits",
                           builder.getDenseI64ArrayAttr(sendWaits))};
  if (isSteady())
    llvm::append_range(
        attrs,
        ArrayRef<NamedAttribute>{
            builder.getNamedAttr("steady", builder.getUnitAttr()),
            builder.getNamedAttr("entry_steps",
                                 builder.getDenseI64ArrayAttr(entrySteps)),
            builder.getNamedAttr("post_after",
                                 builder.getI64IntegerAttr(getPostAfter(rank))),
            builder.getNamedAttr("weight_delay", builder.getI64IntegerAttr(
                                                     getWeightDelay(rank)))});
  stage->setAttr(dist::DistDialect::kScheduleAttrName,
                 builder.getDictionaryAttr(attrs));
}

bool Pipeliner::moveGathersIntoUnits() {
  // A parameter's gather (an all_gather of it or of its cast, with the
  // views and broadcasts the model reads of it: a flat piece's cut of its
  // padding, a unit's members) that only one phase reads:
  // in reverse, so that an op's readers are classified before it.
  auto isParameter = [&](Value value) {
    if (auto cast = value.getDefiningOp<nn::CastOp>())
      value = cast.getInput();
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName);
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
  for (Operation &op : body->without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (classes.lookup(op) != OpClass::Pre || !isGathered(op) ||
        op->use_empty())
      continue;
    std::optional<bool> forward;
    bool oneBodyPhase = llvm::all_of(op->getUsers(), [&](Operation *user) {
      if (classes.lookup(user) != OpClass::Body)
        return false;
      auto moved = movedForward.find(user);
      bool isForward = moved != movedForward.end() ? moved->second
                                                   : forwardOps.contains(user);
      if (forward && *forward != isForward)
        return false;
      forward = isForward;
      return true;
    });
    if (!oneBodyPhase)
      continue;
    classes[op] = OpClass::Body;
    movedForward[op] = *forward;
    if (*forward)
      forwardGathers.insert(op);
  }
  if (movedForward.empty())
    return false;
  bodyOps.clear();
  for (Operation *op : ops)
    if (classes.lookup(op) == OpClass::Body)
      bodyOps.push_back(op);
  return true;
}

LogicalResult Pipeliner::run() {
  if (failed(findGradientNorms()) || failed(classify()))
    return failure();
  findForward();
  // ZeRO-3 gathers a stage's parameters in each unit that reads them, per
  // microbatch, as FSDP does: the stage holds them whole only while the
  // unit runs (one gather before the schedule would keep them all).
  if (moveGathersIntoUnits()) {
    forwardOps.clear();
    findForward();
  }
  if (failed(cutStages()) || failed(assignBackward()))
    return failure();
  if (spec.schedule == PipelineSchedule::ZeroBubbleH1)
    splitWeightGradients();
  assignRanks();
  if (failed(planMessages()))
    return failure();
  // Without a flush a run's sends are waited for at its end: the receive
  // of the last one of a step's backward gradients is in the next run.
  if (isSteady()) {
    if (failed(checkSteady()))
      return failure();
    waitAfter.assign(messages.size(), -1);
  } else if (failed(simulate())) {
    return failure();
  }
  for (int64_t rank = 0; rank < spec.ranks; ++rank)
    if (failed(emit(rank)))
      return failure();
  function.erase();
  return success();
}

DenseMap<Operation *, int64_t> tessera::getRunsPerStep(func::FuncOp function) {
  DenseMap<Operation *, int64_t> runs;
  auto schedule = function->getAttrOfType<DictionaryAttr>(
      dist::DistDialect::kScheduleAttrName);
  int64_t microbatches =
      schedule ? schedule.getAs<IntegerAttr>("microbatches").getInt() : 1;
  auto units = schedule ? schedule.getAs<ArrayAttr>("units") : ArrayAttr();
  int64_t current = 1;
  for (Operation &op : function.getBody().front()) {
    if (auto name =
            op.getAttrOfType<StringAttr>(dist::DistDialect::kUnitAttrName))
      current = units && llvm::is_contained(units, name) ? microbatches : 1;
    op.walk([&](Operation *nested) { runs[nested] = current; });
  }
  return runs;
}

namespace {

struct PipelinePass : tessera::impl::PipelinePassBase<PipelinePass> {
  using PipelinePassBase::PipelinePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PipelineSpec spec{stages, microbatches, virtualStages, schedule};
    if (stages < 1 || microbatches < 1 || virtualStages < 1) {
      module.emitError("expects stages, microbatches and virtual of 1 or "
                       "more");
      return signalPassFailure();
    }
    // As many stages as a plan has devices at most: their count must not
    // overflow, nor the tables the schedule makes per stage grow unbounded.
    if (stages > dist::kMaxDevices / virtualStages) {
      module.emitError("expects at most ")
          << dist::kMaxDevices << " pipeline stages (2^20), got " << spec.ranks
          << " ranks x " << spec.virtualStages << " virtual stages";
      return signalPassFailure();
    }
    if (std::string rejection = getScheduleRejection(spec);
        !rejection.empty()) {
      module.emitError(rejection);
      return signalPassFailure();
    }

    SmallVector<func::FuncOp> functions;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal())
        functions.push_back(function);
    if (functions.size() != 1) {
      module.emitError("expects one function to pipeline, got ")
          << functions.size();
      return signalPassFailure();
    }
    func::FuncOp function = functions.front();
    auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
    if (meshes.size() != 1) {
      module.emitError("pipelining needs one dist.mesh, found ")
          << meshes.size();
      return signalPassFailure();
    }
    dist::MeshOp mesh = meshes.front();
    auto checkAxis = [&](StringRef axis, int64_t size, StringRef what) {
      std::optional<int64_t> actual = mesh.getAxisSize(axis);
      if (actual.value_or(1) == size)
        return true;
      mesh.emitError("the mesh axis \"")
          << axis << "\" has size " << actual.value_or(1) << ", but " << what
          << " = " << size;
      return false;
    };
    if (!checkAxis(kPipelineAxis, stages, "stages") ||
        !checkAxis(kMicrobatchAxis, microbatches, "microbatches"))
      return signalPassFailure();

    if (failed(Pipeliner(function, mesh, spec).run()))
      return signalPassFailure();

    // The microbatch axis is time now, not devices.
    if (std::optional<int64_t> index = mesh.getAxisIndex(kMicrobatchAxis)) {
      SmallVector<Attribute> names(mesh.getAxisNames().getValue());
      SmallVector<int64_t> shape(mesh.getShape());
      names.erase(names.begin() + *index);
      shape.erase(shape.begin() + *index);
      mesh.setAxisNamesAttr(ArrayAttr::get(&getContext(), names));
      mesh.setShape(shape);
    }
  }
};

} // namespace
