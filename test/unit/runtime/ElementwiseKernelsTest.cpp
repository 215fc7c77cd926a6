//===- ElementwiseKernelsTest.cpp - the CPU's elementwise kernels -----------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

TEST(KernelsTest, BinaryOpsApplyElementwise) {
  OwnedTensor lhs = f32({2, 2}, {1, -2, 3, 8});
  OwnedTensor rhs = f32({2, 2}, {4, 5, -6, 2});
  OwnedTensor result(DType::F32, {2, 2});
  ASSERT_EQ(run("nn.add", {}, {&lhs, &rhs}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{5, 3, -3, 10}));
  ASSERT_EQ(run("nn.sub", {}, {&lhs, &rhs}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{-3, -7, 9, 6}));
  ASSERT_EQ(run("nn.mul", {}, {&lhs, &rhs}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{4, -10, -18, 16}));
  ASSERT_EQ(run("nn.div", {}, {&lhs, &rhs}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{0.25f, -0.4f, -0.5f, 4}));
}

TEST(KernelsTest, UnaryOpsApplyElementwise) {
  std::vector<float> x = {-2.0f, -0.5f, 0.25f, 3.0f};
  OwnedTensor input = f32({4}, x);
  OwnedTensor positive = f32({4}, {0.25f, 1.0f, 4.0f, 9.0f});
  OwnedTensor result(DType::F32, {4});
  auto apply = [&](const char *op, const OwnedTensor &in) {
    EXPECT_EQ(run(op, {}, {&in}, {&result}), "");
    return read<float>(result);
  };
  expectNear(apply("nn.neg", input), {2.0f, 0.5f, -0.25f, -3.0f});
  expectNear(apply("nn.exp", input), {std::exp(-2.0f), std::exp(-0.5f),
                                      std::exp(0.25f), std::exp(3.0f)});
  expectNear(apply("nn.log", positive),
             {std::log(0.25f), 0.0f, std::log(4.0f), std::log(9.0f)});
  expectNear(apply("nn.sqrt", positive), {0.5f, 1.0f, 2.0f, 3.0f});
  expectNear(apply("nn.rsqrt", positive), {2.0f, 1.0f, 0.5f, 1.0f / 3});
  expectNear(apply("nn.tanh", input), {std::tanh(-2.0f), std::tanh(-0.5f),
                                       std::tanh(0.25f), std::tanh(3.0f)});
  expectNear(apply("nn.sin", input), {std::sin(-2.0f), std::sin(-0.5f),
                                      std::sin(0.25f), std::sin(3.0f)});
  expectNear(apply("nn.cos", input), {std::cos(-2.0f), std::cos(-0.5f),
                                      std::cos(0.25f), std::cos(3.0f)});
  // Hand values: erf(-2) = -0.995322, erf(-0.5) = -0.520500,
  // erf(0.25) = 0.276326, erf(3) = 0.999978.
  expectNear(apply("nn.erf", input),
             {-0.995322f, -0.520500f, 0.276326f, 0.999978f});
  expectNear(apply("nn.abs", input), {2.0f, 0.5f, 0.25f, 3.0f});
  // Hand values: sigmoid(-2) = 0.119203, sigmoid(-0.5) = 0.377541,
  // sigmoid(0.25) = 0.562177, sigmoid(3) = 0.952574.
  expectNear(apply("nn.sigmoid", input),
             {0.119203f, 0.377541f, 0.562177f, 0.952574f});
  expectNear(apply("nn.relu", input), {0.0f, 0.0f, 0.25f, 3.0f});
  std::vector<float> gelu, silu;
  for (float v : x) {
    gelu.push_back(0.5f * v *
                   (1 + std::tanh(std::sqrt(2 / 3.14159265358979) *
                                  (v + 0.044715f * v * v * v))));
    silu.push_back(v / (1 + std::exp(-v)));
  }
  expectNear(apply("nn.gelu", input), gelu);
  expectNear(apply("nn.silu", input), silu);
  // Hand values: gelu(1) = 0.841192, silu(1) = 1 / (1 + e^-1).
  OwnedTensor one = f32({1}, {1.0f});
  OwnedTensor scalar(DType::F32, {1});
  ASSERT_EQ(run("nn.gelu", {}, {&one}, {&scalar}), "");
  EXPECT_NEAR(read<float>(scalar)[0], 0.841192f, 1e-5f);
  ASSERT_EQ(run("nn.silu", {}, {&one}, {&scalar}), "");
  EXPECT_NEAR(read<float>(scalar)[0], 0.731059f, 1e-5f);
}

TEST(KernelsTest, ElementwiseOpsMayWriteInPlace) {
  OwnedTensor tensor = f32({3}, {1, 2, 3});
  std::vector<const Tensor *> inputs = {&tensor.view, &tensor.view};
  std::vector<Tensor *> outputs = {&tensor.view};
  ASSERT_EQ(runCpuKernel("nn.mul", {}, inputs, outputs).message(), "");
  EXPECT_EQ(read<float>(tensor), (std::vector<float>{1, 4, 9}));
}

