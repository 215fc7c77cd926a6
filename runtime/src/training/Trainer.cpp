//===- Trainer.cpp - A plan's training steps on one rank ------------------===//

#include "tessera/runtime/training/Trainer.h"

#include "tessera/runtime/Dump.h"
#include "tessera/runtime/HostMemory.h"
#include "tessera/runtime/Plan.h"
#include "tessera/runtime/Safetensors.h"
#include "tessera/runtime/Threads.h"
#include "tessera/runtime/training/Checkpoint.h"
#include "tessera/runtime/training/Data.h"
#include "tessera/runtime/training/TrainingLog.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <unistd.h>

using namespace tessera::runtime;

/// Seconds since `begin`.
static double secondsSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
      .count();
}

/// Prints a one-line summary of a global result.
static void printResult(int64_t index, const Tensor &tensor) {
  std::printf("result #%lld: %s [", static_cast<long long>(index),
              getDTypeName(tensor.dtype));
  for (size_t d = 0; d < tensor.shape.size(); ++d)
    std::printf("%s%lld", d ? ", " : "",
                static_cast<long long>(tensor.shape[d]));
  std::printf("]");
  int64_t n = tensor.getNumElements();
  if (n == 1 && (tensor.dtype == DType::F32 || isHalf(tensor.dtype))) {
    std::printf(" = %.9g\n", getScalar(tensor));
    return;
  }
  if (tensor.dtype != DType::F32) {
    std::printf("\n");
    return;
  }
  double sum = 0, maxAbs = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += tensor.as<float>()[i];
    maxAbs = std::max(maxAbs, std::fabs(double(tensor.as<float>()[i])));
  }
  std::printf(" sum = %.6f, max |x| = %.6f\n", sum, maxAbs);
}

Status tessera::runtime::checkTrainerOutputs(const TrainerOptions &options) {
  namespace fs = std::filesystem;
  auto writable = [](const fs::path &dir) {
    return ::access(dir.c_str(), W_OK) == 0;
  };
  auto refuse = [](const char *flag, const std::string &path,
                   const std::string &why) {
    return invalidArgument(std::string(flag) + " '" + path + "'" + why);
  };
  for (auto [flag, dir] : {std::pair<const char *, const std::string *>{
                               "--trace", &options.traceDir},
                           {"--save-checkpoint", &options.saveCheckpoint}}) {
    if (dir->empty())
      continue;
    std::error_code error;
    fs::create_directories(*dir, error);
    if (!fs::is_directory(*dir))
      return refuse(flag, *dir,
                    ": cannot make the directory" +
                        (error ? ": " + error.message() : std::string()));
    if (!writable(*dir))
      return refuse(flag, *dir, ": the directory is not writable");
  }
  for (auto [flag, file] : {std::pair<const char *, const std::string *>{
                                "--dump-inputs", &options.dumpInputs},
                            {"--dump-outputs", &options.dumpOutputs},
                            {"--dump-losses", &options.dumpLosses},
                            {"--save-weights", &options.saveWeights},
                            {"--metrics", &options.metrics}}) {
    if (file->empty())
      continue;
    fs::path parent = fs::path(*file).parent_path();
    if (parent.empty())
      parent = ".";
    if (fs::is_directory(*file))
      return refuse(flag, *file, " is a directory");
    if (!fs::is_directory(parent))
      return refuse(flag, *file, ": no directory '" + parent.string() + "'");
    if (!writable(parent))
      return refuse(flag, *file,
                    ": the directory '" + parent.string() +
                        "' is not writable");
  }
  return Status::success();
}

Trainer::Trainer(const plan::Plan &plan, const Job &job, TrainerOptions options,
                 bool mpiSerialized)
    : plan(plan), job(job), options(std::move(options)),
      mpiSerialized(mpiSerialized), rank(job.getRank()), mesh(getMesh(plan)) {}

Trainer::~Trainer() = default;

