//===- tessera.cpp - The Tessera command-line interface -------------------===//
//
// tessera model gpt|mlp ...   emit a model in nn IR
// tessera stats FILE          parameters, ops and FLOPs of a model
// tessera compile FILE ...    shard, partition and export a plan
// tessera verify FILE ...     sharded plan on N ranks vs one device
// tessera run PLAN --ranks N  run a plan on N local ranks
// tessera gradcheck FILE      autodiff gradients vs finite differences
// tessera plan FILE ...       search the DP/TP/PP plan against a machine
// tessera calibrate -o FILE   fit a machine file from runtime microbenchmarks
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/MemoryPlan.h"
#include "tessera/InitAll.h"
#include "tessera/Models/Models.h"
#include "tessera/Pipelines/Pipelines.h"
#include "tessera/Search/Planner.h"
#include "tessera/Transforms/Passes.h"
#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/Plan.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include <fstream>

using namespace mlir;
using namespace tessera;
namespace cl = llvm::cl;

extern char **environ;

//===----------------------------------------------------------------------===//
// Subcommands and their options
//===----------------------------------------------------------------------===//

static cl::SubCommand modelCmd("model", "Emit a model in nn IR (gpt or mlp)");
static cl::SubCommand
    statsCmd("stats", "Print the parameters, ops and FLOPs of a model file");

static cl::opt<std::string> modelKind(cl::Positional, cl::Required,
                                      cl::desc("<gpt|mlp>"), cl::sub(modelCmd));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::sub(modelCmd));
static cl::opt<int64_t> layers("layers", cl::desc("Layers (blocks for gpt)"),
                               cl::sub(modelCmd));
static cl::opt<int64_t> hidden("hidden", cl::desc("Hidden size"),
                               cl::sub(modelCmd));
static cl::opt<int64_t> heads("heads", cl::desc("Attention heads (gpt)"),
                              cl::sub(modelCmd));
static cl::opt<int64_t> seq("seq", cl::desc("Sequence length (gpt)"),
                            cl::sub(modelCmd));
static cl::opt<int64_t> vocab("vocab", cl::desc("Vocabulary size (gpt)"),
                              cl::sub(modelCmd));
static cl::opt<int64_t> input("input", cl::desc("Input width (mlp)"),
                              cl::sub(modelCmd));
static cl::opt<int64_t> output("output", cl::desc("Output width (mlp)"),
                               cl::sub(modelCmd));
static cl::opt<int64_t> batch("batch", cl::desc("Batch size"),
                              cl::sub(modelCmd));
static cl::opt<std::string>
    sharding("sharding",
             cl::desc("Annotations: none, or megatron (batch over \"dp\", "
                      "Megatron-LM tensor parallelism over \"tp\", on a "
                      "1x1 mesh that --mesh resizes)"),
             cl::sub(modelCmd));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("Element type: f32, bf16, f16, f64"),
                                  cl::sub(modelCmd));

static cl::opt<std::string> statsInput(cl::Positional, cl::Required,
                                       cl::desc("<model.mlir>"),
                                       cl::sub(statsCmd));

static cl::SubCommand
    compileCmd("compile", "Shard, partition and export a model to a plan");
static cl::SubCommand
    verifyCmd("verify",
              "Run the sharded plan on N ranks and the single-device program "
              "on the same seeded inputs, and compare every result");
static cl::SubCommand runCmd("run", "Run a plan on N local ranks (mpirun)");
static cl::SubCommand
    gradcheckCmd("gradcheck",
                 "Check the gradients of a loss function (--tessera-autodiff) "
                 "against central finite differences, in process");

static cl::opt<std::string> modelInput(cl::Positional, cl::Required,
                                       cl::desc("<model.mlir>"),
                                       cl::sub(compileCmd), cl::sub(verifyCmd),
                                       cl::sub(gradcheckCmd));
