//===- tessera-run.cpp - Runs a plan on the ranks of a job ---------------===//
//
//   mpirun -np N tessera-run model.plan [--steps N] [--seed S]
//                            [--inputs FILE] [--weights FILE]
//                            [--dump-inputs FILE]
//                            [--dump-outputs FILE] [--dump-losses FILE]
//                            [--data TOKENS] [--metrics FILE.jsonl]
//                            [--load-weights FILE] [--save-weights FILE]
//                            [--save-checkpoint DIR [--save-every N]]
//                            [--load-checkpoint DIR]
//                            [--device cpu|cuda] [--comm-timeout SECONDS]
//                            [--threads N]
//   tessera-run model.plan --check-plan
//
// One process per rank, started by mpirun, srun, or torchrun-style
// variables (GPUs only; the ranks meet in a TCP rendezvous, Job.h). On
// `--device cuda` each rank runs on a GPU of its node (its rank among the
// node's ranks, modulo the node's GPUs) with NCCL collectives. On
// either device, a collective or transfer that does not finish within
// --comm-timeout (default 600 s) ends the job with an error naming it.
//
// A train step (results that update arguments) trains: after each step its
// new parameters and optimizer state replace the old, the step counter
// counts from 1, and the first rank with the loss logs the step
// (TrainingLog.h). With --data, each step's tokens and labels are the next
// batch of a token file (Data.h). A checkpoint (Checkpoint.h) holds each
// rank's pieces of the parameters and optimizer state, named, with a
// checksum, and the step reached; it is swapped in whole (at the end, and
// every --save-every steps), loading it on the same plan resumes bit for
// bit, and on another plan reshards it. --load-weights and --save-weights
// read and write the parameters alone as safetensors, by their names.
//
// On the CPU, large elementwise, row and attention kernels split over
// --threads threads, and GEMMs run on as many OpenBLAS threads; by default
// the cores this rank may use (its CPU affinity, shared with the other ranks
// of its node where all may use every core), less one for MPI's progress
// thread where the plan overlaps collectives. Results do not depend on it.
//
// With --check-plan, it only loads the plan as a run would (validated, its
// collective manifest and checksum checked) and exits, 0 when it is valid.
//
// Every rank loads and validates the plan, builds the same global inputs
// (seeded, or read from --inputs; the parameters from --weights, as
// `tessera import --weights-out` writes them, or --load-weights), keeps its
// piece, runs its program and sends its results to rank 0, which assembles
// and prints them. With
// pipeline stages (one program per stage) every input and result is known
// by its index in the unpipelined step, so a run feeds and reports them as
// that step would. A failure on any rank is reported with the rank and ends
// the whole job.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Data.h"
#include "Hogwild.h"
#include "Job.h"
#include "ParameterServer.h"
#include "TrainingLog.h"

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/Plan.h"
#include "tessera/runtime/Safetensors.h"
#include "tessera/runtime/Threads.h"

#include <mpi.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

using namespace tessera;
using namespace tessera::runtime;