Status Trainer::run() {
  if (Status status = setUp(); !status.ok())
    return status;
  // A plan too big for this machine is refused before its arguments and
  // its arena are allocated, with the bytes and the largest buffer named,
  // rather than ending in std::bad_alloc (or in the kernel's OOM killer).
  // The ranks of this node share its memory.
  HostMemoryUse use;
  use.arenaOnHost = options.device != "cuda";
  use.parametersMapped = !options.loadWeights.empty();
  if (Status status = checkHostMemory(*program, use,
                                      getHostMemoryLimit(job.getLocalSize()));
      !status.ok())
    return status;
  if (Status status = prepareArguments(); !status.ok())
    return status;
  if (Status status = train(); !status.ok())
    return status;
  return gatherResults();
}

Status Trainer::setUp() {
  if (options.device == "cuda") {
    // This rank's GPU: its index among the ranks of its node, modulo the
    // node's GPUs.
    int gpus = getCudaDeviceCount();
    Expected<std::unique_ptr<Device>> cuda =
        createCudaDevice(gpus > 0 ? job.getLocalRank() % gpus : 0);
    if (!cuda.ok())
      return fail(cuda.message());
    device = cuda.take();
  } else {
    device = createCpuDevice();
  }
  // Whether this rank's program starts collectives or sends on another
  // stream: only then does the MPI communicator progress them from a
  // thread, which takes a core from the kernels while they are in flight.
  program = getProgramOfRank(plan, rank);
  bool overlaps = program && std::any_of(program->instructions().begin(),
                                         program->instructions().end(),
                                         [](const plan::Instruction &i) {
                                           return i.stream() != 0;
                                         });
  Expected<std::unique_ptr<Communicator>> created =
      options.device == "cuda"
          ? createNcclCommunicator(mesh, *device, options.commTimeout,
                                   job.getRendezvous())
          : createMpiCommunicator(mesh, options.commTimeout, overlaps);
  if (!created.ok())
    return fail(created.message());
  communicator = created.take();
  if (!program)
    return fail("the plan has no program for this rank");
  if (options.device == "cpu")
    setKernelThreads(options.threads > 0
                         ? options.threads
                         : getDefaultKernelThreads(job.getLocalSize(),
                                                   overlaps && mpiSerialized));
  // The groups of every program's collectives, set up by all ranks at once.
  std::set<Axes> groups;
  for (const plan::Program &each : plan.programs())
    for (const plan::Instruction &instruction : each.instructions())
      if (instruction.has_collective())
        groups.insert({instruction.collective().mesh_axes().begin(),
                       instruction.collective().mesh_axes().end()});
  if (Status status =
          communicator->prepareGroups({groups.begin(), groups.end()});
      !status.ok())
    return fail(status.message());
  if (Status status = communicator->prepareTransfers(getTransferChannels(plan));
      !status.ok())
    return fail(status.message());
  return Status::success();
}

/// Where the step's inputs come from, by their index in the step as
/// written (pipeline stages read a part; a unit's flat buffer holds
/// several): generated, or read from --weights, --inputs or --load-weights.
struct Trainer::InputSources {
  /// Per argument of this rank's program, the step tensors it holds; the
  /// step's inputs (one past the largest index).
  std::vector<std::vector<std::pair<int64_t, plan::Argument>>> stepTensors;
  int64_t needed = 0;
  /// Every step tensor's role, over every stage's program.
  std::map<int64_t, plan::ArgumentRole> roles;
  /// Step index -> the tensor of --weights (parameters, in the order of
  /// their indices) and of --inputs (data) that holds it; a weight stash's
  /// step index -> its parameter's.
  std::map<int64_t, int64_t> weightOf, dataOf, stashOf;
  std::vector<OwnedTensor> weights;
  /// The step's inputs by index, and --inputs' tensors where they hold the
  /// data arguments alone (`dataOnly`: with --weights).
  std::vector<OwnedTensor> inputs, data;
  bool dataOnly = false;
  /// --load-weights' file and its entry for each parameter's step index.
  std::optional<SafetensorsCheckpoint> safetensors;
  std::map<int64_t, const SafetensorsFile::Entry *> entryOf;
};

