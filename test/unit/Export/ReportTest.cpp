//===- ReportTest.cpp - The figures of tessera report ---------------------===//

#include "tessera/Export/Report.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

/// A plan of `stages` programs on a ["pp"=stages] mesh, each with a forward
/// and a backward unit of one instruction, and the schedule `order` of
/// (unit name, microbatch) per stage.
plan::Plan makePipeline(
    const std::vector<std::vector<std::pair<std::string, int64_t>>> &order) {
  plan::Plan plan;
  plan::Mesh::Axis *axis = plan.mutable_mesh()->add_axes();
  axis->set_name("pp");
  axis->set_size(order.size());
  for (size_t stage = 0; stage < order.size(); ++stage) {
    plan::Program *program = plan.add_programs();
    program->add_ranks(stage);
    std::vector<std::string> units;
    for (const auto &[name, microbatch] : order[stage])
      if (std::find(units.begin(), units.end(), name) == units.end())
        units.push_back(name);
    for (size_t index = 0; index < units.size(); ++index) {
      plan::Unit *unit = program->add_units();
      unit->set_name(units[index]);
      unit->set_begin(index);
      unit->set_end(index + 1);
      program->add_instructions();
    }
    for (const auto &[name, microbatch] : order[stage]) {
      plan::ScheduleEntry *entry = program->add_schedule();
      entry->set_unit(std::find(units.begin(), units.end(), name) -
                      units.begin());
      entry->set_microbatch(microbatch);
    }
  }
  return plan;
}

TEST(ReportTest, SimulatesGPipeAsThePaperDrawsIt) {
  // Two stages, two microbatches: the last stage's backwards start after
  // its forwards, the first stage's after the last stage's.
  plan::Plan plan =
      makePipeline({{{"F0", 0}, {"F0", 1}, {"B0", 0}, {"B0", 1}},
                    {{"F1", 0}, {"F1", 1}, {"B1", 0}, {"B1", 1}}});
  llvm::Expected<std::vector<UnitSpan>> spans = simulateSchedule(plan);
  ASSERT_TRUE(bool(spans)) << llvm::toString(spans.takeError());
  ASSERT_EQ(spans->size(), 8u);
  auto find = [&](char kind, int64_t stage, int64_t microbatch) {
    for (const UnitSpan &span : *spans)
      if (span.kind == kind && span.stage == stage &&
          span.microbatch == microbatch)
        return span;
    ADD_FAILURE() << kind << stage << "." << microbatch << " not drawn";
    return UnitSpan();
  };
  EXPECT_EQ(find('F', 1, 0).start, 1);
  EXPECT_EQ(find('F', 1, 1).start, 2);
  EXPECT_EQ(find('B', 1, 0).start, 3);
  EXPECT_EQ(find('B', 1, 0).end, 5); // a backward takes two
  EXPECT_EQ(find('B', 0, 0).start, 5);
  EXPECT_EQ(find('B', 0, 1).end, 9);
  EXPECT_EQ(find('B', 0, 1).row, 0);
}

TEST(ReportTest, SplitBackwardsTakeOneUnitEach) {
  plan::Plan plan = makePipeline(
      {{{"F0", 0}, {"B0", 0}, {"W0", 0}}, {{"F1", 0}, {"B1", 0}, {"W1", 0}}});
  llvm::Expected<std::vector<UnitSpan>> spans = simulateSchedule(plan);
  ASSERT_TRUE(bool(spans)) << llvm::toString(spans.takeError());
  // F0 [0,1] F1 [1,2] B1 [2,3] W1 [3,4]; B0 [3,4] W0 [4,5].
  double end = 0;
  for (const UnitSpan &span : *spans)
    end = std::max(end, span.end);
  EXPECT_EQ(end, 5);
}

TEST(ReportTest, RejectsAScheduleThatWaitsForever) {
  // The last stage's backward of microbatch 1 is never run: the first
  // stage's waits for it.
  plan::Plan plan = makePipeline({{{"F0", 0}, {"F0", 1}, {"B0", 0}, {"B0", 1}},
                                  {{"F1", 0}, {"F1", 1}, {"B1", 0}}});
  llvm::Expected<std::vector<UnitSpan>> spans = simulateSchedule(plan);
  ASSERT_FALSE(bool(spans));
  EXPECT_EQ(llvm::toString(spans.takeError()),
            "the schedule of program 0 never runs B0 of microbatch 1: the "
            "unit it waits for runs nowhere before it");
  plan.mutable_programs(1)->mutable_units(0)->set_name("forward");
  spans = simulateSchedule(plan);
  ASSERT_FALSE(bool(spans));
  EXPECT_EQ(llvm::toString(spans.takeError()),
            "program 1 runs a unit named 'forward', expected F, B or W and "
            "its stage");
}

