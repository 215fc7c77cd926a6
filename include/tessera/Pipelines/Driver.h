//===- Driver.h - What the tessera CLI runs ---------------------*- C++ -*-===//
//
// The work behind `tessera compile`, `verify`, `run` and `gradcheck`: the CLI
// parses arguments into CompileOptions and the options below, and calls
// these.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINES_DRIVER_H
#define TESSERA_PIPELINES_DRIVER_H

#include "tessera/Pipelines/CompileOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/SourceMgr.h"

namespace tessera {

/// A failure already reported as MLIR diagnostics: callers print nothing
/// more.
class DiagnosedError : public llvm::ErrorInfo<DiagnosedError> {
public:
  static char ID;
  void log(llvm::raw_ostream &os) const override {
    os << "reported as diagnostics";
  }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
};

/// Prints diagnostics at their source lines, as mlir's SourceMgr handler
/// does, but a line too long to read (a function's signature, which the
/// printer writes on one line: several KB for a GPT) as an excerpt around
/// the column instead.
class ModelDiagnosticHandler : public mlir::SourceMgrDiagnosticHandler {
public:
  ModelDiagnosticHandler(llvm::SourceMgr &sourceMgr,
                         mlir::MLIRContext *context);

private:
  void emit(mlir::Diagnostic &diagnostic);
  void emitOne(mlir::Location loc, const llvm::Twine &message,
               mlir::DiagnosticSeverity severity);
  /// The excerpt of `loc`'s source line around its column, if the line is
  /// too long to show whole.
  std::optional<std::string> getExcerpt(mlir::Location loc);
};

/// A model parsed from a file, with the handler that prints the module's
/// diagnostics at their source lines for as long as it lives.
struct ModelFile {
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<ModelDiagnosticHandler> handler;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

/// Parses the model at `path`: nn IR, or an ONNX model (`.onnx`, imported
/// with static shapes; `tessera import --input-shape` gives dynamic ones).
llvm::Expected<std::unique_ptr<ModelFile>>
loadModelFile(mlir::MLIRContext &context, llvm::StringRef path);

/// Runs the pipeline `build` adds on `module`.
llvm::Error runPipeline(mlir::ModuleOp module,
                        llvm::function_ref<void(mlir::OpPassManager &)> build);

/// Compiles `module` with `options` into the plan file options.output
/// (buildCompilePipeline). For parameter-server training (--ps) it compiles
/// the workers' and the servers' programs, each from a copy of the train
/// step, and writes them as one plan.
llvm::Error compilePlan(mlir::ModuleOp module, const CompileOptions &options);

/// Starts Tessera's per-rank programs (tessera-run, tessera-calibrate) on
/// local ranks through mpirun.
struct Launcher {
  /// The directory of tessera-run and tessera-calibrate.
  std::string toolsDir;

  /// Runs `runner` on `ranks` ranks with `args` and returns its exit code;
  /// fails when mpirun cannot start.
  llvm::Expected<int> run(int64_t ranks, llvm::ArrayRef<std::string> args,
                          llvm::StringRef runner = "tessera-run") const;
};

/// Prints what `tessera compile` reports of the plan it wrote to `path`:
/// instructions, collectives, the arena, peak memory by category, and for a
/// train step the model state ZeRO's closed form predicts.
llvm::Error printPlanSummary(llvm::StringRef path,
                             const CompileOptions &options,
                             llvm::raw_ostream &os);

/// Checks the plan in `path` as the runtime loads it (runtime::loadPlan:
/// validated, its collective manifest checked).
llvm::Error checkPlanFile(llvm::StringRef path);

/// Prints the collective manifest of the plan in `path` (which loading has
/// checked, runtime::checkManifest): per program, its ranks and each
/// collective and transfer of a step in the order a run issues them, with
/// the schedule entry (unit and microbatch) that runs it and a collective's
/// group size.
llvm::Error printManifest(llvm::StringRef path, llvm::raw_ostream &os);

struct VerifyOptions {
  int64_t steps = 1;
  int64_t seed = 0;
  /// Largest relative error per result (per step's loss when training).
  double tolerance = 1e-5;
  /// Where the sharded run runs (the reference stays on the CPU).
  std::string device = "cpu";
};

/// Compiles `model` with `options` (its output ignored) and as one device,
/// runs both on the same seeded inputs and compares every result (every
/// step's loss when training), printing the comparison to `os`. Returns
/// whether they agree within the tolerance.
llvm::Expected<bool> verifyModel(mlir::ModuleOp model, llvm::StringRef name,
                                 const CompileOptions &options,
                                 const VerifyOptions &verify,
                                 const Launcher &launcher,
                                 llvm::raw_ostream &os);

struct GradcheckOptions {
  int64_t seed = 0;
  /// Elements checked per parameter.
  int64_t samples = 8;
  /// The finite-difference step.
  double epsilon = 1e-2;
  /// Largest error, relative to max(|g|, |fd|, 0.01).
  double tolerance = 3e-2;
};

/// Checks the gradients autodiff gives `model`'s loss against central finite
/// differences, in process, printing each parameter's worst error to `os`.
/// Returns whether every one is within the tolerance.
llvm::Expected<bool> gradcheckModel(mlir::ModuleOp model, llvm::StringRef name,
                                    const GradcheckOptions &gradcheck,
                                    llvm::raw_ostream &os);

} // namespace tessera

#endif // TESSERA_PIPELINES_DRIVER_H
