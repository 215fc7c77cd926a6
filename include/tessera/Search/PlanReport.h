//===- PlanReport.h - What tessera plan shows of a search -------*- C++ -*-===//

#ifndef TESSERA_SEARCH_PLANREPORT_H
#define TESSERA_SEARCH_PLANREPORT_H

#include "tessera/Search/Planner.h"

#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace tessera {

/// The ZeRO stage as plan tables show it: "3k" keeps the forward's gathers
/// (reshard-after-forward false).
std::string getZeroName(const PlanChoice &choice);

/// " pp=2 schedule=1f1b virtual=2 microbatches=8": the pipeline part of a
/// choice, empty for a plan without one.
std::string formatPipeline(const PlanChoice &choice);

/// One plan as the JSON objects of `tessera plan --json`, its breakdown
/// (toJson of it) under "breakdown".
llvm::json::Object toJson(const PlanEstimate &plan);

/// A step's terms in seconds: "compute" by op class, then each other term
/// and "total_s", their sum.
llvm::json::Object toJson(const StepBreakdown &breakdown);

/// The rows of `tessera plan --breakdown`: each term of the step, its
/// seconds and share of the step; the total; the plan's MFU and HFU.
std::string formatBreakdown(const PlanEstimate &plan);

/// The rows of `tessera plan --scaling`: each count's best plan, throughput,
/// speedup and parallel efficiency, the fitted serial fraction, and the
/// other law at it (Gustafson's scaled speedup of Amdahl's fraction under
/// strong scaling; Amdahl's bound under weak).
std::string formatScaling(const ScalingCurve &curve);
llvm::json::Object toJson(const ScalingCurve &curve);

/// A curve back from toJson's object (tessera plan --scaling --json): its
/// mode, fitted fraction and points (a point's plan is not read back; a
/// point without one has speedup 0). Fails naming what is missing, or the
/// field holding a number no search makes: one not finite, negative, a
/// fraction past 1, or a count or speedup past 2^20 (dist::kMaxDevices).
llvm::Expected<ScalingCurve> parseScalingCurve(const llvm::json::Value &json);

/// The curve as an SVG plot: speedup against devices on log axes, with the
/// ideal line and the fitted law; the model's and machine's names are
/// escaped (escapeHtml), so that a name can hold no markup.
std::string getScalingSvg(const ScalingCurve &curve, llvm::StringRef model,
                          llvm::StringRef machine);

/// Why the fastest plan wins: against the best plan of another DP/TP/PP
/// shape, the part of the step that differs most.
struct WinReason {
  PlanChoice winner, rival;
  /// How much slower the rival is, as a fraction of the winner's step.
  double slowerFraction;
  const char *part;
  double winnerSeconds, rivalSeconds;
};

/// The reason the first of `plans` (fastest first) wins; none when every
/// plan has its DP/TP/PP shape.
std::optional<WinReason> getWinReason(llvm::ArrayRef<PlanEstimate> plans);

} // namespace tessera

#endif // TESSERA_SEARCH_PLANREPORT_H