void Trainer::findInputSources(InputSources &sources) const {
  for (int i = 0; i < program->arguments_size(); ++i) {
    sources.stepTensors.push_back(getStepTensors(program->arguments(i), i));
    for (const auto &[source, tensor] : sources.stepTensors.back())
      sources.needed = std::max(sources.needed, source + 1);
  }
  // --weights holds the parameters in the order of their indices in the
  // step, and with it --inputs may hold the data arguments alone
  // (optimizer state starts at zero, the step counter is the runtime's).
  for (const plan::Program &each : plan.programs())
    for (int i = 0; i < each.arguments_size(); ++i)
      for (const auto &[source, tensor] : getStepTensors(each.arguments(i), i))
        sources.roles.emplace(source, tensor.role());
  for (const auto &[source, role] : sources.roles) {
    if (role == plan::PARAM && !options.weights.empty())
      sources.weightOf.emplace(source, sources.weightOf.size());
    if (role == plan::DATA)
      sources.dataOf.emplace(source, sources.dataOf.size());
  }
  // A weight stash starts as its parameter: by step index, the parameter's.
  for (const plan::Program &each : plan.programs())
    for (int i = 0; i < each.arguments_size(); ++i)
      for (const auto &[source, tensor] : getStepTensors(each.arguments(i), i))
        if (tensor.role() == plan::WEIGHT_STASH)
          sources.stashOf.emplace(source, tensor.version_of_source());
}

Status Trainer::readGivenInputs(InputSources &sources) const {
  if (!options.weights.empty()) {
    Expected<std::vector<OwnedTensor>> read = readTensors(options.weights);
    if (!read.ok())
      return fail(read.message());
    sources.weights = read.take();
    if (sources.weights.size() != sources.weightOf.size())
      return fail("'" + options.weights + "' holds " +
                  std::to_string(sources.weights.size()) +
                  " tensors, the plan has " +
                  std::to_string(sources.weightOf.size()) + " parameters");
  }
  for (const auto &[stash, param] : sources.stashOf)
    if (auto weight = sources.weightOf.find(param);
        weight != sources.weightOf.end())
      sources.weightOf.emplace(stash, weight->second);
  if (!options.loadWeights.empty())
    if (Status status = matchLoadedWeights(sources.stashOf, sources.safetensors,
                                           sources.entryOf);
        !status.ok())
      return status;
  sources.inputs.resize(sources.needed);
  if (options.inputs.empty())
    return Status::success();
  Expected<std::vector<OwnedTensor>> read = readTensors(options.inputs);
  if (!read.ok())
    return fail(read.message());
  sources.data = read.take();
  size_t given = sources.data.size();
  sources.dataOnly = !options.weights.empty() &&
                     given == sources.dataOf.size() &&
                     sources.dataOf.size() != sources.roles.size();
  bool pipelined = plan.programs_size() > 1;
  bool fits = sources.dataOnly ||
              (pipelined ? static_cast<int64_t>(given) >= sources.needed
                         : static_cast<int64_t>(given) == sources.needed);
  if (!fits)
    return fail("'" + options.inputs + "' holds " + std::to_string(given) +
                " tensors, the plan takes " + std::to_string(sources.needed) +
                " arguments" +
                (options.weights.empty()
                     ? std::string()
                     : " (or its " + std::to_string(sources.dataOf.size()) +
                           " data arguments, with --weights)"));
  if (!sources.dataOnly)
    sources.inputs = std::move(sources.data);
  return Status::success();
}

