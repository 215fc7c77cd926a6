//===- Report.h - A plan as one self-contained HTML page --------*- C++ -*-===//
//
// `tessera report` draws a compiled plan, and optionally the trace of a run
// of it, as one HTML page of inline SVG figures: the pipeline schedule as a
// timeline of forward (F), backward (B) and weight-gradient (W) units, each
// program's peak memory by category against the device's capacity, and the
// collectives of a step by mesh axes and bytes. The page loads nothing from
// anywhere; hovering a shape shows its numbers (SVG <title>), without
// script.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_EXPORT_REPORT_H
#define TESSERA_EXPORT_REPORT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {
namespace plan {
class Mesh;
class Plan;
class Program;
} // namespace plan

/// One pipeline unit's run on a row of the schedule's timeline.
struct UnitSpan {
  /// The row: a program of the plan (a stage's ranks), or a traced rank.
  int64_t row = 0;
  /// 'F', 'B' or 'W'; the pipeline stage and microbatch it ran.
  char kind = 'F';
  int64_t stage = 0, microbatch = 0;
  double start = 0, end = 0;
};

/// A plan's pipeline schedule as the papers draw it: every program's
/// schedule entries in order, each unit starting once its program is free
/// and its inputs are made (a stage's forward after the previous stage's,
/// a backward after the next stage's or, on the last stage, after its own
/// forward, a weight gradient after its backward), each forward taking one
/// unit of time and each backward two (one each for the input and weight
/// gradients where the schedule splits them, as zb-h1 does). Rows are the
/// programs; empty for a plan without units. Fails on a schedule that waits
/// for a unit no program runs.
llvm::Expected<std::vector<UnitSpan>> simulateSchedule(const plan::Plan &plan);

/// The units of the last traced step of a merged trace (tessera-run
/// --trace DIR writes DIR/trace.json), each rank a row and its clock from
/// its first event of that step. Fails naming the event and field of a rank
/// (pid) past the most devices a plan runs on (2^20, dist::kMaxDevices) or
/// of a time (ts, dur) not finite, negative (dur) or past 2^53
/// microseconds.
llvm::Expected<std::vector<UnitSpan>>
getTracedSchedule(const llvm::json::Value &trace);

/// What a program's collectives move in one step, per device: each kind
/// on each group of mesh axes ("dp", "dp,tp"; a pipeline's sends on its
/// axis), counted per microbatch inside pipeline units. Groups of one
/// device are left out: they move nothing.
struct CollectiveTotal {
  std::string axes, kind;
  int64_t count = 0, bytes = 0;
};
std::vector<CollectiveTotal>
getCollectivesPerStep(const plan::Mesh &mesh, const plan::Program &program);

/// A figure made elsewhere (the scaling curve of tessera plan --scaling).
struct ReportFigure {
  std::string title, svg;
};

struct ReportInputs {
  const plan::Plan *plan = nullptr;
  /// The plan file's name, shown in the title.
  std::string planName;
  /// The device's memory and its machine's name (none: no capacity line).
  std::optional<double> capacityBytes;
  std::string machineName;
  /// The units of a traced run of the plan (getTracedSchedule), or none
  /// where no trace was given.
  std::optional<std::vector<UnitSpan>> tracedUnits;
  std::vector<ReportFigure> figures;
};

/// The page. Every string it writes from the inputs (names of the plan,
/// model, machine and mesh axes, the figures' titles) is escaped
/// (escapeHtml); a figure's SVG is written as it is.
llvm::Expected<std::string> renderReport(const ReportInputs &inputs);

/// Ranks as runs: {0, 1, 2, 3, 6} -> "0-3, 6".
std::string formatRanks(llvm::ArrayRef<int64_t> ranks);

} // namespace tessera

#endif // TESSERA_EXPORT_REPORT_H
