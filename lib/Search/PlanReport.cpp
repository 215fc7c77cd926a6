//===- PlanReport.cpp - What tessera plan shows of a search ---------------===//

#include "tessera/Search/PlanReport.h"

#include "dialects/Dist/IR/DistOps.h"
#include "tessera/Support/Html.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>
#include <limits>

using namespace tessera;
using llvm::SmallVector;

std::string tessera::getZeroName(const PlanChoice &choice) {
  return std::to_string(choice.zero) +
         (choice.zero >= 3 && !choice.reshardAfterForward ? "k" : "");
}

std::string tessera::formatPipeline(const PlanChoice &choice) {
  std::string text;
  if (choice.pp > 1)
    text = llvm::formatv(" pp={0} schedule={1}", choice.pp,
                         getEnumName(kPipelineScheduleNames, choice.schedule));
  if (choice.virtualStages > 1)
    text += " virtual=" + std::to_string(choice.virtualStages);
  if (choice.microbatches > 1)
    text += " microbatches=" + std::to_string(choice.microbatches);
  return text;
}

llvm::json::Object tessera::toJson(const PlanEstimate &plan) {
  const PlanChoice &c = plan.choice;
  return llvm::json::Object{
      {"dp", c.dp},
      {"tp", c.tp},
      {"pp", c.pp},
      {"ep", c.ep},
      {"cp", c.cp},
      {"microbatches", c.microbatches},
      {"zero", c.zero},
      {"reshard_after_forward", c.reshardAfterForward},
      {"schedule", getEnumName(kPipelineScheduleNames, c.schedule)},
      {"virtual_stages", c.virtualStages},
      {"recompute", getEnumName(kRecomputeNames, c.recompute)},
      {"sequence_parallel", c.sequenceParallel},
      {"layout", getEnumName(kTensorLayoutNames, c.layout)},
      {"layout_memory_share", c.layoutMemoryShare},
      {"step_time_s", plan.stepTimeSeconds},
      {"peak_memory_bytes", plan.peakMemoryBytes},
      {"param_bytes", plan.paramBytes},
      {"grad_bytes", plan.gradBytes},
      {"optimizer_bytes", plan.optimizerBytes},
      {"activation_bytes", plan.activationBytes},
      {"model_flops_per_step", plan.modelFlopsPerStep},
      {"hardware_flops_per_step", plan.hardwareFlopsPerStep},
      {"tflops_per_device", plan.tflopsPerDevice},
      {"mfu", plan.mfu},
      {"hfu", plan.hfu},
      {"compute_s", plan.computeSeconds},
      {"tp_comm_s", plan.tpCommSeconds},
      {"dp_comm_s", plan.dpCommSeconds},
      {"pp_comm_s", plan.ppCommSeconds},
      {"ep_comm_s", plan.epCommSeconds},
      {"cp_comm_s", plan.cpCommSeconds},
      {"bubble_fraction", plan.bubbleFraction},
      {"breakdown", toJson(plan.breakdown)}};
}

namespace {
/// The terms of a breakdown after its compute, as the table and JSON name
/// them.
struct Term {
  const char *label, *key;
  double seconds;
};
SmallVector<Term> getTerms(const StepBreakdown &b) {
  return {{"recomputation", "recompute_s", b.recompute},
          {"kernel launches", "launch_s", b.launch},
          {"exposed TP communication", "tp_exposed_s", b.tpExposed},
          {"exposed EP all-to-all", "ep_exposed_s", b.epExposed},
          {"exposed CP ring transfers", "cp_exposed_s", b.cpExposed},
          {"exposed DP communication", "dp_exposed_s", b.dpExposed},
          {"exposed PP communication", "pp_exposed_s", b.ppExposed},
          {"pipeline bubble", "bubble_s", b.bubble},
          {"optimizer step", "optimizer_s", b.optimizer},
          {"fixed per-step cost", "fixed_s", b.fixed}};
}
} // namespace

llvm::json::Object tessera::toJson(const StepBreakdown &breakdown) {
  llvm::json::Object compute;
  for (const auto &[name, seconds] : breakdown.compute)
    compute[name] = seconds;
  llvm::json::Object object{{"compute_s", std::move(compute)}};
  for (const Term &term : getTerms(breakdown))
    object[term.key] = term.seconds;
  object["total_s"] = breakdown.getTotalSeconds();
  return object;
}

