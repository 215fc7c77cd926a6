//===- CudaKernels.cu - The CUDA backend's own kernels --------------------===//
//
// Elementwise kernels use grid-stride loops; row kernels (reductions,
// softmax, norms, cross-entropy) give each row a block of kThreads threads
// and reduce through warp shuffles and shared memory.
//
//===----------------------------------------------------------------------===//

#include "AttentionMath.h"
#include "CudaKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>

using namespace tessera::runtime;
using namespace tessera::runtime::cuda;

namespace {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over `count` elements.
unsigned getBlocks(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks < 1)
    blocks = 1;
  return static_cast<unsigned>(blocks > 8192 ? 8192 : blocks);
}

#define GRID_STRIDE(i, count)                                                  \
  for (int64_t i =                                                             \
           blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;        \
       i < (count); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void copyStridedKernel(const T *src, T *dst, StridedCopy copy,
                                  int64_t count) {
  GRID_STRIDE(i, count) {
    int64_t rest = i, from = copy.srcBase, to = copy.dstBase;
    for (int d = copy.rank - 1; d >= 0; --d) {
      int64_t index = rest % copy.shape[d];
      rest /= copy.shape[d];
      from += index * copy.srcStrides[d];
      to += index * copy.dstStrides[d];
    }
    dst[to] = src[from];
  }
}

template <typename T> __global__ void fillKernel(T *y, T value, int64_t count) {
  GRID_STRIDE(i, count) { y[i] = value; }
}

template <typename T>
__global__ void selectKernel(const uint8_t *condition, const T *onTrue,
                             const T *onFalse, T *y, int64_t count) {
  GRID_STRIDE(i, count) { y[i] = condition[i] ? onTrue[i] : onFalse[i]; }
}

/// Calls `launch(T())` with the unsigned type of `elementBytes`.
template <typename Fn> void withElementType(int elementBytes, Fn launch) {
  switch (elementBytes) {
  case 1:
    return launch(uint8_t());
  case 2:
    return launch(uint16_t());
  case 4:
    return launch(uint32_t());
  case 8:
    return launch(uint64_t());
  }
}

//===----------------------------------------------------------------------===//
// Elementwise math
//===----------------------------------------------------------------------===//

__global__ void mapKernel(MapOp op, const float *a, const float *b, float *y,
                          int64_t count) {
  GRID_STRIDE(i, count) { y[i] = applyMap(op, a[i], b ? b[i] : 0.0f); }
}

/// The same on 16-bit floats, widened per element and rounded back: one
/// kernel where widening the tensors would take three or four.
__global__ void mapHalfKernel(MapOp op, DType dtype, const uint16_t *a,
                              const uint16_t *b, uint16_t *y, int64_t count) {
  GRID_STRIDE(i, count) {
    float x = widenHalf(dtype, a[i]);
    float z = b ? widenHalf(dtype, b[i]) : 0.0f;
    y[i] = narrowToHalf(dtype, applyMap(op, x, z));
  }
}

template <typename T>
__global__ void compareKernel(int predicate, const T *a, const T *b, uint8_t *y,
                              int64_t count) {
  GRID_STRIDE(i, count) {
    y[i] = applyPredicate(predicate, a[i], b[i]) ? 1 : 0;
  }
}

//===----------------------------------------------------------------------===//
// Casts
//===----------------------------------------------------------------------===//

__global__ void castKernel(DType from, const void *x, DType to, void *y,
                           int64_t count) {
  GRID_STRIDE(i, count) { storeScalar(to, y, i, loadScalar(from, x, i)); }
}

__global__ void clampKernel(const float *x, float *y, int64_t count, float lo,
                            float hi) {
  GRID_STRIDE(i, count) { y[i] = applyClamp(x[i], lo, hi); }
}

/// The first position of this device's piece of `size` along a split dim
/// (nn.OffsetOpInterface), 0 for a whole dim.
__device__ long long getPieceOffset(const int64_t *piece, int64_t size) {
  return piece ? piece[0] * size : 0;
}

/// The index along one dim, `inner` elements apart, wrapping at `size`,
/// from the piece's first.
__global__ void iotaKernel(DType dtype, const int64_t *piece, void *y,
                           int64_t count, int64_t inner, int64_t size) {
  GRID_STRIDE(i, count) {
    storeScalar(
        dtype, y, i,
        Scalar{false, 0.0f, getPieceOffset(piece, size) + i / inner % size});
  }
}

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

enum class Combine { Sum, Max };

__device__ float combine(Combine how, float a, float b) {
  if (how == Combine::Sum)
    return a + b;
  return (b > a || isnan(b)) ? b : a;
}

/// Combines one value per thread of the block; every thread gets the result.
__device__ float blockReduce(Combine how, float value) {
  __shared__ float partial[kThreads / 32];
  __shared__ float result;
  for (int offset = 16; offset > 0; offset /= 2)
    value = combine(how, value, __shfl_down_sync(0xffffffffu, value, offset));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < blockDim.x / 32 ? partial[lane]
                                   : (how == Combine::Sum ? 0.0f : -INFINITY);
    for (int offset = 16; offset > 0; offset /= 2)
      value = combine(how, value, __shfl_down_sync(0xffffffffu, value, offset));
    if (lane == 0)
      result = value;
  }
  __syncthreads();
  float total = result;
  __syncthreads(); // `partial` and `result` are reused by the next call.
  return total;
}