namespace {

struct Options {
  std::string plan;
  int64_t steps = 1;
  uint64_t seed = 0;
  std::string inputs;
  std::string weights;
  std::string dumpInputs;
  std::string dumpOutputs;
  std::string dumpLosses;
  std::string saveCheckpoint;
  std::string loadCheckpoint;
  std::string data;
  std::string loadWeights;
  std::string saveWeights;
  std::string metrics;
  /// With --save-checkpoint: also save after every this many steps (0:
  /// only at the end).
  int64_t saveEvery = 0;
  /// With --save-weights NAME.safetensors.index.json: the bytes after
  /// which a shard is closed (Hugging Face's default, 5 GB).
  int64_t shardBytes = 5000000000;
  std::string traceDir;
  bool time = false;
  /// Only load the plan (validated, its manifest and checksum checked).
  bool checkPlan = false;
  std::string device = "cpu";
  double commTimeout = 600;
  /// The CPU kernels' threads; 0: the default (getDefaultKernelThreads).
  int threads = 0;
  /// A parameter-server plan's job (ParameterServer.h).
  ServerJobOptions server;
  /// Whether any option of a parameter-server plan's job was given.
  bool serverOptions = false;
  /// --hogwild THREADS [--locked] (Hogwild.h); 0: no Hogwild.
  int hogwild = 0;
  bool locked = false;
};

const char *kUsage =
    "usage: tessera-run PLAN [--steps N] [--seed S] [--inputs FILE] "
    "[--weights FILE] "
    "[--dump-inputs FILE] [--dump-outputs FILE] [--dump-losses FILE]\n"
    "       [--data TOKENS] [--load-weights FILE.safetensors] "
    "[--save-weights FILE.safetensors|NAME.safetensors.index.json "
    "[--shard-bytes B]] [--metrics FILE.jsonl]\n"
    "       [--save-checkpoint DIR [--save-every N]] [--load-checkpoint DIR] "
    "[--trace DIR] "
    "[--time]\n"
    "       [--device cpu|cuda] [--comm-timeout SECONDS] [--threads N]\n"
    "       tessera-run PLAN --check-plan: load and check the plan, and "
    "exit\n"
    "  a parameter-server plan (compile --ps), started once:\n"
    "       tessera-run PLAN [--steps N] [--seed S] [--data TOKENS] "
    "[--dump-losses FILE] [--save-weights FILE]\n"
    "       [--ps-dir DIR] [--consistency sync|async|ssp=K] "
    "[--straggler WORKER:MS]... [--ps-checkpoint-every N] "
    "[--ps-timeout SECONDS]\n"
    "       tessera-run PLAN --ps-join DIR [--steps N]: one more worker "
    "for the running job in DIR\n"
    "       tessera-run PLAN --hogwild THREADS [--locked] [--steps N] "
    "[--seed S] [--dump-losses FILE] [--metrics FILE.jsonl]: its workers "
    "as threads on one shared copy of the parameters (SGD)\n";

/// Parses the command line.
Status parseOptions(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) -> bool {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string text;
    if (arg == "--steps" || arg == "--seed") {
      if (!value(text))
        return invalidArgument(arg + " needs a value");
      char *end = nullptr;
      errno = 0;
      long long number = std::strtoll(text.c_str(), &end, 10);
      // Out of range, strtoll gives its largest value: a run without end.
      // So would 2^62 steps; a run has at most kMaxSteps.
      bool isSteps = arg == "--steps";
      if (*end != '\0' || text.empty() || errno == ERANGE ||
          number < (isSteps ? 1 : 0) || (isSteps && number > kMaxSteps))
        return invalidArgument(
            arg +
            (isSteps
                 ? " expects an integer from 1 to " + std::to_string(kMaxSteps)
                 : std::string(" expects a non-negative integer")) +
            ", got '" + text + "'");
      if (arg == "--steps")
        options.steps = number;
      else
        options.seed = number;
    } else if (arg == "--inputs") {
      if (!value(options.inputs))
        return invalidArgument("--inputs needs a file");
    } else if (arg == "--weights") {
      if (!value(options.weights))
        return invalidArgument("--weights needs a file");
    } else if (arg == "--dump-inputs") {
      if (!value(options.dumpInputs))
        return invalidArgument("--dump-inputs needs a file");
    } else if (arg == "--save-checkpoint") {
      if (!value(options.saveCheckpoint))
        return invalidArgument("--save-checkpoint needs a directory");
    } else if (arg == "--load-checkpoint") {
      if (!value(options.loadCheckpoint))
        return invalidArgument("--load-checkpoint needs a directory");
    } else if (arg == "--data") {
      if (!value(options.data))
        return invalidArgument("--data needs a token file");
    } else if (arg == "--load-weights") {
      if (!value(options.loadWeights))
        return invalidArgument("--load-weights needs a safetensors file");
    } else if (arg == "--save-weights") {
      if (!value(options.saveWeights))
        return invalidArgument("--save-weights needs a safetensors file");
    } else if (arg == "--save-every" || arg == "--shard-bytes") {
      bool every = arg == "--save-every";
      const char *what = every ? "steps" : "bytes";
      if (!value(text))
        return invalidArgument(arg + " needs a number of " + what);
      char *end = nullptr;
      errno = 0;
      long long number = std::strtoll(text.c_str(), &end, 10);
      if (*end != '\0' || text.empty() || errno == ERANGE || number < 1)
        return invalidArgument(arg + " expects a positive number of " + what +
                               ", got '" + text + "'");
      (every ? options.saveEvery : options.shardBytes) = number;
    } else if (arg == "--metrics") {
      if (!value(options.metrics))
        return invalidArgument("--metrics needs a file");
    } else if (arg == "--trace") {
      if (!value(options.traceDir))
        return invalidArgument("--trace needs a directory");
    } else if (arg == "--time") {
      options.time = true;
    } else if (arg == "--check-plan") {
      options.checkPlan = true;
    } else if (arg == "--device") {
      if (!value(options.device))
        return invalidArgument("--device needs cpu or cuda");
      if (options.device != "cpu" && options.device != "cuda")
        return invalidArgument("--device expects cpu or cuda, got '" +
                               options.device + "'");
    } else if (arg == "--comm-timeout") {
      if (!value(text))
        return invalidArgument("--comm-timeout needs a number of seconds");
      char *end = nullptr;
      options.commTimeout = std::strtod(text.c_str(), &end);
      if (*end != '\0' || !(options.commTimeout > 0))
        return invalidArgument(
            "--comm-timeout expects a positive number of seconds, got '" +
            text + "'");
    } else if (arg == "--threads") {
      if (!value(text))
        return invalidArgument("--threads needs a number of threads");
      char *end = nullptr;
      long threads = std::strtol(text.c_str(), &end, 10);
      if (*end != '\0' || text.empty() || threads < 1 || threads > 1024)
        return invalidArgument(
            "--threads expects a number of threads from 1 to 1024, got '" +
            text + "'");
      options.threads = threads;
    } else if (arg == "--ps-dir" || arg == "--ps-join") {
      options.serverOptions = true;
      if (!value(options.server.dir))
        return invalidArgument(arg + " needs the job's directory");
      options.server.join = arg == "--ps-join";
    } else if (arg == "--ps-role") {
      options.serverOptions = true;
      if (!value(options.server.role) ||
          (options.server.role != "server" && options.server.role != "worker"))
        return invalidArgument("--ps-role expects server or worker");
    } else if (arg == "--ps-index" || arg == "--ps-checkpoint-every") {
      options.serverOptions = true;
      if (!value(text))
        return invalidArgument(arg + " needs a number");
      char *end = nullptr;
      errno = 0;
      long long number = std::strtoll(text.c_str(), &end, 10);
      if (*end != '\0' || text.empty() || errno == ERANGE || number < 0)
        return invalidArgument(arg + " expects a non-negative integer, got '" +
                               text + "'");
      (arg == "--ps-index" ? options.server.index
                           : options.server.checkpointEvery) = number;
    } else if (arg == "--hogwild") {
      if (!value(text))
        return invalidArgument("--hogwild needs a number of threads");
      char *end = nullptr;
      long threads = std::strtol(text.c_str(), &end, 10);
      if (*end != '\0' || text.empty() || threads < 1 || threads > 1024)
        return invalidArgument(
            "--hogwild expects a number of threads from 1 to 1024, got '" +
            text + "'");
      options.hogwild = threads;
    } else if (arg == "--locked") {
      options.locked = true;
    } else if (arg == "--ps-restore") {
      options.serverOptions = true;
      options.server.restore = true;
    } else if (arg == "--ps-timeout") {
      options.serverOptions = true;
      if (!value(text))
        return invalidArgument("--ps-timeout needs a number of seconds");
      char *end = nullptr;
      options.server.timeout = std::strtod(text.c_str(), &end);
      if (*end != '\0' || !(options.server.timeout > 0))
        return invalidArgument(
            "--ps-timeout expects a positive number of seconds, got '" + text +
            "'");
    } else if (arg == "--consistency") {
      options.serverOptions = true;
      if (!value(text))
        return invalidArgument("--consistency needs sync, async or ssp=K");
      Consistency consistency;
      if (Status parsed = parseConsistency(text, consistency); !parsed.ok())
        return parsed.withPrefix("--consistency ");
      options.server.consistency = consistency;
    } else if (arg == "--straggler") {
      options.serverOptions = true;
      if (!value(text))
        return invalidArgument("--straggler needs WORKER:MS");
      char *end = nullptr;
      long long worker = std::strtoll(text.c_str(), &end, 10);
      bool digits = end != text.c_str();
      long long ms =
          *end == ':' && end[1] != '\0' ? std::strtoll(end + 1, &end, 10) : -1;
      if (*end != '\0' || !digits || worker < 0 || ms < 0)
        return invalidArgument("--straggler expects WORKER:MS (a worker's "
                               "index and the milliseconds it waits each "
                               "step), got '" +
                               text + "'");
      options.server.stragglers[worker] = ms;
    } else if (arg == "--dump-losses") {
      if (!value(options.dumpLosses))
        return invalidArgument("--dump-losses needs a file");
    } else if (arg == "--dump-outputs") {
      if (!value(options.dumpOutputs))
        return invalidArgument("--dump-outputs needs a file");
    } else if (!arg.empty() && arg[0] == '-') {
      return invalidArgument("unknown option '" + arg + "'");
    } else if (options.plan.empty()) {
      options.plan = arg;
    } else {
      return invalidArgument("more than one plan given");
    }
  }
  if (options.plan.empty())
    return invalidArgument("no plan given");
  if (!options.weights.empty() && !options.loadWeights.empty())
    return invalidArgument("--weights and --load-weights both give the "
                           "parameters: give one");
  if (options.saveEvery > 0 && options.saveCheckpoint.empty())
    return invalidArgument("--save-every needs --save-checkpoint DIR");
  if (options.locked && options.hogwild == 0)
    return invalidArgument("--locked needs --hogwild THREADS");
  if (!options.data.empty() && !options.inputs.empty())
    return invalidArgument("--data and --inputs both give the step's data: "
                           "give one");
  return Status::success();
}