std::string tessera::formatBreakdown(const PlanEstimate &plan) {
  const StepBreakdown &breakdown = plan.breakdown;
  double total = breakdown.getTotalSeconds();
  std::string text;
  llvm::raw_string_ostream os(text);
  auto row = [&](const llvm::Twine &label, double seconds) {
    os << llvm::formatv("  {0,-32} {1,12:e3} {2,6:f1}%\n", label.str(), seconds,
                        total > 0 ? 100 * seconds / total : 0.0);
  };
  os << llvm::formatv("  {0,-32} {1,12} {2,7}\n", "term", "seconds", "share");
  for (const auto &[name, seconds] : breakdown.compute)
    row("compute: " + name, seconds);
  for (const Term &term : getTerms(breakdown))
    // Expert and context parallelism's rows only where a plan has them.
    if (term.seconds > 0 || (term.key != llvm::StringRef("ep_exposed_s") &&
                             term.key != llvm::StringRef("cp_exposed_s")))
      row(term.label, term.seconds);
  row("step", total);
  os << llvm::formatv("  MFU {0:f1}%, HFU {1:f1}%, {2:f1} TFLOP/s per device "
                      "(hardware)\n",
                      100 * plan.mfu, 100 * plan.hfu, plan.tflopsPerDevice);
  return text;
}

/// The other law at the curve's fitted fraction: Gustafson's scaled speedup
/// under strong scaling, Amdahl's under weak; and their names.
static double getOtherLaw(const ScalingCurve &curve, double n) {
  return curve.mode == ScalingMode::Strong
             ? getGustafsonSpeedup(curve.serialFraction, n)
             : getAmdahlSpeedup(curve.serialFraction, n);
}

static double getFittedLaw(const ScalingCurve &curve, double n) {
  return curve.mode == ScalingMode::Strong
             ? getAmdahlSpeedup(curve.serialFraction, n)
             : getGustafsonSpeedup(curve.serialFraction, n);
}

static const char *getLawName(ScalingMode mode) {
  return mode == ScalingMode::Strong ? "Amdahl" : "Gustafson";
}

std::string tessera::formatScaling(const ScalingCurve &curve) {
  std::string text;
  llvm::raw_string_ostream os(text);
  bool strong = curve.mode == ScalingMode::Strong;
  // "ep" and "cp" columns after "dp" where a point's plan has them.
  auto has = [&](auto axis) {
    return llvm::any_of(curve.points, [&](const ScalingPoint &point) {
      return point.plan && axis(point.plan->choice) > 1;
    });
  };
  bool experts = has([](const PlanChoice &c) { return c.ep; });
  bool context = has([](const PlanChoice &c) { return c.cp; });
  auto meshColumns = [&](auto ep, auto cp) {
    return (experts ? llvm::formatv(" {0,4}", ep).str() : std::string()) +
           (context ? llvm::formatv(" {0,4}", cp).str() : std::string());
  };
  os << llvm::formatv("{0,8} {1,7} {2,5}{13} {3,4} {4,4} {5,5} {6,4} {7,10} "
                      "{8,10} {9,8} {10,10} {11,6} {12,10}\n",
                      "devices", "batch", "dp", "tp", "pp", "mb", "zero",
                      "step (s)", "seq/s", "speedup", "efficiency", "MFU",
                      strong ? "Gustafson" : "Amdahl", meshColumns("ep", "cp"));
  int64_t base = curve.points.front().devices;
  for (const ScalingPoint &point : curve.points) {
    if (!point.plan) {
      os << llvm::formatv("{0,8} {1,7}  no plan fits in device memory\n",
                          point.devices, point.batch);
      continue;
    }
    const PlanChoice &c = point.plan->choice;
    double n = static_cast<double>(point.devices) / base;
    os << llvm::formatv("{0,8} {1,7} {2,5}{13} {3,4} {4,4} {5,5} {6,4} {7,10} "
                        "{8,10} {9,8:f2} {10,9:f1}% {11,5:f1}% {12,10:f2}\n",
                        point.devices, point.batch, c.dp, c.tp, c.pp,
                        c.microbatches, getZeroName(c),
                        llvm::format("%.4g", point.plan->stepTimeSeconds),
                        llvm::format("%.4g", point.throughput), point.speedup,
                        100 * point.efficiency, 100 * point.plan->mfu,
                        getOtherLaw(curve, n), meshColumns(c.ep, c.cp));
  }
  double f = curve.serialFraction;
  if (strong)
    os << llvm::formatv(
        "Amdahl: serial fraction {0:f4} fitted to the speedups (at most "
        "{1} times the first count's throughput); the Gustafson column is "
        "the scaled speedup n - f (n - 1) the same fraction gives a batch "
        "grown with the devices\n",
        f, f > 0 ? llvm::formatv("{0:f1}", 1 / f).str() : "unbounded");
  else
    os << llvm::formatv(
        "Gustafson: serial fraction {0:f4} fitted to the scaled speedups; "
        "the Amdahl column is the speedup 1 / (f + (1 - f) / n) the same "
        "fraction gives the first count's batch\n",
        f);
  return text;
}

