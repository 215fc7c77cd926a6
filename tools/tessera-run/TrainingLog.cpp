//===- TrainingLog.cpp - tessera-run's per-step training log
//---------------===//

#include "TrainingLog.h"

#include "tessera/runtime/LrSchedule.h"
#include "tessera/runtime/Plan.h"

#include <cerrno>
#include <cstring>

using namespace tessera;
using namespace tessera::runtime;

TrainingLog::TrainingLog(const plan::Plan &plan, const plan::Program &program,
                         int64_t rank, int64_t steps)
    : steps(steps) {
  for (int64_t r = 0; r < getMesh(plan).getNumDevices(); ++r) {
    const plan::Program *each = getProgramOfRank(plan, r);
    bool hasLoss = false;
    for (const plan::Result &result : each->results())
      hasLoss |= !result.has_updates_argument() && result.metric().empty() &&
                 result.global_shape_size() == 0;
    if (hasLoss) {
      logger = r == rank;
      break;
    }
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
  if (metrics)
    std::fclose(metrics);
}

Status TrainingLog::openMetrics(const std::string &path) {
  if (!logger || path.empty())
    return Status::success();
  metricsPath = path;
  metrics = std::fopen(path.c_str(), "w");
  if (!metrics)
    return dataError("cannot write the metrics file '" + path +
                     "': " + std::strerror(errno));
  return Status::success();
}

Status TrainingLog::logStep(int64_t step, double loss,
                            std::optional<double> gradNorm, double seconds) {
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
    if (gradNorm)
      std::printf(" | grad norm %.4g", *gradNorm);
    if (tokensPerStep)
      std::printf(" | %.0f tokens/s", tokensPerStep / seconds);
    std::printf(" | %.1f ms | ETA %.1f s\n", 1e3 * seconds, eta);
    std::fflush(stdout);
  }
  if (!metrics)
    return Status::success();
  std::fprintf(metrics, "{\"step\": %lld, \"loss\": %.9g",
               static_cast<long long>(step), loss);
  if (lr)
    std::fprintf(metrics, ", \"lr\": %.9g", *lr);
  if (gradNorm)
    std::fprintf(metrics, ", \"grad_norm\": %.9g", *gradNorm);
  if (tokensPerStep)
    std::fprintf(metrics, ", \"tokens_per_second\": %.6g",
                 tokensPerStep / seconds);
  std::fprintf(metrics, ", \"step_seconds\": %.6g, \"eta_seconds\": %.6g}\n",
               seconds, eta);
  if (std::fflush(metrics) != 0)
    return dataError("cannot write the metrics file '" + metricsPath + "'");
  return Status::success();
}
