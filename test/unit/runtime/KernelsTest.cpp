//===- KernelsTest.cpp - the CPU kernels of the nn ops on small tensors ---===//

#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/Device.h"
#include "tessera/runtime/LrSchedule.h"
#include "tessera/runtime/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;

namespace {

template <typename T>
OwnedTensor makeTensor(DType dtype, std::vector<int64_t> shape,
                       const std::vector<T> &values) {
  OwnedTensor tensor(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), tensor.view.getNumElements());
  EXPECT_EQ(sizeof(T), getDTypeBytes(dtype));
  std::memcpy(tensor.view.data, values.data(), values.size() * sizeof(T));
  return tensor;
}

OwnedTensor f32(std::vector<int64_t> shape, const std::vector<float> &values) {
  return makeTensor(DType::F32, std::move(shape), values);
}
OwnedTensor i32(std::vector<int64_t> shape,
                const std::vector<int32_t> &values) {
  return makeTensor(DType::I32, std::move(shape), values);
}
OwnedTensor i64(std::vector<int64_t> shape,
                const std::vector<int64_t> &values) {
  return makeTensor(DType::I64, std::move(shape), values);
}
OwnedTensor i1(std::vector<int64_t> shape, const std::vector<uint8_t> &values) {
  return makeTensor(DType::I1, std::move(shape), values);
}

/// Values of increasing, non-round floats, so that a misplaced element shows.
std::vector<float> iota(int64_t count, float scale = 0.25f) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = scale * static_cast<float>(i) - 1.0f;
  return values;
}

template <typename T> std::vector<T> read(const OwnedTensor &tensor) {
  const T *data = tensor.view.as<T>();
  return std::vector<T>(data, data + tensor.view.getNumElements());
}

std::string run(const std::string &op, const KernelAttrs &attrs,
                std::initializer_list<const OwnedTensor *> inputs,
                std::initializer_list<OwnedTensor *> outputs) {
  std::vector<const Tensor *> in;
  for (const OwnedTensor *tensor : inputs)
    in.push_back(&tensor->view);
  std::vector<Tensor *> out;
  for (OwnedTensor *tensor : outputs)
    out.push_back(&tensor->view);
  return runCpuKernel(op, attrs, in, out).message();
}

void expectNear(const std::vector<float> &actual,
                const std::vector<float> &expected, float tolerance = 1e-5f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "at element " << i;
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

TEST(TensorTest, DTypesHaveSizesAndNames) {
  EXPECT_EQ(getDTypeBytes(DType::F32), 4u);
  EXPECT_EQ(getDTypeBytes(DType::F64), 8u);
  EXPECT_EQ(getDTypeBytes(DType::BF16), 2u);
  EXPECT_EQ(getDTypeBytes(DType::I1), 1u);
  EXPECT_STREQ(getDTypeName(DType::BF16), "bf16");
  EXPECT_STREQ(getDTypeName(DType::I64), "i64");
  EXPECT_EQ(getNumElements({}), 1);
  EXPECT_EQ(getNumElements({2, 3, 4}), 24);
  EXPECT_EQ(getNumElements({2, 0}), 0);
}

TEST(TensorTest, OwnedTensorIsZeroedAndCopiesOwnStorage) {
  OwnedTensor tensor(DType::I64, {2, 3});
  EXPECT_EQ(tensor.view.getBytes(), 48u);
  EXPECT_EQ(read<int64_t>(tensor), std::vector<int64_t>(6, 0));
  tensor.view.as<int64_t>()[4] = 7;

  OwnedTensor copy(tensor);
  EXPECT_NE(copy.view.data, tensor.view.data);
  EXPECT_EQ(copy.view.data, copy.storage.data());
  copy.view.as<int64_t>()[4] = 9;
  EXPECT_EQ(tensor.view.as<int64_t>()[4], 7);

  OwnedTensor assigned;
  assigned = tensor;
  EXPECT_EQ(assigned.view.data, assigned.storage.data());
  EXPECT_EQ(assigned.view.as<int64_t>()[4], 7);

  OwnedTensor moved(std::move(copy));
  EXPECT_EQ(moved.view.data, moved.storage.data());
  EXPECT_EQ(moved.view.as<int64_t>()[4], 9);
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

KernelAttrs dotAttrs(std::vector<int64_t> lhsContract,
                     std::vector<int64_t> rhsContract,
                     std::vector<int64_t> lhsBatch = {},
                     std::vector<int64_t> rhsBatch = {}) {
  KernelAttrs attrs;
  attrs.lists["lhs_contracting_dims"] = std::move(lhsContract);
  attrs.lists["rhs_contracting_dims"] = std::move(rhsContract);
  attrs.lists["lhs_batching_dims"] = std::move(lhsBatch);
  attrs.lists["rhs_batching_dims"] = std::move(rhsBatch);
  return attrs;
}

TEST(KernelsTest, DotMultipliesMatrices) {
  OwnedTensor lhs = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor rhs = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  OwnedTensor result(DType::F32, {2, 2});
  ASSERT_EQ(run("nn.dot", dotAttrs({1}, {0}), {&lhs, &rhs}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{58, 64, 139, 154}));
}

TEST(KernelsTest, DotBatchesOverBatchingDims) {
  const int64_t b = 2, m = 3, k = 4, n = 5;
  OwnedTensor lhs = f32({b, m, k}, iota(b * m * k));
  OwnedTensor rhs = f32({b, k, n}, iota(b * k * n, 0.125f));
  OwnedTensor result(DType::F32, {b, m, n});
  ASSERT_EQ(
      run("nn.dot", dotAttrs({2}, {1}, {0}, {0}), {&lhs, &rhs}, {&result}), "");
  std::vector<float> x = read<float>(lhs), y = read<float>(rhs), expected;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t mi = 0; mi < m; ++mi)
      for (int64_t ni = 0; ni < n; ++ni) {
        float sum = 0;
        for (int64_t ki = 0; ki < k; ++ki)
          sum += x[(bi * m + mi) * k + ki] * y[(bi * k + ki) * n + ni];
        expected.push_back(sum);
      }
  expectNear(read<float>(result), expected);
}

TEST(KernelsTest, DotContractsTransposedOperands) {
  // lhs [K, M] contracting dim 0 and rhs [N, K] contracting dim 1: both
  // operands stored transposed with respect to [M, K] x [K, N].
  const int64_t m = 3, k = 4, n = 2;
  OwnedTensor lhs = f32({k, m}, iota(k * m));
  OwnedTensor rhs = f32({n, k}, iota(n * k, 0.5f));
  OwnedTensor result(DType::F32, {m, n});
  ASSERT_EQ(run("nn.dot", dotAttrs({0}, {1}), {&lhs, &rhs}, {&result}), "");
  std::vector<float> x = read<float>(lhs), y = read<float>(rhs), expected;
  for (int64_t mi = 0; mi < m; ++mi)
    for (int64_t ni = 0; ni < n; ++ni) {
      float sum = 0;
      for (int64_t ki = 0; ki < k; ++ki)
        sum += x[ki * m + mi] * y[ni * k + ki];
      expected.push_back(sum);
    }
  expectNear(read<float>(result), expected);
}

TEST(KernelsTest, DotComputesAttentionScoresPerBatchAndHead) {
  // Q·Kᵀ: [b, a, s, d] x [b, a, t, d] -> [b, a, s, t].
  const int64_t b = 2, a = 2, s = 3, t = 5, d = 4;
  OwnedTensor q = f32({b, a, s, d}, iota(b * a * s * d, 0.125f));
  OwnedTensor k = f32({b, a, t, d}, iota(b * a * t * d, 0.0625f));
  OwnedTensor result(DType::F32, {b, a, s, t});
  ASSERT_EQ(
      run("nn.dot", dotAttrs({3}, {3}, {0, 1}, {0, 1}), {&q, &k}, {&result}),
      "");
  std::vector<float> x = read<float>(q), y = read<float>(k), expected;
  for (int64_t bi = 0; bi < b * a; ++bi)
    for (int64_t si = 0; si < s; ++si)
      for (int64_t ti = 0; ti < t; ++ti) {
        float sum = 0;
        for (int64_t di = 0; di < d; ++di)
          sum += x[(bi * s + si) * d + di] * y[(bi * t + ti) * d + di];
        expected.push_back(sum);
      }
  expectNear(read<float>(result), expected);
}

TEST(KernelsTest, DotPermutesScatteredDims) {
  // lhs [M, B, K] with batch dim 1; rhs [K, N, B] with batch dim 2: neither
  // fits a GEMM layout, so both are permuted. The result is [B, M, N].
  const int64_t b = 3, m = 2, k = 4, n = 5;
  OwnedTensor lhs = f32({m, b, k}, iota(m * b * k));
  OwnedTensor rhs = f32({k, n, b}, iota(k * n * b, 0.0625f));
  OwnedTensor result(DType::F32, {b, m, n});
  ASSERT_EQ(
      run("nn.dot", dotAttrs({2}, {0}, {1}, {2}), {&lhs, &rhs}, {&result}), "");
  std::vector<float> x = read<float>(lhs), y = read<float>(rhs), expected;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t mi = 0; mi < m; ++mi)
      for (int64_t ni = 0; ni < n; ++ni) {
        float sum = 0;
        for (int64_t ki = 0; ki < k; ++ki)
          sum += x[(mi * b + bi) * k + ki] * y[(ki * n + ni) * b + bi];
        expected.push_back(sum);
      }
  expectNear(read<float>(result), expected);
}

