//===- TrainingLog.cpp - tessera-run's per-step training log
//---------------===//

#include "tessera/runtime/training/TrainingLog.h"

#include "tessera/runtime/LrSchedule.h"
#include "tessera/runtime/Plan.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

using namespace tessera;
using namespace tessera::runtime;

int tessera::runtime::getLossResult(const plan::Program &program) {
  for (int i = 0; i < program.results_size(); ++i) {
    const plan::Result &result = program.results(i);
    plan::DType dtype = program.buffers(result.buffer()).dtype();
    if (!result.has_updates_argument() && result.metric().empty() &&
        result.global_shape_size() == 0 &&
        (dtype == plan::F32 || dtype == plan::BF16 || dtype == plan::F16))
      return i;
  }
  return -1;
}

TrainingLog::TrainingLog(const plan::Plan &plan, const plan::Program &program,
                         int64_t rank, int64_t steps)
    : steps(steps) {
  for (int64_t r = 0; r < getMesh(plan).getNumDevices(); ++r)
    if (getLossResult(*getProgramOfRank(plan, r)) >= 0) {
      logger = r == rank;
      break;
    }
  for (const plan::Instruction &instruction : program.instructions())
    if (instruction.has_kernel() && instruction.kernel().op() == "nn.adamw") {
      adamw = getKernelAttrs(instruction.kernel());
      break;
    }
  for (const plan::Program &each : plan.programs())
    for (const plan::Argument &argument : each.arguments())
      if (!tokensPerStep && argument.role() == plan::DATA &&
          (argument.dtype() == plan::I32 || argument.dtype() == plan::I64) &&
          argument.global_shape_size() == 2)
        tokensPerStep = argument.global_shape(0) * argument.global_shape(1);
}

TrainingLog::~TrainingLog() {
  if (metricsFile)
    std::fclose(metricsFile);
}

Status TrainingLog::openMetrics(const std::string &path) {
  if (!logger || path.empty())
    return Status::success();
  metricsPath = path;
  metricsFile = std::fopen(path.c_str(), "w");
  if (!metricsFile)
    return dataError("cannot write the metrics file '" + path +
                     "': " + std::strerror(errno));
  return Status::success();
}

Status
TrainingLog::logStep(int64_t step, double loss,
                     const std::vector<std::pair<std::string, double>> &metrics,
                     double seconds) {
  ++logged;
  totalSeconds += seconds;
  double eta = totalSeconds / logged * (steps - logged);
  std::optional<double> lr;
  if (adamw)
    lr = getScheduledLr(static_cast<LrSchedule>(*adamw->getInt("schedule")),
                        *adamw->getFloat("lr"), *adamw->getFloat("min_lr"),
                        *adamw->getInt("warmup_steps"),
                        *adamw->getInt("decay_steps"), step);
  if (steps > 1) {
    std::printf("step %lld: loss = %.7g", static_cast<long long>(step), loss);
    if (lr)
      std::printf(" | lr %.4g", *lr);
    for (const auto &[name, value] : metrics) {
      std::string words = name;
      std::replace(words.begin(), words.end(), '_', ' ');
      // A gradient norm that is not finite: an overflow, whose step the
      // updates skipped.
      if (std::isfinite(value))
        std::printf(" | %s %.4g", words.c_str(), value);
      else
        std::printf(" | %s %s (step skipped)", words.c_str(),
                    std::isnan(value) ? "nan" : "inf");
    }
    if (tokensPerStep)
      std::printf(" | %.0f tokens/s", tokensPerStep / seconds);
    std::printf(" | %.1f ms | ETA %.1f s\n", 1e3 * seconds, eta);
    std::fflush(stdout);
  }
  if (!metricsFile)
    return Status::success();
  std::fprintf(metricsFile, "{\"step\": %lld, \"loss\": %.9g",
               static_cast<long long>(step), loss);
  if (lr)
    std::fprintf(metricsFile, ", \"lr\": %.9g", *lr);
  // JSON has no inf or NaN: a value that is not finite is null.
  for (const auto &[name, value] : metrics)
    if (std::isfinite(value))
      std::fprintf(metricsFile, ", \"%s\": %.9g", name.c_str(), value);
    else
      std::fprintf(metricsFile, ", \"%s\": null", name.c_str());
  if (tokensPerStep)
    std::fprintf(metricsFile, ", \"tokens_per_second\": %.6g",
                 tokensPerStep / seconds);
  std::fprintf(metricsFile,
               ", \"step_seconds\": %.6g, \"eta_seconds\": %.6g}\n", seconds,
               eta);
  if (std::fflush(metricsFile) != 0)
    return dataError("cannot write the metrics file '" + metricsPath + "'");
  return Status::success();
}
