//===- ApplyPlan.cpp - A searched plan as compile options -----------------===//

#include "tessera/Pipelines/ApplyPlan.h"

#include "dialects/NN/IR/NNOps.h"
#include "tessera/Pipelines/Pipelines.h"
#include "tessera/Support/Location.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;

void tessera::applyPlanChoice(const PlanChoice &choice,
                              CompileOptions &options) {
  options.zero = static_cast<ZeroStage>(choice.zero);
  if (choice.zero >= 3 && options.reshardAfterForward.getValue().kind !=
                              ReshardAfterForward::Kind::Group)
    options.reshardAfterForward = choice.reshardAfterForward
                                      ? ReshardAfterForward::shard()
                                      : ReshardAfterForward::keep();
  options.pipelineStages = choice.pp;
  options.microbatches = choice.microbatches;
  options.schedule = choice.schedule;
  options.virtualStages = choice.virtualStages;
  options.recompute = choice.recompute;
}

SearchPins tessera::getAutoPins(const CompileOptions &options,
                                std::optional<int64_t> zero,
                                std::optional<bool> reshardAfterForward,
                                std::optional<Recompute> recompute) {
  SearchPins pins;
  // Pipelines pipeline a train step; inference runs on a DP x TP mesh.
  if (options.train == Optimizer::None) {
    pins.pp = 1;
    pins.microbatches = 1;
  }
  // ZeRO shards AdamW's state: the search picks a stage for an AdamW step
  // unless one is pinned.
  if (options.train != Optimizer::AdamW)
    pins.zero = 0;
  else if (zero)
    pins.zero = *zero;
  pins.reshardAfterForward = reshardAfterForward;
  // The search prices what recomputation keeps per layer as the compiler
  // builds it, and the whole peak within 6% for every mode
  // (bench/search/activations.py), so --auto may recompute.
  pins.recompute = recompute;
  pins.overlap = options.overlap;
  pins.bucketBytes = options.bucketBytes;
  return pins;
}

/// The precision the compile trains `module` in: mixed (f32 master weights
/// for 16-bit parameters) when asked, else the parameters' own.
static Precision getTrainedPrecision(ModuleOp module,
                                     const CompileOptions &options) {
  if (options.precision == TrainPrecision::Mixed)
    return Precision::Mixed;
  Precision precision = Precision::FP32;
  module.walk([&](func::FuncOp function) {
    for (BlockArgument arg : function.getArguments())
      if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName)) {
        Type element = getElementTypeOrSelf(arg.getType());
        if (element.isBF16() || element.isF16())
          precision = Precision::BF16;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return precision;
}

ShardingSolverOptions
tessera::getAutoShardOptions(ModuleOp module, const CompileOptions &options) {
  ShardingSolverOptions solver;
  switch (options.train) {
  case Optimizer::None:
    solver.training = false;
    break;
  case Optimizer::Sgd:
    solver.optimizerBytesPerParameterByte = 0;
    break;
  case Optimizer::AdamW:
    // 12 bytes of f32 master weights and moments per 2-byte parameter.
    solver.optimizerBytesPerParameterByte =
        getTrainedPrecision(module, options) == Precision::Mixed ? 6 : 2;
    break;
  }
  solver.zeroStage = static_cast<int64_t>(options.zero.getValue());
  solver.zeroAxes.assign(options.zeroAxes.begin(), options.zeroAxes.end());
  if (solver.zeroAxes.empty())
    solver.zeroAxes = {"dp"};
  return solver;
}

std::optional<std::string> tessera::getMicrobatchFailure(ModuleOp module) {
  OwningOpRef<ModuleOp> copy = module.clone();
  std::optional<std::string> failure;
  ScopedDiagnosticHandler first(copy->getContext(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && !failure) {
      failure = formatLocation(diag.getLocation()) + ": " + diag.str();
    }
    return success();
  });
  CompileOptions options;
  options.train = Optimizer::Sgd;
  options.microbatches = 2;
  PassManager pm(copy->getContext());
  buildShardingPipeline(pm, options);
  if (mlir::succeeded(pm.run(*copy)))
    return std::nullopt;
  return failure ? failure : std::string("the sharding passes failed");
}

llvm::Expected<MeshShardingPins>
tessera::getMeshShardingPins(ModuleOp module, const SearchPins &pins) {
  MeshShardingPins mesh{pins.dp,           pins.tp, pins.pp,
                        pins.microbatches, {},      pins.schedule,
                        pins.recompute};
  mesh.zeroStages = {0, 1, 2, 3};
  if (pins.zero)
    mesh.zeroStages = {*pins.zero};
  if (pins.microbatches == 1)
    return mesh;
  if (std::optional<std::string> failure = getMicrobatchFailure(module)) {
    if (pins.microbatches)
      return llvm::createStringError(
          llvm::formatv("--microbatches {0}: {1}", *pins.microbatches, *failure)
              .str());
    mesh.microbatches = 1;
  }
  return mesh;
}

