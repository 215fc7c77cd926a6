//===- Gradcheck.cpp - tessera gradcheck ----------------------------------===//

#include "Commands.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::gradcheckCommand() {
  static cl::SubCommand command(
      "gradcheck", "Check the gradients of a loss function "
                   "(--tessera-autodiff) against central finite differences, "
                   "in process");
  return command;
}

static cl::opt<std::string> modelInput(cl::Positional, cl::Required,
                                       cl::desc("<model.mlir>"),
                                       cl::sub(gradcheckCommand()));
static cl::opt<int64_t> seed("seed", cl::desc("Seed of the generated inputs"),
                             cl::init(0), cl::sub(gradcheckCommand()));
static FiniteDoubleOption epsilon("eps", cl::desc("Finite-difference step"),
                                  cl::init(1e-2), cl::sub(gradcheckCommand()));
static FiniteDoubleOption
    tolerance("tolerance",
              cl::desc("Largest error, relative to max(|g|, |fd|, 0.01)"),
              cl::init(3e-2), cl::sub(gradcheckCommand()));
static cl::opt<int64_t> samples("samples",
                                cl::desc("Elements checked per parameter"),
                                cl::init(8), cl::sub(gradcheckCommand()));

int cli::runGradcheck(MLIRContext &context) {
  llvm::Expected<std::unique_ptr<ModelFile>> file =
      loadModelFile(context, modelInput);
  if (!file)
    return reportError(file.takeError());
  ModuleOp model = *(*file)->module;
  GradcheckOptions gradcheck;
  gradcheck.seed = seed;
  gradcheck.samples = samples;
  gradcheck.epsilon = epsilon;
  gradcheck.tolerance = tolerance;
  llvm::Expected<bool> pass =
      gradcheckModel(model, modelInput, gradcheck, llvm::outs());
  if (!pass)
    return reportError(pass.takeError());
  return *pass ? 0 : 1;
}
