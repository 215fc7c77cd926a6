//===- Driver.cpp - Parsing, pipelines, launching and plan summaries ------===//

#include "tessera/Pipelines/Driver.h"

#include "tessera/Import/ONNX/Importer.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"

#include "tessera/Analysis/MemoryPlan.h"
#include "tessera/Export/Report.h"
#include "tessera/Pipelines/Pipelines.h"
#include "tessera/Support/Nesting.h"
#include "tessera/Support/Progress.h"
#include "tessera/runtime/Manifest.h"
#include "tessera/runtime/Plan.h"
#include "tessera/runtime/Tensor.h"

#include "PlanChecksum.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <fstream>
#include <thread>

extern char **environ;

using namespace mlir;
using namespace tessera;

char DiagnosedError::ID;

ModelDiagnosticHandler::ModelDiagnosticHandler(llvm::SourceMgr &sourceMgr,
                                               MLIRContext *context)
    : SourceMgrDiagnosticHandler(sourceMgr, context) {
  setHandler([this](Diagnostic &diagnostic) {
    emit(diagnostic);
    return success();
  });
}

std::optional<std::string> ModelDiagnosticHandler::getExcerpt(Location loc) {
  constexpr int64_t kLongest = 160, kBefore = 40, kAfter = 100;
  auto fileLoc = dyn_cast<FileLineColLoc>(loc);
  if (!fileLoc)
    return std::nullopt;
  const llvm::MemoryBuffer *buffer = getBufferForFile(fileLoc.getFilename());
  if (!buffer)
    return std::nullopt;
  StringRef text = buffer->getBuffer();
  for (unsigned line = 1; line < fileLoc.getLine() && !text.empty(); ++line)
    text = text.split('\n').second;
  StringRef lineText = text.split('\n').first;
  if (static_cast<int64_t>(lineText.size()) <= kLongest)
    return std::nullopt;
  int64_t column = std::max<int64_t>(fileLoc.getColumn(), 1) - 1;
  int64_t begin = std::max<int64_t>(column - kBefore, 0);
  StringRef window = lineText.substr(begin, kBefore + kAfter);
  std::string excerpt = "\n  " + std::string(begin > 0 ? "..." : "") +
                        window.str() +
                        (begin + window.size() < lineText.size() ? "..." : "");
  excerpt += "\n  " + std::string((begin > 0 ? 3 : 0) + column - begin, ' ') +
             "^ (line " + std::to_string(fileLoc.getLine()) + " is " +
             std::to_string(lineText.size()) + " characters long)";
  return excerpt;
}

void ModelDiagnosticHandler::emitOne(Location loc, const llvm::Twine &message,
                                     DiagnosticSeverity severity) {
  if (std::optional<std::string> excerpt = getExcerpt(loc))
    emitDiagnostic(loc, message + *excerpt, severity,
                   /*displaySourceLine=*/false);
  else
    emitDiagnostic(loc, message, severity);
}

void ModelDiagnosticHandler::emit(Diagnostic &diagnostic) {
  bool tooLong = getExcerpt(diagnostic.getLocation()).has_value() ||
                 llvm::any_of(diagnostic.getNotes(), [&](Diagnostic &note) {
                   return getExcerpt(note.getLocation()).has_value();
                 });
  if (!tooLong) {
    SourceMgrDiagnosticHandler::emitDiagnostic(diagnostic);
    return;
  }
  emitOne(diagnostic.getLocation(), diagnostic.str(), diagnostic.getSeverity());
  for (Diagnostic &note : diagnostic.getNotes())
    emitOne(note.getLocation(), note.str(), note.getSeverity());
}

/// The most elements a tensor of a model may have: 2^50, the generators'
/// limit (a thousand times a 1T model's parameters). Larger, its FLOPs and
/// bytes would overflow the int64 counts that costs, memory plans and
/// plans use.
static constexpr int64_t kMaxTensorElements = int64_t(1) << 50;

