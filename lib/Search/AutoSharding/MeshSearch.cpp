//===- MeshSearch.cpp - The auto-sharding ILP over DP x TP x PP meshes ------===//
//
// The per-op program solved on each mesh, stage by stage where pipelined,
// and each solution priced as a train step (compute, model state and
// activations per stage, the schedule's bubble) for the plan search.
//
//===----------------------------------------------------------------------===//

#include "tessera/Search/ShardingSolver.h"

#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/PipelineSchedule.h"
#include "tessera/Analysis/StageCuts.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

using namespace mlir;
using namespace tessera;

namespace {
/// A solved function's forward in items between its layer boundaries (the
/// places where one value of the data crosses), in program order: what
/// each item's ops and the arguments and parameter-only ops they read
/// first cost a step, hold on a device and pass to the next item.
struct StageItems {
  /// The first op of each item.
  SmallVector<Operation *> starts;
  /// A step's seconds.
  SmallVector<double> seconds;
  /// The model state, and the values the item makes per device.
  SmallVector<double> stateBytes, activationBytes;
  /// The largest parameter's piece: a train step holds its gradient, as
  /// the backward makes it, beside the stored (accumulated) ones.
  SmallVector<double> largestParameterBytes;
  /// The bytes per device of what the item passes to the next.
  SmallVector<double> outputBytes;
  /// What its backward holds beside what the forward kept (gradients and
  /// temporaries), at most: as a step frees the kept values at their last
  /// reader (less what it has freed of the item's own), and as a pipeline
  /// holds them (each in a buffer of its own for the whole schedule).
  SmallVector<double> transientBytes, pipelinedTransientBytes;
  /// The data arguments it reads first (the step's inputs, held whole).
  SmallVector<double> inputBytes;
  /// What the weight gradients of its ops that read a parameter read: their
  /// data operands (held to ZB-H1's W unit), and the gradients of their
  /// results (made by the B unit for W).
  SmallVector<double> weightReadBytes, weightMadeBytes;
  /// What selective recomputation remakes of its attention cores
  /// (getAttentionCores): the values the backward reads and the rest of the
  /// forward does not, their ops' step, and its largest core's values.
  SmallVector<double> coreBytes, coreSeconds, largestCoreBytes;
  /// The item of each op that reads the data.
  DenseMap<Operation *, int64_t> itemOf;

  /// `activations`: per model op of the function, the results the
  /// backward reads, which are an item's activations, and what its
  /// backward holds beside them, scaled by the op's split; where empty,
  /// every result, and twice the item's largest value.
  StageItems(func::FuncOp function, const ShardingSolution &solution,
             const TrainStepActivations &activations = {});
  size_t size() const { return starts.size(); }
};
} // namespace