Status Trainer::addLocalArgument(int index, InputSources &sources) {
  const plan::Argument &argument = program->arguments(index);
  std::vector<const Tensor *> held;
  std::vector<Tensor> mapped; // views of --load-weights' tensors
  mapped.reserve(sources.stepTensors[index].size());
  std::optional<OwnedTensor> convertedPiece;
  std::vector<OwnedTensor> &inputs = sources.inputs;
  for (const auto &[source, tensor] : sources.stepTensors[index]) {
    // A parameter of --load-weights: read in place where it has the
    // parameter's dtype (only the piece is copied), else converted: only
    // the piece, unless it is a unit's member (or --dump-inputs wants it).
    if (auto entry = sources.entryOf.find(source);
        entry != sources.entryOf.end()) {
      Tensor view = sources.safetensors->view(*entry->second);
      DType dtype = getDType(tensor.dtype());
      if (view.dtype == dtype && options.dumpInputs.empty()) {
        mapped.push_back(view);
        held.push_back(&mapped.back());
        continue;
      }
      bool piece = view.dtype != dtype && options.dumpInputs.empty() &&
                   argument.members().empty();
      OwnedTensor local;
      if (piece)
        local = takeLocalPiece(view, getLayout(argument), mesh, rank);
      Expected<OwnedTensor> converted =
          convertTo(piece ? local.view : view, dtype);
      if (!converted.ok())
        return fail(converted.getStatus()
                        .withPrefix("'" + options.loadWeights + "': tensor '" +
                                    tensor.name() + "': ")
                        .message());
      if (piece) {
        convertedPiece = converted.take();
        continue;
      }
      inputs[source] = converted.take();
      held.push_back(&inputs[source].view);
      continue;
    }
    // Given (a weight, a data tensor, or the whole step's input), or made.
    const std::string *file = nullptr;
    if (auto weight = sources.weightOf.find(source);
        weight != sources.weightOf.end()) {
      inputs[source] = sources.weights[weight->second];
      file = &options.weights;
    } else if (sources.dataOnly && sources.dataOf.count(source)) {
      inputs[source] = std::move(sources.data[sources.dataOf[source]]);
      file = &options.inputs;
    } else if (options.inputs.empty() || sources.dataOnly) {
      Expected<OwnedTensor> made =
          makeGlobalInput(tensor, options.seed, source);
      if (!made.ok())
        return made.getStatus();
      inputs[source] = made.take();
    } else {
      file = &options.inputs;
    }
    const Tensor &given = inputs[source].view;
    std::vector<int64_t> want(tensor.global_shape().begin(),
                              tensor.global_shape().end());
    if (file &&
        (given.dtype != getDType(tensor.dtype()) || given.shape != want))
      return fail("input #" + std::to_string(source) + " of '" + *file +
                  "' does not match argument '" + tensor.name() + "'");
    held.push_back(&inputs[source].view);
  }
  if (convertedPiece) {
    locals.push_back(std::move(*convertedPiece));
    return Status::success();
  }
  OwnedTensor packed;
  if (!argument.members().empty())
    packed = packMembers(argument, held, mesh);
  locals.push_back(
      takeLocalPiece(argument.members().empty() ? *held.front() : packed.view,
                     getLayout(argument), mesh, rank));
  return Status::success();
}

Status Trainer::prepareArguments() {
  if (plan.programs_size() > 1 && !options.dumpInputs.empty())
    return fail("--dump-inputs needs a plan of one program (this one has a "
                "program per pipeline stage)");
  InputSources sources;
  findInputSources(sources);
  if (Status status = readGivenInputs(sources); !status.ok())
    return status;
  // Each argument's global tensor is its own or its members' packed.
  for (int i = 0; i < program->arguments_size(); ++i)
    if (Status status = addLocalArgument(i, sources); !status.ok())
      return status;
  // A --load-weights file cut short while it was copied gave zeros there:
  // refused, not trained on.
  if (sources.safetensors)
    if (Status status = sources.safetensors->checkIntact(); !status.ok())
      return fail(status.message());
  if (rank == 0 && !options.dumpInputs.empty())
    if (Status status = writeTensors(options.dumpInputs, sources.inputs);
        !status.ok())
      return fail(status.message());
  return Status::success();
}

Status Trainer::resumeFromCheckpoint() {
  // A PipeDream or 2BW plan's ranks end a run at different points of their
  // steps (one has updated a step before, another the run's own): no
  // checkpoint of theirs is one step's state yet.
  if (program->steady() &&
      (!options.saveCheckpoint.empty() || !options.loadCheckpoint.empty()))
    return fail("--save-checkpoint and --load-checkpoint do not take a plan "
                "without a flush between steps (--schedule pipedream or "
                "2bw) yet: save its weights with --save-weights");
  if (!options.loadCheckpoint.empty()) {
    auto begin = std::chrono::steady_clock::now();
    if (Status status = loadCheckpoint(options.loadCheckpoint, plan, *program,
                                       mesh, locals, rank, firstStep);
        !status.ok())
      return fail(status.message());
    if (options.time && rank == 0)
      std::printf("checkpoint: loaded in %.3f s\n", secondsSince(begin));
  }
  // The last step must fit the plan's step counter.
  int64_t lastStep = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < program->arguments_size(); ++i)
    if (program->arguments(i).role() == plan::STEP &&
        locals[i].view.dtype == DType::I32)
      lastStep = std::numeric_limits<int32_t>::max();
  if (firstStep > lastStep - options.steps)
    return fail(std::to_string(options.steps) + " steps from step " +
                std::to_string(firstStep) +
                " pass the largest step the plan's step counter holds (" +
                std::to_string(lastStep) + ")");
  return Status::success();
}

