//===- Compile.cpp - tessera compile, and the options verify shares -------===//

#include "Commands.h"

#include "tessera/Pipelines/Pipelines.h"
#include "tessera/Pipelines/ApplyPlan.h"
#include "tessera/Search/PlanReport.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::compileCommand() {
  static cl::SubCommand command(
      "compile", "Shard, partition and export a model to a plan");
  return command;
}

cl::SubCommand &cli::verifyCommand() {
  static cl::SubCommand command(
      "verify", "Run the sharded plan on N ranks and the single-device "
                "program on the same seeded inputs, and compare every result");
  return command;
}

//===----------------------------------------------------------------------===//
// The options of compile and verify (CompileOptions)
//===----------------------------------------------------------------------===//

static cl::opt<std::string> modelInput(cl::Positional, cl::Required,
                                       cl::desc("<model.mlir>"),
                                       cl::sub(compileCommand()),
                                       cl::sub(verifyCommand()));
static cl::opt<std::string>
    meshSpec("mesh",
             cl::desc("Axis sizes of the model's mesh: dp=2,tp=4 (with --auto: "
                      "pins the searched dp and tp)"),
             cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<int64_t> pipelineStages(
    "pp", cl::desc("Pipeline stages, run along the mesh axis \"pp\""),
    cl::init(1), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<int64_t> microbatches(
    "microbatches", cl::desc("Microbatches per step (gradient accumulation)"),
    cl::init(1), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<PipelineSchedule>
    pipelineSchedule("schedule", cl::desc("Pipeline schedule"),
                     cl::init(PipelineSchedule::OneFOneB),
                     enumValues(kPipelineScheduleNames),
                     cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<int64_t>
    virtualStages("virtual",
                  cl::desc("Stages per pipeline rank (--schedule "
                           "interleaved)"),
                  cl::init(1), cl::sub(compileCommand()),
                  cl::sub(verifyCommand()));
static cl::opt<Optimizer>
    train("train",
          cl::desc("Compile the training step with this optimizer "
                   "(--tessera-train-step)"),
          cl::init(Optimizer::None), enumValues(kOptimizerNames),
          cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<Recompute>
    recompute("recompute",
              cl::desc("With --train: what the backward recomputes of the "
                       "forward (--tessera-recompute)"),
              cl::init(Recompute::None), enumValues(kRecomputeNames),
              cl::sub(compileCommand()), cl::sub(verifyCommand()));
static FiniteDoubleOption learningRate("lr", cl::desc("Learning rate"),
                                       cl::init(1e-3),
                                       cl::sub(compileCommand()),
                                       cl::sub(verifyCommand()));
static cl::opt<TrainPrecision>
    precision("precision", cl::desc("With --train: the types it computes in"),
              cl::init(TrainPrecision::Model), enumValues(kTrainPrecisionNames),
              cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<ZeroStage> zeroStage(
    "zero",
    cl::desc("With --train adamw: ZeRO stage over \"dp\" (--tessera-zero)"),
    cl::init(ZeroStage::None), enumValues(kZeroStageNames),
    cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::list<std::string>
    zeroAxes("zero-axes",
             cl::desc("With --zero: the data-parallel mesh axes, major first "
                      "(default dp, and cp and ep where the mesh has "
                      "them)"),
             cl::CommaSeparated, cl::sub(compileCommand()),
             cl::sub(verifyCommand()));
static cl::opt<ReshardAfterForward> reshardAfterForward(
    "reshard-after-forward",
    cl::desc("With --zero 3: true (gather parameters again for the backward "
             "pass), false (keep the forward's gathers) or a group size (keep "
             "a piece per device of the trailing --zero-axes of that size, "
             "and gather within them)"),
    cl::init(ReshardAfterForward::shard()), cl::sub(compileCommand()),
    cl::sub(verifyCommand()));
static cl::opt<bool> zeroUnits(
    "zero-units",
    cl::desc("With --zero: store each unit's parameters (a transformer "
             "block's), and each of their optimizer states, in one flat "
             "buffer, as FSDP's FlatParameter; with tensor parallelism, "
             "one of the split parameters' pieces and one of the others "
             "(false: a buffer per parameter, as FSDP2)"),
    cl::init(true), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<bool>
    zigzag("zigzag",
           cl::desc("Store the sequence in zigzag order where causal ring "
                    "attention splits it over \"cp\" "
                    "(--tessera-zigzag-context: each device holds two "
                    "opposite chunks, and every ring step costs each device "
                    "the same); --zigzag=false keeps natural order"),
           cl::init(true), cl::sub(compileCommand()),
           cl::sub(verifyCommand()));
static cl::opt<int64_t> servers(
    "ps",
    cl::desc("Parameter-server training with --train: the mesh's devices are "
             "data-parallel workers that pull the parameters from this many "
             "server processes and push their gradients to them, over "
             "ZeroMQ (0: none)"),
    cl::value_desc("SERVERS"), cl::init(0), cl::sub(compileCommand()),
    cl::sub(verifyCommand()));
static cl::opt<std::string> consistency(
    "consistency",
    cl::desc("With --ps: how the servers apply the gradients: sync (each "
             "step's of every worker, summed: data-parallel training), async "
             "(each as it arrives) or ssp=K (async, but no worker runs more "
             "than K steps ahead of the slowest)"),
    cl::init("sync"), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<bool> allowAsync(
    "allow-async",
    cl::desc("Let the plan search (compile --auto, plan) pick the "
             "pipedream and 2bw pipeline schedules, whose steps compute their "
             "gradients at earlier weights: faster without a flush, with "
             "other numerics than synchronous training"),
    cl::init(false), cl::sub(compileCommand()), cl::sub(planCommand()));
static cl::opt<bool> weightStash(
    "weight-stash",
    cl::desc("With --train: compute each step's gradients at the weights of "
             "the step before, W(t+1) = W(t) - lr * grad f(W(t-1)), keeping "
             "them as state \"<param>.stash\" (PipeDream-2BW's weight "
             "update semantics, which a pipeline without a flush between "
             "steps needs)"),
    cl::init(false), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<bool>
    overlap("overlap",
            cl::desc("Overlap communication with compute (--tessera-schedule): "
                     "collectives start early on the communication stream"),
            cl::init(false), cl::sub(compileCommand()),
            cl::sub(verifyCommand()));
static cl::opt<int64_t>
    prefetch("prefetch",
             cl::desc("With --overlap: collectives in flight at once"),
             cl::init(1), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<int64_t> bucketBytes(
    "bucket-bytes",
    cl::desc("With --overlap: bucket reductions smaller than this many "
             "bytes (0: none)"),
    cl::init(0), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<bool> gatherUnits(
    "gather-units",
    cl::desc("With --overlap: gather each unit's parameters (a transformer "
             "block's) in one all_gather"),
    cl::init(true), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<int64_t> prefetchMemoryLimit(
    "memory-limit",
    cl::desc("With --overlap: bytes of collective results in flight that "
             "prefetching may not pass (0: no limit)"),
    cl::init(0), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<bool>
    fuse("fuse",
         cl::desc("Fuse chains of elementwise ops into one kernel each "
                  "(--tessera-fuse-elementwise; --fuse=false: one kernel "
                  "per op)"),
         cl::init(true), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static FiniteDoubleOption weightDecay("weight-decay",
                                      cl::desc("Weight decay of the optimizer"),
                                      cl::init(0.0), cl::sub(compileCommand()),
                                      cl::sub(verifyCommand()));

static cl::opt<LrScheduleKind> lrSchedule(
    "lr-schedule",
    cl::desc("With --train adamw: how the learning rate follows the step "
             "(after --warmup-steps of linear warmup)"),
    cl::init(LrScheduleKind::Constant), enumValues(kLrScheduleNames),
    cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<int64_t>
    warmupSteps("warmup-steps",
                cl::desc("With --train adamw: steps of linear warmup to --lr"),
                cl::init(0), cl::sub(compileCommand()),
                cl::sub(verifyCommand()));
static cl::opt<int64_t> decaySteps(
    "decay-steps",
    cl::desc("With --lr-schedule linear or cosine: the step by which the "
             "learning rate reaches --min-lr"),
    cl::init(0), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static FiniteDoubleOption
    minLr("min-lr",
          cl::desc("With --lr-schedule linear or cosine: the learning rate "
                   "it decays to"),
          cl::init(0.0), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static FiniteDoubleOption clipGrad(
    "clip-grad",
    cl::desc("With --train adamw: clip the gradients to this global norm, "
             "as PyTorch's clip_grad_norm_ (0: no clipping)"),
    cl::init(0.0), cl::sub(compileCommand()), cl::sub(verifyCommand()));

static cl::opt<bool> lossScale(
    "loss-scale",
    cl::desc("With --train adamw: dynamic loss scaling, as PyTorch's "
             "GradScaler (f16 mixed precision): a step whose gradients "
             "overflow is skipped and halves the scale"),
    cl::init(false), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static FiniteDoubleOption initialLossScale(
    "initial-loss-scale",
    cl::desc("With --loss-scale: the first scale (0: 2^16, or 2^15 for an "
             "f16 loss)"),
    cl::init(0.0), cl::sub(compileCommand()), cl::sub(verifyCommand()));
static cl::opt<int64_t> lossScaleWindow(
    "loss-scale-window",
    cl::desc("With --loss-scale: steps without an overflow after which the "
             "scale doubles"),
    cl::init(2000), cl::sub(compileCommand()), cl::sub(verifyCommand()));

void cli::readCompileOptions(CompileOptions &options) {
  options.mesh = meshSpec;
  options.pipelineStages = pipelineStages;
  options.microbatches = microbatches;
  options.schedule = pipelineSchedule;
  options.virtualStages = virtualStages;
  options.train = train;
  options.recompute = recompute;
  options.lr = learningRate.getValue();
  options.weightDecay = weightDecay.getValue();
  options.lrSchedule = lrSchedule;
  options.warmupSteps = warmupSteps;
  options.decaySteps = decaySteps;
  options.minLr = minLr.getValue();
  options.clipGrad = clipGrad.getValue();
  options.lossScale = lossScale;
  options.initialLossScale = initialLossScale.getValue();
  options.lossScaleWindow = lossScaleWindow;
  options.precision = precision;
  options.zero = zeroStage;
  options.zeroAxes = SmallVector<std::string>(zeroAxes.begin(), zeroAxes.end());
  options.reshardAfterForward = reshardAfterForward;
  options.zeroUnits = zeroUnits;
  options.zigzag = zigzag;
  options.servers = servers;
  options.consistency = consistency;
  options.weightStash = weightStash;
  options.overlap = overlap;
  options.prefetch = prefetch;
  options.bucketBytes = bucketBytes;
  options.memoryLimit = prefetchMemoryLimit;
  options.gatherUnits = gatherUnits;
  options.fuse = fuse;
}

StringRef cli::getModelInput() { return modelInput; }

bool cli::getAllowAsync() { return allowAsync; }

//===----------------------------------------------------------------------===//
// tessera compile
//===----------------------------------------------------------------------===//

static cl::opt<std::string> planOutput("o", cl::desc("Output plan file"),
                                       cl::value_desc("file"), cl::Required,
                                       cl::sub(compileCommand()));
static cl::opt<bool>
    planText("text", cl::desc("Write the plan in protobuf text format"),
             cl::sub(compileCommand()));
enum class Emit { Plan, Partitioned, NN };
static cl::opt<Emit>
    emit("emit", cl::desc("What to write"), cl::init(Emit::Plan),
         cl::values(clEnumValN(Emit::Plan, "plan", "the executable plan"),
                    clEnumValN(Emit::Partitioned, "partitioned",
                               "the per-device program in MLIR"),
                    clEnumValN(Emit::NN, "nn",
                               "the annotated global program (after --auto)")),
         cl::sub(compileCommand()));
static cl::opt<bool> printManifestOption(
    "manifest",
    cl::desc("Print the plan's collective manifest: per program, each "
             "collective and transfer of a step in the order a run issues "
             "them (checked to match across every group, and not to "
             "deadlock, as the runtime checks it at load)"),
    cl::sub(compileCommand()));
static cl::opt<bool> printPipeline(
    "print-pipeline",
    cl::desc("Print the tessera-opt command that replays this compile, and "
             "stop"),
    cl::sub(compileCommand()));
static cl::opt<bool>
    autoPlan("auto",
             cl::desc("Search the plan (as tessera plan) and annotate the "
                      "model with the winner; needs --machine and --devices"),
             cl::sub(compileCommand()));
static cl::opt<std::string> machineName(
    "machine",
    cl::desc("The machine model: --auto searches the plan on it, and "
             "propagation resolves conflicts and the partitioner "
             "chooses op layouts by their time on it"),
    cl::sub(compileCommand()));
static cl::opt<TensorLayout>
    autoLayout("layout",
               cl::desc("With --auto: pin the layout on the dp x tp mesh"),
               enumValues(kTensorLayoutNames), cl::sub(compileCommand()));
static cl::opt<int64_t> autoIlpShapes(
    "ilp-shapes",
    cl::desc("With --auto: the dp x tp shapes the ILP's layout is solved on: "
             "those of the N fastest template plans (0: every shape)"),
    cl::init(SearchPins().ilpShapes), cl::sub(compileCommand()));
static cl::opt<int64_t> autoDevices("devices",
                                    cl::desc("With --auto: the devices"),
                                    cl::init(0), cl::sub(compileCommand()));

/// --auto: annotates the model with the fastest plan this compiler builds
/// and sets the options that build it.
static llvm::Error applyAuto(ModuleOp module, CompileOptions &options) {
  if (machineName.empty() || autoDevices < 1)
    return llvm::createStringError(
        "--auto needs --machine NAME and --devices N");
  llvm::Expected<MachineModel> machine =
      loadMachineModel(machineName, getMachinesDir());
  if (!machine)
    return machine.takeError();
  std::optional<int64_t> zero;
  if (zeroStage.getNumOccurrences())
    zero = static_cast<int64_t>(zeroStage.getValue());
  std::optional<bool> reshard;
  if (reshardAfterForward.getNumOccurrences() &&
      reshardAfterForward.kind != ReshardAfterForward::Kind::Group)
    reshard = reshardAfterForward.kind == ReshardAfterForward::Kind::Shard;
  std::optional<Recompute> recomputePin;
  if (recompute.getNumOccurrences())
    recomputePin = recompute.getValue();
  SearchPins pins = getAutoPins(options, zero, reshard, recomputePin);
  // What the command line gives of the pipeline, the search keeps.
  if (pipelineStages.getNumOccurrences())
    pins.pp = pipelineStages;
  if (microbatches.getNumOccurrences())
    pins.microbatches = microbatches;
  if (pipelineSchedule.getNumOccurrences())
    pins.schedule = pipelineSchedule.getValue();
  pins.allowAsync = allowAsync;
  if (autoLayout.getNumOccurrences())
    pins.layout = autoLayout.getValue();
  pins.ilpShapes = autoIlpShapes;
  // --mesh pins the searched mesh, whose axes are "dp" and "tp" (and "ep"
  // with experts, "cp" with fused attention); the annotated model then has
  // the plan's sizes, which the compile keeps (a pin of one axis would not
  // size the other).
  llvm::Expected<llvm::StringMap<int64_t>> sizes = parseMeshSizes(meshSpec);
  if (!sizes)
    return sizes.takeError();
  for (const auto &entry : *sizes) {
    StringRef axis = entry.getKey();
    std::optional<int64_t> *pin = axis == "dp"   ? &pins.dp
                                  : axis == "tp" ? &pins.tp
                                  : axis == "ep" ? &pins.ep
                                  : axis == "cp" ? &pins.cp
                                                 : nullptr;
    if (!pin)
      return llvm::createStringError(
          "with --auto, --mesh pins the searched sizes of \"dp\", \"tp\", "
          "\"ep\" and \"cp\" (dp=2,tp=4), not '" +
          (axis + "=" + llvm::Twine(entry.getValue())).str() + "'");
    *pin = entry.getValue();
  }
  llvm::Expected<AutoPlan> plan =
      applyAutoPlan(module, *machine, autoDevices, pins, options);
  if (!plan)
    return plan.takeError();
  options.mesh.clear();
  const PlanChoice &choice = plan->estimate.choice;
  std::string recomputed =
      choice.recompute == Recompute::None
          ? std::string()
          : " recompute=" +
                getEnumName(kRecomputeNames, choice.recompute).str();
  if (const std::optional<MeshShardingPlan> &sharding = plan->sharding) {
    llvm::errs() << llvm::formatv(
        "auto: dp={0} tp={1}{2} zero={3}{4}, every op sharded by the ILP "
        "({5}): predicted step {6:e3} s, {7:f1} MB of collectives, {8:f1} MB "
        "per device on {9} x {10} (of {11} plans)\n",
        choice.dp, choice.tp, formatPipeline(choice), choice.zero, recomputed,
        plan->notGpt, sharding->stepSeconds, sharding->reshardBytes / 1e6,
        sharding->memoryBytes / 1e6, autoDevices.getValue(), machine->name,
        plan->considered);
    return llvm::Error::success();
  }
  llvm::errs() << llvm::formatv(
      "auto: dp={0}{12} tp={1}{2}{3} zero={4}{5}: predicted step {6:e3} s, "
      "MFU {7:f1}% on {8} x {9} in {11} (of {10} plans)\n",
      choice.dp, choice.tp,
      choice.sequenceParallel ? " sequence-parallel"
      : choice.layout == TensorLayout::Solved && choice.tp > 1 ? " layout=ilp"
                                                               : "",
      formatPipeline(choice), getZeroName(choice), recomputed,
      plan->estimate.stepTimeSeconds, 100 * plan->estimate.mfu,
      autoDevices.getValue(), machine->name, plan->considered,
      getEnumName(kPrecisionNames, choice.precision),
      (choice.ep > 1 ? " ep=" + std::to_string(choice.ep) : "") +
          (choice.cp > 1 ? " cp=" + std::to_string(choice.cp) : ""));
  return llvm::Error::success();
}

/// Writes `module` to the output file.
static int writeModule(ModuleOp module) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file =
      openOutputFile(planOutput, &error);
  if (!file)
    return reportError(error);
  module->print(file->os());
  file->os() << "\n";
  file->keep();
  return 0;
}

int cli::runCompile(MLIRContext &context) {
  CompileOptions options;
  readCompileOptions(options);
  options.machine = machineName;
  options.output = planOutput;
  options.text = planText;
  if (std::string error = checkCompileOptions(options); !error.empty())
    return reportError(error);
  if (printManifestOption && (emit != Emit::Plan || planOutput == "-"))
    return reportError("--manifest prints the manifest of a plan written to "
                       "a file: --emit plan (the default) and -o FILE");
  llvm::Expected<std::unique_ptr<ModelFile>> file =
      loadModelFile(context, modelInput);
  if (!file)
    return reportError(file.takeError());
  ModuleOp module = *(*file)->module;
  if (autoPlan)
    if (llvm::Error error = applyAuto(module, options))
      return reportError(std::move(error));
  if (printPipeline) {
    if (emit == Emit::NN)
      return reportError("--print-pipeline replays a compile to a plan or "
                         "to the partitioned program, not --emit nn");
    // --auto's annotations are in the model --emit nn writes.
    if (autoPlan)
      llvm::outs() << "# on the model that --auto annotates: tessera "
                      "compile ... --emit nn -o ANNOTATED.mlir\n";
    StringRef replayed = autoPlan ? "ANNOTATED.mlir" : StringRef(modelInput);
    llvm::outs() << getReplayCommand(replayed, options,
                                     /*exportPlan=*/emit == Emit::Plan)
                 << "\n";
    // Parameter-server training compiles the servers' program too.
    if (options.servers > 0) {
      CompileOptions server;
      server.copyOptionValuesFrom(options);
      server.serverPart = ServerPart::Server;
      server.output = options.output + ".servers";
      llvm::outs() << "# and the servers' program (tessera compile --ps "
                      "joins the two plans into one):\n"
                   << getReplayCommand(replayed, server,
                                       /*exportPlan=*/emit == Emit::Plan)
                   << "\n";
    }
    return 0;
  }
  switch (emit) {
  case Emit::NN: {
    if (llvm::Error error = runPipeline(
            module, [&](OpPassManager &pm) { buildMeshPipeline(pm, options); }))
      return reportError(std::move(error));
    return writeModule(module);
  }
  case Emit::Partitioned:
    if (llvm::Error error = runPipeline(module, [&](OpPassManager &pm) {
          buildShardingPipeline(pm, options);
        }))
      return reportError(std::move(error));
    return writeModule(module);
  case Emit::Plan:
    break;
  }
  if (llvm::Error error = compilePlan(module, options))
    return reportError(std::move(error));
  if (planOutput == "-")
    return 0;
  // The plan read back as the runtime will: validated, its manifest checked.
  if (llvm::Error error =
          planText ? checkPlanFile(planOutput)
                   : printPlanSummary(planOutput, options, llvm::outs()))
    return reportError(std::move(error));
  if (printManifestOption)
    if (llvm::Error error = printManifest(planOutput, llvm::outs()))
      return reportError(std::move(error));
  return 0;
}
