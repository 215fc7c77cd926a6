//===- TrainingLog.h - tessera-run's per-step training log ------*- C++ -*-===//
//
// Each step of a train step, one line on stdout (with more than one step)
// and, with --metrics FILE.jsonl, one JSON object per line: the loss, the
// learning rate (nn.adamw's schedule at the step), the train step's
// metrics (the global gradient norm with --clip-grad, the loss scale with
// --loss-scale), tokens per second, the step's time and the time left.
// The first rank whose program computes the loss writes it, as each step
// ends there.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAINING_TRAININGLOG_H
#define TESSERA_RUNTIME_TRAINING_TRAININGLOG_H

#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/Status.h"

#include "plan.pb.h"

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// The loss: the first scalar float result that updates no argument and is
/// no metric; -1 when there is none.
int getLossResult(const plan::Program &program);

class TrainingLog {
public:
  /// The log of `steps` steps of `program`, this rank's of `plan`.
  TrainingLog(const plan::Plan &plan, const plan::Program &program,
              int64_t rank, int64_t steps);
  ~TrainingLog();
  TrainingLog(const TrainingLog &) = delete;
  TrainingLog &operator=(const TrainingLog &) = delete;

  /// Whether this rank writes the log.
  bool isLogger() const { return logger; }
  /// On the logging rank, opens the --metrics file (none: `path` empty).
  Status openMetrics(const std::string &path);
  /// Logs step `step`, which took `seconds`, with its metrics by name.
  Status logStep(int64_t step, double loss,
                 const std::vector<std::pair<std::string, double>> &metrics,
                 double seconds);

private:
  bool logger = false;
  int64_t steps, logged = 0;
  double totalSeconds = 0;
  /// The first nn.adamw's attributes: its learning-rate schedule.
  std::optional<KernelAttrs> adamw;
  /// The global batch's tokens ([batch, seq] of the first integer data
  /// argument); 0 when the step has none.
  int64_t tokensPerStep = 0;
  std::string metricsPath;
  std::FILE *metricsFile = nullptr;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_TRAININGLOG_H
