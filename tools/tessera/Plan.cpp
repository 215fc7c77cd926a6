//===- Plan.cpp - tessera plan --------------------------------------------===//

#include "Commands.h"

#include "tessera/Support/Progress.h"

#include "tessera/Analysis/TrainStep.h"
#include "tessera/Pipelines/ApplyPlan.h"
#include "tessera/Pipelines/Pipelines.h"
#include "tessera/Search/PlanReport.h"
#include "tessera/Search/Planner.h"
#include "tessera/Search/ShardingSolver.h"
#include "tessera/Support/Location.h"

#include "dialects/NN/IR/NNOps.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::planCommand() {
  static cl::SubCommand command(
      "plan", "Search the training plan of a model against a machine "
              "model: DP/TP/PP for a GPT, each op's sharding on every DP x TP "
              "mesh for any other");
  return command;
}

static cl::opt<std::string> planModel(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"),
                                      cl::sub(planCommand()));
static cl::opt<std::string>
    machineName("machine",
                cl::desc("A machines/<name>.json preset or a machine file"),
                cl::Required, cl::sub(planCommand()));
static cl::list<int64_t>
    planDevices("devices",
                cl::desc("Number of devices (with --scaling, the counts of "
                         "the curve: 8,16,32)"),
                cl::Required, cl::CommaSeparated, cl::sub(planCommand()));
static cl::opt<ScalingMode> planScaling(
    "scaling",
    cl::desc("Print the best plan's throughput, speedup and parallel "
             "efficiency at each --devices count, with Amdahl's or "
             "Gustafson's serial fraction fitted to it"),
    enumValues(kScalingModeNames), cl::sub(planCommand()));
static cl::opt<std::string>
    planPlot("plot", cl::desc("With --scaling: write the curve as an SVG plot"),
             cl::value_desc("FILE.svg"), cl::sub(planCommand()));
static cl::opt<int64_t> pinDp("dp", cl::desc("Pin the data-parallel size"),
                              cl::sub(planCommand()));
static cl::opt<int64_t> pinTp("tp", cl::desc("Pin the tensor-parallel size"),
                              cl::sub(planCommand()));
static cl::opt<int64_t> pinPp("pp", cl::desc("Pin the pipeline stages"),
                              cl::sub(planCommand()));
static cl::opt<int64_t>
    pinEp("ep", cl::desc("Pin the expert-parallel size (a model with experts)"),
          cl::sub(planCommand()));
static cl::opt<int64_t> pinCp(
    "cp",
    cl::desc("Pin the context-parallel size: the sequence split over a "
             "\"cp\" axis, attention by ring attention (a model with fused "
             "attention)"),
    cl::sub(planCommand()));
static cl::opt<int64_t>
    pinMicrobatches("microbatches", cl::desc("Pin the microbatches per step"),
                    cl::sub(planCommand()));
static cl::opt<ZeroStage> pinZero("zero", cl::desc("Pin the ZeRO stage"),
                                  enumValues(kZeroStageNames),
                                  cl::sub(planCommand()));
/// A yes-or-no pin, named as its option reads it.
enum class Switch { Off, On };
static constexpr EnumName<Switch> kTrueFalseNames[] = {
    {"true", Switch::On, ""}, {"false", Switch::Off, ""}};
static constexpr EnumName<Switch> kOnOffNames[] = {{"on", Switch::On, ""},
                                                   {"off", Switch::Off, ""}};
TESSERA_ENUM_OPTION_PARSER(Switch);
static cl::opt<Switch> pinReshardAfterForward(
    "reshard-after-forward",
    cl::desc("Pin ZeRO-3's regather: true (gather again for the backward) "
             "or false (keep the forward's gathers; shown as zero 3k)"),
    enumValues(kTrueFalseNames), cl::sub(planCommand()));
static cl::opt<PipelineSchedule> pinSchedule("schedule",
                                             cl::desc("Pin the schedule"),
                                             enumValues(kPipelineScheduleNames),
                                             cl::sub(planCommand()));
static cl::opt<int64_t>
    pinVirtual("virtual",
               cl::desc("Pin the interleaved schedule's stages per rank "
                        "(default 2)"),
               cl::sub(planCommand()));
static cl::opt<Recompute> pinRecompute("recompute",
                                       cl::desc("Pin recomputation"),
                                       enumValues(kRecomputeNames),
                                       cl::sub(planCommand()));
