//===- UpdateRuleTest.cpp - a server's updates under each consistency -----===//

#include "ps/UpdateRule.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::runtime;
using namespace tessera::runtime::ps;

namespace {

/// The workers whose pushes `update` sums, in the order it sums them.
std::vector<int64_t> getWorkers(const Update &update) {
  std::vector<int64_t> workers;
  for (const PushRecord &push : update.pushes)
    workers.push_back(push.worker);
  return workers;
}

// Tests that sync waits for every live worker, then sums the round in the
// workers' order whatever order the pushes came in, once.
TEST(UpdateRuleTest, SyncSumsARoundOfEveryLiveWorkerInTheirOrder) {
  UpdateRule rule({plan::SYNC, 0}, 3);
  std::set<int64_t> live = {0, 1, 2};
  rule.addPush({2, 1, 0, 0.5});
  rule.addPush({0, 1, 0, 0.25});
  EXPECT_FALSE(rule.takeUpdate(live));
  rule.addPush({1, 1, 0, 0.75});
  std::optional<Update> update = rule.takeUpdate(live);
  ASSERT_TRUE(update);
  EXPECT_EQ(getWorkers(*update), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(update->scale, 1.0f);
  EXPECT_FALSE(rule.takeUpdate(live));
}

// Tests that a sync round that lost a worker stands for it with the mean of
// the rest: the sum of two pushes scaled by three over two.
TEST(UpdateRuleTest, SyncScalesARoundThatLostAWorker) {
  UpdateRule rule({plan::SYNC, 0}, 3);
  rule.addPush({0, 1, 0, 0});
  rule.addPush({1, 1, 0, 0});
  EXPECT_FALSE(rule.takeUpdate({0, 1, 2}));
  std::optional<Update> update = rule.takeUpdate({0, 1});
  ASSERT_TRUE(update);
  EXPECT_EQ(getWorkers(*update), (std::vector<int64_t>{0, 1}));
  EXPECT_FLOAT_EQ(update->scale, 1.5f);
}

// Tests that a push sent again into the round in progress counts once, and
// that its worker may not pull until the round is applied.
TEST(UpdateRuleTest, SyncCountsARepeatedPushOnceAndHoldsItsPull) {
  UpdateRule rule({plan::SYNC, 0}, 2);
  std::set<int64_t> live = {0, 1};
  EXPECT_FALSE(rule.isRepeatedPush(0));
  rule.addPush({0, 1, 0, 0});
  EXPECT_TRUE(rule.isRepeatedPush(0));
  EXPECT_FALSE(rule.mayPull(0, live));
  EXPECT_TRUE(rule.mayPull(1, live));
  rule.addPush({1, 1, 0, 0});
  ASSERT_TRUE(rule.takeUpdate(live));
  EXPECT_FALSE(rule.isRepeatedPush(0));
  EXPECT_TRUE(rule.mayPull(0, live));
}

// Tests that async applies each push alone, scaled by the workers (a
// worker's gradient stands for the step), and never holds a pull.
TEST(UpdateRuleTest, AsyncAppliesEachPushAloneForTheStep) {
  UpdateRule rule({plan::ASYNC, 0}, 4);
  std::set<int64_t> live = {0, 1, 2, 3};
  rule.addPush({2, 5, 3, 0});
  std::optional<Update> update = rule.takeUpdate(live);
  ASSERT_TRUE(update);
  EXPECT_EQ(getWorkers(*update), (std::vector<int64_t>{2}));
  EXPECT_EQ(update->scale, 4.0f);
  EXPECT_FALSE(rule.isRepeatedPush(2));
  rule.advanceClock(2, 100);
  EXPECT_TRUE(rule.mayPull(2, live));
}

// Tests that ssp=K applies like async but holds a worker's pull while it
// is more than K steps ahead of the slowest live worker.
TEST(UpdateRuleTest, SspHoldsAPullMoreThanKStepsAhead) {
  UpdateRule rule({plan::SSP, 2}, 2);
  std::set<int64_t> live = {0, 1};
  rule.advanceClock(0, 1);
  rule.advanceClock(1, 3);
  EXPECT_EQ(rule.getSlowestClock(live), 1);
  EXPECT_TRUE(rule.mayPull(1, live));
  rule.advanceClock(1, 4);
  EXPECT_FALSE(rule.mayPull(1, live));
  // The slow worker catches up; or it leaves and no longer holds anyone.
  rule.advanceClock(0, 2);
  EXPECT_TRUE(rule.mayPull(1, live));
  rule.advanceClock(1, 9);
  EXPECT_FALSE(rule.mayPull(1, live));
  EXPECT_TRUE(rule.mayPull(1, {1}));
  rule.addPush({1, 9, 0, 0});
  std::optional<Update> update = rule.takeUpdate(live);
  ASSERT_TRUE(update);
  EXPECT_EQ(update->scale, 2.0f);
}

// Tests where a worker starts: a known one after its last push; a new one
// at the slowest other live worker's step, or in sync at the rounds done.
TEST(UpdateRuleTest, AWorkerIsWelcomedAtTheStepItHoldsNoOneBackAt) {
  UpdateRule ssp({plan::SSP, 1}, 3);
  ssp.advanceClock(0, 7);
  ssp.advanceClock(1, 5);
  EXPECT_EQ(ssp.welcome(0, {0, 1}, 12), 7);
  EXPECT_EQ(ssp.welcome(2, {0, 1, 2}, 12), 5);
  UpdateRule sync({plan::SYNC, 0}, 3);
  EXPECT_EQ(sync.welcome(0, {0}, 0), 0);
  EXPECT_EQ(sync.welcome(1, {0, 1}, 4), 4);
}

} // namespace
