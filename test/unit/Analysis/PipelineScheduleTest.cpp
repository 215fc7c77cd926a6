//===- PipelineScheduleTest.cpp - pipeline schedules and simulations ------===//

#include "tessera/Analysis/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

using namespace tessera;

namespace {

using Kind = PipelineUnitKind;
using Schedule = PipelineSchedule;

/// A rank's units as the runtime traces them: "F0.0 F0.1 B0.0 ...".
std::string format(llvm::ArrayRef<PipelineUnit> units) {
  std::string text;
  for (const PipelineUnit &unit : units) {
    if (!text.empty())
      text += ' ';
    text += unit.kind == Kind::Forward    ? 'F'
            : unit.kind == Kind::Backward ? 'B'
                                          : 'W';
    text += std::to_string(unit.stage) + "." + std::to_string(unit.microbatch);
  }
  return text;
}

std::string getOrder(Schedule schedule, int64_t ranks, int64_t microbatches,
                     int64_t rank, int64_t virtualStages = 1,
                     bool hasBackward = true) {
  PipelineSpec spec{ranks, microbatches, virtualStages, schedule};
  return format(getPipelineSchedule(spec, rank, hasBackward));
}

llvm::SmallVector<llvm::SmallVector<PipelineUnit>>
getAllUnits(const PipelineSpec &spec, bool hasBackward = true) {
  llvm::SmallVector<llvm::SmallVector<PipelineUnit>> units;
  for (int64_t rank = 0; rank < spec.ranks; ++rank)
    units.push_back(getPipelineSchedule(spec, rank, hasBackward));
  return units;
}

/// The transfers --tessera-pipeline makes of `units` when each stage hands
/// its forward output to the next stage and its input gradient to the
/// previous one: a receive before the unit that reads it, a send after the
/// unit that makes it. Returns each message's receiver.
llvm::SmallVector<int64_t>
buildEvents(const PipelineSpec &spec,
            llvm::ArrayRef<llvm::SmallVector<PipelineUnit>> units,
            llvm::SmallVector<llvm::SmallVector<PipelineEvent>> &events) {
  int64_t stages = spec.getNumStages();
  // One message per (kind, stage it leaves, microbatch) that crosses ranks.
  std::map<std::tuple<Kind, int64_t, int64_t>, int64_t> messages;
  llvm::SmallVector<int64_t> receivers;
  auto getMessage = [&](Kind kind, int64_t stage, int64_t microbatch,
                        int64_t to) {
    auto [it, inserted] =
        messages.try_emplace({kind, stage, microbatch}, receivers.size());
    if (inserted)
      receivers.push_back(to);
    return it->second;
  };
  events.assign(units.size(), {});
  for (auto [rank, rankUnits] : llvm::enumerate(units)) {
    for (auto [index, unit] : llvm::enumerate(rankUnits)) {
      int64_t self = rank, i = index;
      auto rankOf = [&](int64_t stage) { return stage % spec.ranks; };
      // What it reads from another rank.
      if (unit.kind == Kind::Forward && unit.stage > 0 &&
          rankOf(unit.stage - 1) != self)
        events[rank].push_back(
            {PipelineEvent::Recv,
             getMessage(Kind::Forward, unit.stage - 1, unit.microbatch, self),
             i});
      if (unit.kind == Kind::Backward && unit.stage + 1 < stages &&
          rankOf(unit.stage + 1) != self)
        events[rank].push_back(
            {PipelineEvent::Recv,
             getMessage(Kind::Backward, unit.stage + 1, unit.microbatch, self),
             i});
      events[rank].push_back({PipelineEvent::Compute, -1, i});
      // What another rank reads from it.
      if (unit.kind == Kind::Forward && unit.stage + 1 < stages &&
          rankOf(unit.stage + 1) != self)
        events[rank].push_back(
            {PipelineEvent::Send,
             getMessage(Kind::Forward, unit.stage, unit.microbatch,
                        rankOf(unit.stage + 1)),
             i});
      if (unit.kind == Kind::Backward && unit.stage > 0 &&
          rankOf(unit.stage - 1) != self)
        events[rank].push_back(
            {PipelineEvent::Send,
             getMessage(Kind::Backward, unit.stage, unit.microbatch,
                        rankOf(unit.stage - 1)),
             i});
    }
  }
  return receivers;
}

//===----------------------------------------------------------------------===//
// Orders of units per rank
//===----------------------------------------------------------------------===//

// Tests that each schedule's limits on ranks, virtual stages and
// microbatches are stated once, with the message the pass gives.
TEST(PipelineScheduleTest, ScheduleRejectionsNameTheLimit) {
  EXPECT_EQ(getScheduleRejection({4, 8, 1, Schedule::OneFOneB}), "");
  EXPECT_EQ(getScheduleRejection({4, 1, 1, Schedule::GPipe}), "");
  EXPECT_EQ(getScheduleRejection({2, 4, 2, Schedule::OneFOneB}),
            "virtual stages need the interleaved schedule");
  EXPECT_EQ(getScheduleRejection({2, 4, 2, Schedule::Interleaved}), "");
  EXPECT_EQ(getScheduleRejection({4, 6, 2, Schedule::Interleaved}),
            "the interleaved schedule needs microbatches (6) to be a multiple "
            "of stages (4)");
  EXPECT_EQ(getScheduleRejection({4, 4, 1, Schedule::TwoBW}), "");
  EXPECT_EQ(getScheduleRejection({4, 3, 1, Schedule::TwoBW}),
            "the 2bw schedule needs at least as many microbatches (3) as "
            "stages (4)");
  EXPECT_EQ(getScheduleRejection({4, 1, 1, Schedule::PipeDream}), "");
  EXPECT_NE(getScheduleRejection({4, 2, 1, Schedule::PipeDream})
                .find("a step is one microbatch, got 2"),
            std::string::npos);
}

TEST(PipelineScheduleTest, GPipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(getOrder(Schedule::GPipe, 2, 4, 0),
            "F0.0 F0.1 F0.2 F0.3 B0.0 B0.1 B0.2 B0.3");
  EXPECT_EQ(getOrder(Schedule::GPipe, 2, 4, 1),
            "F1.0 F1.1 F1.2 F1.3 B1.0 B1.1 B1.2 B1.3");
  EXPECT_EQ(getOrder(Schedule::GPipe, 4, 8, 2),
            "F2.0 F2.1 F2.2 F2.3 F2.4 F2.5 F2.6 F2.7 "
            "B2.0 B2.1 B2.2 B2.3 B2.4 B2.5 B2.6 B2.7");
}

TEST(PipelineScheduleTest, OneFOneBWarmsUpThenAlternates) {
  // The order the e2e trace of a two-stage GPT shows.
  EXPECT_EQ(getOrder(Schedule::OneFOneB, 2, 4, 0),
            "F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3");
  EXPECT_EQ(getOrder(Schedule::OneFOneB, 2, 4, 1),
            "F1.0 B1.0 F1.1 B1.1 F1.2 B1.2 F1.3 B1.3");
  EXPECT_EQ(getOrder(Schedule::OneFOneB, 4, 8, 0),
            "F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 F0.6 B0.3 F0.7 "
            "B0.4 B0.5 B0.6 B0.7");
  EXPECT_EQ(getOrder(Schedule::OneFOneB, 4, 8, 2),
            "F2.0 F2.1 B2.0 F2.2 B2.1 F2.3 B2.2 F2.4 B2.3 F2.5 B2.4 F2.6 "
            "B2.5 F2.7 B2.6 B2.7");
  EXPECT_EQ(getOrder(Schedule::OneFOneB, 4, 8, 3),
            "F3.0 B3.0 F3.1 B3.1 F3.2 B3.2 F3.3 B3.3 F3.4 B3.4 F3.5 B3.5 "
            "F3.6 B3.6 F3.7 B3.7");
}

/// A steady rank's units with their step offsets: "F0.0 B0.3@-1 ...".
std::string formatSteady(const PipelineSpec &spec, int64_t rank) {
  std::string text;
  for (const PipelineUnit &unit : getPipelineSchedule(spec, rank, true)) {
    text += format(unit);
    if (unit.stepOffset != 0)
      text += "@" + std::to_string(unit.stepOffset);
    text += ' ';
  }
  text.pop_back();
  return text;
}

TEST(PipelineScheduleTest, SteadySchedulesRunOneFOneBAcrossSteps) {
  // 2BW: the warm-up forwards alternate with the step before's cool-down.
  PipelineSpec twoBW{2, 4, 1, Schedule::TwoBW};
  EXPECT_EQ(formatSteady(twoBW, 0),
            "F0.0 B0.3@-1 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2");
  EXPECT_EQ(formatSteady(twoBW, 1), "F1.0 B1.0 F1.1 B1.1 F1.2 B1.2 F1.3 B1.3");
  // PipeDream: a step of one microbatch; rank r's backward lags its
  // forward by p - r - 1 steps, its warm-up uncapped by the microbatches.
  PipelineSpec pipeDream{4, 1, 1, Schedule::PipeDream};
  for (int64_t rank = 0; rank < 4; ++rank)
    EXPECT_EQ(getWarmupUnits(pipeDream, rank, true), 3 - rank);
  EXPECT_EQ(formatSteady(pipeDream, 0), "F0.0 B0.0@-3");
  EXPECT_EQ(formatSteady(pipeDream, 2), "F2.0 B2.0@-1");
  EXPECT_EQ(formatSteady(pipeDream, 3), "F3.0 B3.0");
  // Both hold p - r microbatches in flight, and no bubble.
  for (int64_t rank = 0; rank < 4; ++rank)
    EXPECT_EQ(getStagesInFlight(pipeDream)[rank][0].second.forwardToBackward,
              4 - rank);
  EXPECT_EQ(getBubbleFraction(Schedule::PipeDream, 4, 1), 0);
}

TEST(PipelineScheduleTest, OneFOneBWithFewMicrobatchesIsGPipe) {
  // The warm-up cannot be longer than the microbatches.
  EXPECT_EQ(getOrder(Schedule::OneFOneB, 4, 2, 0), "F0.0 F0.1 B0.0 B0.1");
  EXPECT_EQ(getOrder(Schedule::OneFOneB, 4, 2, 0),
            getOrder(Schedule::GPipe, 4, 2, 0));
}

TEST(PipelineScheduleTest, InterleavedRunsMegatronOrder) {
  // Two stages per rank: rank 0 holds stages 0 and 2, rank 1 stages 1 and
  // 3. The forwards take the chunks in order, p microbatches at a time; the
  // backwards take them in reverse.
  EXPECT_EQ(getOrder(Schedule::Interleaved, 2, 4, 0, 2),
            "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 "
            "B2.2 B2.3 B0.2 B0.3");
  EXPECT_EQ(getOrder(Schedule::Interleaved, 2, 4, 1, 2),
            "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 "
            "F3.3 B3.3 B1.2 B1.3");
}

TEST(PipelineScheduleTest, InterleavedWithOneChunkIsOneFOneB) {
  // Megatron-LM runs plain 1F1B for one stage per rank: interleaving's
  // longer warm-up, 2 (p - rank - 1) + (v - 1) p, would only hold more
  // microbatches.
  for (int64_t rank = 0; rank < 4; ++rank)
    EXPECT_EQ(getOrder(Schedule::Interleaved, 4, 8, rank, 1),
              getOrder(Schedule::OneFOneB, 4, 8, rank));
  EXPECT_EQ(getOrder(Schedule::Interleaved, 2, 4, 0, 1),
            getOrder(Schedule::OneFOneB, 2, 4, 0));
}

TEST(PipelineScheduleTest, ZeroBubbleDefersWeightGradientsByRank) {
  // The paper's ZB-H1 (figure 3, top): rank r runs a microbatch's weight
  // gradients r backwards after its input gradients, and the last r at the
  // end; the first rank runs them at once.
  EXPECT_EQ(getOrder(Schedule::ZeroBubbleH1, 2, 4, 0),
            "F0.0 F0.1 B0.0 W0.0 F0.2 B0.1 W0.1 F0.3 B0.2 W0.2 B0.3 W0.3");
  EXPECT_EQ(getOrder(Schedule::ZeroBubbleH1, 2, 4, 1),
            "F1.0 B1.0 F1.1 B1.1 W1.0 F1.2 B1.2 W1.1 F1.3 B1.3 W1.2 W1.3");
  EXPECT_EQ(getOrder(Schedule::ZeroBubbleH1, 4, 8, 0),
            "F0.0 F0.1 F0.2 F0.3 B0.0 W0.0 F0.4 B0.1 W0.1 F0.5 B0.2 W0.2 "
            "F0.6 B0.3 W0.3 F0.7 B0.4 W0.4 B0.5 W0.5 B0.6 W0.6 B0.7 W0.7");
  EXPECT_EQ(getOrder(Schedule::ZeroBubbleH1, 4, 8, 1),
            "F1.0 F1.1 F1.2 B1.0 F1.3 B1.1 W1.0 F1.4 B1.2 W1.1 F1.5 B1.3 "
            "W1.2 F1.6 B1.4 W1.3 F1.7 B1.5 W1.4 B1.6 W1.5 B1.7 W1.6 W1.7");
  EXPECT_EQ(getOrder(Schedule::ZeroBubbleH1, 4, 8, 3),
            "F3.0 B3.0 F3.1 B3.1 F3.2 B3.2 F3.3 B3.3 W3.0 F3.4 B3.4 W3.1 "
            "F3.5 B3.5 W3.2 F3.6 B3.6 W3.3 F3.7 B3.7 W3.4 W3.5 W3.6 W3.7");
  // Fewer microbatches than the lag: every weight unit at the end.
  EXPECT_EQ(getOrder(Schedule::ZeroBubbleH1, 4, 2, 3),
            "F3.0 B3.0 F3.1 B3.1 W3.0 W3.1");
}

TEST(PipelineScheduleTest, ZeroBubbleHoldsAsManyMicrobatchesAsOneFOneB) {
  // Rank r holds at most p - r microbatches between F and B, as 1F1B does,
  // and r between B and W: p in all, the first rank's 1F1B count.
  for (auto [p, m] : {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {4, 2}}) {
    PipelineSpec spec{p, m, 1, Schedule::ZeroBubbleH1};
    for (int64_t rank = 0; rank < p; ++rank) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                   " rank " + std::to_string(rank));
      int64_t forwards = 0, backwards = 0, weights = 0;
      int64_t mostActive = 0, mostDeferred = 0, mostHeld = 0;
      for (const PipelineUnit &unit : getPipelineSchedule(spec, rank, true)) {
        forwards += unit.kind == Kind::Forward;
        backwards += unit.kind == Kind::Backward;
        weights += unit.kind == Kind::Weight;
        mostActive = std::max(mostActive, forwards - backwards);
        mostDeferred = std::max(mostDeferred, backwards - weights);
        mostHeld = std::max(mostHeld, forwards - weights);
      }
      EXPECT_EQ(mostActive, std::min(p - rank, m));
      EXPECT_LE(mostDeferred, rank + 1);
      EXPECT_LE(mostHeld, std::min(p, m));
    }
  }
}