/// Refuses a tensor of `type` at `loc` with more than kMaxTensorElements
/// elements, its count multiplied out without overflow.
static LogicalResult checkTensorSize(Type type, Location loc) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return success();
  int64_t elements = 1;
  for (int64_t size : tensor.getShape())
    if (size > 0 && elements > kMaxTensorElements / size)
      return emitError(loc) << "a tensor of " << tensor
                            << " has more than 2^50 elements, the most "
                               "Tessera counts without overflow";
    else
      elements *= size;
  return success();
}

/// The most FLOPs one op of a model may count: 2^56 (7e16, four times a
/// 1T model's largest GEMM over a 3M-token batch), far enough below int64's
/// end that the int64 sums of a few such ops (a fused op's, tessera stats')
/// do not overflow; the planner sums in double.
static constexpr int64_t kMaxOpFlops = int64_t(1) << 56;

/// Every argument's and result's tensor of `module` within the bound, and
/// every op's FLOPs within theirs.
static LogicalResult checkTensorSizes(ModuleOp module) {
  WalkResult result = module.walk<WalkOrder::PreOrder>([](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (failed(checkTensorSize(arg.getType(), arg.getLoc())))
            return WalkResult::interrupt();
    for (Type type : op->getResultTypes())
      if (failed(checkTensorSize(type, op->getLoc())))
        return WalkResult::interrupt();
    // A fused op's FLOPs are its body's, counted there.
    auto cost = dyn_cast<CostOpInterface>(op);
    if (!cost || isa<nn::FusedOp>(op->getParentOp()))
      return WalkResult::advance();
    if (cost.getFlops() > kMaxOpFlops) {
      op->emitOpError() << "computes more than 2^56 FLOPs, the most Tessera "
                           "counts for one op without overflow";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

llvm::Expected<std::unique_ptr<ModelFile>>
tessera::loadModelFile(MLIRContext &context, StringRef path) {
  if (path.ends_with(".onnx")) {
    llvm::Expected<OwningOpRef<ModuleOp>> imported =
        onnx_import::importFile(context, path);
    if (!imported)
      return imported.takeError();
    auto file = std::make_unique<ModelFile>();
    file->handler =
        std::make_unique<ModelDiagnosticHandler>(file->sourceMgr, &context);
    file->module = std::move(*imported);
    if (failed(checkTensorSizes(*file->module)))
      return llvm::make_error<DiagnosedError>();
    return std::move(file);
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(path, &error);
  if (!buffer)
    return llvm::createStringError(error);
  auto file = std::make_unique<ModelFile>();
  file->sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  file->handler =
      std::make_unique<ModelDiagnosticHandler>(file->sourceMgr, &context);
  // The parser recurses per level of nesting: a file nested thousands deep
  // would overflow its stack.
  const llvm::MemoryBuffer *text =
      file->sourceMgr.getMemoryBuffer(file->sourceMgr.getMainFileID());
  if (std::optional<size_t> deep =
          findNestingOverflow(text->getBuffer(), kMaxNestingDepth)) {
    auto [line, column] = file->sourceMgr.getLineAndColumn(
        llvm::SMLoc::getFromPointer(text->getBufferStart() + *deep));
    emitError(FileLineColLoc::get(&context, path, line, column))
        << "nested deeper than " << kMaxNestingDepth
        << " levels, which no model needs (the parser would overflow its "
           "stack)";
    return llvm::make_error<DiagnosedError>();
  }
  file->module = parseSourceFile<ModuleOp>(file->sourceMgr, &context);
  if (!file->module || failed(checkTensorSizes(*file->module)))
    return llvm::make_error<DiagnosedError>();
  return std::move(file);
}

namespace {
/// Shows each top-level pass on a progress line as it starts.
class PassProgress : public PassInstrumentation {
public:
  explicit PassProgress(ProgressLine &line) : line(line) {}
  void runBeforePass(Pass *pass, Operation *op) override {
    if (isa<ModuleOp>(op))
      line.update("compiling: " + pass->getArgument());
  }

private:
  ProgressLine &line;
};
} // namespace

llvm::Error
tessera::runPipeline(ModuleOp module,
                     llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(module->getContext());
  build(pm);
  // On a terminal, the pass that is running.
  ProgressLine progress;
  if (progress.isEnabled())
    pm.addInstrumentation(std::make_unique<PassProgress>(progress));
  LogicalResult ran = pm.run(module);
  progress.clear();
  if (failed(ran))
    return llvm::make_error<DiagnosedError>();
  return llvm::Error::success();
}

llvm::Error tessera::compilePlan(ModuleOp module,
                                 const CompileOptions &options) {
  if (options.servers == 0)
    return runPipeline(
        module, [&](OpPassManager &pm) { buildCompilePipeline(pm, options); });
  runtime::Consistency consistency;
  if (runtime::Status parsed =
          runtime::parseConsistency(options.consistency, consistency);
      !parsed.ok())
    return llvm::createStringError("--consistency " + parsed.message());
  if (options.output == "-")
    return llvm::createStringError("--ps writes a plan of two programs: give "
                                   "an output file");
  // The servers' plan next to the output, then inside it.
  OwningOpRef<ModuleOp> servers = module.clone();
  CompileOptions worker, server;
  worker.copyOptionValuesFrom(options);
  worker.serverPart = ServerPart::Worker;
  server.copyOptionValuesFrom(options);
  server.serverPart = ServerPart::Server;
  server.output = options.output + ".servers";
  server.text = false;
  if (llvm::Error error = runPipeline(
          module, [&](OpPassManager &pm) { buildCompilePipeline(pm, worker); }))
    return error;
  if (llvm::Error error = runPipeline(*servers, [&](OpPassManager &pm) {
        buildCompilePipeline(pm, server);
      }))
    return error;
  runtime::Expected<plan::Plan> workers = runtime::loadPlan(options.output);
  runtime::Expected<plan::Plan> updates = runtime::loadPlan(server.output);
  llvm::sys::fs::remove(server.output);
  if (!workers.ok() || !updates.ok())
    return llvm::createStringError(
        (workers.ok() ? updates : workers).message());
  plan::Plan plan = workers.take();
  plan::ParameterServer *parameterServer = plan.mutable_parameter_server();
  *parameterServer->mutable_servers() = updates.take();
  parameterServer->set_consistency(consistency.mode);
  parameterServer->set_staleness(consistency.staleness);
  plan.set_checksum(plan::computeChecksum(plan));
  std::string bytes = plan::serializePlan(plan, options.text);
  std::ofstream file(options.output, std::ios::binary);
  file << bytes;
  if (bytes.empty() || !file)
    return llvm::createStringError("cannot write the plan '" + options.output +
                                   "'");
  return llvm::Error::success();
}

llvm::Expected<int> Launcher::run(int64_t ranks, ArrayRef<std::string> args,
                                  StringRef runner) const {
  // mpirun -np 0 starts a rank per slot, and a count past int wraps.
  if (ranks < 1 || ranks > dist::kMaxDevices)
    return llvm::createStringError(llvm::formatv(
        "a run has 1 to {0} ranks, got {1}", dist::kMaxDevices, ranks));
  llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun)
    return llvm::createStringError("mpirun not found (install openmpi-bin)");
  SmallString<256> program(toolsDir);
  llvm::sys::path::append(program, runner);
  // Quiet: a rank's error is its own line, without Open MPI's banners
  // about the job it ends. More ranks than cores share them.
  std::vector<std::string> argv = {*mpirun, "-q", "-np", std::to_string(ranks)};
  if (ranks > static_cast<int64_t>(std::thread::hardware_concurrency()))
    argv.push_back("--oversubscribe");
  argv.push_back(std::string(program));
  llvm::append_range(argv, args);
  // OpenMPI refuses root without these; one BLAS thread per rank.
  std::vector<std::string> env;
  for (char **entry = environ; *entry; ++entry)
    env.push_back(*entry);
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    env.push_back("OPENBLAS_NUM_THREADS=1");
  // A session directory of its own: OpenMPI 4's jobs on one node share
  // /tmp/ompi.<host>.<uid>, and one job's cleanup can remove it while
  // another starts ("ORTE_ERROR_LOG: ... session_dir.c", open-mpi/ompi
  // #8510), as when tests verify in parallel.
  SmallString<128> sessions;
  if (!llvm::sys::fs::createUniqueDirectory("tessera-mpi", sessions))
    env.push_back(("OMPI_MCA_orte_tmpdir_base=" + sessions).str());
  SmallVector<StringRef> argRefs(argv.begin(), argv.end());
  SmallVector<StringRef> envRefs(env.begin(), env.end());
  std::string error;
  int code =
      llvm::sys::ExecuteAndWait(*mpirun, argRefs, envRefs, {}, 0, 0, &error);
  if (!sessions.empty())
    (void)llvm::sys::fs::remove_directories(sessions);
  if (code < 0)
    return llvm::createStringError("cannot run mpirun: " + error);
  return code;
}

/// What getZeroModelState predicts for a train step's plan: the parameters
/// a device holds without ZeRO (split only by the other axes), with a
/// gradient of each, and their optimizer state, split by the stage over the
/// ZeRO axes. None for a plan without optimizer state.
static std::optional<ModelStateMemory>
getPredictedModelState(const plan::Plan &plan, const plan::Program &program,
                       const CompileOptions &options) {
  llvm::StringMap<int64_t> axisSizes;
  for (const plan::Mesh::Axis &axis : plan.mesh().axes())
    axisSizes[axis.name()] = axis.size();
  SmallVector<std::string> dataAxes(options.zeroAxes.begin(),
                                    options.zeroAxes.end());
  // The ZeRO pass's default: "dp", and "cp" where the mesh has it.
  if (dataAxes.empty()) {
    dataAxes.push_back("dp");
    if (axisSizes.count("cp"))
      dataAxes.push_back("cp");
  }
  // TODO(issue 23): with experts over "ep" (a ZeRO axis of the dense
  // parameters, the experts' own split) the closed form needs each
  // parameter's ZeRO axes, which the plan does not record.
  if (axisSizes.lookup("ep") > 1)
    return std::nullopt;
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
  ModelStateBytesPerParameter bytes = {perParameter, perParameter,
                                       stateBytes / parameters};
  // Mixed precision: the f32 parameters are master weights (optimizer
  // state); the model reads their 16-bit casts and makes 16-bit gradients,
  // which the update reads (2 + 2 + K, K = 12 with AdamW).
  if (options.precision == TrainPrecision::Mixed)
    bytes = {2, 2, (parameterBytes + stateBytes) / parameters, 1};
  return getZeroModelState(parameters, bytes,
                           static_cast<int64_t>(options.zero.getValue()),
                           dataParallel);
}

static void printBreakdown(llvm::raw_ostream &os, StringRef what,
                           const plan::MemoryBreakdown &bytes) {
  os << llvm::formatv(
      "{0}: parameters {1}, gradients {2}, optimizer state {3}, activations "
      "{4}, communication {5} bytes\n",
      what, bytes.parameter_bytes(), bytes.gradient_bytes(),
      bytes.optimizer_state_bytes(), bytes.activation_bytes(),
      bytes.communication_bytes());
}

/// The plan in `path`, read as the runtime loads it.
static llvm::Expected<plan::Plan> readPlan(StringRef path) {
  runtime::Expected<plan::Plan> loaded = runtime::loadPlan(path.str());
  if (!loaded.ok())
    return llvm::createStringError(loaded.message());
  return std::move(*loaded);
}

llvm::Error tessera::checkPlanFile(StringRef path) {
  return readPlan(path).takeError();
}

llvm::Error tessera::printManifest(StringRef path, llvm::raw_ostream &os) {
  llvm::Expected<plan::Plan> loaded = readPlan(path);
  if (!loaded)
    return loaded.takeError();
  const plan::Plan &plan = *loaded;
  runtime::Mesh mesh = runtime::getMesh(plan);
  for (auto [index, program] : llvm::enumerate(plan.programs())) {
    std::vector<std::string> lines;
    runtime::forEachRunStep(
        program,
        [&](runtime::RunStep step) {
          const plan::Instruction &instruction =
              program.instructions(step.instruction);
          if (!runtime::isCommunication(instruction))
            return;
          std::string line = llvm::formatv("  {0,5}  instruction {1}",
                                           lines.size() + 1, step.instruction);
          if (step.entry >= 0)
            line += llvm::formatv(
                " ({0}, microbatch {1})",
                program.units(program.schedule(step.entry).unit()).name(),
                step.microbatch);
          line += ": " + runtime::describeCommunication(program, instruction);
          if (instruction.has_collective()) {
            const auto &axes = instruction.collective().mesh_axes();
            line += llvm::formatv(
                ", groups of {0}",
                mesh.getGroup(program.ranks(0), {axes.begin(), axes.end()})
                    .size);
          }
          if (instruction.stream() != 0)
            line += ", started";
          lines.push_back(std::move(line));
        },
        [](int64_t) {});
    os << llvm::formatv(
        "manifest of program {0} (ranks {1}): {2} "
        "collectives and transfers per step\n",
        index,
        formatRanks({program.ranks().data(),
                     static_cast<size_t>(program.ranks().size())}),
        lines.size());
    for (const std::string &line : lines)
      os << line << "\n";
  }
  return llvm::Error::success();
}

llvm::Error tessera::printPlanSummary(StringRef path,
                                      const CompileOptions &options,
                                      llvm::raw_ostream &os) {
  // Read the plan back as the runtime will.
  llvm::Expected<plan::Plan> loaded = readPlan(path);
  if (!loaded)
    return loaded.takeError();
  const plan::Plan &plan = *loaded;
  // A plan of several programs (pipeline stages) runs on all their ranks.
  int64_t programs = plan.programs_size(), ranks = 0;
  for (const plan::Program &program : plan.programs())
    ranks += program.ranks_size();
  if (programs > 1)
    os << llvm::formatv("plan {0}: {1} ranks in {2} programs (tessera run "
                        "--ranks {1})\n",
                        path, ranks, programs);
  for (auto [index, program] : llvm::enumerate(plan.programs())) {
    int64_t collectives =
        llvm::count_if(program.instructions(), [](const plan::Instruction &i) {
          return i.has_collective();
        });
    os << llvm::formatv(
        "plan {0}{1}: {2} ranks, {3} instructions ({4} collectives), {5} "
        "buffers in an arena of {6} bytes per device\n",
        path, programs > 1 ? llvm::formatv(", program {0}", index).str() : "",
        program.ranks_size(), program.instructions_size(), collectives,
        program.buffers_size(), program.arena_bytes());
    printBreakdown(os, "memory at the peak", program.peak_memory());
    if (std::optional<ModelStateMemory> state =
            getPredictedModelState(plan, program, options))
      os << llvm::formatv(
          "model state by ZeRO-{0}'s closed form: parameters {1:f0}, "
          "gradients {2:f0}, optimizer state {3:f0} bytes\n",
          static_cast<int>(options.zero.getValue()), state->parameterBytes,
          state->gradientBytes, state->optimizerStateBytes);
    printBreakdown(os, "memory, each at its own peak",
                   program.category_peaks());
  }
  if (plan.has_parameter_server()) {
    const plan::Plan &servers = plan.parameter_server().servers();
    const plan::Program &update = servers.programs(0);
    runtime::Consistency consistency{plan.parameter_server().consistency(),
                                     plan.parameter_server().staleness()};
    int64_t stateBytes = 0;
    for (const plan::Argument &argument : update.arguments())
      if (argument.role() == plan::PARAM ||
          argument.role() == plan::OPTIMIZER_STATE) {
        const plan::Buffer &buffer = update.buffers(argument.buffer());
        stateBytes += runtime::getNumElements(
                          {buffer.shape().begin(), buffer.shape().end()}) *
                      runtime::getDTypeBytes(runtime::getDType(buffer.dtype()));
      }
    os << llvm::formatv(
        "parameter servers: {0}, {1}: {2} instructions ({3} collectives), "
        "{4} bytes of parameters and optimizer state per server\n",
        update.ranks_size(), runtime::formatConsistency(consistency),
        update.instructions_size(),
        llvm::count_if(
            update.instructions(),
            [](const plan::Instruction &i) { return i.has_collective(); }),
        stateBytes);
  }
  return llvm::Error::success();
}