/// Prints a one-line summary of a global result.
void printResult(int64_t index, const Tensor &tensor) {
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

/// Fails unless every output the options name can be written: the
/// directories of --trace and --save-checkpoint are made (as the save would
/// make them) and must be writable, and each --dump-* file's directory must
/// exist and be writable. Checked before the first step, so that a mistyped
/// path does not cost the run.
Status checkOutputs(const Options &options) {
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

/// Runs --hogwild: a parameter-server plan's workers as threads.
int runHogwildThreads(const Expected<plan::Plan> &loaded,
                      const Options &options) {
  auto refuse = [](const std::string &message) {
    std::fprintf(stderr, "tessera-run: error: %s\n", message.c_str());
    return 2;
  };
  if (!loaded.ok())
    return refuse(loaded.message());
  if (!loaded->has_parameter_server())
    return refuse("--hogwild runs a parameter-server plan's workers as "
                  "threads, each applying its own SGD step: compile the "
                  "model with --train sgd --ps 1");
  HogwildOptions hogwild;
  hogwild.threads = options.hogwild;
  hogwild.locked = options.locked;
  hogwild.steps = options.steps;
  hogwild.seed = options.seed;
  hogwild.dumpLosses = options.dumpLosses;
  hogwild.metrics = options.metrics;
  return runHogwild(*loaded, hogwild);
}

/// Runs a parameter-server plan's job, or this process's part of it.
int runServerJob(const plan::Plan &plan, Options &options) {
  auto refuse = [](const std::string &message) {
    std::fprintf(stderr, "tessera-run: error: %s\n", message.c_str());
    return 2;
  };
  // One job per plan: a launcher's ranks would each start one.
  for (const char *variable :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "WORLD_SIZE"})
    if (const char *size = std::getenv(variable); size && std::atoi(size) > 1)
      return Job::isFirstProcess()
                 ? refuse("a parameter-server plan starts its own servers and "
                          "workers: start tessera-run once (or tessera run), "
                          "not on " +
                          std::string(size) + " ranks")
                 : 2;
  std::vector<std::string> unsupported;
  for (auto [flag, value] : {std::pair<const char *, const std::string *>{
                                 "--inputs", &options.inputs},
                             {"--weights", &options.weights},
                             {"--load-weights", &options.loadWeights},
                             {"--dump-inputs", &options.dumpInputs},
                             {"--dump-outputs", &options.dumpOutputs},
                             {"--save-checkpoint", &options.saveCheckpoint},
                             {"--load-checkpoint", &options.loadCheckpoint},
                             {"--metrics", &options.metrics},
                             {"--trace", &options.traceDir}})
    if (!value->empty())
      unsupported.push_back(flag);
  if (options.device != "cpu")
    unsupported.push_back("--device " + options.device);
  if (options.time)
    unsupported.push_back("--time");
  if (!unsupported.empty()) {
    std::string list;
    for (const std::string &flag : unsupported)
      list += (list.empty() ? "" : ", ") + flag;
    return refuse("a parameter-server plan's job does not take " + list +
                  " (its servers keep the parameters: --save-weights writes "
                  "them, --ps-checkpoint-every N checkpoints them)");
  }
  if (options.server.join && !std::filesystem::is_directory(options.server.dir))
    return refuse("--ps-join '" + options.server.dir +
                  "': no running job's directory");
  if (!options.server.role.empty() && options.server.index < 0)
    return refuse("--ps-role needs --ps-index");
  options.server.plan = options.plan;
  options.server.steps = options.steps;
  options.server.seed = options.seed;
  options.server.data = options.data;
  options.server.threads = options.threads;
  options.server.dumpLosses = options.dumpLosses;
  options.server.saveWeights = options.saveWeights;
  return runParameterServerJob(plan, options.server);
}

} // namespace