/// --auto on a model that is not GPT-shaped: the fastest plan of per-op
/// shardings (searchMeshShardings), its pipeline cut marked (dist.stage).
static llvm::Expected<AutoPlan>
applyAutoSharding(ModuleOp module, const MachineModel &machine, int64_t devices,
                  const SearchPins &pins, CompileOptions &options,
                  std::string notGpt) {
  ShardingSolverOptions solver = getAutoShardOptions(module, options);
  // ZeRO stages for AdamW's state unless pinned (getAutoPins).
  llvm::Expected<MeshShardingPins> meshPins = getMeshShardingPins(module, pins);
  if (!meshPins)
    return meshPins.takeError();
  MeshShardingSearch search =
      searchMeshShardings(module, machine, devices, solver, *meshPins,
                          getTrainStepActivations(module));
  if (search.considered == 0)
    return llvm::createStringError(search.firstFailure);
  if (search.plans.empty())
    return llvm::createStringError(llvm::formatv(
        "no dp x tp x pp mesh of {0} devices{1} has a sharding that fits: {2}",
        devices, pins.dp || pins.tp || pins.pp ? " as pinned" : "",
        search.firstFailure));
  const MeshShardingPlan &best = search.plans.front();
  ShardingSolverOptions chosen =
      getMeshSolverOptions(solver, best.pp, best.microbatches, best.zero);
  // The stages cut where the search priced them, which the pipeline pass
  // then takes.
  llvm::Expected<ShardingSolution> solution = applyMeshSharding(
      module, machine, best.dp, best.tp, chosen, best.getNumStages());
  if (!solution)
    return solution.takeError();
  AutoPlan plan;
  PlanChoice &choice = plan.estimate.choice;
  choice.dp = best.dp;
  choice.tp = best.tp;
  choice.pp = best.pp;
  choice.microbatches = best.microbatches;
  choice.schedule = best.schedule;
  choice.virtualStages = best.virtualStages;
  choice.recompute = best.recompute;
  choice.zero = best.zero;
  plan.estimate.stepTimeSeconds = best.stepSeconds;
  plan.estimate.peakMemoryBytes = best.memoryBytes;
  plan.estimate.fits = true;
  plan.considered = search.considered;
  plan.sharding = best;
  plan.notGpt = std::move(notGpt);
  applyPlanChoice(choice, options);
  return plan;
}

llvm::Expected<AutoPlan> tessera::applyAutoPlan(ModuleOp module,
                                                const MachineModel &machine,
                                                int64_t devices,
                                                const SearchPins &pins,
                                                CompileOptions &options) {
  if (llvm::Error error = checkDeviceCount(machine, devices))
    return std::move(error);
  llvm::Expected<ModelShape> shape = getModelShape(module);
  if (!shape)
    return applyAutoSharding(module, machine, devices, pins, options,
                             llvm::toString(shape.takeError()));
  // Priced in the types the compile trains in.
  SearchPins trained = pins;
  trained.precision = getTrainedPrecision(module, options);
  // Without --train the search pins one stage and one microbatch, which a
  // refused mesh then says.
  if (llvm::Error error = checkSearchPins(*shape, devices, trained))
    return llvm::createStringError(
        llvm::toString(std::move(error)) +
        (options.train == Optimizer::None &&
                 getPlanMeshes(*shape, devices, trained).empty()
             ? " (without --train: one stage, one microbatch)"
             : ""));
  LayoutProgram program{module, partitionAnnotated};
  SearchResult result =
      searchPlans(*shape, machine, devices, trained, &program);
  // The interleaved schedule needs the microbatches to be a multiple of the
  // stages.
  auto buildable = [](const PlanEstimate &plan) {
    const PlanChoice &c = plan.choice;
    return c.schedule != PipelineSchedule::Interleaved ||
           c.microbatches % c.pp == 0;
  };
  const PlanEstimate *best = llvm::find_if(result.plans, buildable);
  if (best == result.plans.end())
    return llvm::createStringError(
        llvm::formatv("no plan of {0} devices that this compiler builds fits "
                      "in device memory{1}",
                      devices,
                      options.train != Optimizer::AdamW ? std::string()
                      : pins.zero
                          ? llvm::formatv(" with ZeRO-{0}", *pins.zero).str()
                          : std::string(" with any ZeRO stage"))
            .str());
  if (llvm::Error error =
          annotateLayout(module, machine, best->choice, &*shape))
    return std::move(error);
  applyPlanChoice(best->choice, options);
  return AutoPlan{*best, result.considered};
}
