//===- PipelineSchedule.cpp - Pipeline schedules, simulated ---------------===//

#include "tessera/Analysis/PipelineSchedule.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>
#include <tuple>

using namespace tessera;

std::string tessera::getScheduleRejection(const PipelineSpec &spec) {
  int64_t p = spec.ranks, m = spec.microbatches;
  if (spec.virtualStages > 1 && spec.schedule != PipelineSchedule::Interleaved)
    return "virtual stages need the interleaved schedule";
  // 2BW's warm-up of rank r alternates its p - r - 1 forwards with the
  // step before's last backwards: a step has that many and more.
  if (spec.schedule == PipelineSchedule::TwoBW && m < p)
    return "the 2bw schedule needs at least as many microbatches (" +
           std::to_string(m) + ") as stages (" + std::to_string(p) + ")";
  // PipeDream updates after each backward: a step is one microbatch (2BW is
  // PipeDream over steps of several).
  if (spec.schedule == PipelineSchedule::PipeDream && m != 1)
    return "the pipedream schedule updates the weights after each "
           "microbatch's backward: a step is one microbatch, got " +
           std::to_string(m) + " (2bw updates once per step of several)";
  if (spec.schedule == PipelineSchedule::Interleaved && m % p != 0)
    return "the interleaved schedule needs microbatches (" + std::to_string(m) +
           ") to be a multiple of stages (" + std::to_string(p) + ")";
  return "";
}

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
  if (spec.schedule == PipelineSchedule::GPipe || !hasBackward)
    return m;
  // Without a flush the warm-up runs on into the step before's backwards.
  return isSteady(spec.schedule) ? p - rank - 1 : std::min(p - rank - 1, m);
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
  // PipeDream and PipeDream-2BW: 1F1B without a flush, its steady state
  // running on across steps. Numbering the microbatches through the whole
  // run (step t's microbatch k is t m + k), F(k) is followed by
  // B(k - warmup), of this step or of one before: with 2BW (m >= p) the
  // warm-up forwards alternate with the cool-down backwards of the step
  // before; with PipeDream (one microbatch a step) rank r runs the backward
  // of step t - (p - r - 1).
  if (isSteady(spec.schedule) && hasBackward) {
    for (int64_t k = 0; k < m; ++k) {
      units.push_back({Kind::Forward, rank, k});
      int64_t behind = k - warmup;
      int64_t stepOffset = behind >= 0 ? 0 : -((-behind + m - 1) / m);
      units.push_back(
          {Kind::Backward, rank, behind - stepOffset * m, stepOffset});
    }
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

/// The unit that receives what `unit` sends (stage -1: none), as the
/// pipeline pass sends a GPT's activations: the next stage's forward, or
/// the previous stage's backward; under ZB-H1, whose first stage makes no
/// input gradient, the first stage's weight unit.
static PipelineUnit getReceiver(const PipelineSpec &spec,
                                const PipelineUnit &unit) {
  using Kind = PipelineUnitKind;
  if (unit.kind == Kind::Forward)
    return {Kind::Forward,
            unit.stage + 1 < spec.getNumStages() ? unit.stage + 1 : -1,
            unit.microbatch};
  if (unit.kind == Kind::Weight || unit.stage == 0)
    return {Kind::Backward, -1, unit.microbatch};
  bool weightApart = spec.schedule == PipelineSchedule::ZeroBubbleH1;
  return {weightApart && unit.stage == 1 ? Kind::Weight : Kind::Backward,
          unit.stage - 1, unit.microbatch};
}

llvm::SmallVector<RankInFlight>
tessera::getStagesInFlight(const PipelineSpec &spec) {
  using Kind = PipelineUnitKind;
  int64_t p = spec.ranks, m = spec.microbatches, stages = spec.getNumStages();
  // Units by (kind, stage, microbatch): each runs on its stage's rank.
  auto getIndex = [&](const PipelineUnit &unit) {
    return (static_cast<int64_t>(unit.kind) * stages + unit.stage) * m +
           unit.microbatch;
  };
  // Without a flush a rank holds a microbatch from its forward to its
  // backward as 1F1B does (p - rank of them, the ring running on across
  // steps), and what it sends until the run's end: a slot per microbatch.
  if (isSteady(spec.schedule)) {
    llvm::SmallVector<RankInFlight> ranks(p);
    for (int64_t rank = 0; rank < p; ++rank)
      for (int64_t stage = rank; stage < stages; stage += p)
        ranks[rank].push_back({stage,
                               {p - rank, 0, 0, stage + 1 < stages ? m : 0,
                                stage > 0 ? m : 0, stage > 0 ? m : 0}});
    return ranks;
  }
  llvm::SmallVector<llvm::SmallVector<PipelineUnit>> schedules;
  llvm::SmallVector<int64_t> entryOf(3 * stages * m, -1);
  for (int64_t rank = 0; rank < p; ++rank) {
    schedules.push_back(getPipelineSchedule(spec, rank, /*hasBackward=*/true));
    for (auto [entry, unit] : llvm::enumerate(schedules.back()))
      entryOf[getIndex(unit)] = entry;
  }
  // Per unit that sends, the entry of its rank at whose end the send is
  // waited for: the last if the receipt is not known before.
  llvm::SmallVector<int64_t> waitOf(3 * stages * m, -1);
  if (spec.virtualStages == 1) {
    // A line of ranks: any sign of a receipt comes back through the
    // receiver, so a send is waited for where its sender receives the first
    // message that the receiving rank sends it from the receiving unit on
    // (as simulateTransfers finds, without its clocks). Per rank and entry,
    // the first entry from there whose unit sends to the previous rank
    // ([0]) and to the next ([1]).
    llvm::SmallVector<std::array<llvm::SmallVector<int64_t>, 2>> nextSend(p);
    for (int64_t rank = 0; rank < p; ++rank) {
      int64_t n = schedules[rank].size();
      for (llvm::SmallVector<int64_t> &next : nextSend[rank])
        next.assign(n + 1, -1);
      for (int64_t entry = n - 1; entry >= 0; --entry) {
        for (llvm::SmallVector<int64_t> &next : nextSend[rank])
          next[entry] = next[entry + 1];
        PipelineUnit receiver = getReceiver(spec, schedules[rank][entry]);
        if (receiver.stage >= 0)
          nextSend[rank][receiver.stage > rank][entry] = entry;
      }
    }
    for (int64_t rank = 0; rank < p; ++rank)
      for (const PipelineUnit &unit : schedules[rank]) {
        PipelineUnit receiver = getReceiver(spec, unit);
        if (receiver.stage < 0)
          continue;
        int64_t peer = receiver.stage;
        int64_t back = nextSend[peer][rank > peer][entryOf[getIndex(receiver)]];
        waitOf[getIndex(unit)] =
            back < 0
                ? static_cast<int64_t>(schedules[rank].size()) - 1
                : entryOf[getIndex(getReceiver(spec, schedules[peer][back]))];
      }
  } else {
    // A ring (the last rank's chunks feed the first's): the transfer
    // simulation, one message per unit that sends.
    llvm::SmallVector<int64_t> receivers, messageOf(3 * stages * m);
    llvm::SmallVector<llvm::SmallVector<llvm::SmallVector<int64_t, 1>>>
        incoming(p);
    for (int64_t rank = 0; rank < p; ++rank)
      incoming[rank].resize(schedules[rank].size());
    for (int64_t rank = 0; rank < p; ++rank)
      for (const PipelineUnit &unit : schedules[rank]) {
        PipelineUnit receiver = getReceiver(spec, unit);
        if (receiver.stage < 0)
          continue;
        int64_t to = receiver.stage % p;
        messageOf[getIndex(unit)] = receivers.size();
        incoming[to][entryOf[getIndex(receiver)]].push_back(receivers.size());
        receivers.push_back(to);
      }
    llvm::SmallVector<llvm::SmallVector<PipelineEvent>> events(p);
    for (int64_t rank = 0; rank < p; ++rank)
      for (auto [entry, unit] : llvm::enumerate(schedules[rank])) {
        int64_t e = entry;
        for (int64_t message : incoming[rank][e])
          events[rank].push_back({PipelineEvent::Recv, message, e});
        events[rank].push_back({PipelineEvent::Compute, -1, e});
        if (getReceiver(spec, unit).stage >= 0)
          events[rank].push_back(
              {PipelineEvent::Send, messageOf[getIndex(unit)], e});
      }
    TransferSimulation simulation = simulateTransfers(events, receivers);
    assert(!simulation.deadlockedRank && "the schedules deadlock");
    for (int64_t rank = 0; rank < p; ++rank)
      for (const PipelineUnit &unit : schedules[rank]) {
        if (getReceiver(spec, unit).stage < 0)
          continue;
        int64_t after = simulation.waitAfter[messageOf[getIndex(unit)]];
        waitOf[getIndex(unit)] =
            after >= 0 && events[rank][after].unit >= 0
                ? events[rank][after].unit
                : static_cast<int64_t>(schedules[rank].size()) - 1;
      }
  }

  llvm::SmallVector<RankInFlight> ranks(p);
  for (int64_t rank = 0; rank < p; ++rank) {
    for (int64_t stage = rank; stage < stages; stage += p) {
      // Per microbatch, the entries of the stage's F, B and W units.
      auto getEntry = [&](Kind kind, int64_t k) {
        return entryOf[getIndex({kind, stage, k})];
      };
      auto getWait = [&](Kind kind, int64_t k) {
        return waitOf[getIndex({kind, stage, k})];
      };
      llvm::SmallVector<std::pair<int64_t, int64_t>> fb, fw, bw, fs, bs, bsw;
      for (int64_t k = 0; k < m; ++k) {
        int64_t f = getEntry(Kind::Forward, k), b = getEntry(Kind::Backward, k),
                w = getEntry(Kind::Weight, k);
        fb.push_back({f, b});
        if (w >= 0) {
          fw.push_back({f, w});
          bw.push_back({b, w});
        }
        if (stage + 1 < stages)
          fs.push_back({f, getWait(Kind::Forward, k)});
        if (stage > 0) {
          bs.push_back({b, getWait(Kind::Backward, k)});
          bsw.push_back({b, std::max(w, bs.back().second)});
        }
      }
      // The export gives a send waited for out of the microbatch order a
      // copy per slot of its stage's entries instead.
      auto getSent = [&](llvm::ArrayRef<std::pair<int64_t, int64_t>> sends) {
        for (size_t k = 1; k < sends.size(); ++k)
          if (sends[k].second < sends[k - 1].second)
            return getMostOverlapping(fb);
        return sends.empty() ? 0 : getMostOverlapping(sends);
      };
      ranks[rank].push_back(
          {stage,
           {getMostOverlapping(fb), getMostOverlapping(fw),
            getMostOverlapping(bw), getSent(fs), getSent(bs), getSent(bsw)}});
    }
  }
  return ranks;
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
  // Per rank, the ranks it sends to and, after each of its events, what it
  // knows of their progress (all a wait needs of its clock).
  llvm::SmallVector<llvm::SmallVector<int64_t, 2>> targets(p);
  for (int64_t rank = 0; rank < p; ++rank)
    for (const PipelineEvent &event : events[rank])
      if (event.kind == PipelineEvent::Send &&
          !llvm::is_contained(targets[rank], receivers[event.message]))
        targets[rank].push_back(receivers[event.message]);
  llvm::SmallVector<llvm::SmallVector<llvm::SmallVector<int64_t>, 2>> known(p);
  for (int64_t rank = 0; rank < p; ++rank)
    known[rank].resize(targets[rank].size());
  // The clocks of the messages sent and not yet received.
  llvm::DenseMap<int64_t, llvm::SmallVector<int64_t>> sentClock;
  llvm::SmallVector<int64_t> recvEvent(receivers.size(), -1);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t rank = 0; rank < p; ++rank) {
      while (next[rank] < static_cast<int64_t>(events[rank].size())) {
        const PipelineEvent &event = events[rank][next[rank]];
        auto sent = sentClock.find(event.message);
        if (event.kind == PipelineEvent::Recv && sent == sentClock.end())
          break;
        clock[rank][rank] = next[rank];
        if (event.kind == PipelineEvent::Send)
          sentClock[event.message] = clock[rank];
        if (event.kind == PipelineEvent::Recv) {
          recvEvent[event.message] = next[rank];
          for (int64_t other = 0; other < p; ++other)
            clock[rank][other] =
                std::max(clock[rank][other], sent->second[other]);
          clock[rank][rank] = next[rank];
          sentClock.erase(sent);
        }
        for (auto [target, history] : llvm::zip(targets[rank], known[rank]))
          history.push_back(clock[rank][target]);
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
    for (auto entry : llvm::enumerate(events[rank])) {
      // Named, not bound: the lambda below captures it (C++17).
      size_t index = entry.index();
      const PipelineEvent &event = entry.value();
      if (event.kind != PipelineEvent::Send)
        continue;
      int64_t to = receivers[event.message];
      const llvm::SmallVector<int64_t> &history =
          known[rank][llvm::find(targets[rank], to) - targets[rank].begin()];
      // The first later event after which the sender knows of the receipt
      // (what it knows only grows).
      auto after = std::partition_point(
          history.begin() + index + 1, history.end(),
          [&](int64_t seen) { return seen < recvEvent[event.message]; });
      if (after != history.end())
        simulation.waitAfter[event.message] = after - history.begin();
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
