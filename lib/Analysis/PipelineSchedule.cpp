//===- PipelineSchedule.cpp - Pipeline schedules, simulated ---------------===//

#include "tessera/Analysis/PipelineSchedule.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>
#include <tuple>

using namespace tessera;

int64_t tessera::getWarmupUnits(const PipelineSpec &spec, int64_t rank,
                                bool hasBackward) {
  int64_t p = spec.ranks, m = spec.microbatches, v = spec.virtualStages;
  // With one stage per rank Megatron-LM runs plain 1F1B: the longer warm-up
  // only pays for the chunks there are, and would hold p - rank - 1 more
  // microbatches for nothing.
  if (spec.schedule == PipelineSchedule::Interleaved && v > 1) {
    int64_t total = m * v;
    return hasBackward ? std::min((p - rank - 1) * 2 + (v - 1) * p, total)
                       : total;
  }
  return spec.schedule == PipelineSchedule::GPipe || !hasBackward
             ? m
             : std::min(p - rank - 1, m);
}

llvm::SmallVector<PipelineUnit>
tessera::getPipelineSchedule(const PipelineSpec &spec, int64_t rank,
                             bool hasBackward) {
  using Kind = PipelineUnitKind;
  int64_t p = spec.ranks, m = spec.microbatches, v = spec.virtualStages;
  int64_t warmup = getWarmupUnits(spec, rank, hasBackward);
  llvm::SmallVector<PipelineUnit> units;
  if (spec.schedule == PipelineSchedule::Interleaved) {
    // Megatron-LM's interleaved 1F1B: unit k of the forwards runs chunk
    // (k / p) mod v on microbatch (k / (p v)) p + k mod p; the backwards
    // walk the chunks in reverse.
    int64_t total = m * v;
    auto microbatch = [&](int64_t k) { return k / (p * v) * p + k % p; };
    auto forward = [&](int64_t k) {
      return PipelineUnit{Kind::Forward, (k / p) % v * p + rank, microbatch(k)};
    };
    auto backward = [&](int64_t k) {
      return PipelineUnit{Kind::Backward, (v - 1 - (k / p) % v) * p + rank,
                          microbatch(k)};
    };
    for (int64_t k = 0; k < warmup; ++k)
      units.push_back(forward(k));
    for (int64_t k = 0; k < total - warmup; ++k) {
      units.push_back(forward(warmup + k));
      units.push_back(backward(k));
    }
    if (hasBackward)
      for (int64_t k = total - warmup; k < total; ++k)
        units.push_back(backward(k));
    return units;
  }
  // ZB-H1 (Qi et al. 2023, figure 3, top) keeps 1F1B's forwards and input
  // gradients and runs the weight gradients of microbatch k right after the
  // input gradients of microbatch k + rank, the last `rank` of them at the
  // end. Rank r thus holds 1F1B's p - r microbatches between F and B, and r
  // more between B and W: as many as the first rank holds. The later ranks
  // thereby move their Ws out of the way of the Bs the earlier ranks wait
  // for, into the tail, where 1F1B's later ranks idle. With F = B = W a rank
  // idles only for the p - 1 units before its first B: a bubble of
  // (p - 1) / (3m) for m >= p.
  bool zeroBubble = spec.schedule == PipelineSchedule::ZeroBubbleH1;
  auto backward = [&](int64_t k) {
    units.push_back({Kind::Backward, rank, k});
    if (zeroBubble && k >= rank)
      units.push_back({Kind::Weight, rank, k - rank});
  };
  for (int64_t k = 0; k < warmup; ++k)
    units.push_back({Kind::Forward, rank, k});
  for (int64_t k = 0; k < m - warmup; ++k) {
    units.push_back({Kind::Forward, rank, warmup + k});
    backward(k);
  }
  if (hasBackward) {
    for (int64_t k = m - warmup; k < m; ++k)
      backward(k);
    if (zeroBubble)
      for (int64_t k = std::max<int64_t>(m - rank, 0); k < m; ++k)
        units.push_back({Kind::Weight, rank, k});
  }
  return units;
}

/// The most of `intervals` (inclusive, in order of start and of end) that
/// overlap.
static int64_t
getMostOverlapping(llvm::ArrayRef<std::pair<int64_t, int64_t>> intervals) {
  int64_t most = 0;
  for (size_t k = 0, first = 0; k < intervals.size(); ++k) {
    while (intervals[first].second < intervals[k].first)
      ++first;
    most = std::max<int64_t>(most, k - first + 1);
  }
  return most;
}

llvm::SmallVector<std::pair<int64_t, StageInFlight>>
tessera::getStagesInFlight(const PipelineSpec &spec, int64_t rank) {
  using Kind = PipelineUnitKind;
  // Per stage and microbatch, the entries of its F, B and W units.
  std::map<int64_t, llvm::SmallVector<std::array<int64_t, 3>>> runs;
  llvm::SmallVector<PipelineUnit> units =
      getPipelineSchedule(spec, rank, /*hasBackward=*/true);
  for (auto [entry, unit] : llvm::enumerate(units)) {
    auto &stage = runs[unit.stage];
    if (stage.size() <= static_cast<size_t>(unit.microbatch))
      stage.resize(unit.microbatch + 1, {-1, -1, -1});
    int kind = unit.kind == Kind::Forward    ? 0
               : unit.kind == Kind::Backward ? 1
                                             : 2;
    stage[unit.microbatch][kind] = entry;
  }
  llvm::SmallVector<std::pair<int64_t, StageInFlight>> stages;
  for (auto &[stage, microbatches] : runs) {
    llvm::SmallVector<std::pair<int64_t, int64_t>> fb, fw, bw;
    for (const std::array<int64_t, 3> &run : microbatches) {
      fb.push_back({run[0], run[1]});
      if (run[2] >= 0) {
        fw.push_back({run[0], run[2]});
        bw.push_back({run[1], run[2]});
      }
    }
    stages.push_back({stage,
                      {getMostOverlapping(fb), getMostOverlapping(fw),
                       getMostOverlapping(bw)}});
  }
  return stages;
}