TEST(KernelsTest, DotRejectsMismatchedContractingSizes) {
  OwnedTensor lhs(DType::F32, {4, 16}), rhs(DType::F32, {8, 4});
  OwnedTensor result(DType::F32, {4, 4});
  EXPECT_EQ(run("nn.dot", dotAttrs({1}, {0}), {&lhs, &rhs}, {&result}),
            "nn.dot: lhs contracting dim 1 has size 16 but rhs dim 0 has size "
            "8");
}

TEST(KernelsTest, DotRejectsAWrongResultShape) {
  OwnedTensor lhs(DType::F32, {2, 3}), rhs(DType::F32, {3, 4});
  OwnedTensor result(DType::F32, {4, 2});
  EXPECT_EQ(run("nn.dot", dotAttrs({1}, {0}), {&lhs, &rhs}, {&result}),
            "nn.dot: expects result of shape [2, 4], got [4, 2]");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

TEST(KernelsTest, ReshapeKeepsRowMajorOrder) {
  OwnedTensor input = i32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor result(DType::I32, {3, 2});
  ASSERT_EQ(run("nn.reshape", {}, {&input}, {&result}), "");
  EXPECT_EQ(read<int32_t>(result), read<int32_t>(input));
  OwnedTensor wrong(DType::I32, {4});
  EXPECT_EQ(run("nn.reshape", {}, {&input}, {&wrong}),
            "nn.reshape: cannot reshape 6 elements into 4");
}

TEST(KernelsTest, TransposePermutesDims) {
  KernelAttrs attrs;
  attrs.lists["permutation"] = {1, 0};
  OwnedTensor matrix = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor transposed(DType::F32, {3, 2});
  ASSERT_EQ(run("nn.transpose", attrs, {&matrix}, {&transposed}), "");
  EXPECT_EQ(read<float>(transposed), (std::vector<float>{1, 4, 2, 5, 3, 6}));

  // Result dim i is operand dim permutation[i]: [2, 3, 2] -> [3, 2, 2].
  attrs.lists["permutation"] = {1, 2, 0};
  std::vector<int64_t> values(12);
  for (int64_t i = 0; i < 12; ++i)
    values[i] = i;
  OwnedTensor cube = i64({2, 3, 2}, values);
  OwnedTensor permuted(DType::I64, {3, 2, 2});
  ASSERT_EQ(run("nn.transpose", attrs, {&cube}, {&permuted}), "");
  // result[a][b][c] = input[c][a][b] = 6c + 2a + b.
  EXPECT_EQ(read<int64_t>(permuted),
            (std::vector<int64_t>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
}

TEST(KernelsTest, TransposesBlockByBlockPastTheBlockEdges) {
  // Shapes not a multiple of the CPU kernel's 64 x 64 blocks, with other
  // dims around the transposed plane, in 1-, 4- and 8-byte elements: each
  // result element is the input's at the permuted index.
  std::vector<int64_t> shape = {3, 70, 2, 130};
  for (std::vector<int64_t> perm : std::vector<std::vector<int64_t>>{
           {1, 0, 3, 2}, {3, 0, 2, 1}, {0, 3, 1, 2}, {3, 2, 1, 0}}) {
    std::vector<int64_t> resultShape;
    for (int64_t dim : perm)
      resultShape.push_back(shape[dim]);
    int64_t count = 3 * 70 * 2 * 130;
    std::vector<int64_t> values(count);
    for (int64_t i = 0; i < count; ++i)
      values[i] = i;
    std::vector<uint8_t> bytes(count);
    for (int64_t i = 0; i < count; ++i)
      bytes[i] = static_cast<uint8_t>(i * 7 % 2);
    OwnedTensor wide = i64(shape, values), narrow = f32(shape, iota(count)),
                flags = i1(shape, bytes);
    OwnedTensor wideResult(DType::I64, resultShape),
        narrowResult(DType::F32, resultShape),
        flagsResult(DType::I1, resultShape);
    KernelAttrs attrs;
    attrs.lists["permutation"] = perm;
    ASSERT_EQ(run("nn.transpose", attrs, {&wide}, {&wideResult}), "");
    ASSERT_EQ(run("nn.transpose", attrs, {&narrow}, {&narrowResult}), "");
    ASSERT_EQ(run("nn.transpose", attrs, {&flags}, {&flagsResult}), "");
    std::vector<int64_t> strides = {70 * 2 * 130, 2 * 130, 130, 1};
    std::vector<int64_t> got = read<int64_t>(wideResult);
    std::vector<float> gotNarrow = read<float>(narrowResult);
    std::vector<uint8_t> gotFlags = read<uint8_t>(flagsResult);
    std::vector<float> narrowValues = read<float>(narrow);
    std::vector<int64_t> index(4, 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t source = 0;
      for (int64_t dim = 0; dim < 4; ++dim)
        source += index[dim] * strides[perm[dim]];
      ASSERT_EQ(got[i], source) << "permutation " << perm[0] << perm[1]
                                << perm[2] << perm[3] << " at " << i;
      ASSERT_EQ(gotNarrow[i], narrowValues[source]);
      ASSERT_EQ(gotFlags[i], bytes[source]);
      for (int64_t dim = 3; dim >= 0 && ++index[dim] == resultShape[dim]; --dim)
        index[dim] = 0;
    }
  }
}

TEST(KernelsTest, SliceTakesTheBoundedBox) {
  KernelAttrs attrs;
  attrs.lists["start"] = {1, 1};
  attrs.lists["limit"] = {3, 3};
  OwnedTensor input = f32({3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  OwnedTensor result(DType::F32, {2, 2});
  ASSERT_EQ(run("nn.slice", attrs, {&input}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{11, 12, 21, 22}));

  attrs.lists["limit"] = {3, 5};
  EXPECT_EQ(run("nn.slice", attrs, {&input}, {&result}),
            "nn.slice: dim 1 of size 4 cannot be sliced [1, 5)");
}

TEST(KernelsTest, ConcatJoinsAlongADim) {
  KernelAttrs attrs;
  attrs.ints["dim"] = 1;
  OwnedTensor a = f32({2, 1}, {1, 2});
  OwnedTensor b = f32({2, 2}, {3, 4, 5, 6});
  OwnedTensor result(DType::F32, {2, 3});
  ASSERT_EQ(run("nn.concat", attrs, {&a, &b}, {&result}), "");
  EXPECT_EQ(read<float>(result), (std::vector<float>{1, 3, 4, 2, 5, 6}));

  attrs.ints["dim"] = 0;
  OwnedTensor c = i32({1, 2}, {1, 2}), d = i32({2, 2}, {3, 4, 5, 6});
  OwnedTensor stacked(DType::I32, {3, 2});
  ASSERT_EQ(run("nn.concat", attrs, {&c, &d}, {&stacked}), "");
  EXPECT_EQ(read<int32_t>(stacked), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));

  EXPECT_EQ(run("nn.concat", attrs, {&a, &b}, {&result}),
            "nn.concat: input #1 has shape [2, 2], which does not match [2, "
            "1] outside dim 0");
}

//===----------------------------------------------------------------------===//
// Neural-network layers
//===----------------------------------------------------------------------===//

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

TEST(KernelsTest, LayerNormNormalizesTheLastDim) {
  OwnedTensor input = f32({2, 4}, {1, 2, 3, 4, -10, 0, 10, 40});
  OwnedTensor gamma = f32({4}, {1, 1, 1, 1}), beta = f32({4}, {0, 0, 0, 0});
  OwnedTensor result(DType::F32, {2, 4});
  KernelAttrs attrs;
  attrs.floats["epsilon"] = 0.0;
  ASSERT_EQ(run("nn.layer_norm", attrs, {&input, &gamma, &beta}, {&result}),
            "");
  std::vector<float> y = read<float>(result);
  for (int row = 0; row < 2; ++row) {
    double mean = 0, variance = 0;
    for (int j = 0; j < 4; ++j)
      mean += y[row * 4 + j] / 4.0;
    for (int j = 0; j < 4; ++j)
      variance += (y[row * 4 + j] - mean) * (y[row * 4 + j] - mean) / 4.0;
    EXPECT_NEAR(mean, 0.0, 1e-6);
    EXPECT_NEAR(variance, 1.0, 1e-5);
  }
  // Row 0: mean 2.5, biased variance 1.25.
  EXPECT_NEAR(y[0], -1.5f / std::sqrt(1.25f), 1e-5f);

  OwnedTensor scaled = f32({4}, {2, 2, 2, 2}), shifted = f32({4}, {1, 1, 1, 1});
  ASSERT_EQ(run("nn.layer_norm", attrs, {&input, &scaled, &shifted}, {&result}),
            "");
  EXPECT_NEAR(read<float>(result)[0], 2 * (-1.5f / std::sqrt(1.25f)) + 1,
              1e-5f);
}

TEST(KernelsTest, RmsNormScalesByTheRootMeanSquare) {
  OwnedTensor input = f32({1, 2}, {3, 4});
  OwnedTensor gamma = f32({2}, {1, 2});
  OwnedTensor result(DType::F32, {1, 2});
  KernelAttrs attrs;
  attrs.floats["epsilon"] = 0.0;
  ASSERT_EQ(run("nn.rms_norm", attrs, {&input, &gamma}, {&result}), "");
  // rms = sqrt((9 + 16) / 2).
  float rms = std::sqrt(12.5f);
  expectNear(read<float>(result), {3 / rms, 8 / rms});

  OwnedTensor wrongGamma = f32({3}, {1, 1, 1});
  EXPECT_EQ(run("nn.rms_norm", attrs, {&input, &wrongGamma}, {&result}),
            "nn.rms_norm: expects gamma of shape [2], got [3]");
}

TEST(KernelsTest, NormGradientsMatchFiniteDifferences) {
  // dx_i = sum_j dy_j dy_j/dx_i, against central differences of the
  // forward kernels (in f64 sums of f32 runs; h = 1e-2 on inputs of O(1)),
  // and x̂ against the forward with gamma 1, beta 0.
  for (bool rms : {false, true}) {
    std::string norm = rms ? "nn.rms_norm" : "nn.layer_norm";
    KernelAttrs epsilon;
    epsilon.floats["epsilon"] = rms ? 1.0e-6 : 1.0e-5;
    OwnedTensor x = f32({2, 5}, {0.3f, -1.2f, 2.0f, 0.7f, -0.4f, 1.5f, 1.1f,
                                 -0.9f, 0.0f, 2.4f});
    OwnedTensor gamma = f32({5}, {1.5f, -0.5f, 2.0f, 0.8f, 1.0f});
    OwnedTensor beta = f32({5}, {0.1f, 0.2f, -0.3f, 0.0f, 0.5f});
    OwnedTensor ones = f32({5}, {1, 1, 1, 1, 1}),
                zeros = f32({5}, {0, 0, 0, 0, 0});
    OwnedTensor dy = f32({2, 5}, {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.0f, 0.3f,
                                  -0.2f, 0.9f, -1.1f});
    auto forward = [&](const OwnedTensor &input, const OwnedTensor &g,
                       const OwnedTensor &b) {
      OwnedTensor y(DType::F32, {2, 5});
      std::string error = rms ? run(norm, epsilon, {&input, &g}, {&y})
                              : run(norm, epsilon, {&input, &g, &b}, {&y});
      EXPECT_EQ(error, "");
      return read<float>(y);
    };
    OwnedTensor dx(DType::F32, {2, 5}), xhat(DType::F32, {2, 5});
    ASSERT_EQ(run(norm + "_grad", epsilon, {&x, &gamma, &dy}, {&dx, &xhat}),
              "");
    std::vector<float> got = read<float>(dx);
    for (int i = 0; i < 10; ++i) {
      OwnedTensor up = x, down = x;
      up.view.as<float>()[i] += 1e-2f;
      down.view.as<float>()[i] -= 1e-2f;
      std::vector<float> yUp = forward(up, gamma, beta),
                         yDown = forward(down, gamma, beta);
      double want = 0;
      for (int j = 0; j < 10; ++j)
        want += read<float>(dy)[j] * (yUp[j] - yDown[j]) / 2e-2;
      EXPECT_NEAR(got[i], want, 2e-3) << norm << " dx[" << i << "]";
    }
    expectNear(read<float>(xhat), forward(x, ones, zeros));
  }
  OwnedTensor x(DType::F32, {2, 5}), dy(DType::F32, {2, 4}),
      gamma(DType::F32, {5}), dx(DType::F32, {2, 5}), xhat(DType::F32, {2, 5});
  EXPECT_EQ(run("nn.layer_norm_grad", {}, {&x, &gamma, &dy}, {&dx, &xhat}),
            "nn.layer_norm_grad: expects result gradient of shape [2, 5], "
            "got [2, 4]");
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

/// Pseudo-random values in [-1, 1), reproducible.
std::vector<float> noise(int64_t count, uint32_t seed) {
  std::vector<float> values(count);
  uint32_t state = seed * 2654435761u + 1;
  for (float &value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) / float(1 << 23) - 1.0f;
  }
  return values;
}

/// Attention as the unfused ops compute it, the whole score matrix at
/// once: o = softmax(scale q kᵀ, masked) v, and the gradients of
/// sum(o · r) (so do = r).
struct NaiveAttention {
  int64_t b, a, kv, s, t, d, dv;
  float scale;
  bool causal;
  std::vector<float> q, k, v, r, o, dq, dk, dvOut;

  void run() {
    o.assign(b * a * s * dv, 0);
    dq.assign(q.size(), 0);
    dk.assign(k.size(), 0);
    dvOut.assign(v.size(), 0);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < a; ++h) {
        int64_t qh = (bi * a + h) * s, kh = (bi * kv + h / (a / kv)) * t;
        std::vector<double> p(s * t, 0.0);
        for (int64_t i = 0; i < s; ++i) {
          double max = -INFINITY, sum = 0;
          for (int64_t j = 0; j < t; ++j) {
            if (causal && j > i)
              continue;
            double score = 0;
            for (int64_t e = 0; e < d; ++e)
              score += q[(qh + i) * d + e] * k[(kh + j) * d + e];
            p[i * t + j] = scale * score;
            max = std::max(max, p[i * t + j]);
          }
          for (int64_t j = 0; j < t; ++j) {
            p[i * t + j] = causal && j > i ? 0.0 : std::exp(p[i * t + j] - max);
            sum += p[i * t + j];
          }
          for (int64_t j = 0; j < t; ++j)
            p[i * t + j] /= sum;
        }
        for (int64_t i = 0; i < s; ++i)
          for (int64_t e = 0; e < dv; ++e) {
            double sum = 0;
            for (int64_t j = 0; j < t; ++j)
              sum += p[i * t + j] * v[(kh + j) * dv + e];
            o[(qh + i) * dv + e] = sum;
          }
        // dp = do vᵀ; ds = p (dp - rowsum(p dp)).
        for (int64_t i = 0; i < s; ++i) {
          std::vector<double> dp(t);
          double rowDot = 0;
          for (int64_t j = 0; j < t; ++j) {
            for (int64_t e = 0; e < dv; ++e)
              dp[j] += r[(qh + i) * dv + e] * v[(kh + j) * dv + e];
            rowDot += p[i * t + j] * dp[j];
          }
          for (int64_t j = 0; j < t; ++j) {
            double ds = p[i * t + j] * (dp[j] - rowDot);
            for (int64_t e = 0; e < d; ++e) {
              dq[(qh + i) * d + e] += scale * ds * k[(kh + j) * d + e];
              dk[(kh + j) * d + e] += scale * ds * q[(qh + i) * d + e];
            }
            for (int64_t e = 0; e < dv; ++e)
              dvOut[(kh + j) * dv + e] += p[i * t + j] * r[(qh + i) * dv + e];
          }
        }
      }
  }
};

TEST(KernelsTest, AttentionMatchesTheUnfusedFormulaAcrossTiles) {
  // Causal and not: 130 queries and keys (three 64-query tiles, the last
  // partial, and one key tile) with 4 heads on 2 kv heads; 300 (two
  // 256-key tiles); and 16400 keys against 70 queries, whose backward
  // makes each tile's scores again rather than keep them (past 2^20).
  struct Size {
    int64_t b, a, kv, s, t, d, dv;
  };
  for (auto [size, causal] : {std::pair{Size{2, 4, 2, 130, 130, 8, 6}, true},
                              {Size{2, 4, 2, 130, 130, 8, 6}, false},
                              {Size{1, 2, 1, 300, 300, 4, 3}, true},
                              {Size{1, 2, 1, 300, 300, 4, 3}, false},
                              {Size{1, 1, 1, 70, 16400, 2, 2}, false}}) {
    SCOPED_TRACE("queries " + std::to_string(size.s) + ", keys " +
                 std::to_string(size.t) + (causal ? ", causal" : ""));
    NaiveAttention ref{size.b, size.a,  size.kv, size.s, size.t,
                       size.d, size.dv, 0.35f,   causal};
    ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
    ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
    ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
    ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
    ref.run();
    OwnedTensor q = f32({ref.b, ref.a, ref.s, ref.d}, ref.q),
                k = f32({ref.b, ref.kv, ref.t, ref.d}, ref.k),
                v = f32({ref.b, ref.kv, ref.t, ref.dv}, ref.v),
                r = f32({ref.b, ref.a, ref.s, ref.dv}, ref.r);
    KernelAttrs attrs;
    attrs.floats["scale"] = ref.scale;
    attrs.ints["causal"] = causal;
    attrs.floats["dropout"] = 0;
    attrs.ints["zigzag"] = 0;
    OwnedTensor o(DType::F32, {ref.b, ref.a, ref.s, ref.dv});
    ASSERT_EQ(run("nn.attention", attrs, {&q, &k, &v}, {&o}), "");
    expectNear(read<float>(o), ref.o, 1e-5f);
    OwnedTensor dq(DType::F32, q.view.shape), dk(DType::F32, k.view.shape),
        dv(DType::F32, v.view.shape);
    ASSERT_EQ(
        run("nn.attention_grad", attrs, {&q, &k, &v, &o, &r}, {&dq, &dk, &dv}),
        "");
    expectNear(read<float>(dq), ref.dq, 1e-4f);
    expectNear(read<float>(dk), ref.dk, 1e-4f);
    expectNear(read<float>(dv), ref.dvOut, 1e-4f);
  }
}

TEST(KernelsTest, CausalAttentionOnAPieceOfTheQueriesPlacesThemByThePiece) {
  // 130 queries and keys over 2 pieces of 65 queries (context parallelism
  // that gathers the keys): each piece's output is the whole's rows, and
  // its dk and dv sum to the whole's.
  NaiveAttention ref{1, 4, 2, 130, 130, 8, 6, 0.35f, true};
  ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
  ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
  ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
  ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
  ref.run();
  int64_t rows = 65;
  OwnedTensor k = f32({ref.b, ref.kv, ref.t, ref.d}, ref.k),
              v = f32({ref.b, ref.kv, ref.t, ref.dv}, ref.v);
  std::vector<float> dkSum(ref.k.size(), 0), dvSum(ref.v.size(), 0);
  KernelAttrs attrs;
  attrs.floats["scale"] = ref.scale;
  attrs.ints["causal"] = 1;
  attrs.floats["dropout"] = 0;
  attrs.ints["zigzag"] = 0;
  attrs.lists["global_shape"] = {ref.b, ref.a, ref.s, ref.t};
  // The piece's rows of a [b, heads, s, width] tensor.
  auto rowsOf = [&](const std::vector<float> &whole, int64_t width,
                    int64_t piece) {
    std::vector<float> part;
    for (int64_t bh = 0; bh < ref.b * ref.a; ++bh)
      for (int64_t i = piece * rows; i < (piece + 1) * rows; ++i)
        part.insert(part.end(), whole.begin() + (bh * ref.s + i) * width,
                    whole.begin() + (bh * ref.s + i + 1) * width);
    return part;
  };
  for (int64_t piece = 0; piece < 2; ++piece) {
    SCOPED_TRACE("piece " + std::to_string(piece));
    OwnedTensor q = f32({ref.b, ref.a, rows, ref.d},
                        rowsOf(ref.q, ref.d, piece)),
                r = f32({ref.b, ref.a, rows, ref.dv},
                        rowsOf(ref.r, ref.dv, piece)),
                index = i64({4}, {0, 0, piece, 0});
    OwnedTensor o(DType::F32, {ref.b, ref.a, rows, ref.dv});
    ASSERT_EQ(run("nn.attention", attrs, {&q, &k, &v, &index}, {&o}), "");
    expectNear(read<float>(o), rowsOf(ref.o, ref.dv, piece), 1e-5f);
    // The gradient reads the whole output's rows, as the forward's are.
    OwnedTensor wholeRows = f32(o.view.shape, rowsOf(ref.o, ref.dv, piece));
    OwnedTensor dq(DType::F32, q.view.shape), dk(DType::F32, k.view.shape),
        dv(DType::F32, v.view.shape);
    ASSERT_EQ(run("nn.attention_grad", attrs,
                  {&q, &k, &v, &wholeRows, &r, &index}, {&dq, &dk, &dv}),
              "");
    expectNear(read<float>(dq), rowsOf(ref.dq, ref.d, piece), 1e-4f);
    std::vector<float> dkPiece = read<float>(dk), dvPiece = read<float>(dv);
    for (size_t e = 0; e < dkSum.size(); ++e)
      dkSum[e] += dkPiece[e];
    for (size_t e = 0; e < dvSum.size(); ++e)
      dvSum[e] += dvPiece[e];
  }
  expectNear(dkSum, ref.dk, 1e-4f);
  expectNear(dvSum, ref.dvOut, 1e-4f);
  // A piece without a step is a causal op's only.
  attrs.ints["causal"] = 0;
  OwnedTensor q(DType::F32, {1, 4, 65, 8}), o(DType::F32, {1, 4, 65, 6}),
      index = i64({4}, {0, 0, 1, 0});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k, &v, &index}, {&o}),
            "nn.attention: expects a piece index without a step only when "
            "causal, got 1 inputs after q, k, v");
}

