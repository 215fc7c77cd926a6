//===- StageCutsTest.cpp - balanced pipeline stage cuts -------------------===//

#include "tessera/Analysis/StageCuts.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

TEST(StageCutsTest, EqualLayersSplitEvenly) {
  StageCuts cuts = balanceStages({1, 1, 1, 1, 1, 1, 1, 1}, 4);
  EXPECT_EQ(cuts.starts, (llvm::SmallVector<int64_t>{0, 2, 4, 6}));
  EXPECT_DOUBLE_EQ(cuts.maxStageCost, 2);
}

TEST(StageCutsTest, AHeavyLastLayerGetsFewerNeighbours) {
  // Seven layers and a head as heavy as three of them.
  StageCuts cuts = balanceStages({1, 1, 1, 1, 1, 1, 1, 4}, 3);
  EXPECT_DOUBLE_EQ(cuts.maxStageCost, 4);
  EXPECT_EQ(cuts.starts.back(), 7);
}

TEST(StageCutsTest, LayerCountsNeedNotDivide) {
  StageCuts cuts = balanceStages({1, 1, 1, 1, 1}, 2);
  EXPECT_DOUBLE_EQ(cuts.maxStageCost, 3);
  EXPECT_EQ(cuts.starts.size(), 2u);
}

TEST(StageCutsTest, OneStageHoldsEverything) {
  StageCuts cuts = balanceStages({2, 3}, 1);
  EXPECT_EQ(cuts.starts, (llvm::SmallVector<int64_t>{0}));
  EXPECT_DOUBLE_EQ(cuts.maxStageCost, 5);
}

} // namespace
