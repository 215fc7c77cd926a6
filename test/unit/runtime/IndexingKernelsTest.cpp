//===- IndexingKernelsTest.cpp - the CPU's indexing kernels -----------------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

TEST(KernelsTest, GatherAndScatterAddAlongAnAxis) {
  // torch.gather(x, 1, idx) and zeros.scatter_add_(1, idx, src).
  OwnedTensor x = f32({2, 4}, {10, 11, 12, 13, 20, 21, 22, 23});
  OwnedTensor idx = i64({2, 3}, {3, 0, 3, 1, 1, 2});
  KernelAttrs attrs;
  attrs.ints["axis"] = 1;
  OwnedTensor picked(DType::F32, {2, 3});
  ASSERT_EQ(run("nn.gather", attrs, {&x, &idx}, {&picked}), "");
  EXPECT_EQ(read<float>(picked), (std::vector<float>{13, 10, 13, 21, 21, 22}));
  OwnedTensor sums(DType::F32, {2, 4});
  ASSERT_EQ(run("nn.scatter_add", attrs, {&picked, &idx}, {&sums}), "");
  EXPECT_EQ(read<float>(sums),
            (std::vector<float>{10, 0, 0, 26, 0, 42, 22, 0}));
  // Along the first axis of [3, 2].
  attrs.ints["axis"] = 0;
  OwnedTensor rows = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  OwnedTensor rowIdx = i32({1, 2}, {2, 0});
  OwnedTensor one(DType::F32, {1, 2});
  ASSERT_EQ(run("nn.gather", attrs, {&rows, &rowIdx}, {&one}), "");
  EXPECT_EQ(read<float>(one), (std::vector<float>{5, 2}));
  // An index outside the axis is a data error.
  attrs.ints["axis"] = 1;
  OwnedTensor bad = i64({2, 3}, {0, 4, 0, 0, 0, 0});
  EXPECT_EQ(run("nn.gather", attrs, {&x, &bad}, {&picked}),
            "nn.gather: index 4 at position 1 is outside [0, 4)");
  EXPECT_EQ(run("nn.scatter_add", attrs, {&picked, &bad}, {&sums}),
            "nn.scatter_add: index 4 at position 1 is outside [0, 4)");
}

TEST(KernelsTest, TopKPicksTheLargestInOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OwnedTensor x = f32({2, 5}, {1, 5, 3, 5, -1, 2, nan, 7, 0, 7});
  KernelAttrs attrs;
  attrs.ints["k"] = 3;
  OwnedTensor values(DType::F32, {2, 3}), indices(DType::I64, {2, 3});
  ASSERT_EQ(run("nn.top_k", attrs, {&x}, {&values, &indices}), "");
  // Ties by lower index; NaN above every number.
  EXPECT_EQ(read<int64_t>(indices), (std::vector<int64_t>{1, 3, 2, 1, 2, 4}));
  std::vector<float> v = read<float>(values);
  EXPECT_EQ(v[0], 5.0f);
  EXPECT_EQ(v[2], 3.0f);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_EQ(v[4], 7.0f);
  attrs.ints["k"] = 6;
  EXPECT_EQ(run("nn.top_k", attrs, {&x}, {&values, &indices}),
            "nn.top_k: expects k in [1, 5], got 6");
}

TEST(KernelsTest, MoeDispatchFillsSlotsInGShardsOrder) {
  // Two groups of 4 tokens routed to 2 of 3 experts with 2 slots each: the
  // first choices take slots in token order, then the second ones; a
  // choice whose expert is full is dropped, as is an expert out of range.
  std::vector<int64_t> choices = {0, 1, 0, 2, 0, 1, 1, 5};
  std::vector<int64_t> both = choices;
  both.insert(both.end(), choices.begin(), choices.end());
  OwnedTensor indices = i64({2, 4, 2}, both);
  OwnedTensor mask(DType::F32, {2, 4, 3, 2});
  ASSERT_EQ(run("nn.moe_dispatch", {}, {&indices}, {&mask}), "");
  std::vector<float> group = {1, 0, 0, 1, 0, 0, // token 0: e0 slot 0, e1 slot 1
                              0, 1, 0, 0, 1, 0, // token 1: e0 slot 1, e2 slot 0
                              0, 0, 0, 0, 0, 0, // token 2: e0 and e1 full
                              0, 0, 1, 0, 0, 0}; // token 3: e1 slot 0
  std::vector<float> want = group;
  want.insert(want.end(), group.begin(), group.end());
  EXPECT_EQ(read<float>(mask), want);
  OwnedTensor wrong(DType::F32, {2, 3, 3, 2});
  EXPECT_NE(run("nn.moe_dispatch", {}, {&indices}, {&wrong}), "");
}

