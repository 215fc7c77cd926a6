//===- UpdateRule.h - What a server's consistency decides --------*- C++
//-*-===//
//
// The bookkeeping of a parameter server's consistency, apart from its
// sockets and tensors: each worker's clock (the last step it pushed), the
// sync round in progress, which pushes an update sums and at what scale,
// and which pulls wait.
//
// sync sums a round's gradients of every live worker and applies them once
// (data parallelism: the workers' gradients are partial sums of the
// step's); async applies each as it arrives, scaled to the pushing worker's
// own batch; ssp=K does the same, but holds a worker's pull while it is
// more than K steps ahead of the slowest live worker.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PS_UPDATERULE_H
#define TESSERA_RUNTIME_PS_UPDATERULE_H

#include "tessera/runtime/Plan.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace tessera::runtime::ps {

/// A push as the rule sees it: who pushed which step, against which
/// version of the parameters (the updates applied when it pulled), and the
/// loss it reports.
struct PushRecord {
  int64_t worker = 0, step = 0, version = 0;
  double loss = 0;
};

/// An update to apply: the pushes whose gradients it sums, in the order
/// summed, and the scale of their sum.
struct Update {
  std::vector<PushRecord> pushes;
  float scale = 1;
};

class UpdateRule {
public:
  /// `workers`: the workers the plan was compiled for, whose pushes sum to
  /// a step's gradient.
  UpdateRule(Consistency consistency, int64_t workers)
      : consistency(consistency), workers(workers) {}

  const Consistency &getConsistency() const { return consistency; }

  /// The step a worker says hello at: one the rule knows resumes after its
  /// last push; a new one starts at the slowest of the other `live`
  /// workers' steps (so that it holds no one back), or, in sync, at the
  /// rounds done (`version`) once any other is known.
  int64_t welcome(int64_t worker, const std::set<int64_t> &live,
                  int64_t version);

  /// Records that `worker` is at `step` (a pull: kept where it is known).
  void notePull(int64_t worker, int64_t step) { clocks.emplace(worker, step); }

  /// Advances `worker`'s clock to `step` (a push's).
  void advanceClock(int64_t worker, int64_t step);

  /// Whether a push of `worker` is one sent again into the round in
  /// progress (sync: to a server restarted since), which counts once.
  bool isRepeatedPush(int64_t worker) const;

  /// Records a push (after advanceClock and isRepeatedPush).
  void addPush(const PushRecord &push) { pending.push_back(push); }

  /// The update the pushes so far make, if one is ready; the rule forgets
  /// its pushes. sync: the round, once every `live` worker has pushed into
  /// it, in the workers' order (a round gives the same update whatever
  /// order its pushes came in), scaled by the workers over the pushes (a
  /// round that lost workers stands for them with the mean of the rest).
  /// async and ssp: the push, scaled by the workers (a worker's gradient
  /// is its part of a step's: alone, it stands for the step).
  std::optional<Update> takeUpdate(const std::set<int64_t> &live);

  /// Whether `worker` may pull now: sync, unless it pushed into the round
  /// in progress; ssp=K, while at most K steps ahead of the slowest `live`
  /// worker; async, always.
  bool mayPull(int64_t worker, const std::set<int64_t> &live) const;

  /// The slowest `live` worker's clock (0 without one).
  int64_t getSlowestClock(const std::set<int64_t> &live) const;

  /// Each worker ever seen, with its clock (what a checkpoint keeps).
  std::map<int64_t, int64_t> &getClocks() { return clocks; }
  int64_t getClock(int64_t worker) const;

private:
  Consistency consistency;
  int64_t workers;
  std::map<int64_t, int64_t> clocks;
  /// The pushes not yet applied: sync, the round's; else at most one.
  std::vector<PushRecord> pending;
};

} // namespace tessera::runtime::ps

#endif // TESSERA_RUNTIME_PS_UPDATERULE_H