void Trainer::takeUpdates() {
  for (int i = 0; i < program->results_size(); ++i)
    if (program->results(i).has_updates_argument())
      locals[program->results(i).updates_argument()] = results[i];
}

void Trainer::printStepTimes() const {
  // The first step warms caches and connections; the last fetches every
  // result from the device (the others only the loss): with three steps
  // or more, report those between.
  size_t skip = stepSeconds.size() > 1 ? 1 : 0;
  size_t end =
      stepSeconds.size() > 2 ? stepSeconds.size() - 1 : stepSeconds.size();
  double total = 0, fastest = stepSeconds[skip];
  for (size_t i = skip; i < end; ++i) {
    total += stepSeconds[i];
    fastest = std::min(fastest, stepSeconds[i]);
  }
  // The fastest step too: what PyTorch's benchmarks report, and on a
  // shared machine the one that noise touched least.
  std::printf("time: %.3f ms per step (mean of %zu steps after the "
              "first%s), fastest %.3f ms\n",
              1e3 * total / (end - skip), end - skip,
              end < stepSeconds.size() ? ", before the last" : "",
              1e3 * fastest);
}

Status Trainer::train() {
  executor =
      std::make_unique<Executor>(*program, mesh, *communicator, device.get());
  executor->setTracing(!options.traceDir.empty());
  int lossResult = getLossResult(*program);
  // The new parameters and optimizer state of each step stay on the device
  // as the next step's arguments.
  executor->setCarryUpdates(true);
  // Steps before the last fetch only what the log reads: the loss and the
  // metrics (the gradient norm, the loss scale).
  std::vector<bool> lossOnly(program->results_size(), false);
  if (lossResult >= 0)
    lossOnly[lossResult] = true;
  std::vector<int> metricResults;
  for (int i = 0; i < program->results_size(); ++i)
    if (!program->results(i).metric().empty()) {
      metricResults.push_back(i);
      lossOnly[i] = true;
    }
  if (Status status = resumeFromCheckpoint(); !status.ok())
    return status;
  // --data: each step's inputs and labels, read ahead.
  std::unique_ptr<DataFeed> feed;
  if (!options.data.empty()) {
    Expected<std::unique_ptr<DataFeed>> created = DataFeed::create(
        options.data, plan, *program, mesh, rank, options.seed);
    if (!created.ok())
      return fail(created.message());
    feed = created.take();
    feed->prefetch(firstStep + 1);
  }
  // The training log, from the first rank whose program has the loss.
  TrainingLog log(plan, *program, rank, options.steps);
  if (Status opened = log.openMetrics(options.metrics); !opened.ok())
    return fail(opened.message());
  for (int64_t step = firstStep + 1; step <= firstStep + options.steps;
       ++step) {
    setStepCounters(*program, step, locals);
    bool last = step == firstStep + options.steps;
    // A step that saves a checkpoint on the way fetches every result.
    bool saves =
        !last && options.saveEvery > 0 && step % options.saveEvery == 0;
    auto begin = std::chrono::steady_clock::now();
    if (feed) {
      if (Status status = feed->fill(step, locals); !status.ok())
        return fail("step " + std::to_string(step) + ": " + status.message());
      if (!last)
        feed->prefetch(step + 1);
    }
    if (Status status = executor->run(
            locals, results, last || saves ? std::vector<bool>() : lossOnly);
        !status.ok())
      return fail("step " + std::to_string(step) + ": " + status.message());
    stepSeconds.push_back(secondsSince(begin));
    if (lossResult >= 0)
      losses.push_back(getScalar(results[lossResult].view));
    if (lossResult >= 0 && log.isLogger()) {
      std::vector<std::pair<std::string, double>> metrics;
      for (int i : metricResults)
        metrics.emplace_back(program->results(i).metric(),
                             getScalar(results[i].view));
      if (Status logged =
              log.logStep(step, losses.back(), metrics, stepSeconds.back());
          !logged.ok())
        return fail(logged.message());
    }
    // On the way (--save-every), the step's updates are saved as the last
    // step's are.
    if (saves) {
      takeUpdates();
      if (Status status =
              saveCheckpoint(options.saveCheckpoint, *program, mesh, locals,
                             job, step, options.commTimeout);
          !status.ok())
        return fail(status.message());
    }
  }
  // A pipeline without a flush finishes the last step's backwards and
  // updates now.
  if (executor->hasDeferredWork())
    if (Status status = executor->drain(results); !status.ok())
      return fail("after the last step: " + status.message());
  // The last step's updates are the new arguments (a checkpoint saves them).
  takeUpdates();
  if (options.time && rank == 0)
    printStepTimes();
  if (Status status = writeTraces(); !status.ok())
    return status;
  if (!options.saveCheckpoint.empty()) {
    auto begin = std::chrono::steady_clock::now();
    if (Status status =
            saveCheckpoint(options.saveCheckpoint, *program, mesh, locals, job,
                           firstStep + options.steps, options.commTimeout);
        !status.ok())
      return fail(status.message());
    if (options.time && rank == 0)
      std::printf("checkpoint: saved in %.3f s\n", secondsSince(begin));
  }
  return Status::success();
}