/// The natural position of each stored row of a sequence of `length` in
/// zigzag order of 2 `zigzag` chunks (chunks 0, 2 zigzag - 1, 1, ...), or
/// in natural order where `zigzag` is 0.
static std::vector<int64_t> getStoredPositions(int64_t length, int64_t zigzag) {
  std::vector<int64_t> positions(length);
  for (int64_t row = 0; row < length; ++row)
    positions[row] = row;
  if (zigzag == 0)
    return positions;
  int64_t rows = length / (2 * zigzag);
  for (int64_t row = 0; row < length; ++row) {
    int64_t stored = row / rows;
    int64_t chunk = stored % 2 == 0 ? stored / 2 : 2 * zigzag - 1 - stored / 2;
    positions[row] = chunk * rows + row % rows;
  }
  return positions;
}

/// A [b, heads, s, width] tensor's rows along s in stored order: row i is
/// the row at `positions[i]`.
static std::vector<float> storeRows(const std::vector<float> &whole,
                                    int64_t width,
                                    const std::vector<int64_t> &positions) {
  int64_t length = static_cast<int64_t>(positions.size());
  std::vector<float> stored(whole.size());
  for (size_t bh = 0; bh < whole.size() / (length * width); ++bh)
    for (int64_t i = 0; i < length; ++i)
      std::copy_n(whole.begin() + (bh * length + positions[i]) * width, width,
                  stored.begin() + (bh * length + i) * width);
  return stored;
}

