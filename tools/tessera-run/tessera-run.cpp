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
// rank's pieces of the parameters and optimizer state, named, and the step
// reached, the whole under checksums that a load checks; it is swapped in
// whole (at the end, and every --save-every steps), loading it on the same
// plan resumes bit for bit, and on another plan reshards it. --load-weights and --save-weights
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
// This file parses the options and starts the job; the training is the
// training runtime's (Trainer.h, and ParameterServer.h and Hogwild.h for
// those plans).
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/ps/ParameterServer.h"
#include "tessera/runtime/training/Hogwild.h"
#include "tessera/runtime/training/Job.h"
#include "tessera/runtime/training/Trainer.h"

#include "tessera/runtime/Plan.h"

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

using namespace tessera;
using namespace tessera::runtime;

namespace {

/// The training's options (TrainerOptions), and how this process starts.
struct Options : TrainerOptions {
  std::string plan;
  /// Only load the plan (validated, its manifest and checksum checked).
  bool checkPlan = false;
  /// A parameter-server plan's job (ParameterServer.h).
  ServerJobOptions server;
  /// Whether any option of a parameter-server plan's job was given.
  bool serverOptions = false;
  /// --hogwild THREADS [--locked] (Hogwild.h); 0: no Hogwild.
  int hogwild = 0;
  bool locked = false;
  /// Every option given ("--data"), once each, in the order given: a mode
  /// that does not take one refuses it (refuseOptionsNotTaken).
  std::vector<std::string> given;
};

/// The longest timeout (--comm-timeout, --ps-timeout): a week. A deadline
/// further off never comes, and far enough off it overflows the clock's
/// ticks.
constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600;

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

/// Reads `text`, the value of the option `flag`, as a timeout: a number of
/// seconds above 0 and at most kMaxTimeoutSeconds. strtod reads "nan" and
/// "inf" (and makes an infinity of a number too large): they are refused
/// with the rest, in one error naming the option and the value.
Status parseTimeout(const std::string &flag, const std::string &text,
                    double &seconds) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value > 0) ||
      !(value <= kMaxTimeoutSeconds))
    return invalidArgument(
        flag + " expects a positive number of seconds, at most " +
        std::to_string(static_cast<int64_t>(kMaxTimeoutSeconds)) +
        " (a week), got '" + text + "'");
  seconds = value;
  return Status::success();
}

/// Parses the command line.
Status parseOptions(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0 &&
        std::find(options.given.begin(), options.given.end(), arg) ==
            options.given.end())
      options.given.push_back(arg);
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
      if (Status parsed = parseTimeout(arg, text, options.commTimeout);
          !parsed.ok())
        return parsed;
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
      if (Status parsed = parseTimeout(arg, text, options.server.timeout);
          !parsed.ok())
        return parsed;
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
      errno = 0;
      long long worker = std::strtoll(text.c_str(), &end, 10);
      bool digits = end != text.c_str();
      long long ms =
          *end == ':' && end[1] != '\0' ? std::strtoll(end + 1, &end, 10) : -1;
      // Out of range, strtoll gives its largest value, which names no
      // worker and no delay: refused here rather than as another number.
      if (*end != '\0' || !digits || errno == ERANGE || worker < 0 || ms < 0)
        return invalidArgument("--straggler expects WORKER:MS (a worker's "
                               "index and the milliseconds it waits each "
                               "step), got '" +
                               text + "'");
      // The plan's workers and the longest delay: checkServerJobOptions.
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

/// "a, b and c".
std::string joinWithAnd(const std::vector<std::string> &items) {
  std::string joined;
  for (size_t i = 0; i < items.size(); ++i)
    joined += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return joined;
}

/// Refuses the options given that `mode` does not take, all named in one
/// error with `why` and the options it takes: a mode that ignored one would
/// run otherwise than asked. `taken` lists the options the mode reads;
/// `--device cpu` is taken too, since the modes that call this run on the
/// CPU.
Status refuseOptionsNotTaken(const Options &options, const std::string &mode,
                             const std::vector<std::string> &taken,
                             const std::string &why) {
  std::vector<std::string> refused;
  for (const std::string &flag : options.given) {
    if (std::find(taken.begin(), taken.end(), flag) != taken.end() ||
        (flag == "--device" && options.device == "cpu"))
      continue;
    refused.push_back(flag == "--device" ? flag + " " + options.device : flag);
  }
  if (refused.empty())
    return Status::success();
  return invalidArgument(mode + " does not take " + joinWithAnd(refused) +
                         " (" + why + "; it takes " + joinWithAnd(taken) + ")");
}

/// Runs --hogwild: a parameter-server plan's workers as threads.
int runHogwildThreads(const Expected<plan::Plan> &loaded,
                      const Options &options) {
  auto refuse = [](const std::string &message) {
    std::fprintf(stderr, "tessera-run: error: %s\n", message.c_str());
    return 2;
  };
  if (Status taken = refuseOptionsNotTaken(
          options, "--hogwild",
          {"--hogwild", "--locked", "--steps", "--seed", "--dump-losses",
           "--metrics"},
          "its threads train on generated batches and share the parameters "
          "in memory");
      !taken.ok())
    return refuse(taken.message());
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
  if (Status taken = refuseOptionsNotTaken(
          options, "a parameter-server plan's job",
          {"--steps", "--seed", "--data", "--dump-losses", "--save-weights",
           "--threads", "--ps-dir", "--ps-join", "--ps-role", "--ps-index",
           "--ps-restore", "--ps-timeout", "--ps-checkpoint-every",
           "--consistency", "--straggler"},
          "its servers keep the parameters: --save-weights writes them, "
          "--ps-checkpoint-every N checkpoints them");
      !taken.ok())
    return refuse(taken.message());
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
  Status outputs = checkTrainerOutputs(options);
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
  {
    Trainer trainer(plan, job, options, threads >= MPI_THREAD_SERIALIZED);
    if (Status status = trainer.run(); !status.ok())
      return fail(status.message());
  }
  Job::finishMpi();
  return 0;
}
