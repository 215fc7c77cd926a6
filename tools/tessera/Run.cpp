//===- Run.cpp - tessera run ----------------------------------------------===//

#include "Commands.h"

#include "tessera/runtime/Plan.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::runCommand() {
  static cl::SubCommand command("run", "Run a plan on N local ranks (mpirun)");
  return command;
}

static cl::opt<std::string> planInput(cl::Positional, cl::Required,
                                      cl::desc("<model.plan>"),
                                      cl::sub(runCommand()));
static cl::opt<int64_t> ranks("ranks", cl::desc("Number of ranks"),
                              cl::Required, cl::sub(runCommand()));
static cl::opt<int64_t> steps("steps", cl::desc("Steps to run"), cl::init(1),
                              cl::sub(runCommand()));
static cl::opt<int64_t> seed("seed", cl::desc("Seed of the generated inputs"),
                             cl::init(0), cl::sub(runCommand()));
static cl::opt<std::string> inputsFile("inputs",
                                       cl::desc("Global inputs (tensor file)"),
                                       cl::sub(runCommand()));
static cl::opt<std::string> weightsFile(
    "weights",
    cl::desc("The parameters' values, one tensor per parameter in the step's "
             "order (tessera import --weights-out)"),
    cl::sub(runCommand()));
static cl::opt<std::string>
    device("device",
           cl::desc("Where the run runs: cpu, or cuda (a GPU per rank, NCCL "
                    "collectives)"),
           cl::init("cpu"), cl::sub(runCommand()));

/// More of tessera-run's options, forwarded as given.
static cl::opt<std::string>
    traceDir("trace",
             cl::desc("Write each rank's trace (Chrome JSON) into DIR"),
             cl::value_desc("DIR"), cl::sub(runCommand()));
static cl::opt<std::string>
    saveCheckpoint("save-checkpoint",
                   cl::desc("Save the parameters and state into DIR"),
                   cl::value_desc("DIR"), cl::sub(runCommand()));
static cl::opt<std::string> loadCheckpoint(
    "load-checkpoint",
    cl::desc("Resume from the checkpoint in DIR (saved under any plan of the "
             "model)"),
    cl::value_desc("DIR"), cl::sub(runCommand()));
static cl::opt<std::string>
    dumpInputs("dump-inputs", cl::desc("Write the global inputs to FILE"),
               cl::value_desc("FILE"), cl::sub(runCommand()));
static cl::opt<std::string>
    dumpOutputs("dump-outputs", cl::desc("Write the global results to FILE"),
                cl::value_desc("FILE"), cl::sub(runCommand()));
static cl::opt<std::string>
    dumpLosses("dump-losses", cl::desc("Write each step's loss to FILE"),
               cl::value_desc("FILE"), cl::sub(runCommand()));
static cl::opt<std::string> commTimeout(
    "comm-timeout",
    cl::desc("Seconds a rank waits for a collective before it reports it and "
             "stops the run"),
    cl::value_desc("SECONDS"), cl::sub(runCommand()));
static cl::opt<std::string>
    kernelThreads("threads",
                  cl::desc("Threads of each rank's CPU kernels (default: the "
                           "cores it may use)"),
                  cl::value_desc("N"), cl::sub(runCommand()));
static cl::opt<bool> timeSteps("time", cl::desc("Print the time per step"),
                               cl::sub(runCommand()));
static cl::opt<std::string>
    dataFile("data",
             cl::desc("Train on a token file (tessera data pack): each "
                      "step's tokens and labels are its next batch"),
             cl::value_desc("FILE"), cl::sub(runCommand()));
static cl::opt<std::string>
    loadWeights("load-weights",
                cl::desc("The parameters from a safetensors file (or a sharded "
                         "checkpoint's .index.json), by their names"),
                cl::value_desc("FILE"), cl::sub(runCommand()));
static cl::opt<std::string> saveWeights(
    "save-weights",
    cl::desc(
        "Write the parameters as safetensors (NAME.safetensors.index.json: "
        "sharded, as Hugging Face shards)"),
    cl::value_desc("FILE"), cl::sub(runCommand()));
static cl::opt<std::string>
    shardBytes("shard-bytes",
               cl::desc("With --save-weights NAME.safetensors.index.json: "
                        "the bytes of a shard (default 5 GB)"),
               cl::value_desc("B"), cl::sub(runCommand()));
static cl::opt<std::string>
    metricsFile("metrics",
                cl::desc("Write each step's loss, learning rate, metrics, "
                         "tokens/s and times to FILE as JSON lines"),
                cl::value_desc("FILE"), cl::sub(runCommand()));
static cl::opt<std::string>
    saveEvery("save-every",
              cl::desc("With --save-checkpoint: also save every N steps"),
              cl::value_desc("N"), cl::sub(runCommand()));

int cli::runRun() {
  // tessera-run would refuse them too, but from inside mpirun's output.
  if (steps < 1 || steps > runtime::kMaxSteps)
    return reportError("--steps must be from 1 to " +
                       Twine(runtime::kMaxSteps) + ", got " + Twine(steps));
  if (seed < 0)
    return reportError("--seed must be at least 0, got " + Twine(seed));
  std::vector<std::string> args = {planInput,
                                   "--steps",
                                   std::to_string(steps),
                                   "--seed",
                                   std::to_string(seed),
                                   "--device",
                                   device};
  for (const cl::opt<std::string> *option :
       {&inputsFile, &weightsFile, &traceDir, &saveCheckpoint, &loadCheckpoint,
        &dumpInputs, &dumpOutputs, &dumpLosses, &commTimeout, &kernelThreads,
        &dataFile, &loadWeights, &saveWeights, &shardBytes, &metricsFile,
        &saveEvery})
    if (option->getNumOccurrences()) {
      args.push_back(("--" + option->ArgStr).str());
      args.push_back(option->getValue());
    }
  if (timeSteps)
    args.push_back("--time");
  // A parameter-server plan's job starts its workers and servers itself.
  int64_t processes = ranks;
  if (runtime::Expected<plan::Plan> plan = runtime::loadPlan(planInput);
      plan.ok() && plan->has_parameter_server()) {
    int64_t workers = runtime::getMesh(*plan).getNumDevices();
    int64_t servers =
        runtime::getMesh(plan->parameter_server().servers()).getNumDevices();
    if (ranks != workers + servers)
      return reportError("the parameter-server plan runs " + Twine(workers) +
                         " workers and " + Twine(servers) +
                         " servers: --ranks " + Twine(workers + servers) +
                         ", got " + Twine(ranks));
    processes = 1;
  }
  llvm::Expected<int> code = getLauncher().run(processes, args);
  if (!code)
    return reportError(code.takeError());
  return *code == 0 ? 0 : 1;
}
