//===- Verify.cpp - The sharded plan against one device (tessera verify) --===//

#include "tessera/Pipelines/Driver.h"

#include "tessera/Pipelines/Pipelines.h"
#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Plan.h"
#include "tessera/runtime/Safetensors.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

using namespace mlir;
using namespace tessera;

/// Element `i` of `t`.
static double getElement(const runtime::Tensor &t, int64_t i) {
  switch (t.dtype) {
  case runtime::DType::F32:
    return t.as<float>()[i];
  case runtime::DType::F64:
    return t.as<double>()[i];
  case runtime::DType::BF16:
  case runtime::DType::F16:
    return runtime::halfToFloat(t.dtype, t.as<uint16_t>()[i]);
  case runtime::DType::I32:
    return t.as<int32_t>()[i];
  case runtime::DType::I64:
    return t.as<int64_t>()[i];
  case runtime::DType::I1:
    return t.as<uint8_t>()[i];
  default:
    return 0;
  }
}

/// The largest absolute difference and the largest relative to the
/// reference's largest magnitude.
static std::pair<double, double> compare(const runtime::Tensor &got,
                                         const runtime::Tensor &want) {
  double maxAbs = 0, scale = 0;
  int64_t n = want.getNumElements();
  for (int64_t i = 0; i < n; ++i) {
    maxAbs =
        std::max(maxAbs, std::fabs(getElement(got, i) - getElement(want, i)));
    scale = std::max(scale, std::fabs(getElement(want, i)));
  }
  return {maxAbs, maxAbs / std::max(scale, 1e-30)};
}

/// Prints the worst relative error of two runs' finite losses, step by
/// step: whether it is within `tolerance`.
static bool printLossError(ArrayRef<double> single, ArrayRef<double> sharded,
                           double tolerance, llvm::raw_ostream &os) {
  double worst = 0;
  for (size_t i = 0; i < single.size(); ++i)
    worst = std::max(worst, std::fabs(single[i] - sharded[i]) /
                                std::max(std::fabs(single[i]), 1e-30));
  bool ok = worst <= tolerance;
  os << llvm::formatv(
      "loss: step 1 {0:f6}, step {1} {2:f6}; max rel error over the steps "
      "{3:e2} {4}\n",
      single.front(), single.size(), single.back(), worst,
      ok ? "ok" : "OVER TOLERANCE");
  return ok;
}

/// The number of elements of `t` that are NaN or infinite.
static int64_t countNonFinite(const runtime::Tensor &t) {
  int64_t count = 0;
  for (int64_t i = 0, e = t.getNumElements(); i < e; ++i)
    count += !std::isfinite(getElement(t, i));
  return count;
}

/// Prints how many elements of `what` (a result or a parameter) of a run
/// are NaN or infinite, and returns false; true where none is. A run that
/// diverged fails the check, whatever the other run computed.
static bool checkFinite(const runtime::Tensor &t, const llvm::Twine &what,
                        StringRef run, llvm::raw_ostream &os) {
  int64_t nonFinite = countNonFinite(t);
  if (nonFinite == 0)
    return true;
  os << what << " of the " << run << " run: "
     << llvm::formatv("{0} of {1} elements are NaN or infinite: the run "
                      "diverged\n",
                      nonFinite, t.getNumElements());
  return false;
}

/// Checks the results of a run with checkFinite, up to the first that is
/// not finite (a diverged train step's are all NaN): whether all are.
/// A train step's scalar results are its loss, which compareLosses checks
/// step by step, and its metrics, of which the gradient norm is NaN by
/// design on a step that loss scaling skips: they are not checked here.
static bool checkResultsFinite(ArrayRef<runtime::OwnedTensor> results,
                               StringRef run, bool training,
                               llvm::raw_ostream &os) {
  for (size_t i = 0; i < results.size(); ++i) {
    const runtime::Tensor &result = results[i].view;
    if (training && result.shape.empty())
      continue;
    if (!checkFinite(result, "result #" + llvm::Twine(i), run, os))
      return false;
  }
  return true;
}

