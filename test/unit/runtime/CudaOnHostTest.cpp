//===- CudaOnHostTest.cpp - the CUDA backend's host-checkable parts -------===//
//
// The CUDA kernels only carry out what runtime/src/cuda/Layouts plans: the
// strided copies of the element-moving ops and the collectives' packing,
// row reductions and the cuBLASLt layout of nn.dot. Here those plans are
// carried out on the host (a strided copy loop, a column-major GEMM as
// cuBLASLt defines it) and compared with the CPU backend, and the kernels'
// per-element math (ElementMath.h, the same source the GPU runs) is run on
// the host against the CPU kernels, so both are checked on machines
// without a GPU.
//
//===----------------------------------------------------------------------===//

#include "cuda/AttentionMath.h"
#include "cuda/ElementMath.h"
#include "cuda/FusedMath.h"
#include "cuda/Layouts.h"
#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace tessera::runtime;
using namespace tessera::runtime::cuda;

namespace {

OwnedTensor randomTensor(std::vector<int64_t> shape, uint64_t seed) {
  OwnedTensor tensor(DType::F32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (int64_t i = 0; i < tensor.view.getNumElements(); ++i)
    tensor.view.as<float>()[i] = real(rng);
  return tensor;
}

/// What copyStridedKernel does, on the host.
void applyCopy(const StridedCopy &copy, const Tensor &src, const Tensor &dst) {
  size_t bytes = getDTypeBytes(src.dtype);
  for (int64_t i = 0, e = copy.getNumElements(); i < e; ++i) {
    int64_t rest = i, from = copy.srcBase, to = copy.dstBase;
    for (int d = copy.rank - 1; d >= 0; --d) {
      int64_t index = rest % copy.shape[d];
      rest /= copy.shape[d];
      from += index * copy.srcStrides[d];
      to += index * copy.dstStrides[d];
    }
    std::memcpy(static_cast<uint8_t *>(dst.data) + to * bytes,
                static_cast<const uint8_t *>(src.data) + from * bytes, bytes);
  }
}

std::vector<float> values(const OwnedTensor &tensor) {
  const float *data = tensor.view.as<float>();
  return {data, data + tensor.view.getNumElements()};
}

/// The CPU kernel's result of `op` on `inputs`.
OwnedTensor runCpu(const std::string &op, const KernelAttrs &attrs,
                   std::vector<const OwnedTensor *> inputs,
                   std::vector<int64_t> shape) {
  OwnedTensor result(DType::F32, std::move(shape));
  std::vector<const Tensor *> ins;
  for (const OwnedTensor *input : inputs)
    ins.push_back(&input->view);
  EXPECT_EQ(runCpuKernel(op, attrs, ins, {&result.view}).message(), "");
  return result;
}

TEST(CudaLayoutsTest, ElementMovesMatchTheCpuKernels) {
  OwnedTensor x = randomTensor({3, 4, 5}, 1);
  KernelAttrs transpose;
  transpose.lists["permutation"] = {2, 0, 1};
  StridedCopy copy;
  ASSERT_TRUE(planPermute(x.view.shape, {2, 0, 1}, copy).ok());
  OwnedTensor moved(DType::F32, {5, 3, 4});
  applyCopy(copy, x.view, moved.view);
  EXPECT_EQ(values(moved),
            values(runCpu("nn.transpose", transpose, {&x}, {5, 3, 4})));

  OwnedTensor y = randomTensor({4, 8}, 2);
  KernelAttrs slice;
  slice.lists["start"] = {1, 2};
  slice.lists["limit"] = {3, 7};
  ASSERT_TRUE(planSlice(y.view.shape, {1, 2}, {2, 5}, copy).ok());
  OwnedTensor sliced(DType::F32, {2, 5});
  applyCopy(copy, y.view, sliced.view);
  EXPECT_EQ(values(sliced), values(runCpu("nn.slice", slice, {&y}, {2, 5})));

  for (auto [inShape, dims] :
       {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{4, 1}, {0, 2}},
        {{5}, {2}},
        {{1, 3}, {0, 1}}}) {
    OwnedTensor z = randomTensor(inShape, 3);
    std::vector<int64_t> outShape = {4, 3, 5};
    if (dims == std::vector<int64_t>{0, 1})
      outShape = {2, 3};
    KernelAttrs broadcast;
    broadcast.lists["dims"] = dims;
    ASSERT_TRUE(planBroadcast(inShape, dims, outShape, copy).ok());
    OwnedTensor spread(DType::F32, outShape);
    applyCopy(copy, z.view, spread.view);
    EXPECT_EQ(values(spread),
              values(runCpu("nn.broadcast", broadcast, {&z}, outShape)));
  }

  OwnedTensor a = randomTensor({3, 2, 4}, 4), b = randomTensor({3, 5, 4}, 5);
  KernelAttrs concat;
  concat.ints["dim"] = 1;
  OwnedTensor joined(DType::F32, {3, 7, 4});
  ASSERT_TRUE(planConcatInput(a.view.shape, {3, 7, 4}, 1, 0, copy).ok());
  applyCopy(copy, a.view, joined.view);
  ASSERT_TRUE(planConcatInput(b.view.shape, {3, 7, 4}, 1, 2, copy).ok());
  applyCopy(copy, b.view, joined.view);
  EXPECT_EQ(values(joined),
            values(runCpu("nn.concat", concat, {&a, &b}, {3, 7, 4})));

  EXPECT_EQ(
      planPermute(std::vector<int64_t>(9, 1), {0, 1, 2, 3, 4, 5, 6, 7, 8}, copy)
          .message(),
      "the CUDA backend moves elements of tensors up to rank 8, got "
      "rank 9");
}

TEST(CudaLayoutsTest, PiecesAreLaidOutAsNcclExpects) {
  // Three pieces of [2, 3, 4], gathered or scattered along each dim: the
  // pieces one after another (NCCL's layout) against placePiece, the MPI
  // communicator's.
  std::vector<int64_t> pieceShape = {2, 3, 4};
  for (int64_t dim = 0; dim < 3; ++dim) {
    std::vector<int64_t> wholeShape = pieceShape;
    wholeShape[dim] *= 3;
    OwnedTensor pieces = randomTensor({3, 2, 3, 4}, 6 + dim);
    OwnedTensor expected(DType::F32, wholeShape);
    for (int64_t j = 0; j < 3; ++j) {
      Tensor piece{DType::F32, pieceShape, pieces.view.as<float>() + j * 24};
      placePiece(piece, expected.view, dim, j, 3);
    }
    OwnedTensor whole(DType::F32, wholeShape);
    applyCopy(planPieces(pieceShape, dim, 3, /*toPieces=*/false), pieces.view,
              whole.view);
    EXPECT_EQ(values(whole), values(expected)) << "dim " << dim;
    OwnedTensor back(DType::F32, {3, 2, 3, 4});
    applyCopy(planPieces(pieceShape, dim, 3, /*toPieces=*/true), whole.view,
              back.view);
    EXPECT_EQ(values(back), values(pieces)) << "dim " << dim;
  }
}

TEST(CudaLayoutsTest, RowReductionsMatchTheCpuKernel) {
  OwnedTensor x = randomTensor({3, 4, 5}, 9);
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{2}, {0, 2}, {1}, {0, 1, 2}, {}}) {
    RowReduction plan = planRowReduction(x.view.shape, dims);
    OwnedTensor rows = x;
    if (!plan.perm.empty()) {
      StridedCopy copy;
      ASSERT_TRUE(planPermute(x.view.shape, plan.perm, copy).ok());
      applyCopy(copy, x.view, rows.view);
    }
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < 3; ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end())
        kept.push_back(x.view.shape[d]);
    KernelAttrs attrs;
    attrs.lists["dims"] = dims;
    std::vector<float> want =
        values(runCpu("nn.reduce_sum", attrs, {&x}, kept));
    ASSERT_EQ(static_cast<int64_t>(want.size()), plan.rows);
    for (int64_t r = 0; r < plan.rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < plan.cols; ++c)
        sum += rows.view.as<float>()[r * plan.cols + c];
      EXPECT_NEAR(sum, want[r], 1e-5) << "row " << r;
    }
  }
}