TEST(KernelsTest, SelectPicksByCondition) {
  OwnedTensor condition = i1({2, 2}, {1, 0, 0, 1});
  OwnedTensor onTrue = i64({2, 2}, {1, 2, 3, 4});
  OwnedTensor onFalse = i64({2, 2}, {-1, -2, -3, -4});
  OwnedTensor result(DType::I64, {2, 2});
  ASSERT_EQ(run("nn.select", {}, {&condition, &onTrue, &onFalse}, {&result}),
            "");
  EXPECT_EQ(read<int64_t>(result), (std::vector<int64_t>{1, -2, -3, 4}));
}

TEST(KernelsTest, CompareEvaluatesEveryPredicate) {
  OwnedTensor lhs = f32({3}, {1, 2, 3});
  OwnedTensor rhs = f32({3}, {2, 2, 2});
  OwnedTensor result(DType::I1, {3});
  const std::vector<std::vector<uint8_t>> expected = {
      {0, 1, 0}, {1, 0, 1}, {1, 0, 0}, {1, 1, 0}, {0, 0, 1}, {0, 1, 1}};
  for (int64_t predicate = 0; predicate < 6; ++predicate) {
    KernelAttrs attrs;
    attrs.ints["predicate"] = predicate;
    ASSERT_EQ(run("nn.compare", attrs, {&lhs, &rhs}, {&result}), "");
    EXPECT_EQ(read<uint8_t>(result), expected[predicate])
        << "predicate " << predicate;
  }
}

TEST(KernelsTest, CompareTakesIntegers) {
  KernelAttrs attrs;
  attrs.ints["predicate"] = 2; // lt
  OwnedTensor a32 = i32({3}, {-5, 0, 7}), b32 = i32({3}, {0, 0, 0});
  OwnedTensor result(DType::I1, {3});
  ASSERT_EQ(run("nn.compare", attrs, {&a32, &b32}, {&result}), "");
  EXPECT_EQ(read<uint8_t>(result), (std::vector<uint8_t>{1, 0, 0}));
  OwnedTensor a64 = i64({3}, {INT64_MIN, 1, INT64_MAX});
  OwnedTensor b64 = i64({3}, {0, 2, INT64_MAX - 1});
  ASSERT_EQ(run("nn.compare", attrs, {&a64, &b64}, {&result}), "");
  EXPECT_EQ(read<uint8_t>(result), (std::vector<uint8_t>{1, 1, 0}));
  attrs.ints["predicate"] = 9;
  EXPECT_EQ(run("nn.compare", attrs, {&a64, &b64}, {&result}),
            "nn.compare: predicate 9 is not one of eq, ne, lt, le, gt, ge (0 "
            "to 5)");
}

