//===- MeasuredLayouts.cpp - Layouts priced as the compiler partitions them
//---===//
//
// A layout annotated (Megatron's template or the ILP's solution) and
// partitioned by the compiler's own sharding stages, measured: its
// collectives, FLOPs, parameters and kept activations per device.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Analysis/TrainStep.h"
#include "tessera/Search/ShardingTemplates.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

#include <map>

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

/// The first op of each pipeline stage after the first where the search
/// cuts `model`, a decoder of `shape`, for the ILP's layout of `choice`:
/// between half-layers, as without sequence parallelism (the layout is
/// solved once per mesh, whatever the plan's recomputation and ZeRO);
/// empty where it does not cut so.
static SmallVector<Operation *> getLayoutStageStarts(ModuleOp model,
                                                     const ModelShape &shape,
                                                     const PlanChoice &choice) {
  DecoderItems items(getModelFunction(model));
  if (choice.pp <= 1 ||
      static_cast<int64_t>(items.size()) != 2 * shape.layers + 1 ||
      static_cast<int64_t>(items.size()) < choice.pp)
    return {};
  const StageCuts &cuts =
      getStageCuts(shape, StageCutShape{choice.tp, false, false}, choice.pp);
  SmallVector<Operation *> starts;
  for (int64_t item : llvm::drop_begin(cuts.starts)) {
    // The item's first op of the model (the solver replaces annotations).
    auto ops = ArrayRef(items.ops).slice(
        items.starts[item], items.getEnd(item) - items.starts[item]);
    auto first = llvm::find_if(ops, isModelOp);
    if (first == ops.end())
      return {};
    starts.push_back(*first);
  }
  return starts;
}

ShardingSolverOptions
tessera::getLayoutSolverOptions(ModuleOp model, const MachineModel &machine,
                                const PlanChoice &choice,
                                const ModelShape *shape) {
  ShardingSolverOptions options;
  // The solver charges per byte of a parameter in the program's type its
  // weight, its gradient and the optimizer's share: the plan's precision's
  // state, whatever type the program holds its parameters in.
  double elements = 0, programBytes = 0;
  func::FuncOp function = getModelFunction(model);
  for (BlockArgument arg : function.getArguments())
    if (auto type = dyn_cast<RankedTensorType>(arg.getType()))
      if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName)) {
        elements += type.getNumElements();
        programBytes += getValueBytes(arg);
      }
  PrecisionBytes bytes = getPrecisionBytes(choice.precision);
  double elementBytes = elements > 0 ? programBytes / elements : bytes.weight;
  options.optimizerBytesPerParameterByte = std::max(
      0.0,
      (bytes.weight + bytes.gradient + bytes.optimizer) / elementBytes - 2);
  options.batchAxes = {"dp"};
  options.keepActivations = false;
  // Each stage's state in its device's memory, or all stages' in theirs.
  if (shape)
    options.stageStarts = getLayoutStageStarts(model, *shape, choice);
  options.memoryLimitBytes =
      machine.memoryBytes * choice.layoutMemoryShare *
      (options.stageStarts.empty() ? choice.pp : int64_t(1));
  return options;
}

llvm::Error tessera::annotateLayout(ModuleOp model, const MachineModel &machine,
                                    const PlanChoice &choice,
                                    const ModelShape *shape) {
  if (choice.layout == TensorLayout::Megatron) {
    annotateMegatron(model, choice.dp, choice.tp);
    // Without ep the experts are laid out as Megatron's MLP, whose
    // microbatches and pipelines the "ep" axis would keep out.
    if (choice.ep > 1)
      annotateExpertParallel(model, choice.ep);
    if (choice.cp > 1)
      annotateContextParallel(model, "ring", choice.cp);
    if (choice.sequenceParallel)
      annotateSequenceParallel(model);
    return llvm::Error::success();
  }
  ShardingSolverOptions options =
      getLayoutSolverOptions(model, machine, choice, shape);
  llvm::Expected<ShardingSolution> solution =
      applyMeshSharding(model, machine, choice.dp, choice.tp, options);
  if (solution || choice.dp == 1)
    return solution ? llvm::Error::success() : solution.takeError();
  // A state that fits only split over dp too: solved again in ZeRO-3's
  // share of memory, which the search's plans with ZeRO then price.
  options.memoryLimitBytes = *options.memoryLimitBytes * choice.dp;
  llvm::Expected<ShardingSolution> sharded =
      applyMeshSharding(model, machine, choice.dp, choice.tp, options);
  if (sharded) {
    llvm::consumeError(solution.takeError());
    return llvm::Error::success();
  }
  llvm::consumeError(sharded.takeError());
  return solution.takeError();
}

/// The attribute that marks the results of an op that the train step keeps.
static constexpr llvm::StringLiteral kKeptAttrName = "tessera.kept";

