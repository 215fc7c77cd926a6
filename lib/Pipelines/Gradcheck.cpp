//===- Gradcheck.cpp - Autodiff against finite differences ----------------===//

#include "tessera/Pipelines/Driver.h"

#include "tessera/Pipelines/Pipelines.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/HostMemory.h"
#include "tessera/runtime/Plan.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace tessera;

/// Runs a one-device plan in process on `arguments`.
static llvm::Expected<std::vector<runtime::OwnedTensor>>
runLocal(const plan::Plan &plan, runtime::Communicator &communicator,
         const std::vector<runtime::OwnedTensor> &arguments) {
  runtime::Mesh mesh = runtime::getMesh(plan);
  runtime::Executor executor(plan.programs(0), mesh, communicator);
  std::vector<runtime::OwnedTensor> results;
  if (runtime::Status status = executor.run(arguments, results); !status.ok())
    return llvm::createStringError(status.message());
  return results;
}

llvm::Expected<bool>
tessera::gradcheckModel(ModuleOp model, StringRef name,
                        const GradcheckOptions &gradcheck,
                        llvm::raw_ostream &os) {
  // The negations catch NaN: a zero or NaN step or tolerance would pass
  // every gradient.
  if (!(gradcheck.epsilon > 0) || !std::isfinite(gradcheck.epsilon))
    return llvm::createStringError(
        llvm::formatv("--eps must be a positive number, got {0:e1}",
                      gradcheck.epsilon)
            .str());
  if (!(gradcheck.tolerance > 0) || !std::isfinite(gradcheck.tolerance))
    return llvm::createStringError(
        llvm::formatv("--tolerance must be a positive number, got {0:e1}",
                      gradcheck.tolerance)
            .str());
  if (gradcheck.samples < 1)
    return llvm::createStringError(
        llvm::formatv("--samples must be at least 1, got {0}",
                      gradcheck.samples)
            .str());
  SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("tessera-gradcheck", dir))
    return llvm::createStringError(ec.message());
  std::string gradPath = (dir + "/grad.plan").str();
  std::string lossPath = (dir + "/loss.plan").str();
  OwningOpRef<ModuleOp> lossModel = model.clone();
  CompileOptions loss;
  loss.output = lossPath;
  if (llvm::Error error = runPipeline(model, [&](OpPassManager &pm) {
        buildGradientPipeline(pm, gradPath);
      }))
    return std::move(error);
  if (llvm::Error error = runPipeline(*lossModel, [&](OpPassManager &pm) {
        buildSingleDevicePipeline(pm, loss);
      }))
    return std::move(error);
  runtime::Expected<plan::Plan> loadedGrad = runtime::loadPlan(gradPath);
  if (!loadedGrad.ok())
    return llvm::createStringError(loadedGrad.message());
  runtime::Expected<plan::Plan> loadedLoss = runtime::loadPlan(lossPath);
  if (!loadedLoss.ok())
    return llvm::createStringError(loadedLoss.message());
  plan::Plan gradPlan = loadedGrad.take(), lossPlan = loadedLoss.take();
  llvm::sys::fs::remove_directories(dir);

  const plan::Program &program = gradPlan.programs(0);
  // A model too big for this machine is refused before its arguments and
  // its arena are allocated.
  if (runtime::Status status =
          runtime::checkHostMemory(program, runtime::HostMemoryUse());
      !status.ok())
    return llvm::createStringError(status.message());
  std::vector<runtime::OwnedTensor> arguments;
  for (int i = 0; i < program.arguments_size(); ++i) {
    runtime::Expected<runtime::OwnedTensor> argument =
        runtime::makeGlobalInput(program.arguments(i), gradcheck.seed, i);
    if (!argument.ok())
      return llvm::createStringError(argument.message());
    arguments.push_back(argument.take());
  }
  std::unique_ptr<runtime::Communicator> local =
      runtime::createLocalCommunicator();
  llvm::Expected<std::vector<runtime::OwnedTensor>> gradients =
      runLocal(gradPlan, *local, arguments);
  if (!gradients)
    return gradients.takeError();

  // A failed run of the loss is a NaN, which fails its parameter's check.
  auto lossAt = [&](std::vector<runtime::OwnedTensor> &inputs) -> double {
    llvm::Expected<std::vector<runtime::OwnedTensor>> loss =
        runLocal(lossPlan, *local, inputs);
    if (!loss) {
      llvm::consumeError(loss.takeError());
      return NAN;
    }
    return (*loss)[0].view.as<float>()[0];
  };
  os << llvm::formatv("gradcheck: {0}, eps {1:e1}, seed {2}\n", name,
                      gradcheck.epsilon, gradcheck.seed);
  bool pass = true;
  int64_t result = 1;
  for (int i = 0; i < program.arguments_size(); ++i) {
    if (!program.arguments(i).is_param())
      continue;
    const runtime::Tensor &gradient = (*gradients)[result++].view;
    int64_t n = gradient.getNumElements();
    int64_t count = std::min<int64_t>(gradcheck.samples, n);
    double worst = 0;
    for (int64_t k = 0; k < count; ++k) {
      int64_t index = k * n / count;
      float &x = arguments[i].view.as<float>()[index];
      float saved = x;
      x = saved + gradcheck.epsilon;
      double plus = lossAt(arguments);
      x = saved - gradcheck.epsilon;
      double minus = lossAt(arguments);
      x = saved;
      double numeric = (plus - minus) / (2 * gradcheck.epsilon);
      double analytic = gradient.as<float>()[index];
      double scale = std::max({std::fabs(numeric), std::fabs(analytic), 1e-2});
      worst = std::max(worst, std::fabs(numeric - analytic) / scale);
    }
    bool ok = worst <= gradcheck.tolerance && !std::isnan(worst);
    pass &= ok;
    os << llvm::formatv("{0}: {1} of {2} elements, max error {3:e2} {4}\n",
                        program.arguments(i).name(), count, n, worst,
                        ok ? "ok" : "OVER TOLERANCE");
  }
  os << llvm::formatv("gradcheck: {0} (tolerance {1:e1})\n",
                      pass ? "PASS" : "FAIL", gradcheck.tolerance);
  return pass;
}