TransferSimulation tessera::simulateTransfers(
    llvm::ArrayRef<llvm::SmallVector<PipelineEvent>> events,
    llvm::ArrayRef<int64_t> receivers) {
  // Vector clocks: a rank knows another reached event e once it receives a
  // message sent after e.
  int64_t p = events.size();
  llvm::SmallVector<int64_t> next(p, 0);
  llvm::SmallVector<llvm::SmallVector<int64_t>> clock(
      p, llvm::SmallVector<int64_t>(p, -1));
  // Per rank and event, the clock after it.
  llvm::SmallVector<llvm::SmallVector<llvm::SmallVector<int64_t>>> clocks(p);
  llvm::DenseMap<int64_t, llvm::SmallVector<int64_t>> sentClock;
  llvm::SmallVector<int64_t> recvEvent(receivers.size(), -1);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t rank = 0; rank < p; ++rank) {
      while (next[rank] < static_cast<int64_t>(events[rank].size())) {
        const PipelineEvent &event = events[rank][next[rank]];
        if (event.kind == PipelineEvent::Recv &&
            !sentClock.count(event.message))
          break;
        clock[rank][rank] = next[rank];
        if (event.kind == PipelineEvent::Send)
          sentClock[event.message] = clock[rank];
        if (event.kind == PipelineEvent::Recv) {
          recvEvent[event.message] = next[rank];
          for (int64_t other = 0; other < p; ++other)
            clock[rank][other] =
                std::max(clock[rank][other], sentClock[event.message][other]);
          clock[rank][rank] = next[rank];
        }
        clocks[rank].push_back(clock[rank]);
        ++next[rank];
        progress = true;
      }
    }
  }
  TransferSimulation simulation;
  for (int64_t rank = 0; rank < p; ++rank)
    if (next[rank] < static_cast<int64_t>(events[rank].size())) {
      simulation.deadlockedRank = rank;
      return simulation;
    }
  simulation.waitAfter.assign(receivers.size(), -1);
  for (int64_t rank = 0; rank < p; ++rank) {
    for (auto [index, event] : llvm::enumerate(events[rank])) {
      if (event.kind != PipelineEvent::Send)
        continue;
      int64_t to = receivers[event.message];
      for (int64_t after = index + 1;
           after < static_cast<int64_t>(events[rank].size()); ++after) {
        if (clocks[rank][after][to] >= recvEvent[event.message]) {
          simulation.waitAfter[event.message] = after;
          break;
        }
      }
    }
  }
  return simulation;
}

PipelineTimeline
tessera::simulateUnits(const PipelineSpec &spec,
                       llvm::ArrayRef<llvm::SmallVector<PipelineUnit>> units,
                       const PipelineUnitSeconds &seconds) {
  using Kind = PipelineUnitKind;
  int64_t p = units.size(), stages = spec.getNumStages();
  assert(p == spec.ranks && "one unit list per rank");
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  auto getKey = [](Kind kind, int64_t stage, int64_t microbatch) {
    return Key{static_cast<int64_t>(kind), stage, microbatch};
  };
  llvm::DenseMap<Key, double> ends;
  PipelineTimeline timeline;
  timeline.endSeconds.resize(p);
  llvm::SmallVector<double> free(p, 0), busy(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t rank = 0; rank < p; ++rank) {
      llvm::SmallVector<double> &rankEnds = timeline.endSeconds[rank];
      while (rankEnds.size() < units[rank].size()) {
        const PipelineUnit &unit = units[rank][rankEnds.size()];
        llvm::SmallVector<Key, 2> inputs;
        double duration = seconds.forwardSeconds;
        if (unit.kind == Kind::Forward) {
          if (unit.stage > 0)
            inputs.push_back(
                getKey(Kind::Forward, unit.stage - 1, unit.microbatch));
        } else if (unit.kind == Kind::Backward) {
          duration = seconds.backwardSeconds;
          inputs.push_back(getKey(Kind::Forward, unit.stage, unit.microbatch));
          if (unit.stage + 1 < stages)
            inputs.push_back(
                getKey(Kind::Backward, unit.stage + 1, unit.microbatch));
        } else {
          duration = seconds.weightSeconds;
          inputs.push_back(getKey(Kind::Backward, unit.stage, unit.microbatch));
        }
        double start = free[rank];
        bool ready = llvm::all_of(inputs, [&](const Key &input) {
          auto it = ends.find(input);
          if (it == ends.end())
            return false;
          start = std::max(start, it->second);
          return true;
        });
        if (!ready)
          break;
        free[rank] = start + duration;
        busy[rank] += duration;
        ends[getKey(unit.kind, unit.stage, unit.microbatch)] = free[rank];
        rankEnds.push_back(free[rank]);
        progress = true;
      }
    }
  }
  for (int64_t rank = 0; rank < p; ++rank)
    if (timeline.endSeconds[rank].size() < units[rank].size()) {
      timeline.deadlockedRank = rank;
      return timeline;
    }
  timeline.stepSeconds = *llvm::max_element(free);
  timeline.busySeconds = *llvm::max_element(busy);
  return timeline;
}
