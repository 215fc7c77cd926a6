//===- ReductionKernelsTest.cpp - the CPU's reductions ----------------------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

TEST(KernelsTest, ReductionsReduceTheGivenDims) {
  OwnedTensor input = f32({2, 3}, {1, 5, 3, -4, 2, 8});
  KernelAttrs rows;
  rows.lists["dims"] = {1};
  OwnedTensor perRow(DType::F32, {2});
  ASSERT_EQ(run("nn.reduce_sum", rows, {&input}, {&perRow}), "");
  EXPECT_EQ(read<float>(perRow), (std::vector<float>{9, 6}));
  ASSERT_EQ(run("nn.reduce_max", rows, {&input}, {&perRow}), "");
  EXPECT_EQ(read<float>(perRow), (std::vector<float>{5, 8}));
  ASSERT_EQ(run("nn.reduce_mean", rows, {&input}, {&perRow}), "");
  EXPECT_EQ(read<float>(perRow), (std::vector<float>{3, 2}));

  KernelAttrs columns;
  columns.lists["dims"] = {0};
  OwnedTensor perColumn(DType::F32, {3});
  ASSERT_EQ(run("nn.reduce_sum", columns, {&input}, {&perColumn}), "");
  EXPECT_EQ(read<float>(perColumn), (std::vector<float>{-3, 7, 11}));

  KernelAttrs all;
  all.lists["dims"] = {1, 0};
  OwnedTensor scalar(DType::F32, {});
  ASSERT_EQ(run("nn.reduce_mean", all, {&input}, {&scalar}), "");
  EXPECT_EQ(read<float>(scalar), (std::vector<float>{2.5f}));

  all.lists["dims"] = {0, 0};
  EXPECT_EQ(run("nn.reduce_sum", all, {&input}, {&scalar}),
            "nn.reduce_sum: dim 0 appears twice");
}

} // namespace