/// A column-major GEMM as cuBLASLt defines it, on the plan's layouts.
std::vector<float> emulateGemm(const GemmPlan &plan, const OwnedTensor &lhs,
                               const OwnedTensor &rhs) {
  auto arrange = [](const OwnedTensor &operand,
                    const std::vector<int64_t> &perm) {
    if (perm.empty())
      return operand;
    StridedCopy copy;
    EXPECT_TRUE(planPermute(operand.view.shape, perm, copy).ok());
    OwnedTensor permuted(DType::F32, {operand.view.getNumElements()});
    applyCopy(copy, operand.view, permuted.view);
    return permuted;
  };
  OwnedTensor b = arrange(lhs, plan.lhsPerm), a = arrange(rhs, plan.rhsPerm);
  std::vector<float> d(plan.batch * plan.m * plan.n);
  for (int64_t i = 0; i < plan.batch; ++i) {
    const float *ai = a.view.as<float>() + i * plan.aRows * plan.aCols;
    const float *bi = b.view.as<float>() + i * plan.bRows * plan.bCols;
    // op(A)(r, l), r < n, l < k; op(B)(l, c), c < m; X(r, c) = X[c * rows + r].
    auto opA = [&](int64_t r, int64_t l) {
      return plan.rhsTransposed ? ai[r * plan.aRows + l]
                                : ai[l * plan.aRows + r];
    };
    auto opB = [&](int64_t l, int64_t c) {
      return plan.lhsTransposed ? bi[l * plan.bRows + c]
                                : bi[c * plan.bRows + l];
    };
    EXPECT_EQ(plan.dRows, plan.n);
    for (int64_t c = 0; c < plan.m; ++c)
      for (int64_t r = 0; r < plan.n; ++r) {
        double sum = 0;
        for (int64_t l = 0; l < plan.k; ++l)
          sum += opA(r, l) * opB(l, c);
        d[i * plan.m * plan.n + c * plan.dRows + r] = sum;
      }
  }
  return d;
}