TEST(PipelineScheduleTest, ZeroBubbleWithoutWeightsIsOneFOneB) {
  // The input-gradient and forward units keep 1F1B's order.
  for (int64_t rank = 0; rank < 4; ++rank) {
    PipelineSpec spec{4, 8, 1, Schedule::ZeroBubbleH1};
    llvm::SmallVector<PipelineUnit> units =
        getPipelineSchedule(spec, rank, /*hasBackward=*/true);
    llvm::erase_if(units, [](const PipelineUnit &unit) {
      return unit.kind == Kind::Weight;
    });
    EXPECT_EQ(format(units), getOrder(Schedule::OneFOneB, 4, 8, rank));
  }
}

TEST(PipelineScheduleTest, WithoutBackwardOnlyForwardsRun) {
  for (Schedule schedule :
       {Schedule::GPipe, Schedule::OneFOneB, Schedule::ZeroBubbleH1})
    EXPECT_EQ(getOrder(schedule, 2, 4, 0, 1, /*hasBackward=*/false),
              "F0.0 F0.1 F0.2 F0.3");
  EXPECT_EQ(getOrder(Schedule::Interleaved, 2, 4, 1, 2, /*hasBackward=*/false),
            "F1.0 F1.1 F3.0 F3.1 F1.2 F1.3 F3.2 F3.3");
}

