//===- Calibrate.cpp - tessera calibrate ----------------------------------===//

#include "Commands.h"

#include "tessera/Analysis/MachineModel.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::calibrateCommand() {
  static cl::SubCommand command(
      "calibrate", "Fit a machine file from runtime microbenchmarks on N "
                   "local ranks (GEMMs, memory bandwidth, all_reduce over "
                   "sizes)");
  return command;
}

static cl::opt<std::string> calibrateOutput("o", cl::desc("Machine file"),
                                            cl::value_desc("file"),
                                            cl::Required,
                                            cl::sub(calibrateCommand()));
static cl::opt<int64_t> calibrateRanks("ranks", cl::desc("Ranks to measure"),
                                       cl::init(2),
                                       cl::sub(calibrateCommand()));
static cl::opt<bool> calibrateQuick("quick",
                                    cl::desc("Smaller sizes, fewer repeats"),
                                    cl::sub(calibrateCommand()));

int cli::runCalibrate() {
  std::vector<std::string> args = {calibrateOutput};
  if (calibrateQuick)
    args.push_back("--quick");
  llvm::Expected<int> code =
      getLauncher().run(calibrateRanks, args, "tessera-calibrate");
  if (!code)
    return reportError(code.takeError());
  if (*code != 0)
    return 1;
  // The file must read back as a machine.
  llvm::Expected<MachineModel> machine =
      loadMachineModel(calibrateOutput, getMachinesDir());
  if (!machine)
    return reportError(machine.takeError());
  return 0;
}