/// Marks `values` on the ops of `module`'s model, which must be theirs.
static bool markKeptValues(ModuleOp module, ArrayRef<KeptValue> values) {
  if (values.empty())
    return true;
  SmallVector<Operation *> ops = getModelOps(getModelFunction(module));
  llvm::MapVector<Operation *, SmallVector<int32_t>> results;
  for (const KeptValue &value : values) {
    if (value.op >= static_cast<int64_t>(ops.size()) ||
        ops[value.op]->getName() != value.name ||
        value.result >= ops[value.op]->getNumResults())
      return false;
    results[ops[value.op]].push_back(value.result);
  }
  for (auto &[op, indices] : results)
    op->setAttr(kKeptAttrName,
                DenseI32ArrayAttr::get(module.getContext(), indices));
  return true;
}

/// The figures of `module`'s partitioned program (its collectives merged,
/// in the order of getCollectiveKey).
static PartitionedLayout measurePartition(ModuleOp module) {
  PartitionedLayout partitioned;
  module->walk([&](func::FuncOp function) {
    for (BlockArgument arg : function.getArguments())
      if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
        partitioned.parameters +=
            cast<RankedTensorType>(arg.getType()).getNumElements();
  });
  module->walk([&](CostOpInterface op) {
    partitioned.flops += op.getFlops();
    for (Value result : op->getResults())
      partitioned.valueBytes += getValueBytes(result);
  });
  // The kept values, marked on their ops before the partitioner rewrites
  // them (it keeps an op's attributes).
  module->walk([&](Operation *op) {
    if (auto results = op->getAttrOfType<DenseI32ArrayAttr>(kKeptAttrName))
      for (int32_t result : results.asArrayRef())
        partitioned.keptBytes += getValueBytes(op->getResult(result));
  });
  // Parameters the layout gathers (a weight split on a dim its reader needs
  // whole): the gathered copy is kept for the backward, and its gradient is
  // whole until it is reduced.
  module->walk([&](dist::AllGatherOp gather) {
    Value source = gather.getInput();
    while (Operation *op = source.getDefiningOp()) {
      if (op->getNumOperands() != 1)
        break;
      source = op->getOperand(0);
    }
    auto arg = dyn_cast<BlockArgument>(source);
    auto function =
        arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
    if (function && function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      partitioned.gatheredParameters += gather.getType().getNumElements();
  });
  SymbolTableCollection symbols;
  std::map<CollectiveKey, CollectiveUse> uses;
  module->walk([&](dist::CollectiveOpInterface op) {
    auto in = cast<RankedTensorType>(op->getOperand(0).getType());
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    // Bytes as f32 (the search rescales to the plan's precision).
    double inBytes = in.getNumElements() * 4.0;
    double outBytes = out.getNumElements() * 4.0;
    CollectiveKind kind;
    double bytes;
    if (isa<dist::AllReduceOp>(op)) {
      kind = CollectiveKind::AllReduce;
      bytes = inBytes;
    } else if (isa<dist::AllGatherOp>(op)) {
      kind = CollectiveKind::AllGather;
      bytes = outBytes;
    } else if (isa<dist::ReduceScatterOp>(op)) {
      kind = CollectiveKind::ReduceScatter;
      bytes = inBytes;
    } else if (isa<dist::AllToAllOp>(op)) {
      kind = CollectiveKind::AllToAll;
      bytes = inBytes;
    } else {
      return; // all_slice moves nothing; the others do not appear here
    }
    SmallVector<StringAttr> axes =
        llvm::to_vector(op.getMeshAxes().getAsRange<StringAttr>());
    CollectiveUse use{kind, bytes,
                      MeshShape(op.getMesh(symbols)).getDeviceGroup(axes), 0};
    ++uses.try_emplace(getCollectiveKey(use), use).first->second.count;
  });
  for (auto &entry : uses)
    partitioned.forward.push_back(entry.second);
  return partitioned;
}

/// Cuts `module`'s model to its first `keep` repeated blocks: what the last
/// block passes on is taken from the `keep`th instead, and the later
/// blocks' ops, what only they read and the parameters only they read are
/// erased. False where the blocks do not each pass on one value.
static bool keepFirstBlocks(ModuleOp module, int64_t keep) {
  func::FuncOp function = getModelFunction(module);
  SmallVector<SmallVector<Operation *>> blocks = findRepeatedBlocks(function);
  if (static_cast<int64_t>(blocks.size()) <= keep)
    return false;
  // The one value of `block` that ops outside it read.
  auto getOutput = [](ArrayRef<Operation *> block) {
    llvm::DenseSet<Operation *> inside(block.begin(), block.end());
    Value output;
    for (Operation *op : block)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !inside.contains(user);
            })) {
          if (output)
            return Value();
          output = result;
        }
    return output;
  };
  Value last = getOutput(blocks.back());
  Value kept = getOutput(blocks[keep - 1]);
  if (!last || !kept || last.getType() != kept.getType())
    return false;
  llvm::DenseSet<Operation *> lastBlock(blocks.back().begin(),
                                        blocks.back().end());
  llvm::DenseSet<Operation *> erased;
  for (ArrayRef<Operation *> block : llvm::drop_begin(blocks, keep))
    erased.insert(block.begin(), block.end());
  last.replaceUsesWithIf(kept, [&](OpOperand &use) {
    return !lastBlock.contains(use.getOwner());
  });
  for (Operation *op : erased)
    for (Operation *user : op->getUsers())
      if (!erased.contains(user))
        return false;
  for (ArrayRef<Operation *> block :
       llvm::reverse(llvm::drop_begin(blocks, keep)))
    for (Operation *op : llvm::reverse(block))
      op->erase();
  // What only the erased blocks read: the ops before them that make nothing
  // else reads (a weight's cast), and their parameters.
  SmallVector<Operation *> ops = llvm::to_vector(
      llvm::make_pointer_range(function.front().without_terminator()));
  for (Operation *op : llvm::reverse(ops))
    if (op->getNumResults() > 0 && op->use_empty())
      op->erase();
  llvm::BitVector unused(function.getNumArguments());
  for (BlockArgument arg : function.getArguments())
    if (arg.use_empty() &&
        function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      unused.set(arg.getArgNumber());
  return succeeded(function.eraseArguments(unused));
}