//===----------------------------------------------------------------------===//
// Counts and warm-up lengths
//===----------------------------------------------------------------------===//

struct Shape {
  Schedule schedule;
  int64_t ranks, microbatches, virtualStages;
};

constexpr Shape kShapes[] = {
    {Schedule::GPipe, 2, 4, 1},        {Schedule::GPipe, 4, 8, 1},
    {Schedule::GPipe, 4, 2, 1},        {Schedule::OneFOneB, 2, 4, 1},
    {Schedule::OneFOneB, 4, 8, 1},     {Schedule::OneFOneB, 4, 2, 1},
    {Schedule::OneFOneB, 1, 4, 1},     {Schedule::Interleaved, 2, 4, 2},
    {Schedule::Interleaved, 4, 8, 1},  {Schedule::Interleaved, 4, 8, 2},
    {Schedule::Interleaved, 2, 8, 3},  {Schedule::ZeroBubbleH1, 2, 4, 1},
    {Schedule::ZeroBubbleH1, 4, 8, 1}, {Schedule::ZeroBubbleH1, 4, 2, 1}};

std::string describe(const Shape &shape) {
  return (getEnumName(kPipelineScheduleNames, shape.schedule) +
          " p=" + std::to_string(shape.ranks) +
          " m=" + std::to_string(shape.microbatches) +
          " v=" + std::to_string(shape.virtualStages))
      .str();
}