__global__ void reduceRowsKernel(RowReduce kind, const float *x, float *y,
                                 int64_t cols) {
  const float *row = x + blockIdx.x * cols;
  Combine how = kind == RowReduce::Max ? Combine::Max : Combine::Sum;
  float acc = how == Combine::Sum ? 0.0f : -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    acc = combine(how, acc, row[j]);
  acc = blockReduce(how, acc);
  if (threadIdx.x == 0)
    y[blockIdx.x] = kind == RowReduce::Mean ? acc / cols : acc;
}

/// Rows [outer, size, inner] along size: block b is (b / inner, b % inner).
/// The input is scaled first; a causal row (inner is 1) sees the keys up to
/// its query, b % queries, and gives the rest no weight.
__global__ void softmaxKernel(bool log, const float *x, float *y, int64_t size,
                              int64_t inner, float scale, int64_t queries) {
  int64_t o = blockIdx.x / inner, i = blockIdx.x % inner;
  const float *in = x + o * size * inner + i;
  float *out = y + o * size * inner + i;
  int64_t seen = queries > 0 ? min(size, blockIdx.x % queries + 1) : size;
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < seen; j += blockDim.x)
    max = fmaxf(max, in[j * inner] * scale);
  max = blockReduce(Combine::Max, max);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < seen; j += blockDim.x)
    sum += expf(in[j * inner] * scale - max);
  float logSum = logf(blockReduce(Combine::Sum, sum));
  for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
    float shifted = in[j * inner] * scale - max;
    out[j * inner] = j >= seen ? 0.0f
                     : log     ? shifted - logSum
                               : expf(shifted - logSum);
  }
}

/// A row's mean (0 for RMS norm) and 1 / sqrt(variance + epsilon) (the
/// mean square for RMS norm), by the whole block. Two passes (the variance
/// around the mean), as on the CPU.
__device__ void getRowStatistics(bool rms, const float *in, int64_t cols,
                                 float epsilon, float &mean, float &rstd) {
  mean = 0.0f;
  if (!rms) {
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      sum += in[j];
    mean = blockReduce(Combine::Sum, sum) / cols;
  }
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    squares += (in[j] - mean) * (in[j] - mean);
  rstd = rsqrtf(blockReduce(Combine::Sum, squares) / cols + epsilon);
}

__global__ void normKernel(bool rms, const float *x, const float *gamma,
                           const float *beta, float *y, int64_t cols,
                           float epsilon) {
  const float *in = x + blockIdx.x * cols;
  float *out = y + blockIdx.x * cols;
  float mean, rstd;
  getRowStatistics(rms, in, cols, epsilon, mean, rstd);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    out[j] = (in[j] - mean) * rstd * gamma[j] + (beta ? beta[j] : 0.0f);
}

/// nn.layer_norm_grad / nn.rms_norm_grad, a block per row.
__global__ void normGradKernel(bool rms, const float *x, const float *gamma,
                               const float *dy, float *dx, float *xhat,
                               int64_t cols, float epsilon) {
  const float *in = x + blockIdx.x * cols, *grad = dy + blockIdx.x * cols;
  float *inputGrad = dx + blockIdx.x * cols;
  float *normalized = xhat + blockIdx.x * cols;
  float mean, rstd;
  getRowStatistics(rms, in, cols, epsilon, mean, rstd);
  // g = dy · gamma; the row means of g and g · x̂.
  float sumG = 0.0f, sumGX = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float g = grad[j] * gamma[j];
    sumG += g;
    sumGX += g * (in[j] - mean) * rstd;
  }
  float meanG = rms ? 0.0f : blockReduce(Combine::Sum, sumG) / cols;
  float meanGX = blockReduce(Combine::Sum, sumGX) / cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float n = (in[j] - mean) * rstd;
    float g = grad[j] * gamma[j];
    inputGrad[j] = rstd * (g - meanG - n * meanGX);
    normalized[j] = n;
  }
}

__device__ long long readIndex(const void *indices, bool indices64, int64_t i) {
  return indices64 ? static_cast<const long long *>(indices)[i]
                   : static_cast<const int32_t *>(indices)[i];
}

/// Records the first data-dependent error (later ones are dropped).
__device__ void recordError(KernelError *error, int32_t code, long long a,
                            long long b, long long c) {
  if (atomicCAS(reinterpret_cast<int *>(&error->code), 0, code) != 0)
    return;
  error->values[0] = a;
  error->values[1] = b;
  error->values[2] = c;
  __threadfence_system();
}