TEST(KernelsTest, CastConvertsBetweenElementTypes) {
  OwnedTensor floats = f32({5}, {-2.7f, -0.5f, 0.0f, 1.9f, 3e10f});
  OwnedTensor ints(DType::I32, {5});
  ASSERT_EQ(run("nn.cast", {}, {&floats}, {&ints}), "");
  // Toward zero, saturating out of range.
  EXPECT_EQ(read<int32_t>(ints),
            (std::vector<int32_t>{-2, 0, 0, 1, INT32_MAX}));

  OwnedTensor bools(DType::I1, {5});
  ASSERT_EQ(run("nn.cast", {}, {&floats}, {&bools}), "");
  EXPECT_EQ(read<uint8_t>(bools), (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  OwnedTensor back(DType::F32, {5});
  ASSERT_EQ(run("nn.cast", {}, {&bools}, {&back}), "");
  EXPECT_EQ(read<float>(back), (std::vector<float>{1, 1, 0, 1, 1}));

  OwnedTensor wide = i64({2}, {-3, 1LL << 40});
  OwnedTensor asFloat(DType::F32, {2});
  ASSERT_EQ(run("nn.cast", {}, {&wide}, {&asFloat}), "");
  EXPECT_EQ(read<float>(asFloat), (std::vector<float>{-3.0f, 0x1p40f}));

  // To a 16-bit float: rounded to the nearest half.
  OwnedTensor half(DType::F16, {5});
  ASSERT_EQ(run("nn.cast", {}, {&floats}, {&half}), "");
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(half.view.as<uint16_t>()[i],
              floatToHalf(DType::F16, floats.view.as<float>()[i]));
}

TEST(KernelsTest, ConstantFillsSplatsAndDenseValues) {
  KernelAttrs attrs;
  float splat = 0.125f;
  attrs.bytes["value"] = std::string(reinterpret_cast<char *>(&splat), 4);
  OwnedTensor result(DType::F32, {2, 3});
  ASSERT_EQ(run("nn.constant", attrs, {}, {&result}), "");
  EXPECT_EQ(read<float>(result), std::vector<float>(6, 0.125f));

  std::vector<int32_t> dense = {1, 2, 3, 4, 5, 6};
  attrs.bytes["value"] =
      std::string(reinterpret_cast<char *>(dense.data()), 24);
  OwnedTensor ints(DType::I32, {3, 2});
  ASSERT_EQ(run("nn.constant", attrs, {}, {&ints}), "");
  EXPECT_EQ(read<int32_t>(ints), dense);

  attrs.bytes["value"] = std::string(8, '\0');
  EXPECT_EQ(run("nn.constant", attrs, {}, {&ints}),
            "nn.constant: value has 8 bytes, expected 4 (a splat) or 24 (6 "
            "i32 elements)");
}

TEST(KernelsTest, MaxMinPowAndClamp) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OwnedTensor a = f32({4}, {1.0f, -2.0f, 3.0f, nan}),
              b = f32({4}, {2.0f, -3.0f, 3.0f, 0.0f});
  OwnedTensor out(DType::F32, {4});
  ASSERT_EQ(run("nn.max", {}, {&a, &b}, {&out}), "");
  std::vector<float> max = read<float>(out);
  expectNear({max[0], max[1], max[2]}, {2.0f, -2.0f, 3.0f});
  EXPECT_TRUE(std::isnan(max[3]));
  ASSERT_EQ(run("nn.min", {}, {&a, &b}, {&out}), "");
  std::vector<float> min = read<float>(out);
  expectNear({min[0], min[1], min[2]}, {1.0f, -3.0f, 3.0f});
  EXPECT_TRUE(std::isnan(min[3]));
  OwnedTensor base = f32({3}, {2.0f, 9.0f, -2.0f}),
              exponent = f32({3}, {3.0f, 0.5f, 2.0f}), powers(DType::F32, {3});
  ASSERT_EQ(run("nn.pow", {}, {&base, &exponent}, {&powers}), "");
  expectNear(read<float>(powers), {8.0f, 3.0f, 4.0f});
  KernelAttrs bounds;
  bounds.floats["min"] = -1.0;
  bounds.floats["max"] = 2.0;
  OwnedTensor x = f32({4}, {-5.0f, 0.5f, 7.0f, nan});
  ASSERT_EQ(run("nn.clamp", bounds, {&x}, {&out}), "");
  std::vector<float> clamped = read<float>(out);
  expectNear({clamped[0], clamped[1], clamped[2]}, {-1.0f, 0.5f, 2.0f});
  EXPECT_TRUE(std::isnan(clamped[3]));
}

TEST(KernelsTest, IotaCountsAlongItsDim) {
  KernelAttrs attrs;
  attrs.ints["dim"] = 1;
  OwnedTensor columns(DType::F32, {2, 3});
  ASSERT_EQ(run("nn.iota", attrs, {}, {&columns}), "");
  EXPECT_EQ(read<float>(columns), (std::vector<float>{0, 1, 2, 0, 1, 2}));

  attrs.ints["dim"] = 0;
  OwnedTensor rows(DType::I32, {3, 2});
  ASSERT_EQ(run("nn.iota", attrs, {}, {&rows}), "");
  EXPECT_EQ(read<int32_t>(rows), (std::vector<int32_t>{0, 0, 1, 1, 2, 2}));

  OwnedTensor half(DType::BF16, {4});
  ASSERT_EQ(run("nn.iota", attrs, {}, {&half}), "");
  std::vector<float> widened;
  for (uint16_t bits : read<uint16_t>(half))
    widened.push_back(halfToFloat(DType::BF16, bits));
  EXPECT_EQ(widened, (std::vector<float>{0, 1, 2, 3}));

  attrs.ints["dim"] = 2;
  EXPECT_EQ(run("nn.iota", attrs, {}, {&rows}),
            "nn.iota: expects dim in [0, 2), got 2");
  attrs.ints["dim"] = 0;
  OwnedTensor mask(DType::I1, {2});
  EXPECT_EQ(run("nn.iota", attrs, {}, {&mask}),
            "nn.iota: expects result of element type i32 or i64, got i1");
}

TEST(KernelsTest, BroadcastExpandsNewAndUnitDims) {
  KernelAttrs attrs;
  attrs.lists["dims"] = {1};
  OwnedTensor bias = f32({3}, {1, 2, 3});
  OwnedTensor rows(DType::F32, {2, 3});
  ASSERT_EQ(run("nn.broadcast", attrs, {&bias}, {&rows}), "");
  EXPECT_EQ(read<float>(rows), (std::vector<float>{1, 2, 3, 1, 2, 3}));

  attrs.lists["dims"] = {0, 2};
  OwnedTensor column = i32({2, 1}, {7, 8});
  OwnedTensor cube(DType::I32, {2, 2, 3});
  ASSERT_EQ(run("nn.broadcast", attrs, {&column}, {&cube}), "");
  EXPECT_EQ(read<int32_t>(cube),
            (std::vector<int32_t>{7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8}));

  attrs.lists["dims"] = {1};
  OwnedTensor wrong(DType::F32, {3, 2});
  EXPECT_EQ(run("nn.broadcast", attrs, {&bias}, {&wrong}),
            "nn.broadcast: operand dim 0 of size 3 cannot broadcast to size 2 "
            "of result dim 1");
}

} // namespace