TEST(PipelineScheduleTest, EveryUnitRunsOnceOnItsStagesRank) {
  for (const Shape &shape : kShapes) {
    SCOPED_TRACE(describe(shape));
    PipelineSpec spec{shape.ranks, shape.microbatches, shape.virtualStages,
                      shape.schedule};
    bool zeroBubble = shape.schedule == Schedule::ZeroBubbleH1;
    for (bool hasBackward : {true, false}) {
      std::map<std::tuple<Kind, int64_t, int64_t>, int64_t> seen;
      for (int64_t rank = 0; rank < spec.ranks; ++rank)
        for (const PipelineUnit &unit :
             getPipelineSchedule(spec, rank, hasBackward)) {
          EXPECT_EQ(unit.stage % spec.ranks, rank);
          ++seen[{unit.kind, unit.stage, unit.microbatch}];
        }
      int64_t kinds = !hasBackward ? 1 : zeroBubble ? 3 : 2;
      EXPECT_EQ(static_cast<int64_t>(seen.size()),
                kinds * spec.getNumStages() * spec.microbatches);
      for (int64_t stage = 0; stage < spec.getNumStages(); ++stage)
        for (int64_t microbatch = 0; microbatch < spec.microbatches;
             ++microbatch) {
          EXPECT_EQ((seen[{Kind::Forward, stage, microbatch}]), 1);
          EXPECT_EQ((seen[{Kind::Backward, stage, microbatch}]),
                    hasBackward ? 1 : 0);
          EXPECT_EQ((seen[{Kind::Weight, stage, microbatch}]),
                    hasBackward && zeroBubble ? 1 : 0);
        }
    }
  }
}

