//===- Layouts.cpp - How the CUDA backend moves elements and lays out GEMMs
//===//

#include "Layouts.h"

#include <algorithm>

using namespace tessera::runtime;
using namespace tessera::runtime::cuda;

int64_t StridedCopy::getNumElements() const {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d)
    count *= shape[d];
  return count;
}

std::vector<int64_t>
tessera::runtime::cuda::getStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t dim = static_cast<int64_t>(shape.size()) - 2; dim >= 0; --dim)
    strides[dim] = strides[dim + 1] * shape[dim + 1];
  return strides;
}

/// A copy of `shape` with these strides.
static Status makeCopy(const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &srcStrides,
                       const std::vector<int64_t> &dstStrides,
                       StridedCopy &copy) {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    return unavailable(
        "the CUDA backend moves elements of tensors up to rank " +
        std::to_string(kMaxRank) + ", got rank " +
        std::to_string(shape.size()));
  copy = StridedCopy();
  copy.rank = shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    copy.shape[d] = shape[d];
    copy.srcStrides[d] = srcStrides[d];
    copy.dstStrides[d] = dstStrides[d];
  }
  return Status::success();
}

Status tessera::runtime::cuda::planPermute(const std::vector<int64_t> &shape,
                                           const std::vector<int64_t> &perm,
                                           StridedCopy &copy) {
  std::vector<int64_t> strides = getStrides(shape), permuted, srcStrides;
  for (int64_t dim : perm) {
    permuted.push_back(shape[dim]);
    srcStrides.push_back(strides[dim]);
  }
  return makeCopy(permuted, srcStrides, getStrides(permuted), copy);
}

Status tessera::runtime::cuda::planSlice(const std::vector<int64_t> &inShape,
                                         const std::vector<int64_t> &start,
                                         const std::vector<int64_t> &outShape,
                                         StridedCopy &copy) {
  std::vector<int64_t> strides = getStrides(inShape);
  Status status = makeCopy(outShape, strides, getStrides(outShape), copy);
  for (size_t d = 0; d < start.size() && status.ok(); ++d)
    copy.srcBase += start[d] * strides[d];
  return status;
}

Status tessera::runtime::cuda::planBroadcast(
    const std::vector<int64_t> &inShape, const std::vector<int64_t> &dims,
    const std::vector<int64_t> &outShape, StridedCopy &copy) {
  std::vector<int64_t> inStrides = getStrides(inShape);
  std::vector<int64_t> srcStrides(outShape.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i)
    if (inShape[i] != 1)
      srcStrides[dims[i]] = inStrides[i];
  return makeCopy(outShape, srcStrides, getStrides(outShape), copy);
}

Status tessera::runtime::cuda::planConcatInput(
    const std::vector<int64_t> &inShape, const std::vector<int64_t> &outShape,
    int64_t dim, int64_t offset, StridedCopy &copy) {
  std::vector<int64_t> outStrides = getStrides(outShape);
  Status status = makeCopy(inShape, getStrides(inShape), outStrides, copy);
  copy.dstBase = offset * outStrides[dim];
  return status;
}

StridedCopy
tessera::runtime::cuda::planPieces(const std::vector<int64_t> &pieceShape,
                                   int64_t dim, int64_t count, bool toPieces) {
  // The whole is [outer, count * size, inner], the pieces [count, outer,
  // size * inner]: both are walked as [count, outer, size * inner].
  int64_t outer = 1, run = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= pieceShape[d];
  for (size_t d = dim; d < pieceShape.size(); ++d)
    run *= pieceShape[d];
  int64_t whole[3] = {run, count * run, 1};
  int64_t pieces[3] = {outer * run, run, 1};
  StridedCopy copy;
  copy.rank = 3;
  int64_t shape[3] = {count, outer, run};
  for (int d = 0; d < 3; ++d) {
    copy.shape[d] = shape[d];
    copy.srcStrides[d] = toPieces ? whole[d] : pieces[d];
    copy.dstStrides[d] = toPieces ? pieces[d] : whole[d];
  }
  return copy;
}

