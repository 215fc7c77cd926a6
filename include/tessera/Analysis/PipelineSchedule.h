//===- PipelineSchedule.h - Pipeline schedules, simulated -------*- C++ -*-===//
//
// The order in which each pipeline rank runs its units (the forward,
// backward or weight-gradient ops of one stage on one microbatch) under
// GPipe, 1F1B, interleaved 1F1B and ZB-H1, and two simulations of such
// orders over abstract steps: one over transfers, which places the waits of
// --tessera-pipeline's sends and finds deadlocks, and one over units with
// times, which measures a schedule's bubble. No IR: the pass maps its ops
// onto units and its sends and receives onto events.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_PIPELINESCHEDULE_H
#define TESSERA_ANALYSIS_PIPELINESCHEDULE_H

#include "tessera/Analysis/CostModel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

/// The shape of a pipeline: `ranks` devices along the pipeline axis, each
/// running `virtualStages` stages (stage s runs on rank s mod ranks), over
/// `microbatches` microbatches.
struct PipelineSpec {
  int64_t ranks, microbatches, virtualStages;
  PipelineSchedule schedule;
  int64_t getNumStages() const { return ranks * virtualStages; }
};

/// Why `spec`'s schedule cannot run its ranks, virtual stages and
/// microbatches, or "" when it can: virtual stages only interleave; 2BW's
/// warm-up needs a microbatch per stage; PipeDream updates after each
/// microbatch, so its step is one; interleaving needs the microbatches in
/// whole rounds of the ranks. The pipeline pass refuses such a spec with
/// this message and the plan search never proposes one.
std::string getScheduleRejection(const PipelineSpec &spec);

/// What a unit of a schedule runs: the forward ops of a stage, its backward
/// ops (with ZB-H1 only those that make the gradients other stages need),
/// or (ZB-H1) the rest of its backward ops: the weight gradients.
enum class PipelineUnitKind { Forward, Backward, Weight };

/// One unit of a rank's schedule: the ops of one kind of a stage on one
/// microbatch.
struct PipelineUnit {
  PipelineUnitKind kind;
  int64_t stage, microbatch;
  /// 0: the run's step; -k: the k-th step before (the backwards that
  /// PipeDream and 2BW run after the step's run).
  int64_t stepOffset = 0;
  bool operator==(const PipelineUnit &other) const {
    return kind == other.kind && stage == other.stage &&
           microbatch == other.microbatch;
  }
};

/// The forward units `rank` runs before its steady state of one forward and
/// one backward: all of them for GPipe or without a backward, p - rank - 1
/// for 1F1B, ZB-H1 and interleaved 1F1B with one stage per rank (which is
/// 1F1B, as in Megatron-LM), 2 (p - rank - 1) + (v - 1) p for interleaved
/// 1F1B with v > 1 (at most the units there are).
int64_t getWarmupUnits(const PipelineSpec &spec, int64_t rank,
                       bool hasBackward);

/// The units of `rank` in the order `spec.schedule` runs them. ZB-H1 runs
/// 1F1B's forwards and input-gradient backwards, and the weight units of
/// microbatch k right after the backward of microbatch k + rank (the last
/// `rank` at the end). Without a backward (a forward-only program) the
/// schedule has forward units only.
/// Interleaved 1F1B needs the microbatches to be a multiple of the ranks.
llvm::SmallVector<PipelineUnit>
getPipelineSchedule(const PipelineSpec &spec, int64_t rank, bool hasBackward);

/// How many microbatches of one stage a rank holds at once, at most, from
/// its forward unit to its backward unit, from its forward to its weight
/// unit (ZB-H1) and from its backward to its weight unit. The export gives
/// each value that lives across units as many copies as its lifetimes
/// overlap, for the whole schedule: these are the copies of what the
/// backward reads, of what both read, and of what the weight unit reads of
/// the backward's. A value sent to another rank lives until its send is
/// waited for: the forward's output and the backward's input gradient have
/// as many copies as those lifetimes overlap (0 for a stage that sends
/// none); the input gradient, if ZB-H1's weight unit reads it too, until
/// that unit if later (`backwardSentOrRead`).
struct StageInFlight {
  int64_t forwardToBackward = 0, forwardToWeight = 0, backwardToWeight = 0;
  int64_t forwardSent = 0, backwardSent = 0, backwardSentOrRead = 0;
};

/// The stages a rank runs, each with what it holds in flight.
using RankInFlight = llvm::SmallVector<std::pair<int64_t, StageInFlight>>;

/// Per rank, its stages in flight; the sends' waits as simulateTransfers
/// places them for a GPT's activations (a forward's output to the next
/// stage's forward, an input gradient to the previous stage's backward).
llvm::SmallVector<RankInFlight> getStagesInFlight(const PipelineSpec &spec);

/// One step of a rank's program, as the transfer simulation sees it.
struct PipelineEvent {
  enum Kind { Recv, Compute, Send } kind;
  int64_t message = -1; // Recv, Send
  /// The unit it belongs to; -1 for the post ops and their transfers.
  int64_t unit = -1;
};

/// What the transfer simulation found.
struct TransferSimulation {
  /// The first rank left blocked on a receive whose send never comes.
  std::optional<int64_t> deadlockedRank;
  /// Per message, the event of its sender after which its send is waited
  /// (-1: at the end of the program). Empty on a deadlock.
  llvm::SmallVector<int64_t> waitAfter;
};

/// Runs the ranks' `events` with blocking receives and sends that never
/// block; message i goes to rank `receivers[i]`, and each is sent and
/// received once. A send is waited for at the first event of its sender
/// that comes after the receive was posted, as far as the sender knows:
/// vector clocks carried by the messages, so the wait never blocks on a
/// receive that has not been reached.
TransferSimulation
simulateTransfers(llvm::ArrayRef<llvm::SmallVector<PipelineEvent>> events,
                  llvm::ArrayRef<int64_t> receivers);

/// The time a unit of each kind takes on its stage. Without ZB-H1 a
/// backward unit also makes the weight gradients: give it both halves.
struct PipelineUnitSeconds {
  double forwardSeconds = 1, backwardSeconds = 1, weightSeconds = 1;
};

/// When each unit of a schedule runs, transfers taking no time.
struct PipelineTimeline {
  /// The first rank whose next unit waits for a unit that never runs.
  std::optional<int64_t> deadlockedRank;
  /// Per rank and unit, when it ends.
  llvm::SmallVector<llvm::SmallVector<double>> endSeconds;
  /// When the last unit ends.
  double stepSeconds = 0;
  /// The most time one rank spends computing.
  double busySeconds = 0;
  /// The idle part of a step against the busiest rank's compute, the
  /// measure getBubbleFraction estimates.
  double getBubbleFraction() const {
    return busySeconds > 0 ? stepSeconds / busySeconds - 1 : 0;
  }
};

/// Runs the ranks' `units` (per rank, in order) as early as their inputs
/// allow: a forward after the previous stage's forward of its microbatch, a
/// backward after its forward and the next stage's backward, a weight unit
/// after its backward. Stage s runs on rank s mod ranks.
PipelineTimeline
simulateUnits(const PipelineSpec &spec,
              llvm::ArrayRef<llvm::SmallVector<PipelineUnit>> units,
              const PipelineUnitSeconds &seconds);

} // namespace tessera

#endif // TESSERA_ANALYSIS_PIPELINESCHEDULE_H