/// Every step's loss a run logged (--dump-losses), a line each. A stream's
/// `>>` stops at the "nan" or "inf" that printf writes for a diverged step,
/// which would drop that step and every later one: each line is read by
/// strtod, and one it cannot read is an error.
static llvm::Expected<std::vector<double>> readLosses(const std::string &file) {
  std::ifstream in(file);
  if (!in)
    return llvm::createStringError("cannot read the losses '" + file + "'");
  std::vector<double> losses;
  for (std::string line; std::getline(in, line);) {
    StringRef text = StringRef(line).trim();
    if (text.empty())
      continue;
    std::string number = text.str();
    char *end = nullptr;
    double loss = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size())
      return llvm::createStringError("the losses '" + file +
                                     "' hold no number on line '" + line + "'");
    losses.push_back(loss);
  }
  return losses;
}

/// Prints the first NaN or infinite loss of a run and returns false; true
/// where every loss is finite. A run that diverged fails the check, whatever
/// the other run logged: two runs that both reach NaN agree on nothing.
static bool checkLossesFinite(ArrayRef<double> losses, StringRef run,
                              llvm::raw_ostream &os) {
  for (size_t i = 0; i < losses.size(); ++i)
    if (!std::isfinite(losses[i])) {
      os << llvm::formatv("loss: step {0} of the {1} run is {2}: the run "
                          "diverged\n",
                          i + 1, run, losses[i]);
      return false;
    }
  return true;
}

/// Compares every step's loss of two runs, printing the worst relative
/// error: whether every loss is finite and within `tolerance`; an error
/// where they logged different numbers of steps.
static llvm::Expected<bool> compareLosses(const std::string &singleFile,
                                          const std::string &shardedFile,
                                          double tolerance,
                                          llvm::raw_ostream &os) {
  llvm::Expected<std::vector<double>> single = readLosses(singleFile);
  if (!single)
    return single.takeError();
  llvm::Expected<std::vector<double>> sharded = readLosses(shardedFile);
  if (!sharded)
    return sharded.takeError();
  if (single->empty())
    return llvm::createStringError("the runs logged no loss");
  if (single->size() != sharded->size())
    return llvm::createStringError(
        "the runs logged different numbers of losses: " +
        std::to_string(single->size()) + " on one device, " +
        std::to_string(sharded->size()) + " sharded");
  // Both are checked, so that each run that diverged is reported.
  bool finite = checkLossesFinite(*single, "single-device", os);
  finite &= checkLossesFinite(*sharded, "sharded", os);
  if (!finite)
    return false;
  return printLossError(*single, *sharded, tolerance, os);
}

/// Compares the parameters two runs saved (--save-weights), each within a
/// relative L2 norm, and reports the worst.
static llvm::Expected<bool> compareParameters(const std::string &singleFile,
                                              const std::string &shardedFile,
                                              llvm::raw_ostream &os) {
  runtime::Expected<runtime::SafetensorsCheckpoint> single =
      runtime::openSafetensorsCheckpoint(singleFile);
  runtime::Expected<runtime::SafetensorsCheckpoint> sharded =
      runtime::openSafetensorsCheckpoint(shardedFile);
  if (!single.ok() || !sharded.ok())
    return llvm::createStringError((single.ok() ? sharded : single).message());
  // Each parameter within a relative L2 norm: AdamW moves an element with a
  // near-zero gradient by a step of its sign, so runs whose gradients round
  // apart (a sum in another order) differ there by a step.
  constexpr double kParameterTolerance = 1e-2;
  double worstParam = 0;
  for (const std::string &param : single->getNames()) {
    const runtime::SafetensorsFile::Entry *want = single->find(param);
    const runtime::SafetensorsFile::Entry *got = sharded->find(param);
    if (!got || got->shape != want->shape || got->dtype != want->dtype)
      return llvm::createStringError("the sharded run saved no parameter '" +
                                     param + "' of its dtype and shape");
    runtime::Tensor a = sharded->view(*got), b = single->view(*want);
    // Both are checked, so that each run that diverged is reported.
    std::string what = "parameter '" + param + "'";
    bool finite = checkFinite(b, what, "single-device", os);
    finite &= checkFinite(a, what, "sharded", os);
    if (!finite)
      return false;
    double difference = 0, norm = 0;
    for (int64_t i = 0; i < b.getNumElements(); ++i) {
      double d = getElement(a, i) - getElement(b, i);
      difference += d * d;
      norm += getElement(b, i) * getElement(b, i);
    }
    worstParam =
        std::max(worstParam, std::sqrt(difference / std::max(norm, 1e-30)));
  }
  // A file cut short while it was compared read zeros where it was gone.
  for (const auto *checkpoint : {&*single, &*sharded})
    if (runtime::Status intact = checkpoint->checkIntact(); !intact.ok())
      return llvm::createStringError(intact.message());
  bool paramsOk = worstParam <= kParameterTolerance;
  os << llvm::formatv("parameters: {0} after the last step; max relative L2 "
                      "error {1:e2} {2} (tolerance {3:e0})\n",
                      single->getNames().size(), worstParam,
                      paramsOk ? "ok" : "OVER TOLERANCE", kParameterTolerance);
  return paramsOk;
}