TEST(KernelsTest, ZigzagAttentionIsTheAttentionOfTheStoredRows) {
  // 136 queries and keys stored in zigzag order of 4 chunks of 34 (the
  // query tiles end at the chunks), and of 8 chunks of 17: the output and
  // the gradients are the natural order's, stored likewise.
  for (int64_t zigzag : {2, 4}) {
    SCOPED_TRACE("zigzag " + std::to_string(zigzag));
    NaiveAttention ref{2, 4, 2, 136, 136, 8, 6, 0.35f, true};
    ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
    ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
    ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
    ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
    ref.run();
    std::vector<int64_t> positions = getStoredPositions(ref.s, zigzag);
    OwnedTensor q = f32({ref.b, ref.a, ref.s, ref.d},
                        storeRows(ref.q, ref.d, positions)),
                k = f32({ref.b, ref.kv, ref.t, ref.d},
                        storeRows(ref.k, ref.d, positions)),
                v = f32({ref.b, ref.kv, ref.t, ref.dv},
                        storeRows(ref.v, ref.dv, positions)),
                r = f32({ref.b, ref.a, ref.s, ref.dv},
                        storeRows(ref.r, ref.dv, positions));
    KernelAttrs attrs;
    attrs.floats["scale"] = ref.scale;
    attrs.ints["causal"] = 1;
    attrs.floats["dropout"] = 0;
    attrs.ints["zigzag"] = zigzag;
    OwnedTensor o(DType::F32, {ref.b, ref.a, ref.s, ref.dv});
    ASSERT_EQ(run("nn.attention", attrs, {&q, &k, &v}, {&o}), "");
    expectNear(read<float>(o), storeRows(ref.o, ref.dv, positions), 1e-5f);
    OwnedTensor dq(DType::F32, q.view.shape), dk(DType::F32, k.view.shape),
        dv(DType::F32, v.view.shape);
    ASSERT_EQ(
        run("nn.attention_grad", attrs, {&q, &k, &v, &o, &r}, {&dq, &dk, &dv}),
        "");
    expectNear(read<float>(dq), storeRows(ref.dq, ref.d, positions), 1e-4f);
    expectNear(read<float>(dk), storeRows(ref.dk, ref.d, positions), 1e-4f);
    expectNear(read<float>(dv), storeRows(ref.dvOut, ref.dv, positions), 1e-4f);
  }
  // Zigzag order is causal attention's, of whole chunks.
  KernelAttrs attrs;
  attrs.floats["scale"] = 1.0;
  attrs.ints["causal"] = 1;
  attrs.floats["dropout"] = 0;
  attrs.ints["zigzag"] = 3;
  OwnedTensor q(DType::F32, {1, 1, 8, 2}), o(DType::F32, {1, 1, 8, 2});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &q, &q}, {&o}),
            "nn.attention: expects zigzag order (3) only causal, without "
            "dropout or a piece, on as many queries as keys in 2 zigzag "
            "chunks, got 8 queries and 8 keys");
}

