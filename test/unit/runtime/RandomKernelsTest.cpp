//===- RandomKernelsTest.cpp - random numbers and the random kernels --------===//

#include "KernelsTestSupport.h"
#include "tessera/runtime/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

// Random123's known-answer vectors for Philox-4x32-10 (its kat_vectors).
TEST(RandomTest, PhiloxMatchesTheKnownAnswers) {
  auto words = [](random::Block block) {
    return std::vector<uint32_t>(block.words, block.words + 4);
  };
  EXPECT_EQ(
      words(random::philox4x32({{0, 0, 0, 0}}, 0, 0)),
      (std::vector<uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      words(
          random::philox4x32({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
                             0xffffffff, 0xffffffff)),
      (std::vector<uint32_t>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      words(
          random::philox4x32({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
                             0xa4093822, 0x299f31d0)),
      (std::vector<uint32_t>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(RandomTest, UniformNumbersAreInTheUnitIntervalAndSpread) {
  double sum = 0;
  int below = 0;
  for (uint64_t i = 0; i < 40000; ++i) {
    float u = random::uniformAt(7, 3, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    below += u < 0.1f;
  }
  EXPECT_NEAR(sum / 40000, 0.5, 0.01);
  EXPECT_NEAR(below / 40000.0, 0.1, 0.01);
  // Seed and step each change the numbers.
  EXPECT_NE(random::uniformAt(7, 3, 5), random::uniformAt(8, 3, 5));
  EXPECT_NE(random::uniformAt(7, 3, 5), random::uniformAt(7, 4, 5));
}

TEST(KernelsTest, RandomPiecesDrawWhatTheWholeTensorHolds) {
  KernelAttrs attrs;
  attrs.ints["seed"] = 11;
  OwnedTensor step = i64({}, {5});
  OwnedTensor whole(DType::F32, {4, 6});
  ASSERT_EQ(run("nn.random_uniform", attrs, {&step}, {&whole}), "");
  std::vector<float> all = read<float>(whole);
  // The piece (1, 2) of [2, 3] pieces: rows 2..3, columns 2..3.
  attrs.lists["global_shape"] = {4, 6};
  OwnedTensor piece = i64({2}, {1, 2});
  OwnedTensor part(DType::F32, {2, 2});
  ASSERT_EQ(run("nn.random_uniform", attrs, {&step, &piece}, {&part}), "");
  EXPECT_EQ(read<float>(part),
            (std::vector<float>{all[2 * 6 + 4], all[2 * 6 + 5], all[3 * 6 + 4],
                                all[3 * 6 + 5]}));

  // Dropout keeps x / (1 - rate) where the number is at least the rate.
  attrs.floats["rate"] = 0.5;
  attrs.lists.clear();
  OwnedTensor x = f32({4, 6}, iota(24));
  OwnedTensor dropped(DType::F32, {4, 6});
  ASSERT_EQ(run("nn.dropout", attrs, {&x, &step}, {&dropped}), "");
  std::vector<float> expected = iota(24);
  int kept = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] = all[i] >= 0.5f ? expected[i] * 2.0f : 0.0f;
    kept += all[i] >= 0.5f;
  }
  EXPECT_EQ(read<float>(dropped), expected);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 24);

  attrs.lists["global_shape"] = {4, 6};
  OwnedTensor outside = i64({2}, {2, 0});
  EXPECT_EQ(
      run("nn.random_uniform", attrs, {&step, &outside}, {&part}),
      "nn.random_uniform: piece 2 of size 2 lies outside dim 0 of size 4");
  attrs.lists["global_shape"] = {4, 5};
  EXPECT_EQ(run("nn.random_uniform", attrs, {&step, &piece}, {&part}),
            "nn.random_uniform: global_shape dim 1 of size 5 is not a whole "
            "number of pieces of size 2");
  attrs.lists.clear();
  EXPECT_EQ(run("nn.random_uniform", attrs, {&step, &piece}, {&part}),
            "nn.random_uniform: missing integer-list attribute 'global_shape'");
}

} // namespace