TEST(PipelineScheduleTest, WarmupLengths) {
  PipelineSpec gpipe{4, 8, 1, Schedule::GPipe};
  PipelineSpec oneFOneB{4, 8, 1, Schedule::OneFOneB};
  PipelineSpec zeroBubble{4, 8, 1, Schedule::ZeroBubbleH1};
  PipelineSpec interleaved{4, 8, 2, Schedule::Interleaved};
  for (int64_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(getWarmupUnits(gpipe, rank, true), 8);
    EXPECT_EQ(getWarmupUnits(oneFOneB, rank, true), 3 - rank);
    EXPECT_EQ(getWarmupUnits(zeroBubble, rank, true), 3 - rank);
    // 2 (p - rank - 1) + (v - 1) p.
    EXPECT_EQ(getWarmupUnits(interleaved, rank, true), 2 * (3 - rank) + 4);
    // One stage per rank is 1F1B.
    EXPECT_EQ(getWarmupUnits({4, 8, 1, Schedule::Interleaved}, rank, true),
              3 - rank);
    // Forward only: every unit is warm-up.
    EXPECT_EQ(getWarmupUnits(oneFOneB, rank, false), 8);
    EXPECT_EQ(getWarmupUnits(interleaved, rank, false), 16);
  }
  // Capped by the units there are.
  EXPECT_EQ(getWarmupUnits({8, 2, 1, Schedule::OneFOneB}, 0, true), 2);
  EXPECT_EQ(getWarmupUnits({4, 4, 2, Schedule::Interleaved}, 0, true), 8);
}

