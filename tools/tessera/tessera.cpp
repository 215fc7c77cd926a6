//===- tessera.cpp - The Tessera command-line interface -------------------===//
//
// tessera model gpt|llama|mlp ...  emit a model in nn IR         (Model.cpp)
// tessera stats FILE                parameters, ops and FLOPs      (Stats.cpp)
// tessera import MODEL.onnx         an ONNX model as nn IR        (Import.cpp)
// tessera compile FILE ...          shard, partition, export     (Compile.cpp)
// tessera verify FILE ...           sharded plan vs one device    (Verify.cpp)
// tessera run PLAN --ranks N        run a plan on N local ranks      (Run.cpp)
// tessera gradcheck FILE            autodiff vs finite differences
//                                                              (Gradcheck.cpp)
// tessera plan FILE ...             search the DP/TP/PP plan        (Plan.cpp)
// tessera calibrate -o FILE         fit a machine file         (Calibrate.cpp)
// tessera data pack TEXT -o FILE    a token file                    (Data.cpp)
// tessera report PLAN -o FILE       the plan as an HTML page      (Report.cpp)
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "Version.h"

#include "tessera/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;

static std::string mainExecutable;

int cli::reportError(llvm::Error error) {
  llvm::handleAllErrors(
      std::move(error), [](const DiagnosedError &) {},
      [](const llvm::ErrorInfoBase &info) {
        llvm::errs() << "tessera: error: " << info.message() << "\n";
      });
  return 1;
}

int cli::reportError(const llvm::Twine &message) {
  return reportError(llvm::createStringError(message.str()));
}

const Launcher &cli::getLauncher() {
  static Launcher launcher{llvm::sys::path::parent_path(mainExecutable).str()};
  return launcher;
}

std::string cli::formatCount(int64_t count) {
  if (count >= 1000000000)
    return llvm::formatv("{0:f1}B", count / 1e9).str();
  if (count >= 1000000)
    return llvm::formatv("{0:f1}M", count / 1e6).str();
  if (count >= 1000)
    return llvm::formatv("{0:f1}K", count / 1e3).str();
  return std::to_string(count);
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mainExecutable = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&formatCount));
  // Every subcommand exists before the options are parsed.
  for (llvm::cl::SubCommand *command :
       {&modelCommand(), &statsCommand(), &importCommand(), &compileCommand(),
        &verifyCommand(), &runCommand(), &gradcheckCommand(), &planCommand(),
        &calibrateCommand(), &dataCommand(), &reportCommand()})
    (void)command;
  // The top level's help lists the subcommands; LLVM's own options, which
  // libLLVM registers there, still parse but stay out of it.
  for (auto &entry :
       llvm::cl::getRegisteredOptions(llvm::cl::SubCommand::getTopLevel()))
    if (!llvm::is_contained({"help", "version"}, entry.first))
      entry.second->setHiddenFlag(llvm::cl::ReallyHidden);
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "Tessera " << TESSERA_VERSION << " (git " << TESSERA_GIT_COMMIT
       << ")\nLLVM and MLIR " << LLVM_VERSION_STRING << "\n";
  });
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "Tessera: a declarative auto-sharding compiler for neural-network "
      "training\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  // A diagnostic points at the user's source line; a dump of the op as the
  // passes left it helps no one who runs the CLI.
  context.printOpOnDiagnostic(false);
  if (modelCommand())
    return runModel(context);
  if (statsCommand())
    return runStats(context);
  if (importCommand())
    return runImport(context);
  if (compileCommand())
    return runCompile(context);
  if (verifyCommand())
    return runVerify(context);
  if (runCommand())
    return runRun();
  if (gradcheckCommand())
    return runGradcheck(context);
  if (planCommand())
    return runPlan(context);
  if (calibrateCommand())
    return runCalibrate();
  if (dataCommand())
    return runData();
  if (reportCommand())
    return runReport();
  llvm::errs()
      << "tessera: error: expected a subcommand: model, stats, "
         "import, compile, verify, run, gradcheck, plan, calibrate, data or "
         "report "
         "(see "
         "--help)\n";
  return 1;
}