/// A model of `blocks` repeated blocks, from its partitions with the first
/// block (`one`) and the first two (`two`): the second block's share
/// counted once per block after the first. None where `two` has less of
/// something than `one`.
static std::optional<PartitionedLayout>
extrapolateBlocks(const PartitionedLayout &one, const PartitionedLayout &two,
                  int64_t blocks) {
  PartitionedLayout all;
  bool grows = true;
  auto extrapolate = [&](double first, double second) {
    grows &= second >= first;
    return first + (blocks - 1) * (second - first);
  };
  all.flops = extrapolate(one.flops, two.flops);
  all.parameters = extrapolate(one.parameters, two.parameters);
  all.valueBytes = extrapolate(one.valueBytes, two.valueBytes);
  all.keptBytes = extrapolate(one.keptBytes, two.keptBytes);
  all.gatheredParameters =
      extrapolate(one.gatheredParameters, two.gatheredParameters);
  // Both in the order of getCollectiveKey.
  const CollectiveUse *first = one.forward.begin();
  for (const CollectiveUse &use : two.forward) {
    CollectiveUse total = use;
    int64_t count = 0;
    if (first != one.forward.end() &&
        getCollectiveKey(*first) == getCollectiveKey(use))
      count = (first++)->count;
    total.count = extrapolate(count, use.count);
    all.forward.push_back(total);
  }
  if (!grows || first != one.forward.end())
    return std::nullopt;
  return all;
}

llvm::Expected<PartitionedLayout>
tessera::partitionLayout(const LayoutProgram &program,
                         const MachineModel &machine, const PlanChoice &choice,
                         const ModelShape *shape, bool wholeModel) {
  int64_t dp = choice.dp, tp = choice.tp;
  TensorLayout layout = choice.layout;
  OwningOpRef<ModuleOp> marked = ModuleOp(program.module).clone();
  // The search's diagnostics are its own; a failure here falls back to the
  // analytic formula.
  ScopedDiagnosticHandler quiet(marked->getContext(),
                                [](Diagnostic &) { return success(); });
  auto failure = [&](const llvm::Twine &why) {
    return llvm::createStringError(
        "the model does not partition for dp=" + llvm::Twine(dp) +
        " tp=" + llvm::Twine(tp) + " in " +
        getEnumName(kTensorLayoutNames, layout) + "'s layout" + why);
  };
  if (shape && !markKeptValues(*marked, shape->keptValues))
    return failure(": the model is not the one whose kept values are given");
  // Annotated whole (the ILP's memory constraint holds the whole model),
  // then partitioned whole or cut to its first blocks.
  PlanChoice unsplit = choice;
  unsplit.sequenceParallel = false;
  if (llvm::Error error = annotateLayout(*marked, machine, unsplit, shape))
    return failure(": " + llvm::toString(std::move(error)));
  auto partition = [&](std::optional<int64_t> blocks)
      -> llvm::Expected<std::optional<PartitionedLayout>> {
    OwningOpRef<ModuleOp> module = marked->clone();
    if (blocks && !keepFirstBlocks(*module, *blocks))
      return std::nullopt;
    if (mlir::failed(program.partition(*module)))
      return failure("");
    return measurePartition(*module);
  };
  int64_t blocks = findRepeatedBlocks(getModelFunction(*marked)).size();
  if (!wholeModel && blocks >= 3) {
    auto one = partition(1);
    if (!one)
      return one.takeError();
    auto two = partition(2);
    if (!two)
      return two.takeError();
    if (*one && *two)
      if (std::optional<PartitionedLayout> all =
              extrapolateBlocks(**one, **two, blocks))
        return std::move(*all);
  }
  auto whole = partition(std::nullopt);
  if (!whole)
    return whole.takeError();
  return std::move(**whole);
}
