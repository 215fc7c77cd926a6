//===- Verify.cpp - tessera verify ----------------------------------------===//

#include "Commands.h"

#include "tessera/Pipelines/Pipelines.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

static cl::opt<double> tolerance(
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