Status Trainer::writeTraces() {
  if (options.traceDir.empty())
    return Status::success();
  std::string path =
      options.traceDir + "/rank" + std::to_string(rank) + ".json";
  std::ofstream file(path);
  executor->writeTrace(file, rank);
  if (!file)
    return fail("cannot write the trace '" + path + "'");
  // And one trace of every rank, which rank 0 writes: a process per rank,
  // the transfers' arrows between them.
  std::ostringstream events;
  executor->writeTraceEvents(events, rank);
  std::string text = events.str();
  std::vector<std::vector<uint8_t>> everyone;
  if (Status status = communicator->gatherToRoot(
          std::vector<uint8_t>(text.begin(), text.end()), everyone);
      !status.ok())
    return fail(status.message());
  if (rank == 0) {
    std::string merged = options.traceDir + "/trace.json";
    std::ofstream all(merged);
    all << "{\"traceEvents\": [\n";
    for (size_t r = 0; r < everyone.size(); ++r) {
      all << (r ? ",\n" : "");
      all.write(reinterpret_cast<const char *>(everyone[r].data()),
                everyone[r].size());
    }
    all << "\n]}\n";
    if (!all)
      return fail("cannot write the trace '" + merged + "'");
  }
  return Status::success();
}

Status Trainer::gatherResults() {
  // Rank 0 learns every rank's losses and result pieces: the loss is on the
  // last pipeline stage, and each result on the ranks of its program. The
  // new parameters and optimizer state (results that update an argument)
  // come only where they are written out: they are the size of the model on
  // every rank.
  std::vector<uint8_t> mine(losses.size() * sizeof(double));
  std::memcpy(mine.data(), losses.data(), mine.size());
  for (int i = 0; i < program->results_size(); ++i) {
    if (!isGathered(program->results(i)))
      continue;
    const auto *bytes = static_cast<const uint8_t *>(results[i].view.data);
    mine.insert(mine.end(), bytes, bytes + results[i].view.getBytes());
  }
  std::vector<std::vector<uint8_t>> everyone;
  if (Status status = communicator->gatherToRoot(mine, everyone); !status.ok())
    return fail(status.message());
  if (rank != 0)
    return Status::success();
  // Each rank's bytes: its losses (if its program has a loss), then its
  // results in program order.
  int64_t numRanks = communicator->getNumRanks();
  std::vector<const plan::Program *> programs;
  std::vector<size_t> resultsAt;
  for (int64_t r = 0; r < numRanks; ++r) {
    programs.push_back(getProgramOfRank(plan, r));
    resultsAt.push_back(getLossResult(*programs.back()) >= 0
                            ? stepSeconds.size() * sizeof(double)
                            : 0);
  }
  losses.clear();
  for (int64_t r = 0; r < numRanks && losses.empty(); ++r)
    if (resultsAt[r] > 0) {
      losses.resize(resultsAt[r] / sizeof(double));
      std::memcpy(losses.data(), everyone[r].data(), resultsAt[r]);
    }
  if (!options.dumpLosses.empty()) {
    std::FILE *file = std::fopen(options.dumpLosses.c_str(), "w");
    if (!file)
      return fail("cannot write '" + options.dumpLosses + "'");
    for (double loss : losses)
      std::fprintf(file, "%.9g\n", loss);
    std::fclose(file);
  }
  std::map<int64_t, OwnedTensor> globalResults;
  if (Status status = assembleResults(everyone, resultsAt, globalResults);
      !status.ok())
    return status;
  return writeResults(globalResults);
}

