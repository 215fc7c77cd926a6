//===- Verify.cpp - The sharded plan against one device (tessera verify) --===//

#include "tessera/Pipelines/Driver.h"

#include "tessera/Pipelines/Pipelines.h"
#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Plan.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <fstream>

using namespace mlir;
using namespace tessera;

/// The largest absolute difference and the largest relative to the
/// reference's largest magnitude.
static std::pair<double, double> compare(const runtime::Tensor &got,
                                         const runtime::Tensor &want) {
  double maxAbs = 0, scale = 0;
  int64_t n = want.getNumElements();
  auto value = [](const runtime::Tensor &t, int64_t i) -> double {
    switch (t.dtype) {
    case runtime::DType::F32:
      return t.as<float>()[i];
    case runtime::DType::F64:
      return t.as<double>()[i];
    case runtime::DType::I32:
      return t.as<int32_t>()[i];
    case runtime::DType::I64:
      return t.as<int64_t>()[i];
    case runtime::DType::I1:
      return t.as<uint8_t>()[i];
    default:
      return 0;
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    maxAbs = std::max(maxAbs, std::fabs(value(got, i) - value(want, i)));
    scale = std::max(scale, std::fabs(value(want, i)));
  }
  return {maxAbs, maxAbs / std::max(scale, 1e-30)};
}

static std::vector<double> readLosses(const std::string &file) {
  std::vector<double> losses;
  std::ifstream in(file);
  for (double loss; in >> loss;)
    losses.push_back(loss);
  return losses;
}

llvm::Expected<bool> tessera::verifyModel(ModuleOp model, StringRef name,
                                          const CompileOptions &options,
                                          const VerifyOptions &verify,
                                          const Launcher &launcher,
                                          llvm::raw_ostream &os) {
  // Both programs start from the mesh as sized.
  if (llvm::Error error = runPipeline(
          model, [&](OpPassManager &pm) { buildMeshPipeline(pm, options); }))
    return std::move(error);

  SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("tessera-verify", dir))
    return llvm::createStringError(ec.message());
  auto path = [&](StringRef file) {
    SmallString<128> result(dir);
    llvm::sys::path::append(result, file);
    return std::string(result);
  };
  OwningOpRef<ModuleOp> single = model.clone();
  CompileOptions sharded, reference;
  sharded.copyOptionValuesFrom(options);
  sharded.output = path("sharded.plan");
  sharded.text = false;
  reference.copyOptionValuesFrom(sharded);
  reference.output = path("single.plan");
  if (llvm::Error error = compilePlan(model, sharded))
    return std::move(error);
  if (llvm::Error error = runPipeline(*single, [&](OpPassManager &pm) {
        buildSingleDevicePipeline(pm, reference);
      }))
    return std::move(error);

  // The ranks are the sharded plan's devices: a function that annotates
  // nothing runs on one, whatever meshes its module declares.
  runtime::Expected<plan::Plan> plan = runtime::loadPlan(path("sharded.plan"));
  if (!plan.ok())
    return llvm::createStringError(plan.message());
  int64_t numRanks = runtime::getMesh(*plan).getNumDevices();

  std::string seed = std::to_string(verify.seed),
              steps = std::to_string(verify.steps);
  llvm::Expected<int> singleCode = launcher.run(
      1, {path("single.plan"), "--seed", seed, "--steps", steps,
          "--dump-outputs", path("single.out"), "--dump-losses",
          path("single.losses")});
  if (!singleCode)
    return singleCode.takeError();
  llvm::Expected<int> shardedCode = *singleCode != 0 ? 1 : launcher.run(
      numRanks, {path("sharded.plan"), "--seed", seed, "--steps", steps,
                 "--dump-outputs", path("sharded.out"), "--dump-losses",
                 path("sharded.losses"), "--device", verify.device});
  if (!shardedCode)
    return shardedCode.takeError();
  if (*shardedCode != 0)
    return llvm::createStringError("a run failed");

  runtime::Expected<std::vector<runtime::OwnedTensor>> singleOut =
      runtime::readTensors(path("single.out"));
  if (!singleOut.ok())
    return llvm::createStringError(singleOut.message());
  runtime::Expected<std::vector<runtime::OwnedTensor>> shardedOut =
      runtime::readTensors(path("sharded.out"));
  if (!shardedOut.ok())
    return llvm::createStringError(shardedOut.message());
  std::vector<runtime::OwnedTensor> want = singleOut.take(),
                                    got = shardedOut.take();
  if (want.size() != got.size())
    return llvm::createStringError(
        "the runs return different numbers of results");
  bool pass = true;
  bool training = options.train != Optimizer::None;
  os << llvm::formatv(
      "verify: {0} on {1} ranks against 1 device, seed {2}{3}\n", name,
      numRanks, verify.seed,
      training ? llvm::formatv(", {0} steps of {1}", verify.steps,
                               getEnumName(kTrainNames, options.train.getValue()))
                     .str()
               : std::string());
  // Training: every step's loss must agree; the final parameters are
  // reported.
  if (training) {
    std::vector<double> single = readLosses(path("single.losses"));
    std::vector<double> sharded = readLosses(path("sharded.losses"));
    if (single.size() != sharded.size() || single.empty())
      return llvm::createStringError(
          "the runs logged different numbers of losses");
    double worst = 0;
    for (size_t i = 0; i < single.size(); ++i)
      worst = std::max(worst, std::fabs(single[i] - sharded[i]) /
                                  std::max(std::fabs(single[i]), 1e-30));
    pass = worst <= verify.tolerance;
    os << llvm::formatv(
        "loss: step 1 {0:f6}, step {1} {2:f6}; max rel error over the steps "
        "{3:e2} {4}\n",
        single.front(), single.size(), single.back(), worst,
        pass ? "ok" : "OVER TOLERANCE");
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].view.shape != got[i].view.shape) {
      os << llvm::formatv("result #{0}: shapes differ\n", i);
      pass = false;
      continue;
    }
    auto [absError, relError] = compare(got[i].view, want[i].view);
    if (training)
      continue;
    bool ok = relError <= verify.tolerance;
    pass &= ok;
    os << llvm::formatv(
        "result #{0}: max abs error {1:e2}, max rel error {2:e2} {3}\n", i,
        absError, relError, ok ? "ok" : "OVER TOLERANCE");
  }
  os << llvm::formatv("verify: {0} (tolerance {1:e1})\n",
                      pass ? "PASS" : "FAIL", verify.tolerance);
  llvm::sys::fs::remove_directories(dir);
  return pass;
}