TEST(KernelsTest, EmbeddingLooksUpRowsAndZeroesOutOfRange) {
  OwnedTensor table = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  OwnedTensor indices = i32({2, 2}, {2, 0, -1, 3});
  OwnedTensor result(DType::F32, {2, 2, 2});
  ASSERT_EQ(run("nn.embedding", {}, {&table, &indices}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{5, 6, 1, 2, 0, 0, 0, 0}));

  OwnedTensor wide = i64({1}, {1});
  OwnedTensor row(DType::F32, {1, 2});
  ASSERT_EQ(run("nn.embedding", {}, {&table, &wide}, {&row}), "");
  EXPECT_EQ(read<float>(row), (std::vector<float>{3, 4}));
}

TEST(KernelsTest, EmbeddingGradSumsRowsAtTheirIndices) {
  // Index 2 appears twice; -1 and 3 are outside the table.
  OwnedTensor grad = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  OwnedTensor indices = i32({2, 2}, {2, 0, 2, 3});
  OwnedTensor table(DType::F32, {3, 2});
  ASSERT_EQ(run("nn.embedding_grad", {}, {&grad, &indices}, {&table}), "");
  EXPECT_EQ(read<float>(table), (std::vector<float>{3, 4, 0, 0, 6, 8}));
}

TEST(KernelsTest, OneHotMarksEachLabel) {
  OwnedTensor labels = i64({3}, {1, 0, 5});
  OwnedTensor result(DType::F32, {3, 3});
  ASSERT_EQ(run("nn.one_hot", {}, {&labels}, {&result}), "");
  EXPECT_EQ(read<float>(result),
            (std::vector<float>{0, 1, 0, 1, 0, 0, 0, 0, 0}));
}

TEST(KernelsTest, OffsetOpsWorkOnTheirPieceOfTheVocabulary) {
  // A device's piece 1 of a 6-row table split in two: rows 3, 4 and 5.
  OwnedTensor piece = i64({1}, {1});
  OwnedTensor table = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  OwnedTensor indices = i32({4}, {4, 0, 3, 6});
  OwnedTensor rows(DType::F32, {4, 2});
  ASSERT_EQ(run("nn.embedding", {}, {&table, &indices, &piece}, {&rows}), "");
  EXPECT_EQ(read<float>(rows), (std::vector<float>{3, 4, 0, 0, 1, 2, 0, 0}));

  OwnedTensor grad = f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  OwnedTensor tableGrad(DType::F32, {3, 2});
  ASSERT_EQ(
      run("nn.embedding_grad", {}, {&grad, &indices, &piece}, {&tableGrad}),
      "");
  EXPECT_EQ(read<float>(tableGrad), (std::vector<float>{5, 6, 1, 2, 0, 0}));

  OwnedTensor labels = i64({3}, {4, 1, 3});
  OwnedTensor hot(DType::F32, {3, 3});
  ASSERT_EQ(run("nn.one_hot", {}, {&labels, &piece}, {&hot}), "");
  EXPECT_EQ(read<float>(hot), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0}));

  // Rows 3 to 5 of an iota down 6 rows.
  KernelAttrs down;
  down.ints["dim"] = 0;
  OwnedTensor positions(DType::I64, {3, 2});
  ASSERT_EQ(run("nn.iota", down, {&piece}, {&positions}), "");
  EXPECT_EQ(read<int64_t>(positions), (std::vector<int64_t>{3, 3, 4, 4, 5, 5}));

  OwnedTensor wide = i64({2}, {1, 0});
  EXPECT_EQ(run("nn.one_hot", {}, {&labels, &wide}, {&hot}),
            "nn.one_hot: expects piece of shape [1], got [2]");
}

} // namespace
