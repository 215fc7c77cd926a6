//===- Commands.h - The subcommands of the tessera CLI ----------*- C++ -*-===//
//
// Each subcommand lives in its own file: its options, and a run function
// that reads them and calls the driver (tessera/Pipelines/Driver.h) or the
// planner.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERA_COMMANDS_H
#define TESSERA_TOOLS_TESSERA_COMMANDS_H

#include "tessera/Pipelines/Driver.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"

namespace tessera::cli {

// The subcommands, made on first use: options in other files name them.
llvm::cl::SubCommand &modelCommand();
llvm::cl::SubCommand &statsCommand();
llvm::cl::SubCommand &importCommand();
llvm::cl::SubCommand &compileCommand();
llvm::cl::SubCommand &verifyCommand();
llvm::cl::SubCommand &runCommand();
llvm::cl::SubCommand &gradcheckCommand();
llvm::cl::SubCommand &planCommand();
llvm::cl::SubCommand &calibrateCommand();
llvm::cl::SubCommand &dataCommand();
llvm::cl::SubCommand &reportCommand();

int runModel(mlir::MLIRContext &context);
int runStats(mlir::MLIRContext &context);
int runImport(mlir::MLIRContext &context);
int runCompile(mlir::MLIRContext &context);
int runVerify(mlir::MLIRContext &context);
int runRun();
int runGradcheck(mlir::MLIRContext &context);
int runPlan(mlir::MLIRContext &context);
int runCalibrate();
int runData();
int runReport();

/// Every floating option of the CLI: NaN and the infinities are refused
/// where the value is parsed (tessera::parseFiniteDouble), naming the option
/// and the value.
using FiniteDoubleOption =
    llvm::cl::opt<double, /*ExternalStorage=*/false, FiniteDoubleParser>;

/// The options compile and verify share, as the compile pipeline's.
void readCompileOptions(CompileOptions &options);
/// Whether the user allows the plan search an asynchronous schedule
/// (--allow-async, of tessera plan and compile --auto).
bool getAllowAsync();
/// The model file compile or verify reads.
llvm::StringRef getModelInput();

/// Prints "tessera: error: ..." (nothing for a DiagnosedError, whose
/// diagnostics are out already) and returns the exit code 1.
int reportError(llvm::Error error);
int reportError(const llvm::Twine &message);

/// Starts tessera-run and tessera-calibrate from this binary's directory.
const Launcher &getLauncher();

/// 174615846912 -> "174.6B".
std::string formatCount(int64_t count);

} // namespace tessera::cli

#endif // TESSERA_TOOLS_TESSERA_COMMANDS_H