static int64_t getProduct(const std::vector<int64_t> &shape,
                          const std::vector<int64_t> &dims) {
  int64_t size = 1;
  for (int64_t dim : dims)
    size *= shape[dim];
  return size;
}

static bool isIota(const std::vector<int64_t> &dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

RowReduction
tessera::runtime::cuda::planRowReduction(const std::vector<int64_t> &shape,
                                         const std::vector<int64_t> &dims) {
  std::vector<int64_t> reduced(dims), kept;
  std::sort(reduced.begin(), reduced.end());
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (!std::binary_search(reduced.begin(), reduced.end(), d))
      kept.push_back(d);
  RowReduction plan;
  plan.rows = getProduct(shape, kept);
  plan.cols = getProduct(shape, reduced);
  plan.perm = kept;
  plan.perm.insert(plan.perm.end(), reduced.begin(), reduced.end());
  if (isIota(plan.perm))
    plan.perm.clear();
  return plan;
}

/// How an operand with dims (batch, rows, cols) is read: as stored,
/// transposed, or through a permuted copy (`perm`).
static void arrange(const std::vector<int64_t> &batch,
                    const std::vector<int64_t> &rows,
                    const std::vector<int64_t> &cols, bool &transposed,
                    std::vector<int64_t> &perm) {
  std::vector<int64_t> straight = batch, swapped = batch;
  straight.insert(straight.end(), rows.begin(), rows.end());
  straight.insert(straight.end(), cols.begin(), cols.end());
  swapped.insert(swapped.end(), cols.begin(), cols.end());
  swapped.insert(swapped.end(), rows.begin(), rows.end());
  transposed = false;
  perm.clear();
  if (isIota(straight))
    return;
  if (isIota(swapped))
    transposed = true;
  else
    perm = straight;
}

GemmPlan tessera::runtime::cuda::planGemm(
    const std::vector<int64_t> &lhsShape, const std::vector<int64_t> &rhsShape,
    const std::vector<int64_t> &lhsBatch, const std::vector<int64_t> &rhsBatch,
    const std::vector<int64_t> &lhsContract,
    const std::vector<int64_t> &rhsContract) {
  auto getFree = [](int64_t rank, const std::vector<int64_t> &batch,
                    const std::vector<int64_t> &contract) {
    std::vector<int64_t> free;
    for (int64_t d = 0; d < rank; ++d)
      if (std::count(batch.begin(), batch.end(), d) +
              std::count(contract.begin(), contract.end(), d) ==
          0)
        free.push_back(d);
    return free;
  };
  std::vector<int64_t> lhsFree =
      getFree(lhsShape.size(), lhsBatch, lhsContract);
  std::vector<int64_t> rhsFree =
      getFree(rhsShape.size(), rhsBatch, rhsContract);
  GemmPlan plan;
  plan.batch = getProduct(lhsShape, lhsBatch);
  plan.m = getProduct(lhsShape, lhsFree);
  plan.n = getProduct(rhsShape, rhsFree);
  plan.k = getProduct(lhsShape, lhsContract);
  arrange(lhsBatch, lhsFree, lhsContract, plan.lhsTransposed, plan.lhsPerm);
  arrange(rhsBatch, rhsContract, rhsFree, plan.rhsTransposed, plan.rhsPerm);
  // A row-major [rows, cols] matrix is the column-major cols x rows one.
  // A (the rhs, read as op(A) = n x k): stored [k, n] (n x k), or [n, k]
  // transposed (k x n); B (the lhs, op(B) = k x m): stored [m, k]
  // (k x m), or [k, m] transposed (m x k).
  plan.aRows = plan.rhsTransposed ? plan.k : plan.n;
  plan.aCols = plan.rhsTransposed ? plan.n : plan.k;
  plan.bRows = plan.lhsTransposed ? plan.m : plan.k;
  plan.bCols = plan.lhsTransposed ? plan.k : plan.m;
  plan.dRows = plan.n;
  plan.dCols = plan.m;
  return plan;
}