llvm::json::Object tessera::toJson(const ScalingCurve &curve) {
  llvm::json::Array points;
  for (const ScalingPoint &point : curve.points) {
    llvm::json::Object object{{"devices", point.devices},
                              {"batch", point.batch}};
    if (point.plan) {
      object["plan"] = toJson(*point.plan);
      object["throughput_sequences_per_s"] = point.throughput;
      object["speedup"] = point.speedup;
      object["efficiency"] = point.efficiency;
    }
    points.push_back(std::move(object));
  }
  return llvm::json::Object{
      {"mode", getEnumName(kScalingModeNames, curve.mode)},
      {"law", getLawName(curve.mode)},
      {"serial_fraction", curve.serialFraction},
      {"points", std::move(points)}};
}

namespace {
/// The error of JSON that is not a curve of tessera plan --scaling --json.
llvm::Error failNotScalingJson(const llvm::Twine &what) {
  return llvm::createStringError(
      "not the JSON of tessera plan --scaling --json: " + what);
}

/// The range a number of a scaling curve's JSON lies in: no search makes
/// one outside it, and an infinite speedup would never end the plot's ticks.
struct NumberRange {
  double least, most;
};

/// `value` as a message shows it: 0.25, 1048576, inf, nan.
std::string formatValue(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", value);
  return text;
}

/// Fails naming `field` and `where` it is (" of point 2", or empty for the
/// curve's own) where `value` is not finite or lies outside `range`.
llvm::Error checkNumber(llvm::StringRef field, llvm::StringRef where,
                        double value, NumberRange range) {
  if (std::isfinite(value) && value >= range.least && value <= range.most)
    return llvm::Error::success();
  std::string expected = std::isfinite(range.most)
                             ? "from " + formatValue(range.least) + " to " +
                                   formatValue(range.most)
                             : "of at least " + formatValue(range.least);
  return llvm::createStringError(
      llvm::formatv("\"{0}\"{1} is {2}, expected a finite number {3}", field,
                    where, formatValue(value), expected)
          .str());
}

/// A speedup over the first count past the most devices a plan runs on
/// (2^20) is no search's.
constexpr NumberRange kSpeedupRange{0, double(dist::kMaxDevices)};
constexpr NumberRange kNonNegative{0, std::numeric_limits<double>::infinity()};

/// The point at `index` of a curve's "points": its count, batch and, where
/// a plan fits, its throughput, speedup and efficiency.
llvm::Expected<ScalingPoint> parseScalingPoint(const llvm::json::Value &value,
                                               size_t index) {
  std::string where = llvm::formatv(" of point {0}", index).str();
  const llvm::json::Object *point = value.getAsObject();
  std::optional<int64_t> devices =
      point ? point->getInteger("devices") : std::nullopt;
  if (!devices || *devices < 1)
    return failNotScalingJson("a point without a positive \"devices\" count");
  if (*devices > dist::kMaxDevices)
    return llvm::createStringError(llvm::formatv(
        "\"devices\"{0} is {1}, expected at most {2} (2^20, the most "
        "devices a plan runs on)",
        where, *devices, dist::kMaxDevices));
  ScalingPoint parsed;
  parsed.devices = *devices;
  parsed.batch = point->getInteger("batch").value_or(0);
  parsed.throughput =
      point->getNumber("throughput_sequences_per_s").value_or(0);
  parsed.speedup = point->getNumber("speedup").value_or(0);
  parsed.efficiency = point->getNumber("efficiency").value_or(0);
  if (llvm::Error error = checkNumber("throughput_sequences_per_s", where,
                                      parsed.throughput, kNonNegative))
    return std::move(error);
  if (llvm::Error error =
          checkNumber("speedup", where, parsed.speedup, kSpeedupRange))
    return std::move(error);
  if (llvm::Error error =
          checkNumber("efficiency", where, parsed.efficiency, kNonNegative))
    return std::move(error);
  return parsed;
}
} // namespace

