//===- MemoryPlanTest.cpp - static arena layout ---------------------------===//

#include "tessera/Analysis/MemoryPlan.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

TEST(MemoryPlanTest, BuffersThatLiveApartShareMemory) {
  // a: steps 0-1, b: 1-2, c: 2-3. a and c never meet.
  MemoryPlan plan = planMemory({{256, 0, 1}, {256, 1, 2}, {256, 2, 3}});
  EXPECT_EQ(plan.offsetsBytes[0], 0);
  EXPECT_EQ(plan.offsetsBytes[1], 256);
  EXPECT_EQ(plan.offsetsBytes[2], 0);
  EXPECT_EQ(plan.arenaBytes, 512);
  EXPECT_EQ(plan.liveBytesBound, 512);
}

TEST(MemoryPlanTest, OffsetsAreAligned) {
  MemoryPlan plan = planMemory({{10, 0, 5}, {10, 0, 5}}, /*alignment=*/64);
  EXPECT_EQ(plan.offsetsBytes[1], 64);
  EXPECT_EQ(plan.arenaBytes, 74);
}

TEST(MemoryPlanTest, FirstFitFillsAGapLeftByAFreedBuffer) {
  // A big buffer dies at step 1 between two long-lived ones; a later small
  // buffer reuses its place instead of growing the arena.
  MemoryPlan plan =
      planMemory({{64, 0, 10}, {1024, 0, 1}, {64, 0, 10}, {512, 2, 3}});
  EXPECT_EQ(plan.offsetsBytes[3], plan.offsetsBytes[1]);
  EXPECT_EQ(plan.arenaBytes, 64 + 1024 + 64);
}

TEST(MemoryPlanTest, ArenaIsNeverBelowTheLiveBound) {
  std::vector<BufferLifetime> buffers;
  for (int64_t i = 0; i < 50; ++i)
    buffers.push_back({64 * (1 + i % 7), i % 13, i % 13 + i % 5});
  MemoryPlan plan = planMemory(buffers);
  EXPECT_GE(plan.arenaBytes, plan.liveBytesBound);
  // No two buffers that live at the same step overlap.
  for (size_t a = 0; a < buffers.size(); ++a)
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      bool meet = buffers[a].firstStep <= buffers[b].lastStep &&
                  buffers[b].firstStep <= buffers[a].lastStep;
      bool overlap =
          plan.offsetsBytes[a] < plan.offsetsBytes[b] + buffers[b].bytes &&
          plan.offsetsBytes[b] < plan.offsetsBytes[a] + buffers[a].bytes;
      EXPECT_FALSE(meet && overlap) << a << " and " << b;
    }
}

TEST(MemoryPlanTest, BreakdownSplitsThePeakByCategory) {
  // Parameters live throughout; an activation peaks at step 1, a gradient
  // (larger than the activation alone) at step 3 after the activation died.
  MemoryPlan plan = planMemory({{100, 0, 4, MemoryCategory::Parameter},
                                {300, 1, 2, MemoryCategory::Activation},
                                {50, 1, 1, MemoryCategory::Communication},
                                {200, 3, 4, MemoryCategory::Gradient}});
  EXPECT_EQ(plan.liveBytesBound, 450);
  EXPECT_EQ(plan.peakStep, 1);
  EXPECT_EQ(plan.peakBreakdown[MemoryCategory::Parameter], 100);
  EXPECT_EQ(plan.peakBreakdown[MemoryCategory::Activation], 300);
  EXPECT_EQ(plan.peakBreakdown[MemoryCategory::Communication], 50);
  EXPECT_EQ(plan.peakBreakdown[MemoryCategory::Gradient], 0);
  EXPECT_EQ(plan.peakBreakdown.getTotal(), plan.liveBytesBound);
  // Each category's own peak, wherever it falls.
  EXPECT_EQ(plan.categoryPeaks[MemoryCategory::Gradient], 200);
  EXPECT_EQ(plan.categoryPeaks[MemoryCategory::Activation], 300);
  EXPECT_EQ(plan.categoryPeaks[MemoryCategory::OptimizerState], 0);
}

TEST(MemoryPlanTest, ABufferFreedAndOneAllocatedAtAStepDoNotBothCount) {
  // The first dies after step 1, the second is born at step 2.
  MemoryPlan plan = planMemory({{100, 0, 1, MemoryCategory::Gradient},
                                {100, 2, 3, MemoryCategory::Gradient}});
  EXPECT_EQ(plan.liveBytesBound, 100);
  EXPECT_EQ(plan.categoryPeaks[MemoryCategory::Gradient], 100);
}

TEST(ZeroModelStateTest, MatchesTheZeroPaper) {
  // Rajbhandari et al. (2020), figure 1: 7.5B parameters, mixed-precision
  // Adam (K = 12), 64 data-parallel devices: 120, 31.4, 16.6 and 1.9 GB.
  ModelStateBytesPerParameter adam{2, 2, 12};
  double p = 7.5e9;
  EXPECT_DOUBLE_EQ(getZeroModelState(p, adam, 0, 64).getTotal(), 120e9);
  EXPECT_DOUBLE_EQ(getZeroModelState(p, adam, 1, 64).getTotal(), 31.40625e9);
  EXPECT_DOUBLE_EQ(getZeroModelState(p, adam, 2, 64).getTotal(), 16.640625e9);
  EXPECT_DOUBLE_EQ(getZeroModelState(p, adam, 3, 64).getTotal(), 1.875e9);
  // Each stage splits one more part.
  ModelStateMemory stage2 = getZeroModelState(p, adam, 2, 64);
  EXPECT_DOUBLE_EQ(stage2.parameterBytes, 2 * p);
  EXPECT_DOUBLE_EQ(stage2.gradientBytes, 2 * p / 64);
  EXPECT_DOUBLE_EQ(stage2.optimizerStateBytes, 12 * p / 64);
  // One device: nothing to split.
  EXPECT_DOUBLE_EQ(getZeroModelState(p, adam, 3, 1).getTotal(), 120e9);
}

} // namespace
