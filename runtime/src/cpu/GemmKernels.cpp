//===- GemmKernels.cpp - nn.dot on the CPU --------------------------------===//
//
// GEMMs through OpenBLAS, split over the kernel threads by rows.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <algorithm>
#include <cblas.h>
#include <climits>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

static bool isIdentity(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

static std::vector<int64_t> concatDims(const std::vector<int64_t> &a,
                                       const std::vector<int64_t> &b,
                                       const std::vector<int64_t> &c) {
  std::vector<int64_t> result = a;
  result.insert(result.end(), b.begin(), b.end());
  result.insert(result.end(), c.begin(), c.end());
  return result;
}

namespace {
/// One GEMM operand as a stack of row-major [rows, cols] f32 matrices. BLAS
/// reads a stored [cols, rows] matrix as transposed, so an operand whose dims
/// come as (batch, rows, cols) or (batch, cols, rows) is used in place (the
/// common x·W and Q·Kᵀ cases); any other order is permuted into a copy.
class GemmOperand {
public:
  GemmOperand(const Tensor &tensor, const std::vector<int64_t> &batchDims,
              const std::vector<int64_t> &rowDims,
              const std::vector<int64_t> &colDims)
      : data(tensor.as<float>()) {
    std::vector<int64_t> straight = concatDims(batchDims, rowDims, colDims);
    if (isIdentity(straight))
      return;
    if (isIdentity(concatDims(batchDims, colDims, rowDims))) {
      transposed = true;
      return;
    }
    copy.resize(tensor.getNumElements());
    permuteElements(tensor, straight, copy.data());
    data = copy.data();
  }
  GemmOperand(const GemmOperand &) = delete;
  GemmOperand &operator=(const GemmOperand &) = delete;

  const float *getMatrix(int64_t index, int64_t rows, int64_t cols) const {
    return data + index * rows * cols;
  }
  CBLAS_TRANSPOSE getTranspose() const {
    return transposed ? CblasTrans : CblasNoTrans;
  }
  /// The leading dimension of the stored (not the logical) matrix.
  int getLeadingDim(int64_t rows, int64_t cols) const {
    return static_cast<int>(transposed ? rows : cols);
  }

private:
  const float *data;
  bool transposed = false;
  std::vector<float> copy;
};
} // namespace

static int64_t getSizeOf(const Tensor &tensor,
                         const std::vector<int64_t> &dims) {
  int64_t size = 1;
  for (int64_t dim : dims)
    size *= tensor.shape[dim];
  return size;
}

/// Rows of a piece of splitGemm: whole multiples of this. OpenBLAS
/// computes a row-major C as its column-major transpose, our rows its
/// columns, in micro-kernel tiles of a fixed number of them (4 to 24 by CPU;
/// 12 on Zen); a row at the same offset in a tile is summed alike whatever
/// the call's row count, one in another offset may not be (on Zen, 10% of
/// the elements differ in the last bit). 48 is a multiple of every tile.
/// Columns are never split: on Zen no column split gave the same bits.
constexpr int64_t kGemmPieceAlign = 48;
/// The least M·N·K of a piece of splitGemm. OpenBLAS takes another path
/// (its small-matrix kernels) at or below 100³ on some CPUs: a GEMM whose
/// pieces would fall there runs whole, so that each element is computed
/// alike on any thread count.
constexpr double kGemmPieceWork = 2e6;

/// C = op(A) op(B), row-major [m, n], over the kernel threads. OpenBLAS runs
/// on one thread: its workers spin between calls, and on two cores they
/// took the second from every other kernel (attention and the fused
/// kernels ran no faster on two threads than on one). The rows are split
/// here instead, a piece per thread, each an OpenBLAS call that blocks K as
/// the whole would: the same bits on any thread count.
static void splitGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m,
                      int64_t n, int64_t k, const float *a, int lda,
                      const float *b, int ldb, float *c) {
  auto gemm = [&](int64_t rows, const float *pa, float *pc) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(rows),
                static_cast<int>(n), static_cast<int>(k), 1.0f, pa, lda, b, ldb,
                0.0f, pc, static_cast<int>(n));
  };
  int64_t blocks = (m + kGemmPieceAlign - 1) / kGemmPieceAlign;
  int64_t pieces = std::min<int64_t>(getKernelThreads(), blocks);
  // The smallest piece holds blocks / pieces blocks, the last one short.
  double smallest = static_cast<double>(blocks / std::max<int64_t>(pieces, 1) *
                                            kGemmPieceAlign -
                                        (blocks * kGemmPieceAlign - m)) *
                    static_cast<double>(n) * k;
  if (pieces <= 1 || smallest <= kGemmPieceWork)
    return gemm(m, a, c);
  cpu::parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    int64_t first = begin * kGemmPieceAlign;
    int64_t size = std::min(m, end * kGemmPieceAlign) - first;
    gemm(size, a + first * (ta == CblasNoTrans ? lda : 1), c + first * n);
  });
}

/// nn.dot as one sgemm per batch index over [batch, M, K] x [batch, K, N].
void runDot(KernelCall &c) {
  const Tensor &lhs = c.in(0), &rhs = c.in(1);
  DotDims dims = *checkDotDims(c);
  int64_t batch = getSizeOf(lhs, dims.lhsBatch),
          m = getSizeOf(lhs, dims.lhsFree), n = getSizeOf(rhs, dims.rhsFree),
          k = getSizeOf(lhs, dims.lhsContract);
  float *result = c.out(0).as<float>();
  if (batch * m * n == 0)
    return;
  if (k == 0) {
    std::fill(result, result + batch * m * n, 0.0f);
    return;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    c.fail("matrix of [", m, ", ", k, "] x [", k, ", ", n,
           "] exceeds the sizes BLAS indexes");
    return;
  }
  GemmOperand a(lhs, dims.lhsBatch, dims.lhsFree, dims.lhsContract);
  GemmOperand b(rhs, dims.rhsBatch, dims.rhsContract, dims.rhsFree);
  auto gemm = [&](int64_t index) {
    splitGemm(a.getTranspose(), b.getTranspose(), m, n, k,
              a.getMatrix(index, m, k), a.getLeadingDim(m, k),
              b.getMatrix(index, k, n), b.getLeadingDim(k, n),
              result + index * m * n);
  };
  // A batch splits over the threads by its matrices, each one whole.
  if (batch >= getKernelThreads()) {
    cpu::parallelFor(batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t index = begin; index < end; ++index)
        gemm(index);
    });
    return;
  }
  for (int64_t index = 0; index < batch; ++index)
    gemm(index);
}

} // namespace tessera::runtime::cpu
