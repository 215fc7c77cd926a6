//===- GemmKernelsTest.cpp - the CPU kernel of nn.dot -----------------------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

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

} // namespace