llvm::Expected<ScalingCurve>
tessera::parseScalingCurve(const llvm::json::Value &json) {
  const llvm::json::Object *object = json.getAsObject();
  if (!object)
    return failNotScalingJson("expected an object");
  std::optional<llvm::StringRef> mode = object->getString("mode");
  std::optional<double> fraction = object->getNumber("serial_fraction");
  const llvm::json::Array *points = object->getArray("points");
  std::optional<ScalingMode> parsed =
      mode ? parseEnumName(kScalingModeNames, *mode) : std::nullopt;
  if (!parsed || !fraction || !points || points->empty())
    return failNotScalingJson("expected \"mode\" (strong or weak), "
                              "\"serial_fraction\" and a list of \"points\"");
  // The fitted fraction lies in [0, 1] (fitSerialFraction).
  if (llvm::Error error =
          checkNumber("serial_fraction", "", *fraction, NumberRange{0, 1}))
    return std::move(error);
  ScalingCurve curve;
  curve.mode = *parsed;
  curve.serialFraction = *fraction;
  for (auto [index, value] : llvm::enumerate(*points)) {
    llvm::Expected<ScalingPoint> point = parseScalingPoint(value, index);
    if (!point)
      return point.takeError();
    curve.points.push_back(std::move(*point));
  }
  return curve;
}