TEST(CudaLayoutsTest, GemmLayoutsMatchTheCpuDot) {
  struct Case {
    std::vector<int64_t> lhs, rhs, lhsBatch, rhsBatch, lhsContract, rhsContract,
        result;
    bool lhsTransposed, rhsTransposed, lhsCopied, rhsCopied;
  };
  const Case cases[] = {
      // x·W.
      {{2, 7, 6},
       {6, 5},
       {},
       {},
       {2},
       {0},
       {2, 7, 5},
       false,
       false,
       false,
       false},
      // Q·Kᵀ, batched: the rhs is read transposed.
      {{3, 4, 6},
       {3, 5, 6},
       {0},
       {0},
       {2},
       {2},
       {3, 4, 5},
       false,
       true,
       false,
       false},
      // xᵀ·y (a weight gradient): the lhs is read transposed.
      {{6, 4}, {6, 5}, {}, {}, {0}, {0}, {4, 5}, true, false, false, false},
      // A batch dim in the middle: both operands are permuted first.
      {{6, 4, 3},
       {4, 6, 5},
       {1},
       {0},
       {0},
       {1},
       {4, 3, 5},
       false,
       false,
       true,
       false},
      {{4, 6, 3},
       {6, 4, 5},
       {0},
       {1},
       {1},
       {0},
       {4, 3, 5},
       true,
       false,
       false,
       true},
  };
  uint64_t seed = 20;
  for (const Case &c : cases) {
    OwnedTensor lhs = randomTensor(c.lhs, seed++),
                rhs = randomTensor(c.rhs, seed++);
    KernelAttrs attrs;
    attrs.lists["lhs_batching_dims"] = c.lhsBatch;
    attrs.lists["rhs_batching_dims"] = c.rhsBatch;
    attrs.lists["lhs_contracting_dims"] = c.lhsContract;
    attrs.lists["rhs_contracting_dims"] = c.rhsContract;
    std::vector<float> want =
        values(runCpu("nn.dot", attrs, {&lhs, &rhs}, c.result));
    GemmPlan plan = planGemm(c.lhs, c.rhs, c.lhsBatch, c.rhsBatch,
                             c.lhsContract, c.rhsContract);
    EXPECT_EQ(plan.lhsTransposed, c.lhsTransposed);
    EXPECT_EQ(plan.rhsTransposed, c.rhsTransposed);
    EXPECT_EQ(!plan.lhsPerm.empty(), c.lhsCopied);
    EXPECT_EQ(!plan.rhsPerm.empty(), c.rhsCopied);
    std::vector<float> got = emulateGemm(plan, lhs, rhs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
  }
}

//===----------------------------------------------------------------------===//
// Per-element math
//===----------------------------------------------------------------------===//

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Equal, or both NaN.
bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

TEST(CudaElementMathTest, MapMatchesTheCpuKernels) {
  std::vector<float> xs = {-30.0f, -3.5f, -1.0f, -0.0f, 0.0f,  0.25f,
                           1.0f,   2.5f,  30.0f, kInf,  -kInf, kNaN};
  OwnedTensor x(DType::F32, {static_cast<int64_t>(xs.size())});
  std::memcpy(x.view.data, xs.data(), xs.size() * 4);
  const std::pair<const char *, MapOp> unary[] = {
      {"nn.neg", MapOp::Neg},     {"nn.exp", MapOp::Exp},
      {"nn.log", MapOp::Log},     {"nn.sqrt", MapOp::Sqrt},
      {"nn.rsqrt", MapOp::Rsqrt}, {"nn.tanh", MapOp::Tanh},
      {"nn.sin", MapOp::Sin},     {"nn.cos", MapOp::Cos},
      {"nn.erf", MapOp::Erf},     {"nn.sigmoid", MapOp::Sigmoid},
      {"nn.abs", MapOp::Abs},     {"nn.relu", MapOp::Relu},
      {"nn.gelu", MapOp::Gelu},   {"nn.silu", MapOp::Silu}};
  for (auto [op, map] : unary) {
    std::vector<float> want = values(runCpu(op, {}, {&x}, x.view.shape));
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_TRUE(same(applyMap(map, xs[i], 0.0f), want[i]))
          << op << "(" << xs[i] << ")";
  }
  OwnedTensor y(DType::F32, x.view.shape);
  for (size_t i = 0; i < xs.size(); ++i)
    y.view.as<float>()[i] = xs[xs.size() - 1 - i];
  const std::pair<const char *, MapOp> binary[] = {
      {"nn.add", MapOp::Add}, {"nn.sub", MapOp::Sub}, {"nn.mul", MapOp::Mul},
      {"nn.div", MapOp::Div}, {"nn.max", MapOp::Max}, {"nn.min", MapOp::Min},
      {"nn.pow", MapOp::Pow}};
  for (auto [op, map] : binary) {
    std::vector<float> want = values(runCpu(op, {}, {&x, &y}, x.view.shape));
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_TRUE(same(applyMap(map, xs[i], y.view.as<float>()[i]), want[i]))
          << op << "(" << xs[i] << ", " << y.view.as<float>()[i] << ")";
  }
  KernelAttrs bounds;
  bounds.floats["min"] = -1.0;
  bounds.floats["max"] = 2.5;
  std::vector<float> clamped =
      values(runCpu("nn.clamp", bounds, {&x}, x.view.shape));
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_TRUE(same(applyClamp(xs[i], -1.0f, 2.5f), clamped[i]))
        << "clamp(" << xs[i] << ")";
}

/// A tensor of `dtype` holding `values` (converted as nn.cast would read
/// them from f64).
OwnedTensor castable(DType dtype, const std::vector<double> &values) {
  OwnedTensor tensor(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    switch (dtype) {
    case DType::F32:
      tensor.view.as<float>()[i] = static_cast<float>(v);
      break;
    case DType::BF16:
    case DType::F16:
      tensor.view.as<uint16_t>()[i] = floatToHalf(dtype, static_cast<float>(v));
      break;
    case DType::I32:
      tensor.view.as<int32_t>()[i] =
          std::isfinite(v) ? static_cast<int32_t>(std::fmod(v, 1e9)) : 3;
      break;
    case DType::I64:
      tensor.view.as<int64_t>()[i] =
          std::isfinite(v) ? static_cast<int64_t>(v) : -(int64_t(1) << 40);
      break;
    case DType::I1:
      tensor.view.as<uint8_t>()[i] = v != 0 && !std::isnan(v);
      break;
    default:
      break;
    }
  }
  return tensor;
}

TEST(CudaElementMathTest, CastsMatchTheCpuKernel) {
  // Saturation (1e10, 3e9 to i32), NaN and infinities to integers, i64 to
  // i32 wrapping (2^40 + 5), rounding to 16-bit floats (1/3, 65519.0).
  std::vector<double> inputs = {-3.7,
                                -0.5,
                                0.0,
                                0.5,
                                2.5,
                                1.0 / 3,
                                1e10,
                                -1e10,
                                3e9,
                                65519.0,
                                (1LL << 40) + 5,
                                INFINITY,
                                -INFINITY,
                                NAN};
  const DType types[] = {DType::F32, DType::BF16, DType::F16,
                         DType::I32, DType::I64,  DType::I1};
  for (DType from : types) {
    OwnedTensor x = castable(from, inputs);
    for (DType to : types) {
      OwnedTensor want(to, x.view.shape), got(to, x.view.shape);
      ASSERT_EQ(runCpuKernel("nn.cast", {}, {&x.view}, {&want.view}).message(),
                "");
      for (int64_t i = 0; i < x.view.getNumElements(); ++i)
        storeScalar(to, got.view.data, i, loadScalar(from, x.view.data, i));
      for (int64_t i = 0; i < x.view.getNumElements(); ++i) {
        size_t bytes = getDTypeBytes(to);
        const auto *w = want.view.as<uint8_t>() + i * bytes;
        const auto *g = got.view.as<uint8_t>() + i * bytes;
        bool nan = to == DType::F32 && std::isnan(want.view.as<float>()[i]) &&
                   std::isnan(got.view.as<float>()[i]);
        EXPECT_TRUE(nan || std::memcmp(w, g, bytes) == 0)
            << getDTypeName(from) << " to " << getDTypeName(to) << ", input "
            << inputs[i];
      }
    }
  }
}

TEST(CudaElementMathTest, ComparesMatchTheCpuKernel) {
  std::vector<float> as = {1.0f, 1.0f, -2.0f, kNaN, kInf, 0.0f, -0.0f};
  std::vector<float> bs = {1.0f, 2.0f, 3.0f, kNaN, kInf, -0.0f, 1.0f};
  OwnedTensor a(DType::F32, {7}), b(DType::F32, {7});
  std::memcpy(a.view.data, as.data(), 28);
  std::memcpy(b.view.data, bs.data(), 28);
  for (int64_t predicate = 0; predicate < 6; ++predicate) {
    KernelAttrs attrs;
    attrs.ints["predicate"] = predicate;
    OwnedTensor want(DType::I1, {7});
    ASSERT_EQ(
        runCpuKernel("nn.compare", attrs, {&a.view, &b.view}, {&want.view})
            .message(),
        "");
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ(applyPredicate(static_cast<int>(predicate), as[i], bs[i]),
                want.view.as<uint8_t>()[i] != 0)
          << "predicate " << predicate << " on " << as[i] << ", " << bs[i];
  }
}

/// What fusedKernel computes, a thread per element, on the host: a bias
/// broadcast over rows, the GELU, a clamp, a mask selected by a compare and
/// an i1 result, in bf16 (read and written as bf16) against the CPU's fused
/// kernel (which widens it), within float tolerance: the GPU's tanh is not
/// SLEEF's.
TEST(CudaElementMathTest, FusedProgramsMatchTheCpuKernel) {
  std::vector<int64_t> shape = {33, 7};
  OwnedTensor x = randomTensor(shape, 11), bias = randomTensor({7}, 12);
  OwnedTensor xh(DType::BF16, shape);
  narrowFromF32(x.view, xh.view);
  KernelAttrs attrs;
  auto step = [&](const char *op, std::vector<int64_t> operands,
                  DType dtype = DType::BF16) -> FusedStep & {
    return attrs.fusedSteps.emplace_back(
        FusedStep{op, std::move(operands), {}, dtype});
  };
  step("nn.broadcast", {1}, DType::F32).attrs.lists["dims"] = {1}; // 2
  step("nn.cast", {0});                                            // 3
  step("nn.cast", {2});                                            // 4
  step("nn.add", {3, 4});                                          // 5
  step("nn.gelu", {5});                                            // 6
  FusedStep &clamp = step("nn.clamp", {6});                        // 7
  clamp.attrs.floats["min"] = -0.1;
  clamp.attrs.floats["max"] = 0.5;
  step("nn.compare", {7, 3}, DType::I1).attrs.ints["predicate"] = 2; // 8
  FusedStep &zero = step("nn.constant", {});                         // 9
  uint16_t zeroBits = floatToHalf(DType::BF16, 0.0f);
  zero.attrs.bytes["value"] =
      std::string(reinterpret_cast<const char *>(&zeroBits), 2);
  step("nn.select", {8, 9, 7}); // 10
  step("nn.tanh", {10});        // 11
  attrs.fusedResults = {11, 8};

  OwnedTensor want(DType::BF16, shape), wantMask(DType::I1, shape);
  ASSERT_EQ(runCpuKernel("nn.fused", attrs, {&xh.view, &bias.view},
                         {&want.view, &wantMask.view})
                .message(),
            "");
  OwnedTensor got(DType::BF16, shape), gotMask(DType::I1, shape);
  FusedProgram program;
  ASSERT_TRUE(planFused(attrs, {&xh.view, &bias.view},
                        {&got.view, &gotMask.view}, program)
                  .ok());
  for (int64_t i = 0; i < x.view.getNumElements(); ++i)
    evaluateFused(program, i);
  for (int64_t i = 0; i < x.view.getNumElements(); ++i) {
    float a = halfToFloat(DType::BF16, got.view.as<uint16_t>()[i]);
    float b = halfToFloat(DType::BF16, want.view.as<uint16_t>()[i]);
    EXPECT_NEAR(a, b, 1e-2f) << "element " << i;
    EXPECT_EQ(gotMask.view.as<uint8_t>()[i], wantMask.view.as<uint8_t>()[i])
        << "element " << i;
  }
}

TEST(CudaElementMathTest, FusedProgramsBeyondTheLimitsAreUnavailable) {
  OwnedTensor x(DType::F32, {4}), y(DType::F32, {4});
  KernelAttrs attrs;
  for (int i = 0; i <= kFusedMaxSteps; ++i)
    attrs.fusedSteps.push_back(FusedStep{"nn.neg", {i}, {}, DType::F32});
  attrs.fusedResults = {kFusedMaxSteps + 1};
  FusedProgram program;
  Status status = planFused(attrs, {&x.view}, {&y.view}, program);
  EXPECT_EQ(status.getCode(), StatusCode::Unavailable);
  EXPECT_EQ(status.message(), "nn.fused: the CUDA backend takes at most 64 "
                              "steps, 16 inputs and 8 dims");
}

TEST(CudaAttentionMathTest, RowKernelsMatchTheCpuKernels) {
  // What attentionKernel and the three gradient kernels compute per thread,
  // on the host: keys staged in tiles of 16 for the forward, every row of
  // the gradient from its log-sum-exp. 2 batches, 4 heads on 2 kv heads,
  // 40 queries and keys, d 8, dv 6; without dropout, and with dropout on
  // the second half of the batch of a tensor of 4.
  const int64_t b = 2, a = 4, kv = 2, s = 40, t = 40, d = 8, dv = 6;
  const float scale = 0.3f;
  OwnedTensor q = randomTensor({b, a, s, d}, 11),
              k = randomTensor({b, kv, t, d}, 12),
              v = randomTensor({b, kv, t, dv}, 13),
              dout = randomTensor({b, a, s, dv}, 14);
  OwnedTensor step(DType::I64, {}), piece(DType::I64, {4});
  step.view.as<int64_t>()[0] = 3;
  const int64_t pieceIndex[] = {1, 0, 0, 0};
  std::copy(pieceIndex, pieceIndex + 4, piece.view.as<int64_t>());
  for (auto [causal, rate] : {std::pair(true, 0.0f), std::pair(false, 0.0f),
                              std::pair(true, 0.3f), std::pair(false, 0.3f)}) {
    KernelAttrs attrs;
    attrs.floats["scale"] = scale;
    attrs.ints["causal"] = causal;
    attrs.ints["zigzag"] = 0;
    attrs.floats["dropout"] = rate;
    attrs.ints["seed"] = 9;
    AttentionDropout drop;
    std::vector<const OwnedTensor *> key;
    if (rate > 0) {
      attrs.lists["global_shape"] = {2 * b, a, s, t};
      key = {&step, &piece};
      drop = {rate, 9, 3, {}};
      ASSERT_EQ(
          random::makePiecePlace({b, a, s, t}, {2 * b, a, s, t}, drop.place),
          "");
      ASSERT_EQ(drop.place.setPieceIndex(pieceIndex), -1);
    }
    std::vector<const OwnedTensor *> forward = {&q, &k, &v};
    forward.insert(forward.end(), key.begin(), key.end());
    OwnedTensor want = runCpu("nn.attention", attrs, forward, {b, a, s, dv});
    OwnedTensor dq(DType::F32, q.view.shape), dk(DType::F32, k.view.shape),
        dvWant(DType::F32, v.view.shape);
    std::vector<const Tensor *> backward = {&q.view, &k.view, &v.view,
                                            &want.view, &dout.view};
    for (const OwnedTensor *tensor : key)
      backward.push_back(&tensor->view);
    ASSERT_EQ(runCpuKernel("nn.attention_grad", attrs, backward,
                           {&dq.view, &dk.view, &dvWant.view})
                  .message(),
              "");
    const float *qs = q.view.as<float>(), *ks = k.view.as<float>(),
                *vs = v.view.as<float>(), *os = want.view.as<float>(),
                *gs = dout.view.as<float>();
    auto visible = [&](int64_t query) {
      return causal ? std::min(t, query + 1) : t;
    };
    std::vector<float> lse(b * a * s), rowDot(b * a * s);
    for (int64_t row = 0; row < b * a * s; ++row) {
      int64_t batchHead = row / s, query = row % s;
      int64_t keyBase = (batchHead / a * kv + batchHead % a / (a / kv)) * t;
      // The forward, a tile of 16 keys at a time.
      std::vector<float> acc(dv, 0.0f);
      AttentionRowState state;
      for (int64_t j0 = 0; j0 < visible(query); j0 += 16) {
        int count = int(std::min<int64_t>(16, visible(query) - j0));
        attentionRowUpdate(qs + row * d, ks + (keyBase + j0) * d,
                           vs + (keyBase + j0) * dv, count, d, dv, scale,
                           acc.data(), state, drop, row * t + j0);
      }
      for (int64_t e = 0; e < dv; ++e)
        EXPECT_NEAR(acc[e] / state.sum, os[row * dv + e], 1e-5f)
            << "row " << row << " causal " << causal << " dropout " << rate;
      // The gradient's statistics and dq.
      AttentionRowState stats;
      attentionRowUpdate(qs + row * d, ks + keyBase * d, nullptr,
                         int(visible(query)), d, dv, scale, nullptr, stats);
      lse[row] = attentionLogSumExp(stats);
      rowDot[row] = attentionDot(gs + row * dv, os + row * dv, dv);
      std::vector<float> dqRow(d);
      attentionQueryGrad(qs + row * d, gs + row * dv, rowDot[row], lse[row],
                         ks + keyBase * d, vs + keyBase * dv,
                         int(visible(query)), d, dv, scale, dqRow.data(), drop,
                         row * t);
      for (int64_t e = 0; e < d; ++e)
        EXPECT_NEAR(dqRow[e], dq.view.as<float>()[row * d + e], 1e-4f);
    }
    // dk and dv, a key row at a time over its group's query heads.
    for (int64_t row = 0; row < b * kv * t; ++row) {
      int64_t batch = row / (kv * t), kvHead = row / t % kv, key = row % t;
      std::vector<float> dkRow(d, 0.0f), dvRow(dv, 0.0f);
      int64_t first = causal ? key : 0;
      for (int64_t h = kvHead * (a / kv); h < (kvHead + 1) * (a / kv); ++h) {
        int64_t base = (batch * a + h) * s + first;
        attentionKeyGrad(ks + row * d, vs + row * dv, qs + base * d,
                         gs + base * dv, lse.data() + base,
                         rowDot.data() + base, int(s - first), d, dv, scale,
                         dkRow.data(), dvRow.data(), drop, base * t + key, t);
      }
      for (int64_t e = 0; e < d; ++e)
        EXPECT_NEAR(dkRow[e], dk.view.as<float>()[row * d + e], 1e-4f);
      for (int64_t e = 0; e < dv; ++e)
        EXPECT_NEAR(dvRow[e], dvWant.view.as<float>()[row * dv + e], 1e-4f);
    }
  }
}

TEST(CudaElementMathTest, IndexedAxisAndTopKMatchTheCpuKernels) {
  // gather along the middle axis of [3, 5, 4], read as indexedAxisKernel
  // reads it; top_k of each row as topKKernel computes it.
  OwnedTensor x = randomTensor({3, 5, 4}, 21);
  OwnedTensor idx(DType::I64, {3, 2, 4});
  for (int64_t i = 0; i < idx.view.getNumElements(); ++i)
    idx.view.as<int64_t>()[i] = (i * 7 + 3) % 5;
  KernelAttrs attrs;
  attrs.ints["axis"] = 1;
  OwnedTensor want = runCpu("nn.gather", attrs, {&x, &idx}, {3, 2, 4});
  for (int64_t i = 0; i < want.view.getNumElements(); ++i)
    EXPECT_EQ(x.view.as<float>()[getIndexedOffset(i, idx.view.as<int64_t>()[i],
                                                  2, 5, 4)],
              want.view.as<float>()[i]);
  // Ties and NaN in the rows.
  x.view.as<float>()[3] = x.view.as<float>()[1];
  x.view.as<float>()[6] = kNaN;
  KernelAttrs k;
  k.ints["k"] = 3;
  OwnedTensor values(DType::F32, {3, 5, 3}), indices(DType::I64, {3, 5, 3});
  ASSERT_EQ(
      runCpuKernel("nn.top_k", k, {&x.view}, {&values.view, &indices.view})
          .message(),
      "");
  for (int64_t row = 0; row < 15; ++row) {
    float rowValues[3];
    int64_t rowIndices[3];
    topKRow(x.view.as<float>() + row * 4, 4, 3, rowValues, rowIndices);
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(rowIndices[j], indices.view.as<int64_t>()[row * 3 + j])
          << "row " << row;
      EXPECT_TRUE(same(rowValues[j], values.view.as<float>()[row * 3 + j]));
    }
  }
}

} // namespace
