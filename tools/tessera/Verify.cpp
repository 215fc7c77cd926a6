//===- Verify.cpp - tessera verify ----------------------------------------===//

#include "Commands.h"

#include "tessera/runtime/Plan.h"

#include "tessera/Pipelines/Pipelines.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

static FiniteDoubleOption tolerance(
    "tolerance",
    cl::desc("Largest relative error per result (per step's loss when "
             "training)"),
    cl::init(1e-5), cl::sub(verifyCommand()));
static cl::opt<int64_t> steps("steps", cl::desc("Steps to run"), cl::init(1),
                              cl::sub(verifyCommand()));
static cl::opt<int64_t> seed("seed", cl::desc("Seed of the generated inputs"),
                             cl::init(0), cl::sub(verifyCommand()));
static cl::opt<std::string>
    device("device",
           cl::desc("Where the sharded run runs (the reference stays on the "
                    "CPU): cpu, or cuda (a GPU per rank, NCCL collectives)"),
           cl::init("cpu"), cl::sub(verifyCommand()));

int cli::runVerify(MLIRContext &context) {
  CompileOptions options;
  readCompileOptions(options);
  if (std::string error = checkCompileOptions(options); !error.empty())
    return reportError(error);
  // Checked before any work: tessera-run would refuse the first two only
  // from inside mpirun's output, and every error passes a NaN tolerance.
  if (steps < 1 || steps > runtime::kMaxSteps)
    return reportError("--steps must be from 1 to " +
                       Twine(runtime::kMaxSteps) + ", got " + Twine(steps));
  if (seed < 0)
    return reportError("--seed must be at least 0, got " + Twine(seed));
  if (!(tolerance >= 0 && std::isfinite(tolerance)))
    return reportError(
        llvm::formatv("--tolerance must be a finite number of 0 or more, got "
                      "{0}",
                      tolerance.getValue())
            .str());
  llvm::Expected<std::unique_ptr<ModelFile>> file =
      loadModelFile(context, getModelInput());
  if (!file)
    return reportError(file.takeError());
  ModuleOp model = *(*file)->module;
  VerifyOptions verify;
  verify.steps = steps;
  verify.seed = seed;
  verify.tolerance = tolerance;
  verify.device = device;
  llvm::Expected<bool> pass = verifyModel(model, getModelInput(), options,
                                          verify, getLauncher(), llvm::outs());
  if (!pass)
    return reportError(pass.takeError());
  return *pass ? 0 : 1;
}