bool Trainer::isGathered(const plan::Result &result) const {
  return !options.saveWeights.empty() || !options.dumpOutputs.empty() ||
         !result.has_updates_argument();
}

Status Trainer::assembleResults(std::vector<std::vector<uint8_t>> &everyone,
                                const std::vector<size_t> &resultsAt,
                                std::map<int64_t, OwnedTensor> &globalResults) {
  // Each global result, by its index in the step, from the ranks of the
  // first program that returns it (a unit's flat buffer returns several).
  std::map<int64_t, std::pair<int, int>> sources; // index -> program, result
  for (int p = 0; p < plan.programs_size(); ++p)
    for (int i = 0; i < plan.programs(p).results_size(); ++i) {
      const plan::Result &result = plan.programs(p).results(i);
      if (!isGathered(result))
        continue;
      if (result.members().empty())
        sources.try_emplace(
            result.has_source_index() ? result.source_index() : i, p, i);
      for (const plan::Member &member : result.members())
        sources.try_emplace(member.source_index(), p, i);
    }
  std::set<std::pair<int, int>> placed;
  for (const auto &[index, source] : sources) {
    if (!placed.insert(source).second)
      continue;
    const plan::Program &owner = plan.programs(source.first);
    const plan::Result &result = owner.results(source.second);
    const plan::Buffer &buffer = owner.buffers(result.buffer());
    OwnedTensor global(getDType(buffer.dtype()), {result.global_shape().begin(),
                                                  result.global_shape().end()});
    Tensor piece{global.view.dtype,
                 {buffer.shape().begin(), buffer.shape().end()},
                 nullptr};
    for (int64_t r : owner.ranks()) {
      size_t offset = resultsAt[r];
      for (int i = 0; i < source.second; ++i) {
        if (!isGathered(owner.results(i)))
          continue;
        const plan::Buffer &before = owner.buffers(owner.results(i).buffer());
        offset +=
            getNumElements({before.shape().begin(), before.shape().end()}) *
            getDTypeBytes(getDType(before.dtype()));
      }
      piece.data = everyone[r].data() + offset;
      placeLocalPiece(piece, global.view, getLayout(result), mesh, r);
    }
    // A train step's new parameters and state are many and large: print
    // only what updates nothing (the loss).
    if (!result.has_updates_argument())
      printResult(index, global.view);
    if (result.members().empty()) {
      globalResults[index] = std::move(global);
      continue;
    }
    Expected<std::vector<OwnedTensor>> members =
        unpackMembers(result, global.view, mesh);
    if (!members.ok())
      return fail(members.message());
    for (int m = 0; m < result.members_size(); ++m)
      globalResults.try_emplace(result.members(m).source_index(),
                                std::move((*members)[m]));
  }
  return Status::success();
}