TEST(KernelsTest, RingAttentionBlocksCombineToTheWholeAttention) {
  // 130 queries and keys in a ring of 2 devices of 65: device i's queries
  // against the keys of device (i - step) mod 2 at each step, combined by
  // the blocks' log-sum-exps, are the whole attention's rows; the blocks'
  // gradients against the combined log-sum-exps sum to the whole's. Then
  // the sequence stored in zigzag order (Megatron-LM's causal load
  // balance): 136 in 4 chunks on rings of 2 and 4, and 144 in 8 chunks on
  // a ring of 2 (two runs of positions per device).
  struct Ring {
    bool causal;
    int64_t length, ring, zigzag;
  };
  for (Ring config :
       {Ring{true, 130, 2, 0}, Ring{false, 130, 2, 0}, Ring{true, 136, 2, 2},
        Ring{true, 136, 4, 2}, Ring{true, 144, 2, 4}}) {
    bool causal = config.causal;
    SCOPED_TRACE((causal ? "causal, " : "") + std::to_string(config.length) +
                 " on " + std::to_string(config.ring) + ", zigzag " +
                 std::to_string(config.zigzag));
    NaiveAttention ref{1, 4, 2,     config.length, config.length,
                       8, 6, 0.35f, causal};
    ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
    ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
    ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
    ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
    ref.run();
    int64_t ring = config.ring, rows = ref.s / ring;
    std::vector<int64_t> positions = getStoredPositions(ref.s, config.zigzag);
    // Piece `piece` of a [b, heads, s, width] tensor's stored rows.
    auto pieceOf = [&](const std::vector<float> &whole, int64_t heads,
                       int64_t width, int64_t piece) {
      std::vector<float> stored = storeRows(whole, width, positions), part;
      for (int64_t bh = 0; bh < ref.b * heads; ++bh)
        part.insert(part.end(),
                    stored.begin() + (bh * ref.s + piece * rows) * width,
                    stored.begin() + (bh * ref.s + (piece + 1) * rows) * width);
      return part;
    };
    KernelAttrs attrs;
    attrs.floats["scale"] = ref.scale;
    attrs.ints["causal"] = causal;
    attrs.ints["ring_size"] = ring;
    attrs.ints["zigzag"] = config.zigzag;
    std::vector<std::vector<float>> dkSum(ring), dvSum(ring);
    for (int64_t device = 0; device < ring; ++device) {
      OwnedTensor q = f32({1, 4, rows, 8}, pieceOf(ref.q, 4, 8, device)),
                  r = f32({1, 4, rows, 6}, pieceOf(ref.r, 4, 6, device)),
                  index = i64({1}, {device});
      std::vector<float> o(4 * rows * 6, 0.0f), lse(4 * rows, -INFINITY);
      std::vector<OwnedTensor> ks, vs;
      for (int64_t step = 0; step < ring; ++step) {
        int64_t from = (device - step + ring) % ring;
        ks.push_back(f32({1, 2, rows, 8}, pieceOf(ref.k, 2, 8, from)));
        vs.push_back(f32({1, 2, rows, 6}, pieceOf(ref.v, 2, 6, from)));
        attrs.ints["ring_step"] = step;
        OwnedTensor block(DType::F32, {1, 4, rows, 6}),
            blockLse(DType::F32, {1, 4, rows});
        ASSERT_EQ(run("nn.attention_block", attrs,
                      {&q, &ks.back(), &vs.back(), &index},
                      {&block, &blockLse}),
                  "");
        std::vector<float> ob = read<float>(block), lb = read<float>(blockLse);
        for (int64_t row = 0; row < 4 * rows; ++row) {
          float high = std::max(lse[row], lb[row]);
          if (high == -INFINITY)
            continue;
          float a = std::exp(lse[row] - high), c = std::exp(lb[row] - high);
          for (int64_t e = 0; e < 6; ++e)
            o[row * 6 + e] =
                (o[row * 6 + e] * a + ob[row * 6 + e] * c) / (a + c);
          lse[row] = high + std::log(a + c);
        }
      }
      expectNear(o, pieceOf(ref.o, 4, 6, device), 1e-5f);
      OwnedTensor whole = f32({1, 4, rows, 6}, o),
                  lses = f32({1, 4, rows}, lse);
      std::vector<float> dq(4 * rows * 8, 0.0f);
      for (int64_t step = 0; step < ring; ++step) {
        int64_t from = (device - step + ring) % ring;
        attrs.ints["ring_step"] = step;
        OwnedTensor dqb(DType::F32, q.view.shape),
            dkb(DType::F32, ks[step].view.shape),
            dvb(DType::F32, vs[step].view.shape);
        ASSERT_EQ(run("nn.attention_block_grad", attrs,
                      {&q, &ks[step], &vs[step], &whole, &r, &lses, &index},
                      {&dqb, &dkb, &dvb}),
                  "");
        std::vector<float> part = read<float>(dqb);
        for (size_t e = 0; e < dq.size(); ++e)
          dq[e] += part[e];
        for (auto [sum, gradient] :
             {std::pair(&dkSum[from], &dkb), std::pair(&dvSum[from], &dvb)}) {
          std::vector<float> terms = read<float>(*gradient);
          sum->resize(terms.size(), 0.0f);
          for (size_t e = 0; e < terms.size(); ++e)
            (*sum)[e] += terms[e];
        }
      }
      expectNear(dq, pieceOf(ref.dq, 4, 8, device), 1e-4f);
    }
    for (int64_t piece = 0; piece < ring; ++piece) {
      expectNear(dkSum[piece], pieceOf(ref.dk, 2, 8, piece), 1e-4f);
      expectNear(dvSum[piece], pieceOf(ref.dvOut, 2, 6, piece), 1e-4f);
    }
  }
  // The index lies in the ring, the step within it.
  KernelAttrs attrs;
  attrs.floats["scale"] = 1.0;
  attrs.ints["causal"] = 1;
  attrs.ints["ring_size"] = 2;
  attrs.ints["ring_step"] = 2;
  attrs.ints["zigzag"] = 0;
  OwnedTensor q(DType::F32, {1, 1, 4, 2}), k(DType::F32, {1, 1, 4, 2}),
      o(DType::F32, {1, 1, 4, 2}), lse(DType::F32, {1, 1, 4}),
      index = i64({1}, {0});
  EXPECT_EQ(run("nn.attention_block", attrs, {&q, &k, &k, &index}, {&o, &lse}),
            "nn.attention_block: expects 0 <= ring_step < ring_size, got 2 "
            "and 2");
  attrs.ints["ring_step"] = 1;
  OwnedTensor outside = i64({1}, {5});
  EXPECT_EQ(
      run("nn.attention_block", attrs, {&q, &k, &k, &outside}, {&o, &lse}),
      "nn.attention_block: index 5 lies outside the ring of 2");
  // In zigzag order a device holds whole chunks: 4 rows are not of 3.
  attrs.ints["zigzag"] = 3;
  EXPECT_EQ(run("nn.attention_block", attrs, {&q, &k, &k, &index}, {&o, &lse}),
            "nn.attention_block: expects zigzag order (3) only causal, on as "
            "many queries as keys, in whole chunks of 2 zigzag over the ring "
            "of 2, got 4 queries and 4 keys");
}

