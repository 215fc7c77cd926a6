//===- SoftmaxKernelsTest.cpp - the CPU's softmax and loss kernels ----------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

/// A softmax's attributes along `dim`: unscaled and not causal by default.
static KernelAttrs softmaxAttrs(int64_t dim, double scale = 1.0,
                                bool causal = false) {
  KernelAttrs attrs;
  attrs.ints["dim"] = dim;
  attrs.floats["scale"] = scale;
  attrs.ints["causal"] = causal;
  return attrs;
}

TEST(KernelsTest, SoftmaxRowsSumToOne) {
  KernelAttrs attrs = softmaxAttrs(1);
  // Large logits would overflow exp without the maximum subtracted.
  OwnedTensor input = f32({2, 3}, {1, 2, 3, 1000, 1001, 1002});
  OwnedTensor result(DType::F32, {2, 3});
  ASSERT_EQ(run("nn.softmax", attrs, {&input}, {&result}), "");
  std::vector<float> p = read<float>(result);
  float e1 = std::exp(-2.0f), e2 = std::exp(-1.0f);
  float sum = e1 + e2 + 1;
  expectNear(p, {e1 / sum, e2 / sum, 1 / sum, e1 / sum, e2 / sum, 1 / sum});
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0f, 1e-6f);
  EXPECT_NEAR(p[3] + p[4] + p[5], 1.0f, 1e-6f);

  ASSERT_EQ(run("nn.log_softmax", attrs, {&input}, {&result}), "");
  std::vector<float> logP = read<float>(result);
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(logP[i], std::log(p[i]), 1e-5f);
}

TEST(KernelsTest, SoftmaxWorksAlongAnInnerDim) {
  OwnedTensor input = f32({2, 2}, {0, 5, 0, 5});
  OwnedTensor result(DType::F32, {2, 2});
  ASSERT_EQ(run("nn.softmax", softmaxAttrs(0), {&input}, {&result}), "");
  expectNear(read<float>(result), {0.5f, 0.5f, 0.5f, 0.5f});
  // Scaled: softmax(2 * [0, 5]) along dim 0 of [[0, 5], [0, 5]] is still
  // even; along the rows it is not.
  ASSERT_EQ(run("nn.softmax", softmaxAttrs(0, 2.0), {&input}, {&result}), "");
  expectNear(read<float>(result), {0.5f, 0.5f, 0.5f, 0.5f});
  ASSERT_EQ(run("nn.softmax", softmaxAttrs(1, 0.2), {&input}, {&result}), "");
  float e = std::exp(-1.0f);
  expectNear(read<float>(result),
             {e / (1 + e), 1 / (1 + e), e / (1 + e), 1 / (1 + e)});
}

/// A causal, scaled softmax gives exactly what nn.mul by the scale, then
/// nn.causal_mask, then a plain softmax give (the chain it folds), on two
/// batches of 37 queries and keys: rows of every length, in and out of
/// eight-lane blocks.
TEST(KernelsTest, CausalScaledSoftmaxIsTheMaskedChain) {
  constexpr int64_t kSize = 37;
  std::vector<float> values(2 * kSize * kSize);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(0.37f * static_cast<float>(i)) * 9.0f;
  OwnedTensor input = f32({2, kSize, kSize}, values);
  OwnedTensor scale =
      f32({2, kSize, kSize}, std::vector<float>(values.size(), 0.125f));
  OwnedTensor scaled(DType::F32, {2, kSize, kSize}),
      masked(DType::F32, {2, kSize, kSize}),
      chain(DType::F32, {2, kSize, kSize}),
      folded(DType::F32, {2, kSize, kSize});
  ASSERT_EQ(run("nn.mul", {}, {&input, &scale}, {&scaled}), "");
  KernelAttrs mask;
  mask.floats["fill"] = -std::numeric_limits<double>::infinity();
  ASSERT_EQ(run("nn.causal_mask", mask, {&scaled}, {&masked}), "");
  ASSERT_EQ(run("nn.softmax", softmaxAttrs(2), {&masked}, {&chain}), "");
  ASSERT_EQ(
      run("nn.softmax", softmaxAttrs(2, 0.125, true), {&input}, {&folded}), "");
  std::vector<float> want = read<float>(chain), got = read<float>(folded);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "at " << i;
  // Row q of each batch sees keys 0..q only.
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[kSize * kSize + kSize - 1], 0.0f);
  // A causal softmax runs along the keys, the last dim.
  EXPECT_EQ(run("nn.softmax", softmaxAttrs(1, 1.0, true), {&input}, {&folded}),
            "nn.softmax: a causal softmax expects scores [..., query, key] "
            "and dim 2, got rank 3 and dim 1");
}

TEST(KernelsTest, CrossEntropyIsLogSumExpMinusTheLabelLogit) {
  OwnedTensor logits = f32({2, 3}, {1, 2, 3, 0, 0, 0});
  OwnedTensor labels = i64({2}, {2, 0});
  OwnedTensor result(DType::F32, {2});
  ASSERT_EQ(run("nn.cross_entropy", {}, {&logits, &labels}, {&result}), "");
  // log(e + e^2 + e^3) - 3 = 0.407606; log(3) for uniform logits.
  expectNear(read<float>(result), {0.407606f, std::log(3.0f)});

  OwnedTensor bad = i32({2}, {1, 3});
  EXPECT_EQ(run("nn.cross_entropy", {}, {&logits, &bad}, {&result}),
            "nn.cross_entropy: label 3 at position 1 is outside [0, 3)");
}

} // namespace