static cl::opt<Switch> pinSequenceParallel("sequence-parallel",
                                           cl::desc("Pin sequence parallelism"),
                                           enumValues(kOnOffNames),
                                           cl::sub(planCommand()));
static cl::opt<TensorLayout>
    pinLayout("layout", cl::desc("Pin the layout on the dp x tp mesh"),
              enumValues(kTensorLayoutNames), cl::sub(planCommand()));
static cl::opt<int64_t> planIlpShapes(
    "ilp-shapes",
    cl::desc("The dp x tp shapes the ILP's layout is solved on: those of the "
             "N fastest template plans (0: every shape)"),
    cl::init(SearchPins().ilpShapes), cl::sub(planCommand()));
static cl::opt<Precision> planPrecision("precision", cl::desc("Precision"),
                                        cl::init(Precision::Mixed),
                                        enumValues(kPrecisionNames),
                                        cl::sub(planCommand()));
static cl::opt<int64_t> planTop("top", cl::desc("Plans to show"), cl::init(5),
                                cl::sub(planCommand()));
static cl::opt<bool> planJson("json", cl::desc("Print JSON"),
                              cl::sub(planCommand()));
static cl::opt<bool> planBreakdown(
    "breakdown",
    cl::desc("Show where the best plan's step time goes: compute by op "
             "class, exposed TP, DP and PP communication, bubble, optimizer, "
             "recomputation and overheads, with MFU and HFU (--json: each "
             "plan's \"breakdown\")"),
    cl::sub(planCommand()));
static cl::opt<bool>
    planOverlap("overlap",
                cl::desc("Price the plans as compiled with --overlap: gradient "
                         "reductions overlap the backward in buckets"),
                cl::sub(planCommand()));
static cl::opt<int64_t> planBucketBytes(
    "bucket-bytes",
    cl::desc("With --overlap: the reductions' bucket size, as compiled "
             "(0: each its own)"),
    cl::init(0), cl::sub(planCommand()));
static cl::list<std::string> explainOps(
    "explain-op",
    cl::desc("Explain the ILP's choice for the ops NAME names on the best "
             "plan's dp x tp mesh: a parameter (and its readers), an op name "
             "(nn.dot) or a location (line:col, file:line:col)"),
    cl::value_desc("NAME"), cl::sub(planCommand()));

/// Sets `to` when `option` was given.
template <typename T, typename U>
static void pin(const cl::opt<T> &option, std::optional<U> &to) {
  if (option.getNumOccurrences())
    to = static_cast<U>(option.getValue());
}

/// The solver's options for the train step tessera plan prices (AdamW).
static ShardingSolverOptions getPlanSolverOptions(ModuleOp model) {
  CompileOptions options;
  options.train = Optimizer::AdamW;
  if (planPrecision == Precision::Mixed)
    options.precision = TrainPrecision::Mixed;
  return getAutoShardOptions(model, options);
}

/// Whether `op` is one --explain-op `name` names: by its op name, by its
/// location (its end: line:col or file:line:col), or as a reader of the
/// parameter `name`.
static bool isNamedOp(Operation *op, func::FuncOp function, StringRef name) {
  if (op->getName().getStringRef() == name)
    return true;
  if (StringRef(formatLocation(op->getLoc())).ends_with(name))
    return true;
  return llvm::any_of(op->getOperands(), [&](Value operand) {
    auto arg = dyn_cast<BlockArgument>(operand);
    auto param = arg ? function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                             nn::kParamAttrName)
                     : nullptr;
    return param && param.getValue() == name;
  });
}

/// --explain-op: the ILP's choices on a copy of `model` on the dp x tp mesh,
/// solved with `options` (in `stages` pipeline stages).
static int explainPlanOps(ModuleOp model, const MachineModel &machine,
                          int64_t dp, int64_t tp,
                          const ShardingSolverOptions &options,
                          int64_t stages = 1) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(model->clone()));
  llvm::Expected<ShardingSolution> solution =
      applyMeshSharding(*copy, machine, dp, tp, options, stages);
  if (!solution)
    return reportError(solution.takeError());
  auto mesh = *copy->getOps<dist::MeshOp>().begin();
  func::FuncOp function = getModelFunction(*copy);
  for (const std::string &name : explainOps) {
    int64_t matched = 0;
    for (const ShardingChoice &choice : solution->choices) {
      std::string what;
      if (choice.op) {
        if (choice.op->getNumResults() == 0 ||
            !isNamedOp(choice.op, function, name))
          continue;
        what = choice.op->getName().getStringRef().str() + " at " +
               formatLocation(choice.op->getLoc());
      } else {
        auto param = function.getArgAttrOfType<StringAttr>(choice.argument,
                                                           nn::kParamAttrName);
        if (!param || param.getValue() != name)
          continue;
        what = "parameter " + name;
      }
      ++matched;
      llvm::outs() << "explain: " << what << " on dp=" << dp << " tp=" << tp
                   << ": " << describeChoice(choice, mesh) << "\n";
    }
    if (!matched)
      return reportError("--explain-op " + name +
                         " names no op or parameter of the model");
  }
  return 0;
}