TEST(KernelsTest, AttentionRejectsMismatchedShapes) {
  KernelAttrs attrs;
  attrs.floats["scale"] = 1.0;
  attrs.ints["causal"] = 0;
  attrs.floats["dropout"] = 0;
  attrs.ints["zigzag"] = 0;
  OwnedTensor q(DType::F32, {1, 4, 8, 16}), k(DType::F32, {1, 3, 8, 16}),
      v(DType::F32, {1, 3, 8, 16}), o(DType::F32, {1, 4, 8, 16});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k, &v}, {&o}),
            "nn.attention: expects kv heads dividing the query heads, got 3 "
            "for 4");
  OwnedTensor k2(DType::F32, {1, 2, 8, 8}), v2(DType::F32, {1, 2, 8, 16});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k2, &v2}, {&o}),
            "nn.attention: expects k of shape [1, 2, 8, 16], got [1, 2, 8, 8]");
  // Dropout needs the step its mask is drawn for.
  OwnedTensor k4(DType::F32, {1, 4, 8, 16}), v4(DType::F32, {1, 4, 8, 16});
  attrs.floats["dropout"] = 0.1;
  attrs.ints["seed"] = 0;
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k4, &v4}, {&o}),
            "nn.attention: expects the step its dropout mask is drawn for");
  attrs.floats["dropout"] = 1.0;
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k4, &v4}, {&o}),
            "nn.attention: expects a dropout rate in [0, 1), got 1");
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

TEST(KernelsTest, CausalMaskHidesFutureKeys) {
  OwnedTensor scores = f32({2, 2, 3}, iota(12));
  OwnedTensor result(DType::F32, {2, 2, 3});
  // -inf for the forward's scores, 0 for their gradient.
  for (float fill : {-std::numeric_limits<float>::infinity(), 0.0f}) {
    KernelAttrs attrs;
    attrs.floats["fill"] = fill;
    ASSERT_EQ(run("nn.causal_mask", attrs, {&scores}, {&result}), "");
    std::vector<float> x = read<float>(scores), y = read<float>(result);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t query = 0; query < 2; ++query)
        for (int64_t key = 0; key < 3; ++key) {
          int64_t i = (b * 2 + query) * 3 + key;
          EXPECT_EQ(y[i], key > query ? fill : x[i]) << "at element " << i;
        }
  }
  EXPECT_EQ(run("nn.causal_mask", {}, {&scores}, {&result}),
            "nn.causal_mask: missing float attribute 'fill'");
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

TEST(KernelsTest, SgdStepsAgainstTheGradient) {
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {0.5f, 1});
  OwnedTensor result(DType::F32, {2});
  KernelAttrs attrs;
  attrs.floats["lr"] = 0.1;
  attrs.floats["weight_decay"] = 0.5;
  ASSERT_EQ(run("nn.sgd", attrs, {&param, &grad}, {&result}), "");
  // p - 0.1 * (g + 0.5 p).
  expectNear(read<float>(result), {1 - 0.1f * 1.0f, -2 - 0.1f * 0.0f});
}