__global__ void crossEntropyKernel(const float *logits, const void *labels,
                                   bool labels64, float *y, int64_t vocab,
                                   KernelError *error) {
  const float *in = logits + blockIdx.x * vocab;
  long long label = readIndex(labels, labels64, blockIdx.x);
  if (label < 0 || label >= vocab) {
    if (threadIdx.x == 0)
      recordError(error, KernelError::LabelOutOfRange, label, blockIdx.x,
                  vocab);
    return; // The whole block returns: no barrier is left waiting.
  }
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
    max = fmaxf(max, in[j]);
  max = blockReduce(Combine::Max, max);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
    sum += expf(in[j] - max);
  sum = blockReduce(Combine::Sum, sum);
  if (threadIdx.x == 0)
    y[blockIdx.x] = max + logf(sum) - in[label];
}

//===----------------------------------------------------------------------===//
// Embeddings and masks
//===----------------------------------------------------------------------===//

__global__ void embeddingKernel(const float *table, const void *indices,
                                bool indices64, const int64_t *piece, float *y,
                                int64_t count, int64_t vocab, int64_t hidden) {
  GRID_STRIDE(i, count * hidden) {
    long long index = readIndex(indices, indices64, i / hidden) -
                      getPieceOffset(piece, vocab);
    y[i] =
        index < 0 || index >= vocab ? 0.0f : table[index * hidden + i % hidden];
  }
}

__global__ void embeddingGradKernel(const float *grad, const void *indices,
                                    bool indices64, const int64_t *piece,
                                    float *table, int64_t count, int64_t vocab,
                                    int64_t hidden) {
  GRID_STRIDE(i, count * hidden) {
    long long index = readIndex(indices, indices64, i / hidden) -
                      getPieceOffset(piece, vocab);
    if (index >= 0 && index < vocab)
      atomicAdd(table + index * hidden + i % hidden, grad[i]);
  }
}

__global__ void oneHotKernel(const void *labels, bool labels64,
                             const int64_t *piece, float *y, int64_t count,
                             int64_t depth) {
  GRID_STRIDE(i, count * depth) {
    y[i] =
        readIndex(labels, labels64, i / depth) - getPieceOffset(piece, depth) ==
                i % depth
            ? 1.0f
            : 0.0f;
  }
}

/// One thread per group and expert walks the group's choices in GShard's
/// order and fills the expert's slots; the mask is zeroed before.
__global__ void moeDispatchKernel(const void *indices, bool indices64,
                                  float *mask, int64_t groups, int64_t tokens,
                                  int64_t k, int64_t experts,
                                  int64_t capacity) {
  GRID_STRIDE(i, groups * experts) {
    int64_t group = i / experts, expert = i % experts, taken = 0;
    for (int64_t choice = 0; choice < k && taken < capacity; ++choice)
      for (int64_t token = 0; token < tokens && taken < capacity; ++token) {
        int64_t row = group * tokens + token;
        if (readIndex(indices, indices64, row * k + choice) == expert)
          mask[(row * experts + expert) * capacity + taken++] = 1.0f;
      }
  }
}

__global__ void causalMaskKernel(const float *x, float *y, int64_t count,
                                 int64_t queries, int64_t keys, float fill) {
  GRID_STRIDE(i, count) {
    int64_t key = i % keys, query = (i / keys) % queries;
    y[i] = key > query ? fill : x[i];
  }
}

__global__ void indexedAxisKernel(bool scatter, const float *from, float *to,
                                  const void *indices, bool indices64,
                                  int64_t count, int64_t pickedSize,
                                  int64_t wholeSize, int64_t inner,
                                  KernelError *error) {
  GRID_STRIDE(i, count) {
    long long index = readIndex(indices, indices64, i);
    if (index < 0 || index >= wholeSize) {
      recordError(error, KernelError::IndexOutOfRange, index, i, wholeSize);
      continue;
    }
    int64_t offset = getIndexedOffset(i, index, pickedSize, wholeSize, inner);
    if (scatter)
      atomicAdd(to + offset, from[i]);
    else
      to[i] = from[offset];
  }
}