/// tessera plan of a model that is not GPT-shaped: every dp x tp x pp mesh,
/// ZeRO stage (but --zero) and count of microbatches, each op's sharding
/// solved on it.
static int runShardingPlan(ModuleOp model, const MachineModel &machine,
                           int64_t devices, StringRef notGpt) {
  SearchPins pins;
  pin(pinDp, pins.dp);
  pin(pinTp, pins.tp);
  pin(pinPp, pins.pp);
  pin(pinMicrobatches, pins.microbatches);
  pin(pinZero, pins.zero);
  pin(pinSchedule, pins.schedule);
  pins.allowAsync = cli::getAllowAsync();
  pin(pinRecompute, pins.recompute);
  llvm::Expected<MeshShardingPins> meshPins = getMeshShardingPins(model, pins);
  if (!meshPins)
    return reportError(meshPins.takeError());
  MeshShardingSearch search =
      searchMeshShardings(model, machine, devices, getPlanSolverOptions(model),
                          *meshPins, getTrainStepActivations(model));
  llvm::outs() << llvm::formatv(
      "plan: {0} on {1} x {2}, every op sharded by the ILP ({3}); {4} plans "
      "considered, {5} with no sharding or stage cut that fits\n",
      planModel, devices, machine.name, notGpt, search.considered,
      search.failed);
  if (!pins.microbatches && meshPins->microbatches)
    llvm::outs() << "plan: one microbatch: the model's train step does not "
                    "split into more (tessera compile --microbatches 2 says "
                    "where)\n";
  if (search.plans.empty())
    return reportError(search.firstFailure);
  llvm::outs() << llvm::formatv(
      "{0,4} {1,5} {2,5} {3,4} {4,5} {5,4} {6,-11} "
      "{7,-9} {8,10} {9,14} {10,10} {11,10} "
      "{12,10}\n",
      "rank", "dp", "tp", "pp", "mb", "zero", "schedule", "recompute",
      "step (s)", "collect. (MB)", "mem (GB)", "variables", "solve (s)");
  size_t shown =
      std::min<size_t>(std::max<int64_t>(planTop, 1), search.plans.size());
  for (auto [rank, plan] :
       llvm::enumerate(ArrayRef(search.plans).take_front(shown)))
    llvm::outs() << llvm::formatv(
        "{0,4} {1,5} {2,5} {3,4} {4,5} {5,4} {6,-11} {7,-9} {8,10:e3} "
        "{9,14:f1} {10,10} {11,10} {12,10:f3}\n",
        rank + 1, plan.dp, plan.tp, plan.pp, plan.microbatches, plan.zero,
        getEnumName(kPipelineScheduleNames, plan.schedule),
        getEnumName(kRecomputeNames, plan.recompute), plan.stepSeconds,
        plan.reshardBytes / 1e6, llvm::format("%.4g", plan.memoryBytes / 1e9),
        plan.variables, plan.solveSeconds);
  if (!explainOps.empty()) {
    const MeshShardingPlan &best = search.plans.front();
    return explainPlanOps(model, machine, best.dp, best.tp,
                          getMeshSolverOptions(getPlanSolverOptions(model),
                                               best.pp, best.microbatches,
                                               best.zero),
                          best.getNumStages());
  }
  return 0;
}