TEST(PipelineScheduleTest, WarmupIsTheForwardsBeforeTheSteadyState) {
  // The steady state opens with one more forward, then the first backward.
  for (const Shape &shape : kShapes) {
    SCOPED_TRACE(describe(shape));
    PipelineSpec spec{shape.ranks, shape.microbatches, shape.virtualStages,
                      shape.schedule};
    for (int64_t rank = 0; rank < spec.ranks; ++rank) {
      llvm::SmallVector<PipelineUnit> units =
          getPipelineSchedule(spec, rank, true);
      int64_t forwards = llvm::find_if(units,
                                       [](const PipelineUnit &unit) {
                                         return unit.kind != Kind::Forward;
                                       }) -
                         units.begin();
      int64_t warmup = getWarmupUnits(spec, rank, true);
      int64_t total = spec.microbatches * spec.virtualStages;
      EXPECT_EQ(forwards, warmup < total ? warmup + 1 : total);
    }
  }
}

//===----------------------------------------------------------------------===//
// Simulations
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleTest, EverySchedulePassesBothSimulations) {
  for (const Shape &shape : kShapes) {
    SCOPED_TRACE(describe(shape));
    PipelineSpec spec{shape.ranks, shape.microbatches, shape.virtualStages,
                      shape.schedule};
    for (bool hasBackward : {true, false}) {
      auto units = getAllUnits(spec, hasBackward);
      EXPECT_FALSE(simulateUnits(spec, units, {}).deadlockedRank);
      llvm::SmallVector<llvm::SmallVector<PipelineEvent>> events;
      llvm::SmallVector<int64_t> receivers = buildEvents(spec, units, events);
      TransferSimulation simulation = simulateTransfers(events, receivers);
      EXPECT_FALSE(simulation.deadlockedRank);
      EXPECT_EQ(simulation.waitAfter.size(), receivers.size());
    }
  }
}

TEST(PipelineScheduleTest, TransfersDeadlockOnCrossedReceives) {
  // Each rank first waits for the other's message.
  llvm::SmallVector<llvm::SmallVector<PipelineEvent>> events = {
      {{PipelineEvent::Recv, 1}, {PipelineEvent::Send, 0}},
      {{PipelineEvent::Recv, 0}, {PipelineEvent::Send, 1}}};
  TransferSimulation simulation = simulateTransfers(events, {1, 0});
  EXPECT_EQ(simulation.deadlockedRank, 0);
  EXPECT_TRUE(simulation.waitAfter.empty());
}

TEST(PipelineScheduleTest, ABadOrderDeadlocksInBothSimulations) {
  // Rank 1 runs its second forward before its first backward, but rank 0
  // waits for that backward before it makes the second forward's input.
  PipelineSpec spec{2, 2, 1, Schedule::OneFOneB};
  llvm::SmallVector<llvm::SmallVector<PipelineUnit>> units = {
      {{Kind::Forward, 0, 0},
       {Kind::Backward, 0, 0},
       {Kind::Forward, 0, 1},
       {Kind::Backward, 0, 1}},
      {{Kind::Forward, 1, 0},
       {Kind::Forward, 1, 1},
       {Kind::Backward, 1, 0},
       {Kind::Backward, 1, 1}}};
  PipelineTimeline timeline = simulateUnits(spec, units, {});
  EXPECT_EQ(timeline.deadlockedRank, 0);
  // Rank 0 ran its first forward; rank 1 its first forward.
  EXPECT_EQ(timeline.endSeconds[0].size(), 1u);
  EXPECT_EQ(timeline.endSeconds[1].size(), 1u);

  llvm::SmallVector<llvm::SmallVector<PipelineEvent>> events;
  llvm::SmallVector<int64_t> receivers = buildEvents(spec, units, events);
  EXPECT_EQ(simulateTransfers(events, receivers).deadlockedRank, 0);
}

