//===- Layouts.h - How the CUDA backend moves elements and lays out GEMMs -===//
//
// Pure functions, with no CUDA in them, so that unit tests check them on
// any machine against the CPU backend: the strided copies behind transpose,
// slice, broadcast, concat and the collectives' packing, and the cuBLASLt
// layout of an nn.dot. The CUDA code only launches what they plan.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_LAYOUTS_H
#define TESSERA_RUNTIME_CUDA_LAYOUTS_H

#include "tessera/runtime/Status.h"

#include <cstdint>
#include <vector>

namespace tessera::runtime::cuda {

/// The elements of `shape` in row-major order, read from
/// `srcBase + sum(index[d] * srcStrides[d])` and written to
/// `dstBase + sum(index[d] * dstStrides[d])` (in elements). Plain data, so
/// that a kernel takes it by value.
constexpr int kMaxRank = 8;
struct StridedCopy {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t srcStrides[kMaxRank] = {};
  int64_t dstStrides[kMaxRank] = {};
  int64_t srcBase = 0, dstBase = 0;

  int64_t getNumElements() const;
};

/// Row-major strides, in elements.
std::vector<int64_t> getStrides(const std::vector<int64_t> &shape);

/// Each planner fills `copy`, or fails (unavailable) when the shape has more
/// than kMaxRank dims.
///
/// The result dim i is the source dim perm[i].
Status planPermute(const std::vector<int64_t> &shape,
                   const std::vector<int64_t> &perm, StridedCopy &copy);
/// The block of `inShape` from `start` with `outShape`.
Status planSlice(const std::vector<int64_t> &inShape,
                 const std::vector<int64_t> &start,
                 const std::vector<int64_t> &outShape, StridedCopy &copy);
/// nn.broadcast: operand dim i is result dim dims[i]; size-1 operand dims
/// and new dims repeat.
Status planBroadcast(const std::vector<int64_t> &inShape,
                     const std::vector<int64_t> &dims,
                     const std::vector<int64_t> &outShape, StridedCopy &copy);
/// One concat input of `inShape` written at `offset` along `dim` of
/// `outShape`.
Status planConcatInput(const std::vector<int64_t> &inShape,
                       const std::vector<int64_t> &outShape, int64_t dim,
                       int64_t offset, StridedCopy &copy);
/// Between a tensor of `count` pieces of `pieceShape` along `dim` (the
/// pieces concatenated along dim) and the same pieces one after another
/// (`toPieces`: from the first to the second), as NCCL's all-gather and
/// reduce-scatter and grouped send/recv lay them out.
StridedCopy planPieces(const std::vector<int64_t> &pieceShape, int64_t dim,
                       int64_t count, bool toPieces);

/// A reduction over `dims` as one over the rows of a [rows, cols] matrix:
/// the kept dims first, then the reduced ones (`perm` non-empty when the
/// input must be permuted so).
struct RowReduction {
  std::vector<int64_t> perm;
  int64_t rows = 1, cols = 1;
};
RowReduction planRowReduction(const std::vector<int64_t> &shape,
                              const std::vector<int64_t> &dims);

/// One nn.dot as a strided-batched column-major GEMM (cuBLASLt's
/// convention): the row-major result [batch, m, n] is the column-major
/// D (n x m) = op(A) · op(B) with A the rhs and B the lhs. An operand whose
/// dims come as (batch, rows, cols) is used as stored, one as (batch,
/// cols, rows) transposed, any other permuted first (`lhsPerm`/`rhsPerm`
/// non-empty: the copy's dims are the source's perm[i]).
struct GemmPlan {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  std::vector<int64_t> lhsPerm, rhsPerm;
  bool lhsTransposed = false, rhsTransposed = false;
  /// The stored column-major shapes (rows x cols, leading dim rows) of A
  /// (the rhs), B (the lhs) and D, each `batch` times, rows * cols apart.
  int64_t aRows = 0, aCols = 0, bRows = 0, bCols = 0, dRows = 0, dCols = 0;
};
GemmPlan planGemm(const std::vector<int64_t> &lhsShape,
                  const std::vector<int64_t> &rhsShape,
                  const std::vector<int64_t> &lhsBatch,
                  const std::vector<int64_t> &rhsBatch,
                  const std::vector<int64_t> &lhsContract,
                  const std::vector<int64_t> &rhsContract);

} // namespace tessera::runtime::cuda

#endif // TESSERA_RUNTIME_CUDA_LAYOUTS_H