/// tessera plan --scaling: the best plan at each --devices count.
static int runScaling(const ModelShape &shape, const MachineModel &machine,
                      const SearchPins &pins) {
  llvm::Expected<ScalingCurve> curve = getScalingCurve(
      shape, machine,
      SmallVector<int64_t>(planDevices.begin(), planDevices.end()), planScaling,
      pins);
  if (!curve)
    return reportError(curve.takeError());
  if (planJson) {
    llvm::json::Object json = toJson(*curve);
    json["model"] = planModel;
    json["machine"] = machine.name;
    llvm::outs() << llvm::formatv("{0:2}\n",
                                  llvm::json::Value(std::move(json)));
  } else
    llvm::outs() << llvm::formatv(
                        "scaling ({0}) of {1} on {2}: the best plan of "
                        "Megatron's layout at each count\n",
                        getEnumName(kScalingModeNames, curve->mode), planModel,
                        machine.name)
                 << formatScaling(*curve);
  if (!planPlot.empty()) {
    std::error_code error;
    llvm::raw_fd_ostream file(planPlot, error);
    if (error)
      return reportError("cannot write " + planPlot + ": " + error.message());
    file << getScalingSvg(*curve, planModel, machine.name);
  }
  return llvm::any_of(curve->points,
                      [](const ScalingPoint &point) { return !point.plan; })
             ? 1
             : 0;
}