int main(int argc, char **argv) {
  // Help, bad options and a plan check need no MPI: they end before it
  // starts (and a plan check never depends on an MPI runtime).
  bool first = Job::isFirstProcess();
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-h") == 0) {
      if (first)
        std::printf("tessera-run: runs a plan's training steps on this "
                    "rank (start one per device of the plan, with mpirun, "
                    "tessera run, srun, or torchrun-style variables on "
                    "GPUs)\n%s",
                    kUsage);
      return 0;
    }
  Options options;
  if (Status parsed = parseOptions(argc, argv, options); !parsed.ok()) {
    if (first)
      std::fprintf(stderr, "tessera-run: error: %s\n%s",
                   parsed.message().c_str(), kUsage);
    return 2;
  }
  // The plan loads as every rank would load it; nothing runs.
  if (options.checkPlan) {
    if (!first)
      return 0;
    Expected<plan::Plan> loaded = loadPlan(options.plan);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tessera-run: error: %s\n",
                   loaded.message().c_str());
      return 1;
    }
    int64_t ranks = 0;
    for (const plan::Program &program : loaded->programs())
      ranks += program.ranks_size();
    std::printf("tessera-run: plan '%s' is valid: %lld ranks in %d "
                "program%s, %s\n",
                options.plan.c_str(), static_cast<long long>(ranks),
                loaded->programs_size(),
                loaded->programs_size() == 1 ? "" : "s",
                loaded->checksum() ? "its checksum matches"
                                   : "no checksum (written by hand)");
    return 0;
  }
  // A parameter-server plan runs as a job of its own processes, which meet
  // over ZeroMQ: no MPI.
  Expected<plan::Plan> loaded = loadPlan(options.plan);
  if (options.hogwild > 0)
    return runHogwildThreads(loaded, options);
  if (loaded.ok() && loaded->has_parameter_server())
    return runServerJob(loaded.take(), options);
  if (loaded.ok() && options.serverOptions) {
    if (first)
      std::fprintf(stderr,
                   "tessera-run: error: --ps-*, --consistency and "
                   "--straggler run a parameter-server plan's job, but "
                   "'%s' has no servers (compile it with --ps S)\n",
                   options.plan.c_str());
    return 2;
  }
  // Serialized: a progress thread tests collectives in flight while this
  // one computes (see MpiCommunicator).
  int threads = MPI_THREAD_SINGLE;
  if (Job::needsMpi())
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &threads);
  // Which launcher started this process, and, for torchrun-style
  // variables, the rendezvous of its ranks.
  Expected<Job> started = Job::start(options.commTimeout);
  if (!started.ok()) {
    std::fprintf(stderr, "tessera-run: error: %s\n", started.message().c_str());
    Job::finishMpi();
    return 2;
  }
  const Job job = started.take();
  int rank = job.getRank(), size = job.getSize();
  // Every rank reports its own failure, then ends the whole job so that no
  // rank waits forever in a collective.
  auto fail = [&](const std::string &message) {
    std::fprintf(stderr, "tessera-run: error: rank %d: %s\n", rank,
                 message.c_str());
    std::fflush(stderr);
    job.abort();
    return 1;
  };
  // The ranks that met without MPI have no MPI collectives: they run on
  // GPUs, over NCCL. Rank 0 says so once.
  if (job.getRendezvous() && options.device != "cuda") {
    if (rank == 0)
      std::fprintf(stderr,
                   "tessera-run: error: rank 0: the %d ranks met at "
                   "MASTER_ADDR:MASTER_PORT, but the CPU backend's "
                   "collectives run over MPI: start tessera-run with mpirun "
                   "(or tessera run, or srun --mpi=pmix); torchrun-style "
                   "variables start --device cuda only\n",
                   size);
    Job::finishMpi();
    return 2;
  }
  // Every rank checks the outputs it writes; all stop if one cannot, and
  // the first that cannot says why.
  Status outputs = checkOutputs(options);
  int failing = 0;
  int firstFailing = outputs.ok() ? size : rank;
  if (Status agreed =
          job.allReduceMin(firstFailing, failing, options.commTimeout,
                           "a rank stopped before checking its outputs");
      !agreed.ok()) {
    std::fprintf(stderr, "tessera-run: error: rank %d: %s\n", rank,
                 agreed.message().c_str());
    Job::finishMpi();
    return 2;
  }
  if (failing < size) {
    if (failing == rank)
      std::fprintf(stderr, "tessera-run: error: rank %d: %s\n", rank,
                   outputs.message().c_str());
    Job::finishMpi();
    return 2;
  }
  if (!loaded.ok())
    return fail(loaded.message());
  const plan::Plan plan = loaded.take();
  Mesh mesh = getMesh(plan);
  std::unique_ptr<Device> device;
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
  const plan::Program *program = getProgramOfRank(plan, rank);
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
  std::unique_ptr<Communicator> communicator = created.take();
  if (!program)
    return fail("the plan has no program for this rank");
  if (options.device == "cpu")
    setKernelThreads(options.threads > 0
                         ? options.threads
                         : getDefaultKernelThreads(
                               job.getLocalSize(),
                               overlaps && threads >= MPI_THREAD_SERIALIZED));
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

  // The step's inputs by their index in the step as written (pipeline
  // stages read a part; a unit's flat buffer holds several): generated, or
  // read from --inputs. Each argument's global tensor is its own or its
  // members' packed.
  bool pipelined = plan.programs_size() > 1;
  if (pipelined && !options.dumpInputs.empty())
    return fail("--dump-inputs needs a plan of one program (this one has a "
                "program per pipeline stage)");
  std::vector<std::vector<std::pair<int64_t, plan::Argument>>> stepTensors;
  int64_t needed = 0;
  for (int i = 0; i < program->arguments_size(); ++i) {
    stepTensors.push_back(getStepTensors(program->arguments(i), i));
    for (const auto &[source, tensor] : stepTensors.back())
      needed = std::max(needed, source + 1);
  }
  // Every step tensor's role, over every stage's program: --weights holds
  // the parameters in the order of their indices in the step, and with it
  // --inputs may hold the data arguments alone (optimizer state starts at
  // zero, the step counter is the runtime's).
  std::map<int64_t, plan::ArgumentRole> roles;
  for (const plan::Program &each : plan.programs())
    for (int i = 0; i < each.arguments_size(); ++i)
      for (const auto &[source, tensor] : getStepTensors(each.arguments(i), i))
        roles.emplace(source, tensor.role());
  std::map<int64_t, int64_t> weightOf, dataOf; // step index -> file tensor
  for (const auto &[source, role] : roles) {
    if (role == plan::PARAM && !options.weights.empty())
      weightOf.emplace(source, weightOf.size());
    if (role == plan::DATA)
      dataOf.emplace(source, dataOf.size());
  }
  // A weight stash starts as its parameter: by step index, the parameter's.
  std::map<int64_t, int64_t> stashOf;
  for (const plan::Program &each : plan.programs())
    for (int i = 0; i < each.arguments_size(); ++i)
      for (const auto &[source, tensor] : getStepTensors(each.arguments(i), i))
        if (tensor.role() == plan::WEIGHT_STASH)
          stashOf.emplace(source, tensor.version_of_source());
  std::vector<OwnedTensor> weights;
  if (!options.weights.empty()) {
    Expected<std::vector<OwnedTensor>> read = readTensors(options.weights);
    if (!read.ok())
      return fail(read.message());
    weights = read.take();
    if (weights.size() != weightOf.size())
      return fail("'" + options.weights + "' holds " +
                  std::to_string(weights.size()) + " tensors, the plan has " +
                  std::to_string(weightOf.size()) + " parameters");
  }
  for (const auto &[stash, param] : stashOf)
    if (auto weight = weightOf.find(param); weight != weightOf.end())
      weightOf.emplace(stash, weight->second);
  // --load-weights: the parameters by name from a safetensors file, each
  // checked against the step's parameter of that name; every mismatch is
  // reported at once.
  std::optional<SafetensorsCheckpoint> safetensors;
  std::map<int64_t, const SafetensorsFile::Entry *> entryOf;
  if (!options.loadWeights.empty()) {
    Expected<SafetensorsCheckpoint> opened =
        openSafetensorsCheckpoint(options.loadWeights);
    if (!opened.ok())
      return fail(opened.message());
    safetensors.emplace(opened.take());
    std::map<std::string, std::pair<int64_t, plan::Argument>> params;
    for (const plan::Program &each : plan.programs())
      for (int i = 0; i < each.arguments_size(); ++i)
        for (const auto &[source, tensor] :
             getStepTensors(each.arguments(i), i))
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
  }
  std::vector<OwnedTensor> inputs(needed), data;
  bool dataOnly = false;
  if (!options.inputs.empty()) {
    Expected<std::vector<OwnedTensor>> read = readTensors(options.inputs);
    if (!read.ok())
      return fail(read.message());
    data = read.take();
    dataOnly = !options.weights.empty() && data.size() == dataOf.size() &&
               dataOf.size() != roles.size();
    bool fits =
        dataOnly || (pipelined ? static_cast<int64_t>(data.size()) >= needed
                               : static_cast<int64_t>(data.size()) == needed);
    if (!fits)
      return fail("'" + options.inputs + "' holds " +
                  std::to_string(data.size()) + " tensors, the plan takes " +
                  std::to_string(needed) + " arguments" +
                  (options.weights.empty()
                       ? std::string()
                       : " (or its " + std::to_string(dataOf.size()) +
                             " data arguments, with --weights)"));
    if (!dataOnly)
      inputs = std::move(data);
  }
  std::vector<OwnedTensor> locals;
  for (int i = 0; i < program->arguments_size(); ++i) {
    const plan::Argument &argument = program->arguments(i);
    std::vector<const Tensor *> held;
    std::vector<Tensor> mapped; // views of --load-weights' tensors
    mapped.reserve(stepTensors[i].size());
    std::optional<OwnedTensor> convertedPiece;
    for (const auto &[source, tensor] : stepTensors[i]) {
      // A parameter of --load-weights: read in place where it has the
      // parameter's dtype (only the piece is copied), else converted: only
      // the piece, unless it is a unit's member (or --dump-inputs wants it).
      if (auto entry = entryOf.find(source); entry != entryOf.end()) {
        Tensor view = safetensors->view(*entry->second);
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
                          .withPrefix("'" + options.loadWeights +
                                      "': tensor '" + tensor.name() + "': ")
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
      if (auto weight = weightOf.find(source); weight != weightOf.end()) {
        inputs[source] = weights[weight->second];
        file = &options.weights;
      } else if (dataOnly && dataOf.count(source)) {
        inputs[source] = std::move(data[dataOf[source]]);
        file = &options.inputs;
      } else if (options.inputs.empty() || dataOnly) {
        inputs[source] = makeGlobalInput(tensor, options.seed, source);
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
      continue;
    }
    OwnedTensor packed;
    if (!argument.members().empty())
      packed = packMembers(argument, held, mesh);
    locals.push_back(
        takeLocalPiece(argument.members().empty() ? *held.front() : packed.view,
                       getLayout(argument), mesh, rank));
  }

  if (rank == 0 && !options.dumpInputs.empty())
    if (Status status = writeTensors(options.dumpInputs, inputs); !status.ok())
      return fail(status.message());

  Executor executor(*program, mesh, *communicator, device.get());
  executor.setTracing(!options.traceDir.empty());
  std::vector<OwnedTensor> results;
  int lossResult = getLossResult(*program);
  // The new parameters and optimizer state of each step stay on the device
  // as the next step's arguments.
  executor.setCarryUpdates(true);
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
  std::vector<double> losses, stepSeconds;
  int64_t firstStep = 0;
  // --time reports how long the checkpoint took, as seen by rank 0.
  auto secondsSince = [](std::chrono::steady_clock::time_point begin) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         begin)
        .count();
  };
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
    if (Status status = executor.run(
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
      for (int i = 0; i < program->results_size(); ++i)
        if (program->results(i).has_updates_argument())
          locals[program->results(i).updates_argument()] = results[i];
      if (Status status =
              saveCheckpoint(options.saveCheckpoint, *program, mesh, locals,
                             job, step, options.commTimeout);
          !status.ok())
        return fail(status.message());
    }
  }
  // A pipeline without a flush finishes the last step's backwards and
  // updates now.
  if (executor.hasDeferredWork())
    if (Status status = executor.drain(results); !status.ok())
      return fail("after the last step: " + status.message());
  // The last step's updates are the new arguments (a checkpoint saves them).
  for (int i = 0; i < program->results_size(); ++i)
    if (program->results(i).has_updates_argument())
      locals[program->results(i).updates_argument()] = results[i];
  if (options.time && rank == 0) {
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
  if (!options.traceDir.empty()) {
    std::string path =
        options.traceDir + "/rank" + std::to_string(rank) + ".json";
    std::ofstream file(path);
    executor.writeTrace(file, rank);
    if (!file)
      return fail("cannot write the trace '" + path + "'");
    // And one trace of every rank, which rank 0 writes: a process per rank,
    // the transfers' arrows between them.
    std::ostringstream events;
    executor.writeTraceEvents(events, rank);
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
  }
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
  // Rank 0 learns every rank's losses and result pieces: the loss is on the
  // last pipeline stage, and each result on the ranks of its program. The
  // new parameters and optimizer state (results that update an argument)
  // come only where they are written out: they are the size of the model on
  // every rank.
  bool allResults =
      !options.saveWeights.empty() || !options.dumpOutputs.empty();
  auto isGathered = [&](const plan::Result &result) {
    return allResults || !result.has_updates_argument();
  };
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
  if (rank != 0) {
    communicator.reset();
    Job::finishMpi();
    return 0;
  }
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
  std::map<int64_t, OwnedTensor> globalResults;
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
  communicator.reset();
  Job::finishMpi();
  return 0;
}