__global__ void topKKernel(const float *x, float *values, int64_t *indices,
                           int64_t rows, int64_t size, int64_t k) {
  GRID_STRIDE(row, rows) {
    topKRow(x + row * size, size, k, values + row * k, indices + row * k);
  }
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

constexpr int kAttentionRows = 64;
constexpr int kAttentionKeys = 16;

/// Where the queries sit in the sequence: a ring block's by its index in
/// the ring, a causal piece's by its piece index, else the whole sequence
/// (in zigzag order where it is stored so).
__device__ SequencePlace getQueryPlace(const AttentionShape &n) {
  if (n.ringIndex)
    return SequencePlace::get(n.ringIndex[0] * n.queries, n.queries,
                              n.ringSize * n.queries, n.zigzag);
  if (n.causal && n.piece)
    return SequencePlace::get(n.piece[2] * n.queries, n.queries, n.queries, 0);
  return SequencePlace::get(0, n.queries, n.queries, n.zigzag);
}

/// Where the keys sit: a ring block's those of the device
/// (index - step) mod size.
__device__ SequencePlace getKeyPlace(const AttentionShape &n) {
  if (n.ringIndex)
    return SequencePlace::get((n.ringIndex[0] - n.ringStep + n.ringSize) %
                                  n.ringSize * n.keys,
                              n.keys, n.ringSize * n.keys, n.zigzag);
  return SequencePlace::get(0, n.keys, n.keys, n.zigzag);
}

/// The keys of run `run` of the keys that query `query` sees, from the
/// run's first.
__device__ int64_t visibleKeys(const AttentionShape &n,
                               const SequencePlace &queryPlace,
                               const SequencePlace &keyPlace, int64_t query,
                               int64_t run) {
  int64_t runKeys = keyPlace.getRunRows();
  return n.causal ? max(int64_t(0),
                        min(runKeys, queryPlace.getPosition(query) -
                                         keyPlace.getRunPosition(run) + 1))
                  : runKeys;
}

/// The first row of (batch, head)'s kv head in k and v.
__device__ int64_t kvRow(const AttentionShape &n, int64_t batchHead) {
  int64_t b = batchHead / n.heads, h = batchHead % n.heads;
  return (b * n.kvHeads + h / (n.heads / n.kvHeads)) * n.keys;
}

/// The shape's dropout with the step and the piece's place read on the GPU;
/// false, with the error recorded, where the piece lies outside the tensor.
__device__ bool loadDropout(const AttentionShape &n, AttentionDropout &drop) {
  drop = n.dropout;
  if (drop.rate <= 0.0f)
    return true;
  drop.step = static_cast<uint64_t>(readIndex(n.step, n.step64, 0));
  if (!n.piece)
    return true;
  int dim = drop.place.setPieceIndex(n.piece);
  if (dim < 0)
    return true;
  recordError(n.error, KernelError::PieceOutOfRange, n.piece[dim], dim,
              drop.place.shape[dim] == 0
                  ? 0
                  : drop.place.globalShape[dim] / drop.place.shape[dim]);
  return false;
}

__global__ void attentionKernel(AttentionShape n, const float *q,
                                const float *k, const float *v, float *out,
                                float *lse) {
  __shared__ float tile[kAttentionKeys * 2 * kAttentionMaxHeadDim];
  int64_t batchHead = blockIdx.x;
  int64_t query = int64_t(blockIdx.y) * kAttentionRows + threadIdx.x;
  bool active = query < n.queries;
  int64_t keyBase = kvRow(n, batchHead);
  // The condition is the block's, so that no barrier is left waiting.
  AttentionDropout drop;
  if (!loadDropout(n, drop))
    return;
  float qRow[kAttentionMaxHeadDim], acc[kAttentionMaxHeadDim];
  if (active)
    for (int e = 0; e < n.d; ++e)
      qRow[e] = q[(batchHead * n.queries + query) * n.d + e];
  for (int e = 0; e < n.dv; ++e)
    acc[e] = 0.0f;
  AttentionRowState state;
  SequencePlace queryPlace = getQueryPlace(n), keyPlace = getKeyPlace(n);
  int64_t firstQuery = int64_t(blockIdx.y) * kAttentionRows;
  int64_t lastQuery = min(n.queries, firstQuery + kAttentionRows) - 1;
  float *keys = tile, *values = tile + kAttentionKeys * n.d;
  for (int64_t run = 0; run < keyPlace.getRuns(); ++run) {
    // The run's keys that some query of the block sees (its queries may
    // be of several runs in zigzag order).
    int64_t runStart = run * keyPlace.getRunRows(), seen = 0;
    for (int64_t i = firstQuery; i <= lastQuery; ++i)
      seen = max(seen, visibleKeys(n, queryPlace, keyPlace, i, run));
    for (int64_t j0 = runStart; j0 < runStart + seen; j0 += kAttentionKeys) {
      int count = int(min(int64_t(kAttentionKeys), runStart + seen - j0));
      __syncthreads();
      for (int i = threadIdx.x; i < count * n.d; i += blockDim.x)
        keys[i] = k[(keyBase + j0) * n.d + i];
      for (int i = threadIdx.x; i < count * n.dv; i += blockDim.x)
        values[i] = v[(keyBase + j0) * n.dv + i];
      __syncthreads();
      if (active) {
        int64_t visible =
            runStart + visibleKeys(n, queryPlace, keyPlace, query, run) - j0;
        attentionRowUpdate(qRow, keys, values,
                           int(max(int64_t(0), min(int64_t(count), visible))),
                           n.d, n.dv, n.scale, acc, state, drop,
                           (batchHead * n.queries + query) * n.keys + j0);
      }
    }
  }
  if (active)
    for (int e = 0; e < n.dv; ++e)
      out[(batchHead * n.queries + query) * n.dv + e] =
          state.sum > 0.0f ? acc[e] / state.sum : 0.0f;
  if (active && lse)
    lse[batchHead * n.queries + query] =
        state.sum > 0.0f ? attentionLogSumExp(state) : -INFINITY;
}

/// Each query row's log-sum-exp and rowsum(do · o).
__global__ void attentionRowStatsKernel(AttentionShape n, const float *q,
                                        const float *k, const float *out,
                                        const float *dout, float *lse,
                                        float *rowDot, bool lseGiven) {
  GRID_STRIDE(row, n.batch * n.heads * n.queries) {
    int64_t batchHead = row / n.queries, query = row % n.queries;
    if (!lseGiven) {
      AttentionRowState state;
      SequencePlace queryPlace = getQueryPlace(n), keyPlace = getKeyPlace(n);
      for (int64_t run = 0; run < keyPlace.getRuns(); ++run)
        attentionRowUpdate(
            q + row * n.d,
            k + (kvRow(n, batchHead) + run * keyPlace.getRunRows()) * n.d,
            nullptr, int(visibleKeys(n, queryPlace, keyPlace, query, run)), n.d,
            n.dv, n.scale, nullptr, state);
      lse[row] = attentionLogSumExp(state);
    }
    rowDot[row] = attentionDot(dout + row * n.dv, out + row * n.dv, n.dv);
  }
}

__global__ void attentionQueryGradKernel(AttentionShape n, const float *q,
                                         const float *k, const float *v,
                                         const float *dout, const float *lse,
                                         const float *rowDot, float *dq) {
  AttentionDropout drop;
  if (!loadDropout(n, drop))
    return;
  GRID_STRIDE(row, n.batch * n.heads * n.queries) {
    int64_t batchHead = row / n.queries, query = row % n.queries;
    int64_t keyBase = kvRow(n, batchHead);
    SequencePlace queryPlace = getQueryPlace(n), keyPlace = getKeyPlace(n);
    float sum[kAttentionMaxHeadDim], part[kAttentionMaxHeadDim];
    for (int e = 0; e < n.d; ++e)
      sum[e] = 0.0f;
    for (int64_t run = 0; run < keyPlace.getRuns(); ++run) {
      int64_t runStart = run * keyPlace.getRunRows();
      attentionQueryGrad(
          q + row * n.d, dout + row * n.dv, rowDot[row], lse[row],
          k + (keyBase + runStart) * n.d, v + (keyBase + runStart) * n.dv,
          int(visibleKeys(n, queryPlace, keyPlace, query, run)), n.d, n.dv,
          n.scale, part, drop, row * n.keys + runStart);
      for (int e = 0; e < n.d; ++e)
        sum[e] += part[e];
    }
    for (int e = 0; e < n.d; ++e)
      dq[row * n.d + e] = sum[e];
  }
}

/// A thread per key row: the terms of every query of every head of its
/// group that sees it.
__global__ void attentionKeyGradKernel(AttentionShape n, const float *q,
                                       const float *k, const float *v,
                                       const float *dout, const float *lse,
                                       const float *rowDot, float *dk,
                                       float *dv) {
  AttentionDropout drop;
  if (!loadDropout(n, drop))
    return;
  GRID_STRIDE(row, n.batch * n.kvHeads * n.keys) {
    int64_t batchKv = row / n.keys, key = row % n.keys;
    int64_t b = batchKv / n.kvHeads, kvHead = batchKv % n.kvHeads;
    int64_t group = n.heads / n.kvHeads;
    float dkRow[kAttentionMaxHeadDim], dvRow[kAttentionMaxHeadDim];
    for (int e = 0; e < n.d; ++e)
      dkRow[e] = 0.0f;
    for (int e = 0; e < n.dv; ++e)
      dvRow[e] = 0.0f;
    SequencePlace queryPlace = getQueryPlace(n), keyPlace = getKeyPlace(n);
    int64_t position = keyPlace.getPosition(key),
            runRows = queryPlace.getRunRows();
    for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h)
      for (int64_t run = 0; run < queryPlace.getRuns(); ++run) {
        // The run's first query that sees the key.
        int64_t first =
            n.causal
                ? min(runRows, max(int64_t(0),
                                   position - queryPlace.getRunPosition(run)))
                : 0;
        int64_t base = (b * n.heads + h) * n.queries + run * runRows + first;
        if (first < runRows)
          attentionKeyGrad(k + row * n.d, v + row * n.dv, q + base * n.d,
                           dout + base * n.dv, lse + base, rowDot + base,
                           int(runRows - first), n.d, n.dv, n.scale, dkRow,
                           dvRow, drop, base * n.keys + key, n.keys);
      }
    for (int e = 0; e < n.d; ++e)
      dk[row * n.d + e] = dkRow[e];
    for (int e = 0; e < n.dv; ++e)
      dv[row * n.dv + e] = dvRow[e];
  }
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

__global__ void sgdKernel(const float *param, const float *grad, float *y,
                          int64_t count, float lr, float weightDecay) {
  GRID_STRIDE(i, count) {
    y[i] = param[i] - lr * (grad[i] + weightDecay * param[i]);
  }
}

/// A random op's numbers (see the launcher in CudaKernels.h): each thread
/// places the piece from the piece index first.
__global__ void randomKernel(const float *x, float *y, int64_t count,
                             float rate, uint64_t seed, const void *step,
                             bool step64, const int64_t *piece,
                             random::PiecePlace place, KernelError *error) {
  if (piece) {
    if (int dim = place.setPieceIndex(piece); dim >= 0) {
      if (blockIdx.x == 0 && threadIdx.x == 0)
        recordError(error, KernelError::PieceOutOfRange, piece[dim], dim,
                    place.shape[dim] == 0
                        ? 0
                        : place.globalShape[dim] / place.shape[dim]);
      return;
    }
  }
  random::Dropout drop{
      rate, seed, static_cast<uint64_t>(readIndex(step, step64, 0)), place};
  GRID_STRIDE(i, count) {
    y[i] = x ? x[i] * drop.getScale(i)
             : random::uniformAt(seed, drop.step, place.getGlobalIndex(i));
  }
}

__global__ void adamwKernel(const float *param, const void *grad,
                            DType gradType, const float *m, const float *v,
                            const void *step, bool step64, float *newParam,
                            float *newM, float *newV, int64_t count,
                            AdamWRate rate, double beta1, double beta2,
                            double epsilon, double weightDecay,
                            KernelError *error) {
  long long t = readIndex(step, step64, 0);
  if (t < 1) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      recordError(error, KernelError::StepBelowOne, t, 0, 0);
    return;
  }
  // In f32, as the CPU's update (and PyTorch's AdamW) computes.
  float inverseCorrection1 =
      static_cast<float>(1 / (1 - pow(beta1, static_cast<double>(t))));
  float inverseCorrection2 =
      static_cast<float>(1 / (1 - pow(beta2, static_cast<double>(t))));
  float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  float lr = static_cast<float>(getScheduledLr(
      rate.schedule, rate.lr, rate.minLr, rate.warmup, rate.decay, t));
  float eps = static_cast<float>(epsilon);
  float decay = static_cast<float>(weightDecay);
  float norm = rate.gradNorm ? *rate.gradNorm : 0.0f;
  bool skip = !isFiniteNorm(norm);
  float clip = rate.gradNorm
                   ? getGradientFactor(norm, rate.maxGradNorm,
                                       rate.lossScale ? *rate.lossScale : 1.0f)
                   : 1.0f;
  GRID_STRIDE(i, count) {
    // An overflow skips the step: the state stays as it is.
    if (skip) {
      newParam[i] = param[i];
      newM[i] = m[i];
      newV[i] = v[i];
      continue;
    }
    float p = param[i];
    float g = gradType == DType::F32
                  ? static_cast<const float *>(grad)[i]
                  : widenHalf(gradType, static_cast<const uint16_t *>(grad)[i]);
    if (rate.gradNorm)
      g *= clip;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    float update =
        mi * inverseCorrection1 / (sqrtf(vi * inverseCorrection2) + eps);
    newM[i] = mi;
    newV[i] = vi;
    newParam[i] = p - lr * (update + decay * p);
  }
}