TEST(PipelineScheduleTest, AUnitThatNeverRunsDeadlocks) {
  // Rank 1 never runs the backward rank 0 waits for.
  PipelineSpec spec{2, 1, 1, Schedule::OneFOneB};
  llvm::SmallVector<llvm::SmallVector<PipelineUnit>> units = {
      {{Kind::Forward, 0, 0}, {Kind::Backward, 0, 0}}, {{Kind::Forward, 1, 0}}};
  EXPECT_EQ(simulateUnits(spec, units, {}).deadlockedRank, 0);
}

TEST(PipelineScheduleTest, SendsAreWaitedOnceTheReceiverIsKnownToHavePosted) {
  // Rank 0 sends message 0 after its first compute and learns that rank 1
  // received it only from message 1, which rank 1 sends after that receive.
  llvm::SmallVector<llvm::SmallVector<PipelineEvent>> events = {
      {{PipelineEvent::Compute},
       {PipelineEvent::Send, 0},
       {PipelineEvent::Compute},
       {PipelineEvent::Compute},
       {PipelineEvent::Recv, 1},
       {PipelineEvent::Compute}},
      {{PipelineEvent::Recv, 0},
       {PipelineEvent::Compute},
       {PipelineEvent::Send, 1}}};
  TransferSimulation simulation = simulateTransfers(events, {1, 0});
  ASSERT_FALSE(simulation.deadlockedRank);
  // Message 0 is waited right after the receive of message 1; nothing comes
  // back after message 1, so it is waited at the end.
  EXPECT_EQ(simulation.waitAfter, (llvm::SmallVector<int64_t>{4, -1}));
}

TEST(PipelineScheduleTest, SentValuesLiveUntilTheirWaits) {
  // GPipe's last rank runs its backwards back to back, and nothing comes
  // back from the first after them: every input gradient it sends is waited
  // for at the end, m copies. Under 1F1B rank r learns of a receipt from
  // the forward output that rank r - 1 sends it next, but its cool-down has
  // none: p - r + 1 copies (as the export gives them).
  PipelineSpec gpipe{2, 4, 1, Schedule::GPipe};
  auto ranks = getStagesInFlight(gpipe);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1][0].second.backwardSent, 4);
  EXPECT_EQ(ranks[1][0].second.forwardSent, 0);
  EXPECT_EQ(ranks[0][0].second.backwardSent, 0);
  EXPECT_EQ(ranks[0][0].second.forwardSent, 4);
  PipelineSpec oneFOneB{4, 8, 1, Schedule::OneFOneB};
  ranks = getStagesInFlight(oneFOneB);
  for (int64_t rank = 1; rank < 4; ++rank)
    EXPECT_EQ(ranks[rank][0].second.backwardSent, 4 - rank + 1)
        << "rank " << rank;
  // Between F and B, 1F1B holds p - r microbatches.
  for (int64_t rank = 0; rank < 4; ++rank)
    EXPECT_EQ(ranks[rank][0].second.forwardToBackward, 4 - rank);
}

TEST(PipelineScheduleTest, OneFOneBTimeline) {
  // Two ranks, two microbatches, forwards of 1 s and backwards of 2 s:
  // F0.0 [0,1] F0.1 [1,2] on rank 0; F1.0 [1,2] B1.0 [2,4] F1.1 [4,5]
  // B1.1 [5,7] on rank 1; B0.0 [4,6] B0.1 [7,9] on rank 0.
  PipelineSpec spec{2, 2, 1, Schedule::OneFOneB};
  PipelineTimeline timeline = simulateUnits(spec, getAllUnits(spec), {1, 2});
  ASSERT_FALSE(timeline.deadlockedRank);
  EXPECT_EQ(timeline.endSeconds[0], (llvm::SmallVector<double>{1, 2, 6, 9}));
  EXPECT_EQ(timeline.endSeconds[1], (llvm::SmallVector<double>{2, 4, 5, 7}));
  EXPECT_DOUBLE_EQ(timeline.stepSeconds, 9);
  EXPECT_DOUBLE_EQ(timeline.busySeconds, 6);
  EXPECT_DOUBLE_EQ(timeline.getBubbleFraction(), 0.5);
}

