//===- ShapeKernelsTest.cpp - the CPU's shape kernels -----------------------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

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

} // namespace
