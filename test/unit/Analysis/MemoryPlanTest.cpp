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
  MemoryPlan plan = planMemory(
      {{64, 0, 10}, {1024, 0, 1}, {64, 0, 10}, {512, 2, 3}});
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

} // namespace