/// Parameter-server training against one device: the job's loss each step
/// (its workers' mean) and its servers' final parameters, by name.
static llvm::Expected<bool> verifyParameterServer(
    StringRef name, const plan::Plan &plan, const CompileOptions &options,
    const VerifyOptions &verify, const Launcher &launcher,
    llvm::function_ref<std::string(StringRef)> path, llvm::raw_ostream &os) {
  std::string seed = std::to_string(verify.seed),
              steps = std::to_string(verify.steps);
  for (StringRef run : {"single", "sharded"}) {
    // The parameter-server job starts its own processes: one launch.
    llvm::Expected<int> code =
        launcher.run(1, {path((run + ".plan").str()), "--seed", seed, "--steps",
                         steps, "--dump-losses", path((run + ".losses").str()),
                         "--save-weights", path((run + ".safetensors").str())});
    if (!code)
      return code.takeError();
    if (*code != 0)
      return llvm::createStringError("a run failed");
  }
  os << llvm::formatv(
      "verify: {0} on {1} workers and {2} parameter servers ({3}) against 1 "
      "device, seed {4}, {5} steps of {6}\n",
      name, runtime::getMesh(plan).getNumDevices(),
      runtime::getMesh(plan.parameter_server().servers()).getNumDevices(),
      options.consistency.getValue(), verify.seed, verify.steps,
      getEnumName(kTrainNames, options.train.getValue()));
  llvm::Expected<bool> lossesOk = compareLosses(
      path("single.losses"), path("sharded.losses"), verify.tolerance, os);
  if (!lossesOk)
    return lossesOk.takeError();
  bool pass = *lossesOk;
  llvm::Expected<bool> paramsOk = compareParameters(
      path("single.safetensors"), path("sharded.safetensors"), os);
  if (!paramsOk)
    return paramsOk.takeError();
  pass &= *paramsOk;
  os << llvm::formatv("verify: {0} (tolerance {1:e1})\n",
                      pass ? "PASS" : "FAIL", verify.tolerance);
  return pass;
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
  // Only synchronous parameter servers compute what one device computes.
  if (options.servers > 0 && options.consistency.getValue() != "sync")
    return llvm::createStringError(
        "verify compares every step with one device's, which only --ps with "
        "--consistency sync computes (async and ssp apply stale gradients: "
        "compare their losses with tessera-run --dump-losses)");
  if (llvm::Error error = compilePlan(model, sharded))
    return std::move(error);
  runtime::Expected<plan::Plan> plan = runtime::loadPlan(path("sharded.plan"));
  if (!plan.ok())
    return llvm::createStringError(plan.message());
  // PipeDream's stages read their weights as many updates before as their
  // ranks lag: one device reads each parameter as many steps before.
  if (options.schedule.getValue() == PipelineSchedule::PipeDream) {
    reference.pipelineStages = 1;
    std::map<std::string, int64_t> delayOf;
    for (const plan::Program &program : plan->programs())
      for (const plan::Argument &argument : program.arguments())
        if (argument.role() == plan::PARAM)
          delayOf[argument.name()] = program.weight_delay();
    std::vector<std::string> delays;
    for (const auto &[param, delay] : delayOf)
      delays.push_back(param + ":" + std::to_string(delay));
    reference.stashDelays = delays;
  }
  if (llvm::Error error = runPipeline(*single, [&](OpPassManager &pm) {
        buildSingleDevicePipeline(pm, reference);
      }))
    return std::move(error);

  // The ranks are the sharded plan's devices: a function that annotates
  // nothing runs on one, whatever meshes its module declares.
  int64_t numRanks = runtime::getMesh(*plan).getNumDevices();

  std::string seed = std::to_string(verify.seed),
              steps = std::to_string(verify.steps);
  if (plan->has_parameter_server()) {
    llvm::Expected<bool> pass =
        verifyParameterServer(name, *plan, options, verify, launcher, path, os);
    llvm::sys::fs::remove_directories(dir);
    return pass;
  }
  bool training = options.train != Optimizer::None;
  // A pipeline without a flush runs its last steps' updates in a drain after
  // the last run, which no loss shows: its runs also save their parameters,
  // after the last step's updates, and those must agree too. (Elsewhere the
  // last update is the code of every other; and over many AdamW steps the
  // parameters drift apart where gradients near zero round apart, which the
  // losses do not.)
  bool drains = llvm::any_of(plan->programs(),
                             [](const plan::Program &p) { return p.steady(); });
  auto getArgs = [&](StringRef run) {
    std::vector<std::string> args = {path((run + ".plan").str()),
                                     "--seed",
                                     seed,
                                     "--steps",
                                     steps,
                                     "--dump-outputs",
                                     path((run + ".out").str()),
                                     "--dump-losses",
                                     path((run + ".losses").str())};
    if (training && drains)
      llvm::append_range(
          args, std::vector<std::string>{"--save-weights",
                                         path((run + ".safetensors").str())});
    return args;
  };
  llvm::Expected<int> singleCode = launcher.run(1, getArgs("single"));
  if (!singleCode)
    return singleCode.takeError();
  std::vector<std::string> shardedArgs = getArgs("sharded");
  llvm::append_range(shardedArgs,
                     std::vector<std::string>{"--device", verify.device});
  llvm::Expected<int> shardedCode =
      *singleCode != 0 ? 1 : launcher.run(numRanks, shardedArgs);
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
  if (want.size() != got.size() && !training)
    return llvm::createStringError(
        "the runs return different numbers of results");
  os << llvm::formatv(
      "verify: {0} on {1} ranks against 1 device, seed {2}{3}\n", name,
      numRanks, verify.seed,
      training ? llvm::formatv(", {0} steps of {1}", verify.steps,
                               getEnumName(kTrainNames, options.train.getValue()))
                     .str()
               : std::string());
  // A run that diverged fails, whatever the other computed: both are
  // checked, so that each is reported.
  bool pass = checkResultsFinite(want, "single-device", training, os);
  pass &= checkResultsFinite(got, "sharded", training, os);
  // (PipeDream's stashes on one device are chains as long as each
  // parameter's delay: trained results are not compared.)
  if (training && want.size() != got.size())
    want.clear();
  // Training: every step's loss must agree, and where a drain finishes the
  // last steps, the parameters after it.
  if (training) {
    llvm::Expected<bool> lossesOk = compareLosses(
        path("single.losses"), path("sharded.losses"), verify.tolerance, os);
    if (!lossesOk)
      return lossesOk.takeError();
    pass &= *lossesOk;
    if (drains) {
      llvm::Expected<bool> paramsOk = compareParameters(
          path("single.safetensors"), path("sharded.safetensors"), os);
      if (!paramsOk)
        return paramsOk.takeError();
      pass &= *paramsOk;
    }
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