StageItems::StageItems(func::FuncOp function, const ShardingSolution &solution,
                       const TrainStepActivations &activations) {
  // The ops that read the data (not what parameters and constants alone
  // make), as findRepeatedBlocks reads them.
  DenseSet<Value> data;
  for (BlockArgument arg : function.getArguments())
    if (!function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      data.insert(arg);
  SmallVector<Operation *> dataOps;
  DenseMap<Operation *, const ShardingChoice *> choiceOf;
  SmallVector<const ShardingChoice *> others;
  for (const ShardingChoice &choice : solution.choices) {
    if (choice.op)
      choiceOf[choice.op] = &choice;
    if (!choice.op || isa<func::ReturnOp>(choice.op) ||
        llvm::none_of(choice.op->getOperands(),
                      [&](Value value) { return data.contains(value); })) {
      others.push_back(&choice);
      continue;
    }
    dataOps.push_back(choice.op);
    data.insert(choice.op->result_begin(), choice.op->result_end());
  }
  if (dataOps.empty())
    return;
  SmallVector<int64_t> boundaries = getLayerBoundaries(dataOps);
  int64_t items = boundaries.size();
  starts.resize(items);
  seconds.assign(items, 0);
  stateBytes.assign(items, 0);
  activationBytes.assign(items, 0);
  largestParameterBytes.assign(items, 0);
  outputBytes.assign(items, 0);
  weightReadBytes.assign(items, 0);
  weightMadeBytes.assign(items, 0);
  inputBytes.assign(items, 0);
  transientBytes.assign(items, 0);
  pipelinedTransientBytes.assign(items, 0);
  // Per item, its values' bytes on a device and whole.
  SmallVector<std::pair<double, double>> shares(items);
  coreBytes.assign(items, 0);
  coreSeconds.assign(items, 0);
  largestCoreBytes.assign(items, 0);
  // The bytes per device of each value the data ops read.
  DenseMap<Value, double> valueBytes;
  for (const ShardingChoice &choice : solution.choices) {
    if (!choice.op)
      valueBytes[function.getArgument(choice.argument)] = choice.resultBytes;
    else if (choice.op->getNumResults() == 1)
      valueBytes[choice.op->getResult(0)] = choice.resultBytes;
  }
  DenseSet<Value> readByWeights;
  // What the backward reads of each op's results, where known.
  SmallVector<Operation *> modelOps;
  for (Operation &op : function.front().without_terminator())
    if (!isa<dist::DistDialect>(op.getDialect()))
      modelOps.push_back(&op);
  DenseMap<Operation *, uint64_t> keptOf;
  if (modelOps.size() == activations.kept.size())
    for (auto [op, results] : llvm::zip(modelOps, activations.kept))
      keptOf[op] = results;
  auto isKept = [&](Value value) {
    auto result = dyn_cast<OpResult>(value);
    if (!result)
      return false; // an argument is the step's input, not an activation
    if (keptOf.empty())
      return true;
    return result.getResultNumber() < 64 &&
           (keptOf.lookup(result.getOwner()) >> result.getResultNumber()) & 1;
  };
  auto getKeptBytes = [&](const ShardingChoice &choice) {
    unsigned results = choice.op->getNumResults();
    if (results == 0)
      return 0.0;
    unsigned keptResults = llvm::count_if(choice.op->getResults(), isKept);
    return choice.resultBytes * keptResults / results;
  };
  for (int64_t item = 0; item < items; ++item) {
    starts[item] = dataOps[boundaries[item]];
    int64_t end = item + 1 < items ? boundaries[item + 1] : dataOps.size();
    for (int64_t i = boundaries[item]; i < end; ++i)
      itemOf[dataOps[i]] = item;
  }
  auto add = [&](const ShardingChoice &choice, int64_t item) {
    seconds[item] += choice.seconds + choice.edgeSeconds;
    stateBytes[item] += choice.stateBytes;
  };
  for (Operation *op : dataOps) {
    const ShardingChoice &choice = *choiceOf.lookup(op);
    int64_t item = itemOf.lookup(op);
    add(choice, item);
    activationBytes[item] += getKeptBytes(choice);
    // Without the measured backward: its gradient, and the one made of it.
    if (keptOf.empty()) {
      transientBytes[item] =
          std::max(transientBytes[item], 2 * choice.resultBytes);
      pipelinedTransientBytes[item] = transientBytes[item];
    }
    // The share of its values a device holds.
    shares[item].first += choice.resultBytes;
    for (Value result : op->getResults())
      if (auto type = dyn_cast<RankedTensorType>(result.getType()))
        shares[item].second += type.getNumElements() * getElementBytes(type);
    if (llvm::any_of(op->getOperands(), [](Value value) {
          return !getParamName(value).empty();
        })) {
      weightMadeBytes[item] += choice.resultBytes;
      for (Value operand : op->getOperands())
        if (data.contains(operand) && isKept(operand) &&
            readByWeights.insert(operand).second)
          weightReadBytes[item] += valueBytes.lookup(operand);
    }
    // What a later item reads of it crosses every boundary between.
    for (Operation *user : op->getUsers())
      if (auto it = itemOf.find(user); it != itemOf.end())
        for (int64_t crossed = item; crossed < it->second; ++crossed)
          outputBytes[crossed] =
              std::max(outputBytes[crossed], choice.resultBytes);
  }
  // The rest (arguments, what parameters and constants alone make, the
  // return) with their first reader's item, latest first so that each
  // reader is placed; what no item reads goes with the last.
  for (const ShardingChoice *choice : llvm::reverse(others)) {
    Value made = choice->op && choice->op->getNumResults() > 0
                     ? choice->op->getResult(0)
                 : choice->op ? Value()
                              : function.getArgument(choice->argument);
    int64_t item = items - 1;
    if (made)
      for (Operation *user : made.getUsers())
        if (auto it = itemOf.find(user); it != itemOf.end())
          item = std::min(item, it->second);
    if (choice->op) {
      itemOf[choice->op] = item;
      // What parameters alone make for the backward (a norm's broadcast
      // scale) is kept with its reader's activations.
      if (!keptOf.empty() && !isa<func::ReturnOp>(choice->op))
        activationBytes[item] += getKeptBytes(*choice);
    } else if (function.getArgAttr(choice->argument, nn::kParamAttrName)) {
      largestParameterBytes[item] =
          std::max(largestParameterBytes[item], choice->resultBytes);
    } else {
      inputBytes[item] += choice->resultBytes;
    }
    add(*choice, item);
  }
  // The backward measured: what it holds beside the kept values while it
  // runs an item's part, less what it has freed of the item's own.
  if (!keptOf.empty()) {
    SmallVector<double> freed(items, 0);
    for (const TrainStepActivations::BackwardOp &op : activations.backward) {
      for (auto [made, bytes] : op.freed)
        if (auto it = itemOf.find(modelOps[made]); it != itemOf.end())
          freed[it->second] += bytes;
      auto it = itemOf.find(modelOps[op.part]);
      if (it == itemOf.end())
        continue;
      int64_t item = it->second;
      auto [device, whole] = shares[item];
      double share = whole > 0 ? device / whole : 1;
      transientBytes[item] =
          std::max(transientBytes[item], (op.liveBytes - freed[item]) * share);
      pipelinedTransientBytes[item] =
          std::max(pipelinedTransientBytes[item], op.liveBytes * share);
    }
  }
  llvm::SetVector<Operation *> forward = getForwardOps(function);
  for (const llvm::SetVector<Operation *> &core : getAttentionCores(forward)) {
    double bytes = 0;
    for (Operation *op : core) {
      bool handedOn = llvm::any_of(op->getUsers(), [&](Operation *user) {
        return forward.contains(user) && !core.contains(user);
      });
      const ShardingChoice *choice = choiceOf.lookup(op);
      auto it = itemOf.find(op);
      if (handedOn || !choice || it == itemOf.end())
        continue;
      coreBytes[it->second] += getKeptBytes(*choice);
      coreSeconds[it->second] += choice->seconds + choice->edgeSeconds;
      bytes += getKeptBytes(*choice);
    }
    if (auto it = itemOf.find(core.front()); it != itemOf.end())
      largestCoreBytes[it->second] =
          std::max(largestCoreBytes[it->second], bytes);
  }
}

/// The first op of each pipeline stage after the first when `function`,
/// solved as `solution` (before applyShardings writes it), is cut into
/// `stages` at its forward's layer boundaries, balanced on its items' step
/// seconds. Empty where the forward has fewer layers than stages.
static SmallVector<Operation *>
getMeshStageStarts(func::FuncOp function, const ShardingSolution &solution,
                   int64_t stages) {
  StageItems items(function, solution);
  if (static_cast<int64_t>(items.size()) < stages)
    return {};
  StageCuts cuts = balanceStages(items.seconds, stages);
  SmallVector<Operation *> starts;
  for (int64_t item : llvm::drop_begin(cuts.starts))
    starts.push_back(items.starts[item]);
  return starts;
}

ShardingSolverOptions
tessera::getMeshSolverOptions(const ShardingSolverOptions &options, int64_t pp,
                              int64_t microbatches, int64_t zeroStage) {
  ShardingSolverOptions mesh = options;
  mesh.axes.clear();
  mesh.zeroStage = zeroStage;
  // The search prices a train step's activations as it keeps them.
  if (options.training)
    mesh.keepActivations = false;
  if (pp == 1 && microbatches == 1)
    return mesh;
  mesh.microbatches = microbatches;
  mesh.batchAxes = {"dp"};
  return mesh;
}

/// The first dim of every ranked data argument of `function` divides by
/// this (0: none has one).
static int64_t getBatch(func::FuncOp function) {
  int64_t batch = 0;
  for (BlockArgument arg : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (type && type.getRank() > 0 &&
        !function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      batch = std::gcd(batch, type.getDimSize(0));
  }
  return batch;
}

/// `model` on `dist.mesh @mesh ["dp"=dp, "tp"=tp]` in place of its meshes
/// and annotations, and its function's shardings solved there (not yet
/// written).
static llvm::Expected<ShardingSolution>
solveOnMesh(ModuleOp model, const MachineModel &machine, int64_t dp, int64_t tp,
            const ShardingSolverOptions &options) {
  func::FuncOp function = getModelFunction(model);
  if (!function)
    return llvm::createStringError("the model has no function");
  MLIRContext *context = model.getContext();
  context->loadDialect<dist::DistDialect>();
  // The plan's mesh replaces whatever the model was annotated for.
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  for (auto mesh : llvm::make_early_inc_range(model.getOps<dist::MeshOp>()))
    mesh.erase();
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    function.removeArgAttr(i, attrName);
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    function.removeResultAttr(i, StringAttr::get(context, attrName));
  function.walk([](dist::ShardingConstraintOp constraint) {
    constraint.replaceAllUsesWith(constraint.getInput());
    constraint.erase();
  });
  OpBuilder builder = OpBuilder::atBlockBegin(model.getBody());
  auto mesh = dist::MeshOp::create(builder, model.getLoc(), "mesh",
                                   builder.getStrArrayAttr({"dp", "tp"}),
                                   builder.getDenseI64ArrayAttr({dp, tp}));
  ShardingSolverOptions all = options;
  all.axes.clear();
  return solveShardings(function, mesh, machine, all);
}

namespace {
/// A solution in pipeline stages, and the first op of each stage after the
/// first.
struct StagedSolution {
  ShardingSolution solution;
  SmallVector<Operation *> starts;
};
} // namespace

/// solveOnMesh in `stages` pipeline stages: solved once with the model
/// state of all stages in their devices' memory, cut where that solution's
/// step seconds balance (getMeshStageStarts), and solved again with each
/// stage's state in its device's memory.
static llvm::Expected<StagedSolution>
solveStages(ModuleOp model, const MachineModel &machine, int64_t dp, int64_t tp,
            const ShardingSolverOptions &options, int64_t stages) {
  ShardingSolverOptions all = options;
  double memoryLimit = options.memoryLimitBytes.value_or(machine.memoryBytes);
  all.memoryLimitBytes = memoryLimit * stages;
  llvm::Expected<ShardingSolution> first =
      solveOnMesh(model, machine, dp, tp, all);
  if (!first || stages == 1)
    return first ? llvm::Expected<StagedSolution>(
                       StagedSolution{std::move(*first), {}})
                 : first.takeError();
  SmallVector<Operation *> starts =
      getMeshStageStarts(getModelFunction(model), *first, stages);
  if (static_cast<int64_t>(starts.size()) + 1 != stages)
    return llvm::createStringError(
        llvm::formatv("the forward has too few layer boundaries for {0} "
                      "pipeline stages",
                      stages));
  ShardingSolverOptions staged = options;
  staged.memoryLimitBytes = memoryLimit;
  staged.stageStarts = starts;
  llvm::Expected<ShardingSolution> solution =
      solveOnMesh(model, machine, dp, tp, staged);
  if (!solution)
    return solution.takeError();
  return StagedSolution{std::move(*solution), std::move(starts)};
}

llvm::Expected<ShardingSolution> tessera::applyMeshSharding(
    ModuleOp model, const MachineModel &machine, int64_t dp, int64_t tp,
    const ShardingSolverOptions &options, int64_t stages) {
  llvm::Expected<StagedSolution> staged =
      solveStages(model, machine, dp, tp, options, stages);
  if (!staged)
    return staged.takeError();
  Builder builder(model.getContext());
  for (auto [stage, op] : llvm::enumerate(staged->starts))
    op->setAttr(dist::DistDialect::kStageAttrName,
                builder.getI64IntegerAttr(stage + 1));
  applyShardings(getModelFunction(model), *model.getOps<dist::MeshOp>().begin(),
                 staged->solution);
  return std::move(staged->solution);
}

/// Per item, the layer that full recomputation (getRecomputedLayers)
/// remakes it in, numbered in program order, or -1 outside every layer.
static SmallVector<int64_t> getItemLayers(func::FuncOp function,
                                          const StageItems &items) {
  SmallVector<Operation *> body;
  for (Operation &op : function.front().without_terminator())
    body.push_back(&op);
  SmallVector<int64_t> layerOf(items.size(), -1);
  for (auto [layer, ops] :
       llvm::enumerate(getRecomputedLayers(getDataOps(function, body))))
    for (Operation *op : ops)
      if (auto it = items.itemOf.find(op); it != items.itemOf.end())
        layerOf[it->second] = layer;
  return layerOf;
}

/// Prices `plan`'s train step, cut into its stages at `starts` and run on
/// its schedule, recomputing as it says: the memory of the rank that holds
/// the most (its stages' model state, its largest parameter's gradient as
/// the backward makes it beside the stored ones, the activations of each
/// stage's microbatches in flight, getStagesInFlight, and the largest
/// recomputed layer's as its backward remakes them), and with stages the
/// step: the slowest rank's with the schedule's bubble, and each
/// microbatch's activations forward and their gradients back at each cut,
/// as the GPT plans price them. A recomputed layer keeps what it hands on
/// and runs its forward (a third of its step) again. Under ZB-H1 (but on
/// the first stage, whose W unit runs its whole backward) what the weight
/// gradients read is held to the W unit, and what B makes for them from B.
static void priceTrainStep(MeshShardingPlan &plan, const StageItems &items,
                           ArrayRef<int64_t> layerOf,
                           ArrayRef<Operation *> starts,
                           const MachineModel &machine,
                           double objectiveSeconds) {
  int64_t pp = plan.pp, m = plan.microbatches, stages = plan.getNumStages();
  bool full = plan.recompute == Recompute::Full;
  bool selective = plan.recompute == Recompute::Selective;
  bool weightApart = plan.schedule == PipelineSchedule::ZeroBubbleH1;
  // Stage s holds items [cuts[s], cuts[s + 1]).
  SmallVector<int64_t> cuts = {0};
  for (Operation *start : starts)
    cuts.push_back(llvm::find(items.starts, start) - items.starts.begin());
  cuts.push_back(items.size());
  // One rank holding one microbatch in flight without a pipeline.
  SmallVector<RankInFlight> ranks = {{{0, StageInFlight{1, 1, 0, 0, 0, 0}}}};
  if (pp > 1)
    ranks = getStagesInFlight({pp, m, plan.virtualStages, plan.schedule});
  struct StagePrice {
    double seconds = 0, state = 0, gradient = 0, held = 0, transient = 0;
  };
  SmallVector<StagePrice> prices(stages);
  double recomputed = 0, crossing = 0;
  for (int64_t stage = 0; stage < stages; ++stage) {
    StagePrice &price = prices[stage];
    // Per microbatch: what the stage keeps outside recomputed layers and
    // what its weight gradients read of it, what recomputed layers hand on
    // and what their weight gradients read of the remade values, and what
    // B makes for W. What a stage receives its backward reads (a weight
    // gradient, or the first layer's recomputation).
    double kept = 0, read = 0, handedOn = 0, remadeRead = 0, made = 0;
    if (stage > 0)
      kept = read = items.outputBytes[cuts[stage] - 1] / m;
    // The backward runs each item's part beside what it remakes for it (the
    // item's recomputed layer, its piece on this stage, or its largest
    // attention core), having freed what the later items kept (a pipeline
    // keeps them to the end of its schedule).
    SmallVector<double> keptAfter(items.size(), 0);
    double after = 0;
    for (int64_t item = cuts[stage + 1] - 2; item >= cuts[stage]; --item) {
      if (!full || layerOf[item + 1] < 0)
        after += items.activationBytes[item + 1] / m;
      keptAfter[item] = after;
    }
    double layerBytes = 0, layerTransient = 0;
    for (int64_t item = cuts[stage]; item < cuts[stage + 1]; ++item) {
      price.seconds += items.seconds[item];
      price.state += items.stateBytes[item] + items.inputBytes[item];
      price.gradient =
          std::max(price.gradient, items.largestParameterBytes[item]);
      made += items.weightMadeBytes[item] / m;
      double transient = pp > 1
                             ? items.pipelinedTransientBytes[item] / m
                             : items.transientBytes[item] / m - keptAfter[item];
      bool remade = full && layerOf[item] >= 0;
      if (!remade) {
        kept += items.activationBytes[item] / m;
        read += items.weightReadBytes[item] / m;
        if (selective) {
          // The attention cores' values are remade, one core at a time.
          kept -= items.coreBytes[item] / m;
          recomputed += items.coreSeconds[item] / 3;
          price.seconds += items.coreSeconds[item] / 3;
          transient += items.largestCoreBytes[item] / m;
        }
        price.transient = std::max(price.transient, transient);
        continue;
      }
      // A third of the item's step again: its forward.
      recomputed += items.seconds[item] / 3;
      price.seconds += items.seconds[item] / 3;
      remadeRead += items.weightReadBytes[item] / m;
      layerBytes += items.activationBytes[item] / m;
      layerTransient = std::max(layerTransient, transient);
      // The layer (its piece on this stage) ends here.
      if (item + 1 == cuts[stage + 1] || layerOf[item + 1] != layerOf[item]) {
        handedOn += items.outputBytes[item] / m;
        price.transient =
            std::max(price.transient, layerBytes + layerTransient);
        layerBytes = layerTransient = 0;
      }
    }
    // What the stage sends the next, per microbatch.
    double sent = 0;
    if (stage + 1 < stages) {
      crossing = std::max(crossing, items.outputBytes[cuts[stage + 1] - 1]);
      sent = items.outputBytes[cuts[stage + 1] - 1] / m;
    }
    for (const RankInFlight &rank : ranks)
      for (auto [onRank, inFlight] : rank) {
        if (onRank != stage)
          continue;
        if (!weightApart)
          price.held = inFlight.forwardToBackward * (kept + handedOn);
        else if (stage == 0)
          price.held = inFlight.forwardToWeight * (kept + handedOn);
        else
          price.held = inFlight.forwardToBackward * (kept - read + handedOn) +
                       inFlight.forwardToWeight * read +
                       inFlight.backwardToWeight * (made + remadeRead);
        price.held += inFlight.forwardSent * sent;
      }
  }
  plan.memoryBytes = 0;
  double slowest = 0;
  for (const RankInFlight &rank : ranks) {
    StagePrice total;
    for (auto [stage, inFlight] : rank) {
      const StagePrice &price = prices[stage];
      total.seconds += price.seconds;
      total.state += price.state;
      total.held += price.held;
      total.gradient = std::max(total.gradient, price.gradient);
      total.transient = std::max(total.transient, price.transient);
    }
    slowest = std::max(slowest, total.seconds);
    plan.memoryBytes =
        std::max(plan.memoryBytes,
                 total.state + total.gradient + total.held + total.transient);
  }
  if (pp == 1) {
    plan.stepSeconds = objectiveSeconds + recomputed;
    return;
  }
  double p2p = getCollectiveSeconds(machine, CollectiveKind::AllGather,
                                    2 * crossing / m, {2, plan.dp * plan.tp});
  plan.stepSeconds = slowest * (1 + getBubbleFraction(plan.schedule, pp, m,
                                                      plan.virtualStages)) +
                     2 * p2p * (m * plan.virtualStages + pp - 1);
}

MeshShardingSearch tessera::searchMeshShardings(
    ModuleOp model, const MachineModel &machine, int64_t devices,
    const ShardingSolverOptions &options, const MeshShardingPins &pins,
    const TrainStepActivations &activations) {
  MeshShardingSearch search;
  SmallVector<int64_t> zeroStages(pins.zeroStages);
  if (zeroStages.empty())
    zeroStages.push_back(options.zeroStage);
  auto pinned = [](std::optional<int64_t> pin, int64_t value) {
    return !pin || *pin == value;
  };
  auto fail = [&](std::string reason) {
    ++search.failed;
    if (search.firstFailure.empty())
      search.firstFailure = std::move(reason);
  };
  func::FuncOp function = getModelFunction(model);
  // Selective recomputation remakes attention cores; without one it is no
  // plan of its own.
  bool hasCores =
      function && !getAttentionCores(getForwardOps(function)).empty();
  if (pins.recompute == Recompute::Selective && !hasCores) {
    search.firstFailure =
        "selective recomputation finds no attention core (a product, softmax "
        "and product) in the model: give --recompute none or full, or let "
        "the search choose";
    return search;
  }
  int64_t batch = function ? getBatch(function) : 0;
  double memoryLimit = options.memoryLimitBytes.value_or(machine.memoryBytes);
  for (int64_t dp = 1; dp <= devices; ++dp) {
    for (int64_t tp = 1; dp * tp <= devices; ++tp) {
      if (devices % (dp * tp) || !pinned(pins.dp, dp) || !pinned(pins.tp, tp))
        continue;
      int64_t pp = devices / dp / tp;
      // Stages and microbatches split a train step's batch on "dp".
      if (!pinned(pins.pp, pp) || (pp > 1 && !options.training))
        continue;
      SmallVector<int64_t> microbatches;
      for (int64_t m = 1; m <= std::max<int64_t>(1, batch / dp); ++m)
        if (pinned(pins.microbatches, m) &&
            (m == 1 || (options.training && batch % (dp * m) == 0)))
          microbatches.push_back(m);
      for (int64_t zero : zeroStages) {
        // ZeRO shards over dp; without it there is nothing to shard.
        if (zero > 0 && dp == 1 && zero != zeroStages.front())
          continue;
        for (int64_t m : microbatches) {
          int64_t zeroStage = dp > 1 ? zero : 0;
          // Interleaved 1F1B runs two stages per rank.
          for (int64_t v : {1, 2}) {
            if (v == 2 &&
                (pp == 1 || !getScheduleRejection(
                                {pp, m, v, PipelineSchedule::Interleaved})
                                 .empty()))
              continue;
            SmallVector<PipelineSchedule> schedules = {
                PipelineSchedule::OneFOneB};
            if (v == 2)
              schedules = {PipelineSchedule::Interleaved};
            else if (pp > 1)
              schedules = {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB,
                           PipelineSchedule::ZeroBubbleH1};
            llvm::erase_if(schedules, [&](PipelineSchedule schedule) {
              return pins.schedule && *pins.schedule != schedule;
            });
            if (schedules.empty())
              continue;
            ShardingSolverOptions meshOptions =
                getMeshSolverOptions(options, pp, m, zeroStage);
            OwningOpRef<ModuleOp> copy(cast<ModuleOp>(model->clone()));
            llvm::Expected<StagedSolution> staged =
                solveStages(*copy, machine, dp, tp, meshOptions, pp * v);
            if (!staged) {
              ++search.considered;
              fail(llvm::toString(staged.takeError()));
              continue;
            }
            const ShardingSolution &solution = staged->solution;
            // A train step's memory is priced here (a forward's is the
            // solver's), for each recomputation and schedule.
            func::FuncOp solved = getModelFunction(*copy);
            std::optional<StageItems> items;
            SmallVector<int64_t> layerOf;
            if (options.training) {
              items.emplace(solved, solution, activations);
              layerOf = getItemLayers(solved, *items);
            }
            for (Recompute recompute :
                 {Recompute::None, Recompute::Selective, Recompute::Full}) {
              if ((pins.recompute && *pins.recompute != recompute) ||
                  (recompute != Recompute::None && !options.training) ||
                  (recompute == Recompute::Selective && !hasCores))
                continue;
              for (PipelineSchedule schedule : schedules) {
                ++search.considered;
                MeshShardingPlan plan;
                plan.dp = dp;
                plan.tp = tp;
                plan.pp = pp;
                plan.microbatches = m;
                plan.zero = zeroStage;
                plan.schedule = schedule;
                plan.virtualStages = v;
                plan.recompute = recompute;
                plan.stepSeconds = solution.objectiveSeconds;
                plan.reshardBytes = solution.reshardBytes;
                plan.memoryBytes = solution.memoryBytes;
                plan.variables = solution.variables;
                plan.solveSeconds = solution.solveSeconds;
                if (items) {
                  priceTrainStep(plan, *items, layerOf, staged->starts, machine,
                                 solution.objectiveSeconds);
                  if (plan.memoryBytes > memoryLimit) {
                    fail(llvm::formatv(
                        "dp={0} tp={1} pp={2} in {3} microbatches ({4}, "
                        "recompute={5}) holds {6:f3} GB on a device, over "
                        "its {7:f3} GB",
                        dp, tp, pp, m,
                        getEnumName(kPipelineScheduleNames, schedule),
                        getEnumName(kRecomputeNames, recompute),
                        plan.memoryBytes / 1e9, memoryLimit / 1e9));
                    continue;
                  }
                }
                search.plans.push_back(plan);
              }
            }
          }
        }
      }
    }
  }
  if (search.considered == 0)
    search.firstFailure = llvm::formatv(
        "no dp x tp x pp mesh of {0} devices matches the pins: dp x tp x pp "
        "makes the devices, stages pipeline a train step only, and the "
        "microbatches must divide a dp replica's batch ({1})",
        devices, batch);
  // Fastest first; of plans as fast (to six digits: solves of one
  // program on one mesh differ in rounding), the fewest stages,
  // microbatches and ZeRO stage, which the cost model prices no faster,
  // then the least memory (1F1B before GPipe).
  auto key = [](const MeshShardingPlan &plan) {
    double scale = std::pow(
        10.0, 5 - std::floor(std::log10(std::max(plan.stepSeconds, 1e-300))));
    return std::make_tuple(std::round(plan.stepSeconds * scale) / scale,
                           plan.pp, plan.microbatches, plan.zero,
                           plan.memoryBytes);
  };
  llvm::stable_sort(search.plans,
                    [&](const MeshShardingPlan &a, const MeshShardingPlan &b) {
                      return key(a) < key(b);
                    });
  return search;
}