TEST(ReportTest, ReadsTheLastTracedStep) {
  llvm::Expected<llvm::json::Value> trace = llvm::json::parse(R"({
    "traceEvents": [
      {"name": "F0.0", "ph": "X", "pid": 0, "tid": -1, "ts": 10, "dur": 5,
       "args": {"step": 1}},
      {"name": "dot", "ph": "X", "pid": 0, "tid": 0, "ts": 100, "dur": 1,
       "args": {"step": 2}},
      {"name": "F0.1", "ph": "X", "pid": 0, "tid": -1, "ts": 102, "dur": 4,
       "args": {"step": 2}},
      {"name": "update", "ph": "X", "pid": 0, "tid": -1, "ts": 106,
       "dur": 2, "args": {"step": 2}},
      {"name": "step 2", "ph": "i", "pid": 0, "tid": 0, "ts": 100}
    ]})");
  ASSERT_TRUE(bool(trace));
  llvm::Expected<std::vector<UnitSpan>> spans = getTracedSchedule(*trace);
  ASSERT_TRUE(bool(spans)) << llvm::toString(spans.takeError());
  ASSERT_EQ(spans->size(), 2u);
  EXPECT_EQ((*spans)[0].kind, 'F');
  EXPECT_EQ((*spans)[0].microbatch, 1);
  EXPECT_DOUBLE_EQ((*spans)[0].start, 0.002); // ms from the step's start
  EXPECT_EQ((*spans)[1].kind, 'U');
  llvm::Expected<std::vector<UnitSpan>> bad =
      getTracedSchedule(llvm::json::Value(llvm::json::Object{}));
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "the trace is not Chrome trace JSON: expected a \"traceEvents\" "
            "list");
}

TEST(ReportTest, RefusesTracedRanksAndTimesNoRunHas) {
  auto getError = [](llvm::StringRef event) {
    llvm::Expected<llvm::json::Value> trace =
        llvm::json::parse(("{\"traceEvents\": [" + event + "]}").str());
    EXPECT_TRUE(bool(trace));
    if (!trace)
      return llvm::toString(trace.takeError());
    llvm::Expected<std::vector<UnitSpan>> spans = getTracedSchedule(*trace);
    return spans ? std::string("no error") : llvm::toString(spans.takeError());
  };
  // A rank of 10^12 would have the page label every rank below it.
  EXPECT_EQ(getError(R"({"name": "F0.0", "ph": "X", "pid": 1000000000000,
                         "tid": -1, "ts": 0, "dur": 5, "args": {"step": 1}})"),
            "\"pid\" of trace event 0 is 1000000000000, expected a rank "
            "from 0 to 1048575 (2^20 devices are the most a plan runs on)");
  EXPECT_EQ(getError(R"({"name": "F0.0", "ph": "X", "pid": 0, "tid": -1,
                         "ts": 1e309, "dur": 5, "args": {"step": 1}})"),
            "\"ts\" of trace event 0 is inf, expected a finite time in "
            "microseconds from -2^53 to 2^53");
  EXPECT_EQ(getError(R"({"name": "F0.0", "ph": "X", "pid": 0, "tid": -1,
                         "ts": 0, "dur": -1, "args": {"step": 1}})"),
            "\"dur\" of trace event 0 is -1, expected a finite duration in "
            "microseconds from 0 to 2^53");
}

TEST(ReportTest, CountsCollectivesPerMicrobatchAndSkipsGroupsOfOne) {
  plan::Plan plan =
      makePipeline({{{"F0", 0}, {"F0", 1}, {"B0", 0}, {"B0", 1}}});
  plan::Mesh::Axis *dp = plan.mutable_mesh()->add_axes();
  dp->set_name("dp");
  dp->set_size(2);
  plan::Mesh::Axis *tp = plan.mutable_mesh()->add_axes();
  tp->set_name("tp");
  tp->set_size(1);
  plan::Program *program = plan.mutable_programs(0);
  plan::Buffer *buffer = program->add_buffers();
  buffer->add_shape(4);
  buffer->add_shape(8);
  buffer->set_dtype(plan::BF16);
  // In the forward unit (run per microbatch), over dp; after the units
  // (once), over dp; over tp (a group of one).
  plan::Collective *inUnit =
      program->mutable_instructions(0)->mutable_collective();
  inUnit->set_kind(plan::ALL_REDUCE);
  inUnit->add_mesh_axes("dp");
  plan::Collective *after = program->add_instructions()->mutable_collective();
  after->set_kind(plan::ALL_REDUCE);
  after->add_mesh_axes("dp");
  plan::Collective *one = program->add_instructions()->mutable_collective();
  one->set_kind(plan::ALL_GATHER);
  one->add_mesh_axes("tp");
  std::vector<CollectiveTotal> totals =
      getCollectivesPerStep(plan.mesh(), *program);
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_EQ(totals[0].axes, "dp");
  EXPECT_EQ(totals[0].kind, "all_reduce");
  EXPECT_EQ(totals[0].count, 3);
  EXPECT_EQ(totals[0].bytes, 3 * 64);
}

} // namespace