TEST(KernelsTest, AdamWTakesOneStep) {
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {0.5f, -1});
  OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
  OwnedTensor step = i64({}, {3});
  OwnedTensor newParam(DType::F32, {2}), newM(DType::F32, {2}),
      newV(DType::F32, {2});
  KernelAttrs attrs;
  double lr = 1e-2, beta1 = 0.8, beta2 = 0.9, epsilon = 1e-6, decay = 0.1;
  attrs.floats = {{"lr", lr},
                  {"beta1", beta1},
                  {"beta2", beta2},
                  {"epsilon", epsilon},
                  {"weight_decay", decay}};
  attrs.floats["min_lr"] = 0;
  attrs.floats["max_grad_norm"] = 0;
  attrs.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  ASSERT_EQ(run("nn.adamw", attrs, {&param, &grad, &m, &v, &step},
                {&newParam, &newM, &newV}),
            "");
  std::vector<float> p = read<float>(param), g = read<float>(grad),
                     m0 = read<float>(m), v0 = read<float>(v);
  for (size_t i = 0; i < 2; ++i) {
    double mi = beta1 * m0[i] + (1 - beta1) * g[i];
    double vi = beta2 * v0[i] + (1 - beta2) * g[i] * g[i];
    double mHat = mi / (1 - std::pow(beta1, 3));
    double vHat = vi / (1 - std::pow(beta2, 3));
    double pi = p[i] - lr * (mHat / (std::sqrt(vHat) + epsilon) + decay * p[i]);
    EXPECT_NEAR(read<float>(newM)[i], mi, 1e-6);
    EXPECT_NEAR(read<float>(newV)[i], vi, 1e-6);
    EXPECT_NEAR(read<float>(newParam)[i], pi, 1e-6);
  }

  OwnedTensor zero = i32({}, {0});
  EXPECT_EQ(run("nn.adamw", attrs, {&param, &grad, &m, &v, &zero},
                {&newParam, &newM, &newV}),
            "nn.adamw: expects a step of at least 1 (steps count from 1), got "
            "0");
}

TEST(KernelsTest, LearningRateSchedulesFollowTheStep) {
  using S = LrSchedule;
  // Warmup: linear from lr / warmup at step 1 to lr at the warmup's end.
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 1), 0.1);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 10), 1.0);
  // Cosine: halfway through the decay, halfway between lr and min_lr.
  EXPECT_NEAR(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 60), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 110), 0.1);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 500), 0.1);
  EXPECT_NEAR(getScheduledLr(S::Linear, 1.0, 0.0, 0, 100, 25), 0.75, 1e-12);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Constant, 1.0, 0.0, 0, 0, 1000), 1.0);
  // Clipping scales by max / (norm + 1e-6), never up.
  EXPECT_FLOAT_EQ(getClipScale(4.0f, 1.0f), 1.0f / (4.0f + 1e-6f));
  EXPECT_FLOAT_EQ(getClipScale(0.5f, 1.0f), 1.0f);
}

TEST(KernelsTest, AdamWClipsAndSchedulesAsTheUnclippedStepWouldAtItsRate) {
  // A step at 1/4 of the peak rate (warmup of 4, step 1) with a gradient of
  // norm 5 clipped to 1 is the plain step with lr / 4 and the gradient / 5.
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {3, 4});
  OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
  OwnedTensor step = i64({}, {1}), norm = f32({}, {5});
  OwnedTensor scaled = f32({2}, {3 * (1 / (5 + 1e-6f)), 4 * (1 / (5 + 1e-6f))});
  KernelAttrs plain;
  plain.floats = {{"lr", 0.25},        {"beta1", 0.9},        {"beta2", 0.99},
                  {"epsilon", 1e-8},   {"weight_decay", 0.1}, {"min_lr", 0},
                  {"max_grad_norm", 0}};
  plain.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  KernelAttrs clipped = plain;
  clipped.floats["lr"] = 1.0;
  clipped.floats["max_grad_norm"] = 1.0;
  clipped.ints = {{"schedule", 2}, {"warmup_steps", 4}, {"decay_steps", 8}};
  OwnedTensor p1(DType::F32, {2}), m1(DType::F32, {2}), v1(DType::F32, {2});
  OwnedTensor p2(DType::F32, {2}), m2(DType::F32, {2}), v2(DType::F32, {2});
  ASSERT_EQ(
      run("nn.adamw", plain, {&param, &scaled, &m, &v, &step}, {&p1, &m1, &v1}),
      "");
  ASSERT_EQ(run("nn.adamw", clipped, {&param, &grad, &m, &v, &step, &norm},
                {&p2, &m2, &v2}),
            "");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FLOAT_EQ(read<float>(p2)[i], read<float>(p1)[i]);
    EXPECT_FLOAT_EQ(read<float>(m2)[i], read<float>(m1)[i]);
  }
  clipped.ints["schedule"] = 7;
  EXPECT_EQ(run("nn.adamw", clipped, {&param, &grad, &m, &v, &step, &norm},
                {&p2, &m2, &v2}),
            "nn.adamw: unknown learning-rate schedule 7");
}

TEST(KernelsTest, AdamWUnscalesALossScaledGradientAndSkipsAnOverflow) {
  // Gradients and their norm 1024 times the true ones: the update is the
  // plain one's, clipped by the true norm.
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {0.3f, 0.4f});
  OwnedTensor scaledGrad = f32({2}, {0.3f * 1024, 0.4f * 1024});
  OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
  OwnedTensor step = i64({}, {2}), norm = f32({}, {0.5f});
  OwnedTensor scaledNorm = f32({}, {0.5f * 1024}), scale = f32({}, {1024});
  KernelAttrs attrs;
  attrs.floats = {{"lr", 0.1},
                  {"beta1", 0.9},
                  {"beta2", 0.99},
                  {"epsilon", 1e-8},
                  {"weight_decay", 0.0},
                  {"min_lr", 0},
                  {"max_grad_norm", 0.25}};
  attrs.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  OwnedTensor p1(DType::F32, {2}), m1(DType::F32, {2}), v1(DType::F32, {2});
  OwnedTensor p2(DType::F32, {2}), m2(DType::F32, {2}), v2(DType::F32, {2});
  ASSERT_EQ(run("nn.adamw", attrs, {&param, &grad, &m, &v, &step, &norm},
                {&p1, &m1, &v1}),
            "");
  ASSERT_EQ(run("nn.adamw", attrs,
                {&param, &scaledGrad, &m, &v, &step, &scaledNorm, &scale},
                {&p2, &m2, &v2}),
            "");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FLOAT_EQ(read<float>(p2)[i], read<float>(p1)[i]);
    EXPECT_FLOAT_EQ(read<float>(v2)[i], read<float>(v1)[i]);
  }
  // An overflow (an inf or NaN norm) leaves everything as it was.
  for (float bad : {std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    OwnedTensor overflow = f32({}, {bad});
    ASSERT_EQ(run("nn.adamw", attrs,
                  {&param, &scaledGrad, &m, &v, &step, &overflow, &scale},
                  {&p2, &m2, &v2}),
              "");
    EXPECT_EQ(read<float>(p2), read<float>(param));
    EXPECT_EQ(read<float>(m2), read<float>(m));
    EXPECT_EQ(read<float>(v2), read<float>(v));
  }
}

TEST(KernelsTest, SumSquaresSumsInDoubleWhateverTheThreads) {
  std::vector<float> values(100000);
  double want = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(0.001f * i);
    want += double(values[i]) * values[i];
  }
  OwnedTensor x = f32({100, 1000}, values), sum(DType::F32, {});
  ASSERT_EQ(run("nn.sum_squares", {}, {&x}, {&sum}), "");
  EXPECT_FLOAT_EQ(read<float>(sum)[0], static_cast<float>(want));
  OwnedTensor half(DType::BF16, {2});
  half.view.as<uint16_t>()[0] = floatToHalf(DType::BF16, 3);
  half.view.as<uint16_t>()[1] = floatToHalf(DType::BF16, -4);
  ASSERT_EQ(run("nn.sum_squares", {}, {&half}, {&sum}), "");
  EXPECT_EQ(read<float>(sum)[0], 25.0f);
  OwnedTensor ints = i64({2}, {1, 2});
  EXPECT_EQ(run("nn.sum_squares", {}, {&ints}, {&sum}),
            "nn.sum_squares: expects a float input, got i64");
}