static cl::opt<std::string>
    meshSpec("mesh", cl::desc("Axis sizes of the model's mesh: dp=2,tp=4"),
             cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<int64_t>
    pipelineStages("pp",
                   cl::desc("Pipeline stages, run along the mesh axis \"pp\""),
                   cl::init(1), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<int64_t>
    microbatches("microbatches",
                 cl::desc("Microbatches per step (gradient accumulation)"),
                 cl::init(1), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<std::string> pipelineSchedule(
    "schedule",
    cl::desc("Pipeline schedule: gpipe, 1f1b, interleaved or zb-h1"),
    cl::init("1f1b"), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<int64_t>
    virtualStages("virtual",
                  cl::desc("Stages per pipeline rank (--schedule "
                           "interleaved)"),
                  cl::init(1), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<std::string> planOutput("o", cl::desc("Output plan file"),
                                       cl::value_desc("file"), cl::Required,
                                       cl::sub(compileCmd));
static cl::opt<bool>
    planText("text", cl::desc("Write the plan in protobuf text format"),
             cl::sub(compileCmd));
enum class Emit { Plan, Partitioned, NN };
static cl::opt<Emit>
    emit("emit", cl::desc("What to write"), cl::init(Emit::Plan),
         cl::values(clEnumValN(Emit::Plan, "plan", "the executable plan"),
                    clEnumValN(Emit::Partitioned, "partitioned",
                               "the per-device program in MLIR"),
                    clEnumValN(Emit::NN, "nn",
                               "the annotated global program (after --auto)")),
         cl::sub(compileCmd));
static cl::opt<bool>
    autoPlan("auto",
             cl::desc("Search the plan (as tessera plan) and annotate the "
                      "model with the winner; needs --machine and --devices"),
             cl::sub(compileCmd));
static cl::opt<std::string> autoMachine(
    "machine",
    cl::desc("The machine model: --auto searches the plan on it, and "
             "propagation resolves conflicts by their time on it"),
    cl::sub(compileCmd));
static cl::opt<int64_t> autoDevices("devices",
                                    cl::desc("With --auto: the devices"),
                                    cl::init(0), cl::sub(compileCmd));
static cl::opt<double> tolerance(
    "tolerance",
    cl::desc("Largest relative error per result (per step's loss when "
             "training)"),
    cl::init(1e-5), cl::sub(verifyCmd));
static cl::opt<std::string>
    train("train",
          cl::desc("Compile the training step with this optimizer: adamw "
                   "or sgd (--tessera-train-step)"),
          cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<double> learningRate("lr", cl::desc("Learning rate"),
                                    cl::init(1e-3), cl::sub(compileCmd),
                                    cl::sub(verifyCmd));
static cl::opt<std::string> precision(
    "precision",
    cl::desc("With --train: model (the model's types) or mixed (f32 master "
             "weights and optimizer state for a bf16/f16 model)"),
    cl::init("model"), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<int64_t> zeroStage(
    "zero",
    cl::desc("With --train adamw: ZeRO stage over \"dp\" (--tessera-zero): "
             "0, 1 (optimizer state sharded), 2 (and gradients) or 3 (and "
             "parameters)"),
    cl::init(0), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::list<std::string>
    zeroAxes("zero-axes",
             cl::desc("With --zero: the data-parallel mesh axes, major first "
                      "(default dp)"),
             cl::CommaSeparated, cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<std::string> reshardAfterForward(
    "reshard-after-forward",
    cl::desc("With --zero 3: true (gather parameters again for the backward "
             "pass), false (keep the forward's gathers) or a group size (keep "
             "a piece per device of the trailing --zero-axes of that size, "
             "and gather within them)"),
    cl::init("true"), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<bool>
    overlap("overlap",
            cl::desc("Overlap communication with compute (--tessera-schedule): "
                     "collectives start early on the communication stream"),
            cl::init(false), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<int64_t>
    prefetch("prefetch",
             cl::desc("With --overlap: collectives in flight at once"),
             cl::init(1), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<int64_t> bucketBytes(
    "bucket-bytes",
    cl::desc("With --overlap: bucket reductions smaller than this many "
             "bytes (0: none)"),
    cl::init(0), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<bool> gatherUnits(
    "gather-units",
    cl::desc("With --overlap: gather each unit's parameters (a transformer "
             "block's) in one all_gather"),
    cl::init(true), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<int64_t> prefetchMemoryLimit(
    "memory-limit",
    cl::desc("With --overlap: bytes of collective results in flight that "
             "prefetching may not pass (0: no limit)"),
    cl::init(0), cl::sub(compileCmd), cl::sub(verifyCmd));
static cl::opt<double> weightDecay("weight-decay",
                                   cl::desc("Weight decay of the optimizer"),
                                   cl::init(0.0), cl::sub(compileCmd),
                                   cl::sub(verifyCmd));

static cl::opt<std::string> device(
    "device",
    cl::desc("Where the run (with verify: the sharded run; the reference "
             "stays on the CPU) runs: cpu, or cuda (a GPU per rank, NCCL "
             "collectives)"),
    cl::init("cpu"), cl::sub(runCmd), cl::sub(verifyCmd));

static cl::opt<std::string> planInput(cl::Positional, cl::Required,
                                      cl::desc("<model.plan>"),
                                      cl::sub(runCmd));
static cl::opt<int64_t> ranks("ranks", cl::desc("Number of ranks"),
                              cl::Required, cl::sub(runCmd));
static cl::opt<int64_t> steps("steps", cl::desc("Steps to run"), cl::init(1),
                              cl::sub(runCmd), cl::sub(verifyCmd));
static cl::opt<int64_t> seed("seed", cl::desc("Seed of the generated inputs"),
                             cl::init(0), cl::sub(runCmd), cl::sub(verifyCmd),
                             cl::sub(gradcheckCmd));
static cl::opt<double> epsilon("eps", cl::desc("Finite-difference step"),
                               cl::init(1e-2), cl::sub(gradcheckCmd));
static cl::opt<double>
    gradTolerance("tolerance",
                  cl::desc("Largest error, relative to max(|g|, |fd|, 0.01)"),
                  cl::init(3e-2), cl::sub(gradcheckCmd));
static cl::opt<int64_t> samples("samples",
                                cl::desc("Elements checked per parameter"),
                                cl::init(8), cl::sub(gradcheckCmd));
static cl::opt<std::string> inputsFile("inputs",
                                       cl::desc("Global inputs (tensor file)"),
                                       cl::sub(runCmd));

static cl::SubCommand
    calibrateCmd("calibrate",
                 "Fit a machine file from runtime microbenchmarks on N local "
                 "ranks (GEMMs, memory bandwidth, all_reduce over sizes)");
static cl::opt<std::string> calibrateOutput("o", cl::desc("Machine file"),
                                            cl::value_desc("file"),
                                            cl::Required,
                                            cl::sub(calibrateCmd));
static cl::opt<int64_t> calibrateRanks("ranks", cl::desc("Ranks to measure"),
                                       cl::init(2), cl::sub(calibrateCmd));
static cl::opt<bool> calibrateQuick("quick",
                                    cl::desc("Smaller sizes, fewer repeats"),
                                    cl::sub(calibrateCmd));

static cl::SubCommand
    planCmd("plan",
            "Search the DP/TP/PP training plan of a GPT-style model against "
            "a machine model");
static cl::opt<std::string> planModel(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"),
                                      cl::sub(planCmd));
static cl::opt<std::string>
    machineName("machine",
                cl::desc("A machines/<name>.json preset or a machine file"),
                cl::Required, cl::sub(planCmd));
static cl::opt<int64_t> planDevices("devices", cl::desc("Number of devices"),
                                    cl::Required, cl::sub(planCmd));
static cl::opt<int64_t> pinDp("dp", cl::desc("Pin the data-parallel size"),
                              cl::sub(planCmd));
static cl::opt<int64_t> pinTp("tp", cl::desc("Pin the tensor-parallel size"),
                              cl::sub(planCmd));
static cl::opt<int64_t> pinPp("pp", cl::desc("Pin the pipeline stages"),
                              cl::sub(planCmd));
static cl::opt<int64_t>
    pinMicrobatches("microbatches", cl::desc("Pin the microbatches per step"),
                    cl::sub(planCmd));
static cl::opt<int64_t> pinZero("zero", cl::desc("Pin the ZeRO stage (0-3)"),
                                cl::sub(planCmd));
static cl::opt<std::string> pinReshardAfterForward(
    "reshard-after-forward",
    cl::desc("Pin ZeRO-3's regather: true (gather again for the backward) "
             "or false (keep the forward's gathers; shown as zero 3k)"),
    cl::sub(planCmd));
static cl::opt<std::string>
    pinSchedule("schedule",
                cl::desc("Pin the schedule: gpipe, 1f1b or interleaved"),
                cl::sub(planCmd));
static cl::opt<std::string>
    pinRecompute("recompute",
                 cl::desc("Pin recomputation: none, selective or full"),
                 cl::sub(planCmd));
static cl::opt<std::string>
    pinSequenceParallel("sequence-parallel",
                        cl::desc("Pin sequence parallelism: on or off"),
                        cl::sub(planCmd));
static cl::opt<std::string>
    planPrecision("precision", cl::desc("mixed (default), bf16 or fp32"),
                  cl::init("mixed"), cl::sub(planCmd));
static cl::opt<int64_t> planTop("top", cl::desc("Plans to show"), cl::init(5),
                                cl::sub(planCmd));
static cl::opt<bool> planJson("json", cl::desc("Print JSON"), cl::sub(planCmd));

//===----------------------------------------------------------------------===//
// tessera model
//===----------------------------------------------------------------------===//

/// Copies a set option into a config field.
template <typename T>
static void setIfGiven(const cl::opt<T> &option, T &field) {
  if (option.getNumOccurrences())
    field = option;
}

static int reportError(llvm::Error error) {
  llvm::errs() << "tessera: error: " << llvm::toString(std::move(error))
               << "\n";
  return 1;
}

/// 174615846912 -> "174.6B".
static std::string formatCount(int64_t count) {
  if (count >= 1000000000)
    return llvm::formatv("{0:f1}B", count / 1e9).str();
  if (count >= 1000000)
    return llvm::formatv("{0:f1}M", count / 1e6).str();
  if (count >= 1000)
    return llvm::formatv("{0:f1}K", count / 1e3).str();
  return std::to_string(count);
}

static int runModel(MLIRContext &context) {
  OwningOpRef<ModuleOp> module;
  int64_t expectedParams;
  std::string formula;
  if (modelKind == "gpt") {
    tessera::GptConfig config;
    setIfGiven(layers, config.layers);
    setIfGiven(hidden, config.hidden);
    setIfGiven(heads, config.heads);
    setIfGiven(seq, config.seq);
    setIfGiven(vocab, config.vocab);
    setIfGiven(batch, config.batch);
    setIfGiven(dtype, config.dtype);
    setIfGiven(sharding, config.sharding);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildGpt(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula = "12·L·h² + 13·L·h + (V+s)·h + 2·h (final layer norm)";
  } else if (modelKind == "mlp") {
    tessera::MlpConfig config;
    setIfGiven(layers, config.layers);
    setIfGiven(hidden, config.hidden);
    setIfGiven(input, config.input);
    setIfGiven(output, config.output);
    setIfGiven(batch, config.batch);
    setIfGiven(dtype, config.dtype);
    setIfGiven(sharding, config.sharding);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildMlp(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula = "Σ (in+1)·out over the layers";
  } else {
    return reportError(llvm::createStringError("unknown model '" + modelKind +
                                               "', expected gpt or mlp"));
  }
  if (failed(verify(*module)))
    return reportError(
        llvm::createStringError("the generated model does not verify"));
  int64_t params = tessera::countParameters(*module);
  if (params != expectedParams)
    return reportError(llvm::createStringError(
        llvm::formatv("generated {0} parameters, the closed form gives {1}",
                      params, expectedParams)
            .str()));

  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> file =
      openOutputFile(outputFile, &errorMessage);
  if (!file)
    return reportError(llvm::createStringError(errorMessage));
  module->print(file->os());
  file->os() << "\n";
  file->keep();
  llvm::errs() << llvm::formatv("{0}: {1} parameters ({2}) = {3}\n", modelKind,
                                params, formatCount(params), formula);
  return 0;
}

//===----------------------------------------------------------------------===//
// tessera stats
//===----------------------------------------------------------------------===//

static int runStats(MLIRContext &context) {
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(statsInput, &errorMessage);
  if (!file)
    return reportError(llvm::createStringError(errorMessage));
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  struct OpStats {
    int64_t count = 0, flops = 0, bytes = 0;
  };
  llvm::MapVector<StringRef, OpStats> perOp;
  OpStats total;
  module->walk([&](tessera::CostOpInterface op) {
    OpStats &stats = perOp[op->getName().getStringRef()];
    int64_t flops = op.getFlops(), bytes = op.getBytesAccessed();
    stats.count += 1;
    stats.flops += flops;
    stats.bytes += bytes;
    total.count += 1;
    total.flops += flops;
    total.bytes += bytes;
  });
  llvm::outs() << llvm::formatv("parameters: {0}\n",
                                tessera::countParameters(*module));
  llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", "op", "count",
                                "flops", "bytes");
  for (auto &[name, stats] : perOp)
    llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", name,
                                  stats.count, stats.flops, stats.bytes);
  llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", "total",
                                total.count, total.flops, total.bytes);
  return 0;
}

//===----------------------------------------------------------------------===//
// tessera compile / verify / run
//===----------------------------------------------------------------------===//

/// Parses a model file; diagnostics go to stderr.
static OwningOpRef<ModuleOp>
parseModel(MLIRContext &context, llvm::SourceMgr &sourceMgr, StringRef path) {
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(path, &errorMessage);
  if (!file) {
    (void)reportError(llvm::createStringError(errorMessage));
    return {};
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// Runs `build`'s pipeline on `module`; fails with the pass's diagnostics.
static LogicalResult
runPipeline(ModuleOp module, llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(module->getContext());
  build(pm);
  return pm.run(module);
}

/// With --train, the pipeline starts with the training step.
static void addTrainStep(OpPassManager &pm) {
  if (train.empty())
    return;
  TrainStepPassOptions options;
  options.optimizer = train;
  options.lr = learningRate;
  options.weightDecay = weightDecay;
  options.precision = precision;
  pm.addPass(createTrainStepPass(options));
}

/// The sharded program's ZeRO pass, after the train step.
static void addZero(OpPassManager &pm) {
  if (zeroStage == 0)
    return;
  ZeroPassOptions options;
  options.stage = zeroStage;
  options.reshardAfterForward = reshardAfterForward;
  options.dataAxes.assign(zeroAxes.begin(), zeroAxes.end());
  pm.addPass(createZeroPass(options));
}

/// --tessera-schedule's options, when --overlap asks for it.
static std::optional<SchedulePassOptions> getSchedule() {
  if (!overlap)
    return std::nullopt;
  SchedulePassOptions options;
  options.prefetch = prefetch;
  options.bucketBytes = bucketBytes;
  options.memoryLimit = prefetchMemoryLimit;
  options.gatherUnits = gatherUnits;
  return options;
}

/// --tessera-pipeline's options, when --pp or --microbatches ask for it.
static std::optional<PipelinePassOptions> getPipeline() {
  if (pipelineStages == 1 && microbatches == 1)
    return std::nullopt;
  PipelinePassOptions options;
  options.stages = pipelineStages;
  options.microbatches = microbatches;
  options.schedule = pipelineSchedule;
  options.virtualStages = virtualStages;
  return options;
}

/// --zero shards optimizer state: it needs AdamW's.
static int checkZero() {
  if (zeroStage != 0 && train != "adamw")
    return reportError(llvm::createStringError(
        "--zero needs --train adamw (the optimizer state it shards)"));
  if (getPipeline() && train.empty())
    return reportError(llvm::createStringError(
        "--pp and --microbatches pipeline a train step: give --train"));
  return 0;
}

/// Applies --mesh, with the pipeline axis "pp" added for --pp.
static LogicalResult applyMesh(ModuleOp module, std::string &error) {
  if (pipelineStages > 1 && failed(addPipelineAxis(module, pipelineStages)))
    return failure();
  if (meshSpec.empty())
    return success();
  std::string spec = meshSpec;
  if (pipelineStages > 1 && !StringRef(spec).starts_with("pp=") &&
      !StringRef(spec).contains(",pp="))
    spec += ",pp=" + std::to_string(pipelineStages);
  return applyMeshSpec(module, spec, error);
}

static std::string mainExecutable;

/// Runs `runnerName` (next to this binary) on `numRanks` ranks through
/// mpirun; returns its exit code, or -1 when it cannot start.
static int launch(int64_t numRanks, ArrayRef<std::string> runArgs,
                  StringRef runnerName = "tessera-run") {
  llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun) {
    llvm::errs() << "tessera: error: mpirun not found (install openmpi-bin)\n";
    return -1;
  }
  SmallString<256> runner(llvm::sys::path::parent_path(mainExecutable));
  llvm::sys::path::append(runner, runnerName);
  std::vector<std::string> args = {*mpirun, "-np", std::to_string(numRanks),
                                   "--oversubscribe", std::string(runner)};
  llvm::append_range(args, runArgs);
  // OpenMPI refuses root without these; one BLAS thread per rank.
  std::vector<std::string> env;
  for (char **entry = environ; *entry; ++entry)
    env.push_back(*entry);
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    env.push_back("OPENBLAS_NUM_THREADS=1");
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  SmallVector<StringRef> envRefs(env.begin(), env.end());
  std::string errorMessage;
  int code = llvm::sys::ExecuteAndWait(*mpirun, argRefs, envRefs, {}, 0, 0,
                                       &errorMessage);
  if (code < 0)
    llvm::errs() << "tessera: error: cannot run mpirun: " << errorMessage
                 << "\n";
  return code;
}

/// The names of the planner's choices, as the CLI reads and prints them.
template <typename T> using NamedChoice = std::pair<StringRef, T>;
static const NamedChoice<PipelineSchedule> kScheduleNames[] = {
    {"gpipe", PipelineSchedule::GPipe},
    {"1f1b", PipelineSchedule::OneFOneB},
    {"interleaved", PipelineSchedule::Interleaved},
    {"zb-h1", PipelineSchedule::ZeroBubbleH1}};
static const NamedChoice<Recompute> kRecomputeNames[] = {
    {"none", Recompute::None},
    {"selective", Recompute::Selective},
    {"full", Recompute::Full}};

/// The name of `value` in `names`.
template <typename T>
static StringRef getChoiceName(ArrayRef<NamedChoice<T>> names, T value) {
  for (const auto &[name, choice] : names)
    if (choice == value)
      return name;
  llvm_unreachable("a choice without a name");
}

/// The ZeRO stage as the plan table shows it: "3k" keeps the forward's
/// gathers (reshard-after-forward false).
static std::string getZeroName(const PlanChoice &choice) {
  return std::to_string(choice.zero) +
         (choice.zero >= 3 && !choice.reshardAfterForward ? "k" : "");
}

/// --auto: searches the plans this compiler builds (data, tensor and, for a
/// train step, pipeline parallelism with microbatches and ZeRO; no
/// recomputation or sequence parallelism), annotates the model with the
/// fastest and sets the options that build it.
static int applyAutoPlan(ModuleOp module) {
  if (autoMachine.empty() || autoDevices < 1)
    return reportError(
        llvm::createStringError("--auto needs --machine NAME and --devices N"));
  llvm::Expected<ModelShape> shape = getModelShape(module);
  if (!shape)
    return reportError(shape.takeError());
  llvm::Expected<MachineModel> machine =
      loadMachineModel(autoMachine, TESSERA_MACHINES_DIR);
  if (!machine)
    return reportError(machine.takeError());
  SearchPins pins;
  // Pipelines pipeline a train step; inference runs on a DP x TP mesh.
  if (train.empty()) {
    pins.pp = 1;
    pins.microbatches = 1;
  }
  // ZeRO shards AdamW's state: the search picks a stage for an AdamW step
  // unless --zero pins one.
  if (train != "adamw" || zeroStage.getNumOccurrences())
    pins.zero = train == "adamw" ? zeroStage.getValue() : 0;
  if (reshardAfterForward.getNumOccurrences() &&
      (reshardAfterForward == "true" || reshardAfterForward == "false"))
    pins.reshardAfterForward = reshardAfterForward == "true";
  pins.sequenceParallel = false;
  pins.recompute = Recompute::None;
  SearchResult result =
      searchPlans(*shape, *machine, autoDevices, pins, module);
  // The fastest plan this compiler builds: the interleaved schedule needs
  // the microbatches to be a multiple of the stages.
  auto buildable = [](const PlanEstimate &plan) {
    const PlanChoice &c = plan.choice;
    return c.schedule != PipelineSchedule::Interleaved ||
           c.microbatches % c.pp == 0;
  };
  const PlanEstimate *best = llvm::find_if(result.plans, buildable);
  if (best == result.plans.end())
    return reportError(llvm::createStringError(
        llvm::formatv("no plan of {0} devices that this compiler builds fits "
                      "in device memory{1}",
                      autoDevices.getValue(),
                      train != "adamw" ? std::string()
                      : pins.zero
                          ? llvm::formatv(" with ZeRO-{0}", *pins.zero).str()
                          : std::string(" with any ZeRO stage"))
            .str()));
  const PlanChoice &choice = best->choice;
  annotateMegatron(module, choice.dp, choice.tp);
  zeroStage = choice.zero;
  if (choice.zero >= 3 && !reshardAfterForward.getNumOccurrences())
    reshardAfterForward = choice.reshardAfterForward ? "true" : "false";
  pipelineStages = choice.pp;
  microbatches = choice.microbatches;
  pipelineSchedule =
      getChoiceName(ArrayRef(kScheduleNames), choice.schedule).str();
  virtualStages = choice.virtualStages;
  std::string pipeline;
  if (choice.pp > 1)
    pipeline = llvm::formatv(" pp={0} schedule={1}", choice.pp,
                             pipelineSchedule.getValue());
  if (choice.virtualStages > 1)
    pipeline += " virtual=" + std::to_string(choice.virtualStages);
  if (choice.microbatches > 1)
    pipeline += " microbatches=" + std::to_string(choice.microbatches);
  llvm::errs() << llvm::formatv(
      "auto: dp={0} tp={1}{2} zero={3}: predicted step {4:e3} s, MFU {5:f1}% "
      "on {6} x {7} (of {8} plans)\n",
      choice.dp, choice.tp, pipeline, getZeroName(choice),
      best->stepTimeSeconds, 100 * best->mfu, autoDevices.getValue(),
      machine->name, result.considered);
  return 0;
}

/// What getZeroModelState predicts for a train step's plan: the
/// parameters a device holds without ZeRO (split only by the other axes),
/// with a gradient of each, and their optimizer state, split by the stage
/// over the ZeRO axes. None for a plan without optimizer state.
static std::optional<ModelStateMemory>
getPredictedModelState(const plan::Plan &plan, const plan::Program &program) {
  llvm::StringMap<int64_t> axisSizes;
  for (const plan::Mesh::Axis &axis : plan.mesh().axes())
    axisSizes[axis.name()] = axis.size();
  SmallVector<std::string> dataAxes(zeroAxes.begin(), zeroAxes.end());
  if (dataAxes.empty())
    dataAxes.push_back("dp");
  double parameters = 0, parameterBytes = 0, stateBytes = 0;
  for (const plan::Argument &argument : program.arguments()) {
    double elements = 1;
    for (int64_t size : argument.global_shape())
      elements *= size;
    for (const plan::DimAxes &dim : argument.dim_axes())
      for (const std::string &axis : dim.axes())
        if (!llvm::is_contained(dataAxes, axis))
          elements /= axisSizes.lookup(axis);
    double bytes =
        elements * runtime::getDTypeBytes(runtime::getDType(argument.dtype()));
    if (argument.role() == plan::PARAM) {
      parameters += elements;
      parameterBytes += bytes;
    } else if (argument.role() != plan::DATA) {
      stateBytes += bytes;
    }
  }
  if (parameters == 0 || stateBytes == 0)
    return std::nullopt;
  int64_t dataParallel = 1;
  for (const std::string &axis : dataAxes)
    dataParallel *= axisSizes.contains(axis) ? axisSizes.lookup(axis) : 1;
  double perParameter = parameterBytes / parameters;
  return getZeroModelState(
      parameters, {perParameter, perParameter, stateBytes / parameters},
      zeroStage, dataParallel);
}

static void printBreakdown(StringRef what, const plan::MemoryBreakdown &bytes) {
  llvm::outs() << llvm::formatv(
      "{0}: parameters {1}, gradients {2}, optimizer state {3}, activations "
      "{4}, communication {5} bytes\n",
      what, bytes.parameter_bytes(), bytes.gradient_bytes(),
      bytes.optimizer_state_bytes(), bytes.activation_bytes(),
      bytes.communication_bytes());
}

static int runCompile(MLIRContext &context) {
  if (int code = checkZero())
    return code;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseModel(context, sourceMgr, modelInput);
  if (!module)
    return 1;
  std::string error;
  if (autoPlan && applyAutoPlan(*module) != 0)
    return 1;
  if (failed(applyMesh(*module, error)))
    return error.empty() ? 1 : reportError(llvm::createStringError(error));
  if (emit == Emit::NN) {
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(planOutput, &error);
    if (!file)
      return reportError(llvm::createStringError(error));
    module->print(file->os());
    file->keep();
    return 0;
  }
  if (emit == Emit::Partitioned) {
    if (failed(runPipeline(*module, [&](OpPassManager &pm) {
          addTrainStep(pm);
          addZero(pm);
          buildShardingPipeline(pm, autoMachine, getSchedule(), getPipeline());
        })))
      return 1;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(planOutput, &error);
    if (!file)
      return reportError(llvm::createStringError(error));
    module->print(file->os());
    file->keep();
    return 0;
  }
  if (failed(runPipeline(*module, [&](OpPassManager &pm) {
        addTrainStep(pm);
        addZero(pm);
        buildCompilePipeline(pm, planOutput, planText, autoMachine,
                             getSchedule(), getPipeline());
      })))
    return 1;
  if (planText || planOutput == "-")
    return 0;
  // Read the plan back as the runtime will, and summarize it.
  plan::Plan plan;
  if (!(error = runtime::loadPlan(planOutput, plan)).empty())
    return reportError(llvm::createStringError(error));
  for (const plan::Program &program : plan.programs()) {
    int64_t collectives =
        llvm::count_if(program.instructions(), [](const plan::Instruction &i) {
          return i.has_collective();
        });
    llvm::outs() << llvm::formatv(
        "plan {0}: {1} ranks, {2} instructions ({3} collectives), {4} "
        "buffers in an arena of {5} bytes per device\n",
        planOutput, program.ranks_size(), program.instructions_size(),
        collectives, program.buffers_size(), program.arena_bytes());
    printBreakdown("memory at the peak", program.peak_memory());
    if (std::optional<ModelStateMemory> state =
            getPredictedModelState(plan, program))
      llvm::outs() << llvm::formatv(
          "model state by ZeRO-{0}'s closed form: parameters {1:f0}, "
          "gradients {2:f0}, optimizer state {3:f0} bytes\n",
          zeroStage.getValue(), state->parameterBytes, state->gradientBytes,
          state->optimizerStateBytes);
    printBreakdown("memory, each at its own peak", program.category_peaks());
  }
  return 0;
}

/// The largest absolute difference and the largest relative to the
/// reference's largest magnitude.
static std::pair<double, double> compare(const runtime::Tensor &got,
                                         const runtime::Tensor &want) {
  double maxAbs = 0, scale = 0;
  int64_t n = want.getNumElements();
  auto value = [](const runtime::Tensor &t, int64_t i) -> double {
    switch (t.dtype) {
    case runtime::DType::F32:
      return t.as<float>()[i];
    case runtime::DType::F64:
      return t.as<double>()[i];
    case runtime::DType::I32:
      return t.as<int32_t>()[i];
    case runtime::DType::I64:
      return t.as<int64_t>()[i];
    case runtime::DType::I1:
      return t.as<uint8_t>()[i];
    default:
      return 0;
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    maxAbs = std::max(maxAbs, std::fabs(value(got, i) - value(want, i)));
    scale = std::max(scale, std::fabs(value(want, i)));
  }
  return {maxAbs, maxAbs / std::max(scale, 1e-30)};
}

static int runVerify(MLIRContext &context) {
  if (int code = checkZero())
    return code;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> model = parseModel(context, sourceMgr, modelInput);
  if (!model)
    return 1;
  std::string error;
  if (failed(applyMesh(*model, error)))
    return error.empty() ? 1 : reportError(llvm::createStringError(error));
  int64_t numRanks = 1;
  for (auto mesh : model->getOps<dist::MeshOp>())
    numRanks = mesh.getNumDevices();

  SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("tessera-verify", dir))
    return reportError(llvm::createStringError(ec.message()));
  auto path = [&](StringRef name) {
    SmallString<128> file(dir);
    llvm::sys::path::append(file, name);
    return std::string(file);
  };
  OwningOpRef<ModuleOp> single = model->clone();
  if (failed(runPipeline(*model,
                         [&](OpPassManager &pm) {
                           addTrainStep(pm);
                           addZero(pm);
                           buildCompilePipeline(pm, path("sharded.plan"),
                                                /*text=*/false,
                                                /*machine=*/{}, getSchedule(),
                                                getPipeline());
                         })) ||
      failed(runPipeline(*single, [&](OpPassManager &pm) {
        addTrainStep(pm);
        buildSingleDevicePipeline(pm, path("single.plan"));
      })))
    return 1;
  std::string seedText = std::to_string(seed),
              stepsText = std::to_string(steps);
  if (launch(1, {path("single.plan"), "--seed", seedText, "--steps", stepsText,
                 "--dump-outputs", path("single.out"), "--dump-losses",
                 path("single.losses")}) != 0 ||
      launch(numRanks,
             {path("sharded.plan"), "--seed", seedText, "--steps", stepsText,
              "--dump-outputs", path("sharded.out"), "--dump-losses",
              path("sharded.losses"), "--device", device}) != 0)
    return reportError(llvm::createStringError("a run failed"));

  std::vector<runtime::OwnedTensor> want, got;
  if (!(error = runtime::readTensors(path("single.out"), want)).empty() ||
      !(error = runtime::readTensors(path("sharded.out"), got)).empty())
    return reportError(llvm::createStringError(error));
  if (want.size() != got.size())
    return reportError(llvm::createStringError("the runs return different "
                                               "numbers of results"));
  bool pass = true;
  llvm::outs() << llvm::formatv(
      "verify: {0} on {1} ranks against 1 device, seed {2}{3}\n", modelInput,
      numRanks, seed.getValue(),
      train.empty() ? std::string()
                    : llvm::formatv(", {0} steps of {1}", steps.getValue(),
                                    train.getValue())
                          .str());
  // Training: every step's loss must agree; the final parameters are
  // reported.
  bool training = !train.empty();
  if (training) {
    auto readLosses = [](const std::string &file) {
      std::vector<double> losses;
      std::ifstream in(file);
      for (double loss; in >> loss;)
        losses.push_back(loss);
      return losses;
    };
    std::vector<double> single = readLosses(path("single.losses"));
    std::vector<double> sharded = readLosses(path("sharded.losses"));
    if (single.size() != sharded.size() || single.empty())
      return reportError(llvm::createStringError("the runs logged different "
                                                 "numbers of losses"));
    double worst = 0;
    for (size_t i = 0; i < single.size(); ++i)
      worst = std::max(worst, std::fabs(single[i] - sharded[i]) /
                                  std::max(std::fabs(single[i]), 1e-30));
    pass = worst <= tolerance;
    llvm::outs() << llvm::formatv(
        "loss: step 1 {0:f6}, step {1} {2:f6}; max rel error over the steps "
        "{3:e2} {4}\n",
        single.front(), single.size(), single.back(), worst,
        pass ? "ok" : "OVER TOLERANCE");
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].view.shape != got[i].view.shape) {
      llvm::outs() << llvm::formatv("result #{0}: shapes differ\n", i);
      pass = false;
      continue;
    }
    auto [absError, relError] = compare(got[i].view, want[i].view);
    if (training)
      continue;
    bool ok = relError <= tolerance;
    pass &= ok;
    llvm::outs() << llvm::formatv(
        "result #{0}: max abs error {1:e2}, max rel error {2:e2} {3}\n", i,
        absError, relError, ok ? "ok" : "OVER TOLERANCE");
  }
  llvm::outs() << llvm::formatv("verify: {0} (tolerance {1:e1})\n",
                                pass ? "PASS" : "FAIL", tolerance.getValue());
  llvm::sys::fs::remove_directories(dir);
  return pass ? 0 : 1;
}

/// Runs a one-device plan in process on `arguments`; fails with a message.
static FailureOr<std::vector<runtime::OwnedTensor>>
runLocal(const plan::Plan &plan, runtime::Communicator &communicator,
         const std::vector<runtime::OwnedTensor> &arguments) {
  runtime::Mesh mesh = runtime::getMesh(plan);
  runtime::Executor executor(plan.programs(0), mesh, communicator);
  std::vector<runtime::OwnedTensor> results;
  if (std::string error = executor.run(arguments, results); !error.empty()) {
    (void)reportError(llvm::createStringError(error));
    return failure();
  }
  return results;
}

static int runGradcheck(MLIRContext &context) {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> model = parseModel(context, sourceMgr, modelInput);
  if (!model)
    return 1;
  SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("tessera-gradcheck", dir))
    return reportError(llvm::createStringError(ec.message()));
  std::string gradPath = (dir + "/grad.plan").str();
  std::string lossPath = (dir + "/loss.plan").str();
  OwningOpRef<ModuleOp> lossModel = model->clone();
  if (failed(runPipeline(
          *model,
          [&](OpPassManager &pm) { buildGradientPipeline(pm, gradPath); })) ||
      failed(runPipeline(*lossModel, [&](OpPassManager &pm) {
        buildSingleDevicePipeline(pm, lossPath);
      })))
    return 1;
  plan::Plan gradPlan, lossPlan;
  std::string error;
  if (!(error = runtime::loadPlan(gradPath, gradPlan)).empty() ||
      !(error = runtime::loadPlan(lossPath, lossPlan)).empty())
    return reportError(llvm::createStringError(error));
  llvm::sys::fs::remove_directories(dir);

  const plan::Program &program = gradPlan.programs(0);
  std::vector<runtime::OwnedTensor> arguments;
  for (int i = 0; i < program.arguments_size(); ++i)
    arguments.push_back(
        runtime::makeGlobalInput(program.arguments(i), seed, i));
  std::unique_ptr<runtime::Communicator> local =
      runtime::createLocalCommunicator();
  FailureOr<std::vector<runtime::OwnedTensor>> gradients =
      runLocal(gradPlan, *local, arguments);
  if (failed(gradients))
    return 1;

  auto lossAt = [&](std::vector<runtime::OwnedTensor> &inputs) -> double {
    FailureOr<std::vector<runtime::OwnedTensor>> loss =
        runLocal(lossPlan, *local, inputs);
    return succeeded(loss) ? (*loss)[0].view.as<float>()[0] : NAN;
  };
  llvm::outs() << llvm::formatv("gradcheck: {0}, eps {1:e1}, seed {2}\n",
                                modelInput, epsilon.getValue(),
                                seed.getValue());
  bool pass = true;
  int64_t result = 1;
  for (int i = 0; i < program.arguments_size(); ++i) {
    if (!program.arguments(i).is_param())
      continue;
    const runtime::Tensor &gradient = (*gradients)[result++].view;
    int64_t n = gradient.getNumElements();
    int64_t count = std::min<int64_t>(samples, n);
    double worst = 0;
    for (int64_t k = 0; k < count; ++k) {
      int64_t index = k * n / count;
      float &x = arguments[i].view.as<float>()[index];
      float saved = x;
      x = saved + epsilon;
      double plus = lossAt(arguments);
      x = saved - epsilon;
      double minus = lossAt(arguments);
      x = saved;
      double numeric = (plus - minus) / (2 * epsilon);
      double analytic = gradient.as<float>()[index];
      double scale = std::max({std::fabs(numeric), std::fabs(analytic), 1e-2});
      worst = std::max(worst, std::fabs(numeric - analytic) / scale);
    }
    bool ok = worst <= gradTolerance && !std::isnan(worst);
    pass &= ok;
    llvm::outs() << llvm::formatv("{0}: {1} of {2} elements, max error "
                                  "{3:e2} {4}\n",
                                  program.arguments(i).name(), count, n, worst,
                                  ok ? "ok" : "OVER TOLERANCE");
  }
  llvm::outs() << llvm::formatv("gradcheck: {0} (tolerance {1:e1})\n",
                                pass ? "PASS" : "FAIL",
                                gradTolerance.getValue());
  return pass ? 0 : 1;
}

/// Sets `to` from a string option given on the command line, one of
/// `names`; reports the option, the names and the value otherwise.
template <typename T>
static bool pinChoice(const cl::opt<std::string> &option,
                      ArrayRef<NamedChoice<T>> names, std::optional<T> &to) {
  if (!option.getNumOccurrences())
    return true;
  std::string expected;
  for (auto [index, choice] : llvm::enumerate(names)) {
    if (option.getValue() == choice.first) {
      to = choice.second;
      return true;
    }
    expected += (index == 0                  ? ""
                 : index + 1 == names.size() ? " or "
                                             : ", ") +
                choice.first.str();
  }
  reportError(
      llvm::createStringError(("--" + option.ArgStr + " must be " + expected +
                               ", got '" + option.getValue() + "'")
                                  .str()));
  return false;
}

static int runPlan(MLIRContext &context) {
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> model = parseModel(context, sourceMgr, planModel);
  if (!model)
    return 1;
  llvm::Expected<ModelShape> shape = getModelShape(*model);
  if (!shape)
    return reportError(shape.takeError());
  llvm::Expected<MachineModel> machine =
      loadMachineModel(machineName, TESSERA_MACHINES_DIR);
  if (!machine)
    return reportError(machine.takeError());
  if (planDevices < 1 ||
      (machine->getMaxDevices() && planDevices > machine->getMaxDevices()))
    return reportError(llvm::createStringError(
        llvm::formatv("--devices must be between 1 and {0} for machine '{1}'",
                      machine->getMaxDevices(), machine->name)
            .str()));

  SearchPins pins;
  auto pin = [](const cl::opt<int64_t> &option, std::optional<int64_t> &to) {
    if (option.getNumOccurrences())
      to = option;
  };
  pin(pinDp, pins.dp);
  pin(pinTp, pins.tp);
  pin(pinPp, pins.pp);
  pin(pinMicrobatches, pins.microbatches);
  pin(pinZero, pins.zero);
  std::optional<Precision> precision;
  if (!pinChoice<PipelineSchedule>(pinSchedule, kScheduleNames,
                                   pins.schedule) ||
      !pinChoice<bool>(pinReshardAfterForward,
                       {{"true", true}, {"false", false}},
                       pins.reshardAfterForward) ||
      !pinChoice<Recompute>(pinRecompute, kRecomputeNames, pins.recompute) ||
      !pinChoice<bool>(pinSequenceParallel, {{"on", true}, {"off", false}},
                       pins.sequenceParallel) ||
      !pinChoice<Precision>(planPrecision,
                            {{"mixed", Precision::Mixed},
                             {"bf16", Precision::BF16},
                             {"fp32", Precision::FP32}},
                            precision))
    return 1;
  if (precision)
    pins.precision = *precision;

  SearchResult result =
      searchPlans(*shape, *machine, planDevices, pins, *model);
  size_t shown =
      std::min<size_t>(std::max<int64_t>(planTop, 1), result.plans.size());
  if (planJson) {
    llvm::json::Array plans;
    for (const PlanEstimate &plan : ArrayRef(result.plans).take_front(shown)) {
      const PlanChoice &c = plan.choice;
      plans.push_back(llvm::json::Object{
          {"dp", c.dp},
          {"tp", c.tp},
          {"pp", c.pp},
          {"microbatches", c.microbatches},
          {"zero", c.zero},
          {"reshard_after_forward", c.reshardAfterForward},
          {"schedule",
           getChoiceName<PipelineSchedule>(kScheduleNames, c.schedule)},
          {"virtual_stages", c.virtualStages},
          {"recompute", getChoiceName<Recompute>(kRecomputeNames, c.recompute)},
          {"sequence_parallel", c.sequenceParallel},
          {"step_time_s", plan.stepTimeSeconds},
          {"peak_memory_bytes", plan.peakMemoryBytes},
          {"param_bytes", plan.paramBytes},
          {"grad_bytes", plan.gradBytes},
          {"optimizer_bytes", plan.optimizerBytes},
          {"activation_bytes", plan.activationBytes},
          {"model_flops_per_step", plan.modelFlopsPerStep},
          {"hardware_flops_per_step", plan.hardwareFlopsPerStep},
          {"tflops_per_device", plan.tflopsPerDevice},
          {"mfu", plan.mfu},
          {"compute_s", plan.computeSeconds},
          {"tp_comm_s", plan.tpCommSeconds},
          {"dp_comm_s", plan.dpCommSeconds},
          {"pp_comm_s", plan.ppCommSeconds},
          {"bubble_fraction", plan.bubbleFraction}});
    }
    llvm::json::Object root{{"machine", machine->name},
                            {"devices", planDevices.getValue()},
                            {"considered", result.considered},
                            {"over_memory", result.overMemory},
                            {"plans", std::move(plans)}};
    llvm::outs() << llvm::formatv("{0:2}\n",
                                  llvm::json::Value(std::move(root)));
    return result.plans.empty() ? 1 : 0;
  }
  llvm::outs() << llvm::formatv(
      "plan: {0} on {1} x {2} ({3} layers, hidden {4}, {5} parameters, batch "
      "{6}); {7} plans considered, {8} over {9:f1} GB of device memory\n",
      planModel, planDevices.getValue(), machine->name, shape->layers,
      shape->hidden, formatCount(shape->parameters), shape->batch,
      result.considered, result.overMemory, machine->memoryBytes / 1e9);
  if (result.plans.empty())
    return reportError(llvm::createStringError(
        "no plan fits in device memory; add devices or allow ZeRO, "
        "recomputation or pipelining"));
  llvm::outs() << llvm::formatv(
      "{0,4} {1,5} {2,4} {3,4} {4,5} {5,4} {6,-11} {7,-9} {8,3} {9,10} "
      "{10,6} {11,10}\n",
      "rank", "dp", "tp", "pp", "mb", "zero", "schedule", "recompute", "sp",
      "step (s)", "MFU", "mem (GB)");
  for (auto [rank, plan] :
       llvm::enumerate(ArrayRef(result.plans).take_front(shown))) {
    const PlanChoice &c = plan.choice;
    llvm::outs() << llvm::formatv(
        "{0,4} {1,5} {2,4} {3,4} {4,5} {5,4} {6,-11} {7,-9} {8,3} {9,10:f3} "
        "{10,5:f1}% {11,10:f1}\n",
        rank + 1, c.dp, c.tp, c.pp, c.microbatches, getZeroName(c),
        getChoiceName<PipelineSchedule>(kScheduleNames, c.schedule),
        getChoiceName<Recompute>(kRecomputeNames, c.recompute),
        c.sequenceParallel ? "on" : "off", plan.stepTimeSeconds, 100 * plan.mfu,
        plan.peakMemoryBytes / 1e9);
  }
  // Why the winner wins: against the best plan of another DP/TP/PP shape,
  // the component of the step that differs most.
  const PlanEstimate &best = result.plans.front();
  for (const PlanEstimate &other : result.plans) {
    const PlanChoice &a = best.choice, &b = other.choice;
    if (a.dp == b.dp && a.tp == b.tp && a.pp == b.pp)
      continue;
    struct Part {
      const char *name;
      double winner, rival;
    } parts[] = {
        {"compute", best.computeSeconds, other.computeSeconds},
        {"tensor-parallel communication", best.tpCommSeconds,
         other.tpCommSeconds},
        {"data-parallel communication", best.dpCommSeconds,
         other.dpCommSeconds},
        {"pipeline communication", best.ppCommSeconds, other.ppCommSeconds},
        {"pipeline bubble", best.bubbleFraction * best.computeSeconds,
         other.bubbleFraction * other.computeSeconds}};
    const Part *largest =
        llvm::max_element(parts, [](const Part &x, const Part &y) {
          return x.rival - x.winner < y.rival - y.winner;
        });
    llvm::outs() << llvm::formatv(
        "why: dp={0} tp={1} pp={2} beats the best dp={3} tp={4} pp={5} by "
        "{6:f1}%: its {7} takes {8:e2} s against {9:e2} s\n",
        a.dp, a.tp, a.pp, b.dp, b.tp, b.pp,
        100 * (other.stepTimeSeconds / best.stepTimeSeconds - 1), largest->name,
        largest->winner, largest->rival);
    break;
  }
  return 0;
}

static int runCalibrate() {
  std::vector<std::string> args = {calibrateOutput};
  if (calibrateQuick)
    args.push_back("--quick");
  int code = launch(calibrateRanks, args, "tessera-calibrate");
  if (code != 0)
    return 1;
  // The file must read back as a machine.
  llvm::Expected<MachineModel> machine =
      loadMachineModel(calibrateOutput, TESSERA_MACHINES_DIR);
  if (!machine)
    return reportError(machine.takeError());
  return 0;
}

static int runRun() {
  std::vector<std::string> args = {planInput,
                                   "--steps",
                                   std::to_string(steps),
                                   "--seed",
                                   std::to_string(seed),
                                   "--device",
                                   device};
  if (!inputsFile.empty()) {
    args.push_back("--inputs");
    args.push_back(inputsFile);
  }
  int code = launch(ranks, args);
  return code == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mainExecutable = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&reportError));
  cl::ParseCommandLineOptions(
      argc, argv,
      "Tessera: a declarative auto-sharding compiler for neural-network "
      "training\n");

  DialectRegistry registry;
  tessera::registerAllDialects(registry);
  MLIRContext context(registry);
  if (modelCmd)
    return runModel(context);
  if (statsCmd)
    return runStats(context);
  if (compileCmd)
    return runCompile(context);
  if (verifyCmd)
    return runVerify(context);
  if (runCmd)
    return runRun();
  if (gradcheckCmd)
    return runGradcheck(context);
  if (planCmd)
    return runPlan(context);
  if (calibrateCmd)
    return runCalibrate();
  llvm::errs() << "tessera: error: expected a subcommand: model, stats, "
                  "compile, verify, run, plan or calibrate (see --help)\n";
  return 1;
}
