//===- Run.cpp - tessera run ----------------------------------------------===//

#include "Commands.h"

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

int cli::runRun() {
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
  if (!weightsFile.empty()) {
    args.push_back("--weights");
    args.push_back(weightsFile);
  }
  llvm::Expected<int> code = getLauncher().run(ranks, args);
  if (!code)
    return reportError(code.takeError());
  return *code == 0 ? 0 : 1;
}