TEST(KernelsTest, AdamWReadsA16BitGradientAsItsF32Value) {
  // A mixed-precision update: f32 master weight and moments, a bf16 or f16
  // gradient, in place (the outputs are the inputs' buffers), as a
  // plan's update writes over the old parameter and state.
  for (DType dtype : {DType::BF16, DType::F16}) {
    OwnedTensor param = f32({2}, {1, -2}), wide = f32({2}, {0.5f, -1});
    OwnedTensor grad(dtype, {2});
    for (int i = 0; i < 2; ++i)
      grad.view.as<uint16_t>()[i] =
          floatToHalf(dtype, read<float>(wide)[static_cast<size_t>(i)]);
    OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
    OwnedTensor step = i64({}, {3});
    OwnedTensor p2(param), m2(m), v2(v);
    OwnedTensor newParam(DType::F32, {2}), newM(DType::F32, {2}),
        newV(DType::F32, {2});
    KernelAttrs attrs;
    attrs.floats = {{"lr", 1e-2},
                    {"beta1", 0.8},
                    {"beta2", 0.9},
                    {"epsilon", 1e-6},
                    {"weight_decay", 0.1}};
    attrs.floats["min_lr"] = 0;
    attrs.floats["max_grad_norm"] = 0;
    attrs.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
    ASSERT_EQ(run("nn.adamw", attrs, {&param, &wide, &m, &v, &step},
                  {&newParam, &newM, &newV}),
              "");
    ASSERT_EQ(
        run("nn.adamw", attrs, {&p2, &grad, &m2, &v2, &step}, {&p2, &m2, &v2}),
        "");
    EXPECT_EQ(read<float>(p2), read<float>(newParam));
    EXPECT_EQ(read<float>(m2), read<float>(newM));
    EXPECT_EQ(read<float>(v2), read<float>(newV));
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(KernelsTest, RejectsMismatchedShapes) {
  OwnedTensor lhs(DType::F32, {2, 3}), rhs(DType::F32, {3, 2});
  OwnedTensor result(DType::F32, {2, 3});
  EXPECT_EQ(run("nn.add", {}, {&lhs, &rhs}, {&result}),
            "nn.add: expects rhs of shape [2, 3], got [3, 2]");
}

TEST(KernelsTest, RejectsAnUnknownOp) {
  EXPECT_EQ(run("nn.foo", {}, {}, {}), "unknown kernel 'nn.foo'");
}

TEST(KernelsTest, HalfFloatsComputeInF32AndRoundToNearestEven) {
  // bf16 1.0, 2.0, 0.5 and 1 + 2^-7 (the next bf16 after 1).
  OwnedTensor input(DType::BF16, {4});
  uint16_t *bits = input.view.as<uint16_t>();
  bits[0] = 0x3f80;
  bits[1] = 0x4000;
  bits[2] = 0x3f00;
  bits[3] = 0x3f81;
  OwnedTensor result(DType::BF16, {4});
  ASSERT_EQ(run("nn.add", {}, {&input, &input}, {&result}), "");
  const uint16_t *sum = result.view.as<uint16_t>();
  EXPECT_EQ(sum[0], 0x4000); // 2
  EXPECT_EQ(sum[1], 0x4080); // 4
  EXPECT_EQ(sum[2], 0x3f80); // 1
  EXPECT_EQ(sum[3], 0x4001); // 2 + 2^-6
  // f16 round trip of 1/3: 0x3555 is the nearest half.
  EXPECT_EQ(floatToHalf(DType::F16, 1.0f / 3.0f), 0x3555);
  EXPECT_NEAR(halfToFloat(DType::F16, 0x3555), 1.0f / 3.0f, 1e-4);
  EXPECT_EQ(halfToFloat(DType::F16, 0x0001), std::ldexp(1.0f, -24));
}

TEST(KernelsTest, RejectsIntegerMath) {
  OwnedTensor ints(DType::I32, {4}), floats(DType::F32, {4});
  EXPECT_EQ(run("nn.exp", {}, {&ints}, {&floats}),
            "nn.exp: expects a float input, got i32");
}

TEST(KernelsTest, RejectsWrongArityAndMissingAttributes) {
  OwnedTensor input(DType::F32, {4});
  OwnedTensor result(DType::F32, {4});
  EXPECT_EQ(run("nn.add", {}, {&input}, {&result}),
            "nn.add: expects 2 inputs and 1 output, got 1 and 1");
  EXPECT_EQ(run("nn.softmax", {}, {&input}, {&result}),
            "nn.softmax: missing integer attribute 'dim'");
  EXPECT_EQ(run("nn.sgd", {}, {&input, &input}, {&result}),
            "nn.sgd: missing float attribute 'lr'");
  std::vector<const Tensor *> inputs = {nullptr};
  std::vector<Tensor *> outputs = {&result.view};
  EXPECT_EQ(runCpuKernel("nn.neg", {}, inputs, outputs).message(),
            "nn.neg: input #0 is null");
}

} // namespace

//===----------------------------------------------------------------------===//
// Status and the registry
//===----------------------------------------------------------------------===//

namespace {

TEST(StatusTest, CarriesACodeAndAMessage) {
  Status success;
  EXPECT_TRUE(success.ok());
  EXPECT_EQ(success.message(), "");
  EXPECT_TRUE(success.withPrefix("instruction 3: ").ok());

  Status failure = timeoutError("all_reduce: not finished after 5 s");
  EXPECT_FALSE(failure.ok());
  Status prefixed = failure.withPrefix("instruction 3: ");
  EXPECT_EQ(prefixed.getCode(), StatusCode::Timeout);
  EXPECT_EQ(prefixed.message(),
            "instruction 3: all_reduce: not finished after 5 s");
  EXPECT_STREQ(getStatusCodeName(prefixed.getCode()), "timeout");
}

TEST(StatusTest, ExpectedHoldsAValueOrAnError) {
  Expected<int> value = 42;
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 42);
  EXPECT_TRUE(value.getStatus().ok());

  Expected<int> error = dataError("'x.bin' is not a tensor file: wrong magic");
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.getStatus().getCode(), StatusCode::DataError);
  EXPECT_EQ(error.message(), "'x.bin' is not a tensor file: wrong magic");
}

TEST(KernelRegistryTest, FindsEachOpOnce) {
  Expected<const CpuKernel *> first = findCpuKernel("nn.dot");
  Expected<const CpuKernel *> second = findCpuKernel("nn.dot");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ((*first)->getOp(), "nn.dot");

  Expected<const CpuKernel *> unknown = findCpuKernel("nn.frobnicate");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.getStatus().getCode(), StatusCode::InvalidPlan);
  EXPECT_EQ(unknown.message(), "unknown kernel 'nn.frobnicate'");

  std::unique_ptr<Device> cpu = createCpuDevice();
  Expected<const Kernel *> onDevice = cpu->findKernel("nn.frobnicate");
  EXPECT_EQ(onDevice.message(), "unknown kernel 'nn.frobnicate'");
}

TEST(KernelRegistryTest, TellsDataErrorsFromBadArguments) {
  OwnedTensor logits(DType::F32, {1, 4}), labels(DType::I32, {1}),
      loss(DType::F32, {1});
  labels.view.as<int32_t>()[0] = 7;
  Status bad = runCpuKernel("nn.cross_entropy", {},
                            {&logits.view, &labels.view}, {&loss.view});
  EXPECT_EQ(bad.getCode(), StatusCode::DataError);
  EXPECT_EQ(bad.message(),
            "nn.cross_entropy: label 7 at position 0 is outside [0, 4)");
  Status wrong = runCpuKernel("nn.neg", {}, {&logits.view}, {&loss.view});
  EXPECT_EQ(wrong.getCode(), StatusCode::InvalidArgument);
}

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

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