TEST(PipelineScheduleTest, SimulatedBubblesMatchTheCostModel) {
  // Uniform units: a forward of 1, a backward of 2 (per chunk when
  // interleaved). With fewer microbatches than ranks 1F1B runs as GPipe,
  // whose bubble is the same (p-1)/m.
  for (const Shape &shape : kShapes) {
    if (shape.schedule == Schedule::ZeroBubbleH1)
      continue;
    SCOPED_TRACE(describe(shape));
    PipelineSpec spec{shape.ranks, shape.microbatches, shape.virtualStages,
                      shape.schedule};
    PipelineTimeline timeline = simulateUnits(spec, getAllUnits(spec), {1, 2});
    ASSERT_FALSE(timeline.deadlockedRank);
    EXPECT_NEAR(timeline.getBubbleFraction(),
                getBubbleFraction(shape.schedule, shape.ranks,
                                  shape.microbatches, shape.virtualStages),
                1e-12);
  }
}

TEST(PipelineScheduleTest, ZeroBubbleBubbleMatchesTheCostModel) {
  // The backward's input- and weight-gradient halves each as long as the
  // forward, the cost model's (p-1)/(3m): each rank idles only for the
  // p - 1 units before its first B, so the step is 3m + p - 1.
  for (auto [p, m] : {std::pair<int64_t, int64_t>{2, 4},
                      {4, 8},
                      {4, 16},
                      {2, 2},
                      {3, 5},
                      {8, 8}}) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
    PipelineSpec spec{p, m, 1, Schedule::ZeroBubbleH1};
    PipelineTimeline timeline =
        simulateUnits(spec, getAllUnits(spec), {1, 1, 1});
    ASSERT_FALSE(timeline.deadlockedRank);
    EXPECT_DOUBLE_EQ(timeline.stepSeconds, 3 * m + p - 1);
    EXPECT_NEAR(timeline.getBubbleFraction(),
                getBubbleFraction(Schedule::ZeroBubbleH1, p, m), 1e-12);
  }
}

TEST(PipelineScheduleTest, ZeroBubbleWithFewMicrobatchesMatchesTheCostModel) {
  // With m < p the last rank's first B comes p - m units later still; the
  // cost model prices (p - 1 + p - m)/(3m).
  for (auto [p, m] :
       {std::pair<int64_t, int64_t>{4, 2}, {4, 1}, {8, 4}, {3, 2}}) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
    PipelineSpec spec{p, m, 1, Schedule::ZeroBubbleH1};
    PipelineTimeline timeline =
        simulateUnits(spec, getAllUnits(spec), {1, 1, 1});
    ASSERT_FALSE(timeline.deadlockedRank);
    EXPECT_NEAR(timeline.getBubbleFraction(),
                getBubbleFraction(Schedule::ZeroBubbleH1, p, m), 1e-12);
  }
}

TEST(PipelineScheduleTest, ZeroBubbleTimeline) {
  // Two ranks, four microbatches, every unit 1 s: rank 1 runs without a
  // gap from its first forward; rank 0 waits one unit for the first
  // gradient ([2, 3]) and never again.
  PipelineSpec spec{2, 4, 1, Schedule::ZeroBubbleH1};
  PipelineTimeline timeline = simulateUnits(spec, getAllUnits(spec), {1, 1, 1});
  ASSERT_FALSE(timeline.deadlockedRank);
  EXPECT_EQ(
      timeline.endSeconds[0],
      (llvm::SmallVector<double>{1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(
      timeline.endSeconds[1],
      (llvm::SmallVector<double>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_DOUBLE_EQ(timeline.stepSeconds, 13);
  EXPECT_DOUBLE_EQ(timeline.busySeconds, 12);
  EXPECT_NEAR(timeline.getBubbleFraction(), 1.0 / 12, 1e-12);
}

} // namespace