int cli::runPlan(MLIRContext &context) {
  llvm::Expected<std::unique_ptr<ModelFile>> file =
      loadModelFile(context, planModel);
  if (!file)
    return reportError(file.takeError());
  ModuleOp model = *(*file)->module;
  llvm::Expected<MachineModel> machine =
      loadMachineModel(machineName, getMachinesDir());
  if (!machine)
    return reportError(machine.takeError());
  bool scaling = planScaling.getNumOccurrences() > 0;
  if (!scaling && planDevices.size() != 1)
    return reportError("--devices takes one count (a list with --scaling)");
  if (!scaling && !planPlot.empty())
    return reportError("--plot draws a --scaling curve");
  int64_t devices = planDevices.front();
  if (llvm::Error error = checkDeviceCount(*machine, devices))
    return reportError(std::move(error));
  llvm::Expected<ModelShape> shape = getModelShape(model);
  if (!shape && (scaling || planBreakdown))
    return reportError(std::string(scaling ? "--scaling" : "--breakdown") +
                       " prices the plans of GPT-style models: " +
                       llvm::toString(shape.takeError()));
  if (!shape)
    return runShardingPlan(model, *machine, devices,
                           llvm::toString(shape.takeError()));

  SearchPins pins;
  pin(pinDp, pins.dp);
  pin(pinTp, pins.tp);
  pin(pinPp, pins.pp);
  pin(pinEp, pins.ep);
  pin(pinCp, pins.cp);
  pin(pinMicrobatches, pins.microbatches);
  pin(pinZero, pins.zero);
  if (pinReshardAfterForward.getNumOccurrences())
    pins.reshardAfterForward = pinReshardAfterForward == Switch::On;
  pin(pinSchedule, pins.schedule);
  pins.allowAsync = cli::getAllowAsync();
  pin(pinVirtual, pins.virtualStages);
  pin(pinLayout, pins.layout);
  pin(pinRecompute, pins.recompute);
  if (pinSequenceParallel.getNumOccurrences())
    pins.sequenceParallel = pinSequenceParallel == Switch::On;
  pins.precision = planPrecision;
  pins.ilpShapes = planIlpShapes;
  pins.overlap = planOverlap;
  if (planBucketBytes < 0)
    return reportError("--bucket-bytes must not be negative");
  pins.bucketBytes = planBucketBytes;
  if (scaling)
    return runScaling(*shape, *machine, pins);
  if (llvm::Error error = checkSearchPins(*shape, devices, pins))
    return reportError(std::move(error));

  // On a terminal, how far the search is.
  ProgressLine progress;
  if (progress.isEnabled())
    pins.progress = [&](const SearchResult &sofar) {
      progress.update(
          llvm::formatv(
              "plans considered {0}, best step {1}", sofar.considered,
              std::isinf(sofar.bestStepSeconds)
                  ? std::string("none yet")
                  : llvm::formatv("{0:F4} s", sofar.bestStepSeconds).str())
              .str());
    };
  LayoutProgram program{model, partitionAnnotated};
  SearchResult result = searchPlans(*shape, *machine, devices, pins,
                                    model ? &program : nullptr);
  progress.clear();
  size_t shown =
      std::min<size_t>(std::max<int64_t>(planTop, 1), result.plans.size());
  if (planJson) {
    llvm::json::Array plans;
    for (const PlanEstimate &plan : ArrayRef(result.plans).take_front(shown))
      plans.push_back(toJson(plan));
    llvm::json::Object root{{"machine", machine->name},
                            {"devices", devices},
                            {"considered", result.considered},
                            {"over_memory", result.overMemory},
                            {"plans", std::move(plans)}};
    llvm::outs() << llvm::formatv("{0:2}\n",
                                  llvm::json::Value(std::move(root)));
    return result.plans.empty() ? 1 : 0;
  }
  llvm::outs() << llvm::formatv(
      "plan: {0} on {1} x {2} ({3} layers, hidden {4}, {5} parameters, batch "
      "{6}); {7} plans considered, {8} over {9} GB of device memory\n",
      planModel, devices, machine->name, shape->layers, shape->hidden,
      formatCount(shape->parameters), shape->batch, result.considered,
      result.overMemory, llvm::format("%.4g", machine->memoryBytes / 1e9));
  if (result.plans.empty())
    return reportError(
        pins.layout == TensorLayout::Solved && !result.solveFailure.empty()
            ? "no plan of the ILP's layout: " + result.solveFailure
            : std::string("no plan fits in device memory; add devices or "
                          "allow ZeRO, recomputation or pipelining"));
  // A model with experts gets an "ep" column after "dp"; where the plans
  // shown split the sequence, a "cp" column follows.
  bool experts = shape->experts > 0;
  ArrayRef<PlanEstimate> shownPlans = ArrayRef(result.plans).take_front(shown);
  bool contextParallel = llvm::any_of(
      shownPlans, [](const PlanEstimate &plan) { return plan.choice.cp > 1; });
  auto meshColumns = [&](auto ep, auto cp) {
    return (experts ? llvm::formatv(" {0,4}", ep).str() : std::string()) +
           (contextParallel ? llvm::formatv(" {0,4}", cp).str()
                            : std::string());
  };
  llvm::outs() << llvm::formatv(
      "{0,4} {1,5}{13} {2,4} {3,4} {4,5} {5,4} {6,-11} {7,-9} {8,3} {9,-8} "
      "{10,10} {11,6} {12,10}\n",
      "rank", "dp", "tp", "pp", "mb", "zero", "schedule", "recompute", "sp",
      "layout", "step (s)", "MFU", "mem (GB)", meshColumns("ep", "cp"));
  for (auto [rank, plan] : llvm::enumerate(shownPlans)) {
    const PlanChoice &c = plan.choice;
    llvm::outs() << llvm::formatv(
        "{0,4} {1,5}{13} {2,4} {3,4} {4,5} {5,4} {6,-11} {7,-9} {8,3} {9,-8} "
        "{10,10} {11,5:f1}% {12,10}\n",
        rank + 1, c.dp, c.tp, c.pp, c.microbatches, getZeroName(c),
        getEnumName(kPipelineScheduleNames, c.schedule),
        getEnumName(kRecomputeNames, c.recompute),
        c.sequenceParallel ? "on" : "off",
        getEnumName(kTensorLayoutNames, c.layout),
        // Four significant digits, so that a small model's step and memory
        // do not read 0.000.
        llvm::format("%.4g", plan.stepTimeSeconds), 100 * plan.mfu,
        llvm::format("%.4g", plan.peakMemoryBytes / 1e9),
        meshColumns(c.ep, c.cp));
  }
  // dp=.. (ep=..) (cp=..) tp=.. pp=..
  auto formatMesh = [&](const PlanChoice &c) {
    return llvm::formatv("dp={0}{1}{2} tp={3} pp={4}", c.dp,
                         experts ? " ep=" + std::to_string(c.ep) : "",
                         c.cp > 1 ? " cp=" + std::to_string(c.cp) : "", c.tp,
                         c.pp)
        .str();
  };
  if (planBreakdown) {
    const PlanEstimate &best = result.plans.front();
    const PlanChoice &c = best.choice;
    llvm::outs() << llvm::formatv("breakdown of plan 1 ({0} zero={1}{2}):\n",
                                  formatMesh(c), getZeroName(c),
                                  formatPipeline(c))
                 << formatBreakdown(best);
  }
  if (!explainOps.empty()) {
    // As the search solves the best plan's layout: the batch on dp.
    const PlanChoice &best = result.plans.front().choice;
    if (int status = explainPlanOps(
            model, *machine, best.dp, best.tp,
            getLayoutSolverOptions(model, *machine, best, &*shape)))
      return status;
  }
  if (std::optional<WinReason> why = getWinReason(result.plans)) {
    const PlanChoice &a = why->winner, &b = why->rival;
    llvm::outs() << llvm::formatv(
        "why: {0} beats the best {1} by {2:f1}%: its {3} takes {4:e2} s "
        "against {5:e2} s\n",
        formatMesh(a), formatMesh(b), 100 * why->slowerFraction, why->part,
        why->winnerSeconds, why->rivalSeconds);
  }
  return 0;
}