/// sumSquares' first pass: block b sums the squares of its grid-stride
/// share, in a fixed order.
__global__ void sumSquaresKernel(const void *x, DType dtype, int64_t count,
                                 double *partials) {
  __shared__ double sums[kThreads];
  double sum = 0;
  GRID_STRIDE(i, count) {
    double value = dtype == DType::F32
                       ? static_cast<const float *>(x)[i]
                       : widenHalf(dtype, static_cast<const uint16_t *>(x)[i]);
    sum += value * value;
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sums[0];
}

/// sumSquares' second pass: the blocks' sums, in order.
__global__ void sumPartialsKernel(const double *partials, float *result) {
  double sum = 0;
  for (int b = 0; b < kSumSquaresBlocks; ++b)
    sum += partials[b];
  *result = static_cast<float>(sum);
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

namespace tessera::runtime::cuda {

void copyStrided(const void *src, void *dst, int elementBytes,
                 const StridedCopy &copy, cudaStream_t stream) {
  int64_t count = copy.getNumElements();
  if (count == 0)
    return;
  withElementType(elementBytes, [&](auto type) {
    using T = decltype(type);
    copyStridedKernel<T><<<getBlocks(count), kThreads, 0, stream>>>(
        static_cast<const T *>(src), static_cast<T *>(dst), copy, count);
  });
}

void map(MapOp op, const float *a, const float *b, float *y, int64_t count,
         cudaStream_t stream) {
  if (count > 0)
    mapKernel<<<getBlocks(count), kThreads, 0, stream>>>(op, a, b, y, count);
}

__global__ void fusedKernel(FusedProgram program, int64_t count) {
  GRID_STRIDE(i, count) { evaluateFused(program, i); }
}

void fused(const FusedProgram &program, cudaStream_t stream) {
  int64_t count = 1;
  for (int d = 0; d < program.rank; ++d)
    count *= program.shape[d];
  if (count > 0)
    fusedKernel<<<getBlocks(count), kThreads, 0, stream>>>(program, count);
}

void mapHalf(MapOp op, DType dtype, const uint16_t *a, const uint16_t *b,
             uint16_t *y, int64_t count, cudaStream_t stream) {
  if (count > 0)
    mapHalfKernel<<<getBlocks(count), kThreads, 0, stream>>>(op, dtype, a, b, y,
                                                             count);
}

void compare(int predicate, DType dtype, const void *a, const void *b,
             uint8_t *y, int64_t count, cudaStream_t stream) {
  if (count == 0)
    return;
  auto launch = [&](auto type) {
    using T = decltype(type);
    compareKernel<T><<<getBlocks(count), kThreads, 0, stream>>>(
        predicate, static_cast<const T *>(a), static_cast<const T *>(b), y,
        count);
  };
  switch (dtype) {
  case DType::F32:
    return launch(float());
  case DType::I32:
    return launch(int32_t());
  case DType::I64:
    return launch(static_cast<long long>(0));
  case DType::I1:
    return launch(uint8_t());
  default:
    return;
  }
}

void select(const uint8_t *condition, const void *onTrue, const void *onFalse,
            void *y, int elementBytes, int64_t count, cudaStream_t stream) {
  if (count == 0)
    return;
  withElementType(elementBytes, [&](auto type) {
    using T = decltype(type);
    selectKernel<T><<<getBlocks(count), kThreads, 0, stream>>>(
        condition, static_cast<const T *>(onTrue),
        static_cast<const T *>(onFalse), static_cast<T *>(y), count);
  });
}

void cast(DType from, const void *x, DType to, void *y, int64_t count,
          cudaStream_t stream) {
  if (count > 0)
    castKernel<<<getBlocks(count), kThreads, 0, stream>>>(from, x, to, y,
                                                          count);
}

void clamp(const float *x, float *y, int64_t count, float lo, float hi,
           cudaStream_t stream) {
  if (count > 0)
    clampKernel<<<getBlocks(count), kThreads, 0, stream>>>(x, y, count, lo, hi);
}

void drawRandom(const float *x, float *y, int64_t count, float rate,
                uint64_t seed, const void *step, bool step64,
                const int64_t *piece, const random::PiecePlace &place,
                KernelError *error, cudaStream_t stream) {
  if (count > 0)
    randomKernel<<<getBlocks(count), kThreads, 0, stream>>>(
        x, y, count, rate, seed, step, step64, piece, place, error);
}

void iota(DType dtype, const int64_t *piece, void *y, int64_t count,
          int64_t inner, int64_t size, cudaStream_t stream) {
  if (count > 0)
    iotaKernel<<<getBlocks(count), kThreads, 0, stream>>>(dtype, piece, y,
                                                          count, inner, size);
}

void fill(void *y, int elementBytes, uint64_t pattern, int64_t count,
          cudaStream_t stream) {
  if (count == 0)
    return;
  withElementType(elementBytes, [&](auto type) {
    using T = decltype(type);
    fillKernel<T><<<getBlocks(count), kThreads, 0, stream>>>(
        static_cast<T *>(y), static_cast<T>(pattern), count);
  });
}

void reduceRows(RowReduce kind, const float *x, float *y, int64_t rows,
                int64_t cols, cudaStream_t stream) {
  if (rows > 0)
    reduceRowsKernel<<<rows, kThreads, 0, stream>>>(kind, x, y, cols);
}

void softmax(bool log, const float *x, float *y, int64_t outer, int64_t size,
             int64_t inner, float scale, int64_t queries, cudaStream_t stream) {
  if (outer * inner > 0 && size > 0)
    softmaxKernel<<<outer * inner, kThreads, 0, stream>>>(
        log, x, y, size, inner, scale, queries);
}

void norm(bool rms, const float *x, const float *gamma, const float *beta,
          float *y, int64_t rows, int64_t cols, float epsilon,
          cudaStream_t stream) {
  if (rows > 0 && cols > 0)
    normKernel<<<rows, kThreads, 0, stream>>>(rms, x, gamma, beta, y, cols,
                                              epsilon);
}

void normGrad(bool rms, const float *x, const float *gamma, const float *dy,
              float *dx, float *xhat, int64_t rows, int64_t cols, float epsilon,
              cudaStream_t stream) {
  if (rows > 0 && cols > 0)
    normGradKernel<<<rows, kThreads, 0, stream>>>(rms, x, gamma, dy, dx, xhat,
                                                  cols, epsilon);
}

void crossEntropy(const float *logits, const void *labels, bool labels64,
                  float *y, int64_t rows, int64_t vocab, KernelError *error,
                  cudaStream_t stream) {
  if (rows > 0)
    crossEntropyKernel<<<rows, kThreads, 0, stream>>>(logits, labels, labels64,
                                                      y, vocab, error);
}

void embedding(const float *table, const void *indices, bool indices64,
               const int64_t *piece, float *y, int64_t count, int64_t vocab,
               int64_t hidden, cudaStream_t stream) {
  if (count * hidden > 0)
    embeddingKernel<<<getBlocks(count * hidden), kThreads, 0, stream>>>(
        table, indices, indices64, piece, y, count, vocab, hidden);
}

void embeddingGrad(const float *grad, const void *indices, bool indices64,
                   const int64_t *piece, float *table, int64_t count,
                   int64_t vocab, int64_t hidden, cudaStream_t stream) {
  cudaMemsetAsync(table, 0, vocab * hidden * sizeof(float), stream);
  if (count * hidden > 0)
    embeddingGradKernel<<<getBlocks(count * hidden), kThreads, 0, stream>>>(
        grad, indices, indices64, piece, table, count, vocab, hidden);
}

void oneHot(const void *labels, bool labels64, const int64_t *piece, float *y,
            int64_t count, int64_t depth, cudaStream_t stream) {
  if (count * depth > 0)
    oneHotKernel<<<getBlocks(count * depth), kThreads, 0, stream>>>(
        labels, labels64, piece, y, count, depth);
}

void moeDispatch(const void *indices, bool indices64, float *mask,
                 int64_t groups, int64_t tokens, int64_t k, int64_t experts,
                 int64_t capacity, cudaStream_t stream) {
  int64_t count = groups * tokens * experts * capacity;
  if (count == 0)
    return;
  cudaMemsetAsync(mask, 0, count * sizeof(float), stream);
  moeDispatchKernel<<<getBlocks(groups * experts), kThreads, 0, stream>>>(
      indices, indices64, mask, groups, tokens, k, experts, capacity);
}

void causalMask(const float *x, float *y, int64_t count, int64_t queries,
                int64_t keys, float fill, cudaStream_t stream) {
  if (count > 0)
    causalMaskKernel<<<getBlocks(count), kThreads, 0, stream>>>(
        x, y, count, queries, keys, fill);
}

void indexedAxis(bool scatter, const float *from, float *to,
                 const void *indices, bool indices64, int64_t count,
                 int64_t pickedSize, int64_t wholeSize, int64_t inner,
                 int64_t wholeCount, KernelError *error, cudaStream_t stream) {
  if (scatter && wholeCount > 0)
    fillKernel<<<getBlocks(wholeCount), kThreads, 0, stream>>>(to, 0.0f,
                                                               wholeCount);
  if (count > 0)
    indexedAxisKernel<<<getBlocks(count), kThreads, 0, stream>>>(
        scatter, from, to, indices, indices64, count, pickedSize, wholeSize,
        inner, error);
}

void topK(const float *x, float *values, int64_t *indices, int64_t rows,
          int64_t size, int64_t k, cudaStream_t stream) {
  if (rows > 0)
    topKKernel<<<getBlocks(rows), kThreads, 0, stream>>>(x, values, indices,
                                                         rows, size, k);
}

void attention(const AttentionShape &shape, const float *q, const float *k,
               const float *v, float *out, float *lse, cudaStream_t stream) {
  if (shape.batch * shape.heads == 0 || shape.queries == 0)
    return;
  dim3 blocks(unsigned(shape.batch * shape.heads),
              unsigned((shape.queries + kAttentionRows - 1) / kAttentionRows));
  attentionKernel<<<blocks, kAttentionRows, 0, stream>>>(shape, q, k, v, out,
                                                         lse);
}

void attentionGrad(const AttentionShape &shape, const float *q, const float *k,
                   const float *v, const float *out, const float *dout,
                   float *dq, float *dk, float *dv, float *lse, float *rowDot,
                   bool lseGiven, cudaStream_t stream) {
  int64_t queryRows = shape.batch * shape.heads * shape.queries;
  int64_t keyRows = shape.batch * shape.kvHeads * shape.keys;
  if (queryRows > 0) {
    attentionRowStatsKernel<<<getBlocks(queryRows), kThreads, 0, stream>>>(
        shape, q, k, out, dout, lse, rowDot, lseGiven);
    attentionQueryGradKernel<<<getBlocks(queryRows), kThreads, 0, stream>>>(
        shape, q, k, v, dout, lse, rowDot, dq);
  }
  if (keyRows > 0)
    attentionKeyGradKernel<<<getBlocks(keyRows), kThreads, 0, stream>>>(
        shape, q, k, v, dout, lse, rowDot, dk, dv);
}

void sgd(const float *param, const float *grad, float *y, int64_t count,
         float lr, float weightDecay, cudaStream_t stream) {
  if (count > 0)
    sgdKernel<<<getBlocks(count), kThreads, 0, stream>>>(param, grad, y, count,
                                                         lr, weightDecay);
}

void adamw(const float *param, const void *grad, DType gradType, const float *m,
           const float *v, const void *step, bool step64, float *newParam,
           float *newM, float *newV, int64_t count, const AdamWRate &rate,
           double beta1, double beta2, double epsilon, double weightDecay,
           KernelError *error, cudaStream_t stream) {
  adamwKernel<<<getBlocks(count), kThreads, 0, stream>>>(
      param, grad, gradType, m, v, step, step64, newParam, newM, newV, count,
      rate, beta1, beta2, epsilon, weightDecay, error);
}

void sumSquares(const void *x, DType dtype, int64_t count, double *partials,
                float *result, cudaStream_t stream) {
  sumSquaresKernel<<<kSumSquaresBlocks, kThreads, 0, stream>>>(x, dtype, count,
                                                               partials);
  sumPartialsKernel<<<1, 1, 0, stream>>>(partials, result);
}

} // namespace tessera::runtime::cuda