std::string tessera::getScalingSvg(const ScalingCurve &curve,
                                   llvm::StringRef model,
                                   llvm::StringRef machine) {
  constexpr double kWidth = 720, kHeight = 440, kLeft = 70, kRight = 30,
                   kTop = 50, kBottom = 60;
  int64_t base = curve.points.front().devices;
  double most = static_cast<double>(curve.points.back().devices) / base;
  double top = most;
  for (const ScalingPoint &point : curve.points)
    top = std::max(top, point.speedup);
  double xSpan = std::max(std::log2(most), 1.0);
  double ySpan = std::max(std::log2(top), 1.0);
  auto x = [&](double n) {
    return kLeft + std::log2(n) / xSpan * (kWidth - kLeft - kRight);
  };
  auto y = [&](double speedup) {
    return kHeight - kBottom -
           std::log2(std::max(speedup, 1.0)) / ySpan *
               (kHeight - kTop - kBottom);
  };
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv(
      "<svg class=\"scaling\" xmlns=\"http://www.w3.org/"
      "2000/svg\" width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n",
      kWidth, kHeight);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv(
      "<text x=\"{0}\" y=\"24\" font-size=\"15\">{1} "
      "scaling of {2} on {3}</text>\n",
      kLeft, curve.mode == ScalingMode::Strong ? "Strong" : "Weak",
      escapeHtml(llvm::sys::path::filename(model)), escapeHtml(machine));
  // Axes, and a tick at each count and at each power of two of speedup.
  os << llvm::formatv("<path d=\"M{0},{1} V{2} H{3}\" stroke=\"black\" "
                      "fill=\"none\"/>\n",
                      kLeft, kTop, kHeight - kBottom, kWidth - kRight);
  for (const ScalingPoint &point : curve.points) {
    double n = static_cast<double>(point.devices) / base;
    os << llvm::formatv("<text x=\"{0:f1}\" y=\"{1}\" "
                        "text-anchor=\"middle\">{2}</text>\n",
                        x(n), kHeight - kBottom + 18, point.devices);
  }
  // At most 64 ticks, whatever the curve holds: doubling towards an
  // infinite top would never end.
  for (int power = 0; power < 64; ++power) {
    double speedup = std::exp2(power);
    if (speedup > top * 1.0001)
      break;
    os << llvm::formatv("<text x=\"{0}\" y=\"{1:f1}\" "
                        "text-anchor=\"end\">{2}</text>\n",
                        kLeft - 6, y(speedup) + 4, speedup);
  }
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" "
                      "text-anchor=\"middle\">devices</text>\n",
                      (kLeft + kWidth - kRight) / 2, kHeight - 18);
  os << llvm::formatv("<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" "
                      "transform=\"rotate(-90 18 {0})\">{1}</text>\n",
                      (kTop + kHeight - kBottom) / 2,
                      curve.mode == ScalingMode::Strong ? "speedup"
                                                        : "scaled speedup");
  // The ideal, the fitted law, the plans.
  os << llvm::formatv("<path d=\"M{0:f1},{1:f1} L{2:f1},{3:f1}\" "
                      "stroke=\"gray\" stroke-dasharray=\"4 4\"/>\n",
                      x(1), y(1), x(most), y(most));
  std::string law = "M";
  for (int i = 0; i <= 64; ++i) {
    double n = std::exp2(std::log2(most) * i / 64);
    law += llvm::formatv("{0}{1:f1},{2:f1}", i ? " L" : "", x(n),
                         y(getFittedLaw(curve, n)));
  }
  os << "<path d=\"" << law
     << "\" stroke=\"darkorange\" fill=\"none\" stroke-width=\"2\"/>\n";
  std::string measured;
  for (const ScalingPoint &point : curve.points) {
    if (point.speedup <= 0) // no plan fits
      continue;
    double n = static_cast<double>(point.devices) / base;
    measured += llvm::formatv("{0}{1:f1},{2:f1}", measured.empty() ? "M" : " L",
                              x(n), y(point.speedup));
    os << llvm::formatv("<circle cx=\"{0:f1}\" cy=\"{1:f1}\" r=\"4\" "
                        "fill=\"steelblue\"/>\n",
                        x(n), y(point.speedup));
  }
  os << "<path d=\"" << measured
     << "\" stroke=\"steelblue\" fill=\"none\" stroke-width=\"2\"/>\n";
  // The legend.
  double legend = kLeft + 16;
  os << llvm::formatv(
      "<text x=\"{0}\" y=\"{1}\" fill=\"steelblue\">best plan at each "
      "count</text>\n<text x=\"{0}\" y=\"{2}\" fill=\"darkorange\">{3}, "
      "serial fraction {4:f4}</text>\n<text x=\"{0}\" y=\"{5}\" "
      "fill=\"gray\">ideal</text>\n",
      legend, kTop + 4, kTop + 20, getLawName(curve.mode), curve.serialFraction,
      kTop + 36);
  os << "</svg>\n";
  return text;
}

std::optional<WinReason>
tessera::getWinReason(llvm::ArrayRef<PlanEstimate> plans) {
  if (plans.empty())
    return std::nullopt;
  const PlanEstimate &best = plans.front();
  for (const PlanEstimate &other : plans) {
    const PlanChoice &a = best.choice, &b = other.choice;
    if (a.dp == b.dp && a.tp == b.tp && a.pp == b.pp && a.ep == b.ep &&
        a.cp == b.cp)
      continue;
    struct Part {
      const char *name;
      double winner, rival;
    } parts[] = {
        {"compute", best.computeSeconds, other.computeSeconds},
        {"tensor-parallel communication", best.breakdown.tpExposed,
         other.breakdown.tpExposed},
        {"expert-parallel all-to-all", best.breakdown.epExposed,
         other.breakdown.epExposed},
        {"context-parallel ring transfers", best.breakdown.cpExposed,
         other.breakdown.cpExposed},
        {"exposed data-parallel communication", best.breakdown.dpExposed,
         other.breakdown.dpExposed},
        {"pipeline communication", best.breakdown.ppExposed,
         other.breakdown.ppExposed},
        {"pipeline bubble", best.breakdown.bubble, other.breakdown.bubble}};
    const Part *largest =
        llvm::max_element(parts, [](const Part &x, const Part &y) {
          return x.rival - x.winner < y.rival - y.winner;
        });
    return WinReason{a,
                     b,
                     other.stepTimeSeconds / best.stepTimeSeconds - 1,
                     largest->name,
                     largest->winner,
                     largest->rival};
  }
  return std::nullopt;
}