Status Trainer::writeResults(std::map<int64_t, OwnedTensor> &globalResults) {
  // --save-weights: each new parameter under its name, once (a parameter
  // tied across pipeline stages is a result of each).
  if (!options.saveWeights.empty()) {
    std::vector<std::pair<std::string, const Tensor *>> named;
    std::set<std::string> seen;
    auto add = [&](const std::string &name, int64_t index) {
      auto found = globalResults.find(index);
      if (found != globalResults.end() && seen.insert(name).second)
        named.push_back({name, &found->second.view});
    };
    for (const plan::Program &each : plan.programs())
      for (int i = 0; i < each.results_size(); ++i) {
        const plan::Result &result = each.results(i);
        if (!result.has_updates_argument())
          continue;
        const plan::Argument &argument =
            each.arguments(result.updates_argument());
        if (argument.role() != plan::PARAM)
          continue;
        if (argument.members().empty())
          add(argument.name(),
              result.has_source_index() ? result.source_index() : i);
        for (int m = 0;
             m < argument.members_size() && m < result.members_size(); ++m)
          add(argument.members(m).name(), result.members(m).source_index());
      }
    // Hugging Face's sharded form where the path names an index.
    const std::string index = ".safetensors.index.json";
    bool sharded =
        options.saveWeights.size() > index.size() &&
        options.saveWeights.compare(options.saveWeights.size() - index.size(),
                                    index.size(), index) == 0;
    if (Status status = sharded ? writeSafetensorsShards(
                                      options.saveWeights, named,
                                      options.shardBytes, {{"format", "pt"}})
                                : writeSafetensors(options.saveWeights, named,
                                                   {{"format", "pt"}});
        !status.ok())
      return fail(status.message());
  }
  if (!options.dumpOutputs.empty()) {
    std::vector<OwnedTensor> dumped;
    for (auto &[index, global] : globalResults)
      dumped.push_back(std::move(global));
    if (Status status = writeTensors(options.dumpOutputs, dumped); !status.ok())
      return fail(status.message());
  }
  return Status::success();
}

Status Trainer::matchLoadedWeights(
    const std::map<int64_t, int64_t> &stashOf,
    std::optional<SafetensorsCheckpoint> &safetensors,
    std::map<int64_t, const SafetensorsFile::Entry *> &entryOf) const {
  Expected<SafetensorsCheckpoint> opened =
      openSafetensorsCheckpoint(options.loadWeights);
  if (!opened.ok())
    return fail(opened.message());
  safetensors.emplace(opened.take());
  std::map<std::string, std::pair<int64_t, plan::Argument>> params;
  for (const plan::Program &each : plan.programs())
    for (int i = 0; i < each.arguments_size(); ++i)
      for (const auto &[source, tensor] : getStepTensors(each.arguments(i), i))
        if (tensor.role() == plan::PARAM)
          params.emplace(tensor.name(), std::make_pair(source, tensor));
  std::vector<std::string> problems;
  for (const auto &[name, param] : params) {
    const plan::Argument &tensor = param.second;
    std::vector<int64_t> shape(tensor.global_shape().begin(),
                               tensor.global_shape().end());
    DType dtype = getDType(tensor.dtype());
    const SafetensorsFile::Entry *entry = safetensors->find(name);
    if (!entry)
      problems.push_back("no tensor '" + name + "' (" + getDTypeName(dtype) +
                         " " + formatShape(shape) + ")");
    else if (entry->shape != shape)
      problems.push_back("'" + name + "' is " + formatShape(entry->shape) +
                         ", the model's " + formatShape(shape));
    else if (isFloat(entry->dtype) != isFloat(dtype))
      problems.push_back("'" + name + "' is " + getDTypeName(entry->dtype) +
                         ", the model's " + getDTypeName(dtype));
    else
      entryOf[param.first] = entry;
  }
  for (const std::string &name : safetensors->getNames())
    if (!params.count(name))
      problems.push_back("'" + name + "' is no parameter of the model");
  for (const auto &[stash, param] : stashOf)
    if (auto entry = entryOf.find(param); entry != entryOf.end())
      entryOf.emplace(stash, entry->second);
  if (!problems.empty()) {
    std::string message = "'" + options.loadWeights +
                          "' does not hold "
                          "the model's parameters:";
    for (const std::string &problem : problems)
      message += "\n  " + problem;
    return fail(message);
  }
  return Status::success();
}
