//===- CudaKernels.h - Launchers of the CUDA backend's kernels --*- C++ -*-===//
//
// Host functions that queue one CUDA kernel each on a stream. They take
// device pointers and sizes that CudaDevice has already checked (through
// checkKernel), compute in f32 (16-bit floats are widened by `cast` around
// them, except in GEMMs) and report launch failures through
// cudaGetLastError. Data-dependent errors (a label outside the vocabulary, a
// step below 1) are written to a KernelError in host-mapped memory, which
// the device reads when it synchronizes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_CUDAKERNELS_H
#define TESSERA_RUNTIME_CUDA_CUDAKERNELS_H

#include "AttentionMath.h"
#include "ElementMath.h"
#include "FusedMath.h"
#include "Layouts.h"
#include "tessera/runtime/LrSchedule.h"
#include "tessera/runtime/Random.h"
#include "tessera/runtime/SequencePlace.h"
#include "tessera/runtime/Tensor.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace tessera::runtime::cuda {

/// The first data-dependent error of the kernels since it was cleared.
struct KernelError {
  enum Code : int32_t {
    None = 0,
    LabelOutOfRange = 1,
    StepBelowOne = 2,
    IndexOutOfRange = 3,
    PieceOutOfRange = 4
  };
  int32_t code;
  /// LabelOutOfRange: label, position, vocabulary; StepBelowOne: step;
  /// IndexOutOfRange (gather, scatter_add): index, position, axis size;
  /// PieceOutOfRange (random ops): piece index, dim, pieces in the dim.
  int64_t values[3];
};

/// Runs a planned strided copy (Layouts.h): one kernel serves broadcast,
/// transpose, slice, concat and the collectives' packing.
void copyStrided(const void *src, void *dst, int elementBytes,
                 const StridedCopy &copy, cudaStream_t stream);

/// y[i] = op(a[i]) or op(a[i], b[i]); y may alias a or b.
void map(MapOp op, const float *a, const float *b, float *y, int64_t count,
         cudaStream_t stream);
/// The same on bf16 or f16 tensors (all of `dtype`), in f32 per element.
void mapHalf(MapOp op, DType dtype, const uint16_t *a, const uint16_t *b,
             uint16_t *y, int64_t count, cudaStream_t stream);

/// nn.fused: a thread per element evaluates the program (evaluateFused).
void fused(const FusedProgram &program, cudaStream_t stream);

/// nn.compare's predicates 0..5 (eq, ne, lt, le, gt, ge) on f32, i32, i64 or
/// i1 elements.
void compare(int predicate, DType dtype, const void *a, const void *b,
             uint8_t *y, int64_t count, cudaStream_t stream);
/// y[i] = condition[i] ? onTrue[i] : onFalse[i], elements of any size.
void select(const uint8_t *condition, const void *onTrue, const void *onFalse,
            void *y, int elementBytes, int64_t count, cudaStream_t stream);
/// nn.cast between f32, bf16, f16, i32, i64 and i1 (as the CPU kernel:
/// float to integer truncates and saturates, NaN gives 0; to i1 tests
/// `!= 0`).
void cast(DType from, const void *x, DType to, void *y, int64_t count,
          cudaStream_t stream);
/// nn.clamp (applyClamp) of each element.
void clamp(const float *x, float *y, int64_t count, float lo, float hi,
           cudaStream_t stream);
/// nn.random_uniform (x null) or nn.dropout of x at `rate`: the numbers of
/// `place` (its offsets zero) for the key (`seed`, the step read from
/// `step`), the piece at the index `piece` reads per dim (null: the whole
/// tensor).
void drawRandom(const float *x, float *y, int64_t count, float rate,
                uint64_t seed, const void *step, bool step64,
                const int64_t *piece, const random::PiecePlace &place,
                KernelError *error, cudaStream_t stream);
/// nn.iota in any element type: y[i] is (i / inner) % size, from the
/// first index of the piece `piece` (device memory, or null) places.
void iota(DType dtype, const int64_t *piece, void *y, int64_t count,
          int64_t inner, int64_t size, cudaStream_t stream);
/// Every element of y is the `elementBytes` low bytes of `pattern`.
void fill(void *y, int elementBytes, uint64_t pattern, int64_t count,
          cudaStream_t stream);

enum class RowReduce : int32_t { Sum, Max, Mean };
/// y[r] = reduce(x[r, 0..cols)); a NaN in a max sticks.
void reduceRows(RowReduce kind, const float *x, float *y, int64_t rows,
                int64_t cols, cudaStream_t stream);
/// Softmax (or log-softmax) of x times `scale` viewed as [outer, size,
/// inner] along size; with `queries` above 0 (a causal softmax, inner 1),
/// row r sees only its first r % queries + 1 entries, the rest 0.
void softmax(bool log, const float *x, float *y, int64_t outer, int64_t size,
             int64_t inner, float scale, int64_t queries, cudaStream_t stream);
/// Layer norm (with beta) or RMS norm (beta null, `rms`) over each row.
void norm(bool rms, const float *x, const float *gamma, const float *beta,
          float *y, int64_t rows, int64_t cols, float epsilon,
          cudaStream_t stream);
/// The input gradient dx and normalized input x̂ of layer norm (or, with
/// `rms`, RMS norm) for the result gradient dy, over each row.
void normGrad(bool rms, const float *x, const float *gamma, const float *dy,
              float *dx, float *xhat, int64_t rows, int64_t cols, float epsilon,
              cudaStream_t stream);
/// y[r] = logsumexp(logits[r]) - logits[r, label[r]].
void crossEntropy(const float *logits, const void *labels, bool labels64,
                  float *y, int64_t rows, int64_t vocab, KernelError *error,
                  cudaStream_t stream);
/// `piece` (device memory, or null for a whole dim): the index of this
/// device's piece of the positioned dim (nn.OffsetOpInterface), whose
/// positions start at piece × the local size.
/// Rows of `table` at `indices` (zero rows outside [0, vocab)).
void embedding(const float *table, const void *indices, bool indices64,
               const int64_t *piece, float *y, int64_t count, int64_t vocab,
               int64_t hidden, cudaStream_t stream);
/// `table` = the rows of `grad` summed at `indices` (outside: dropped).
void embeddingGrad(const float *grad, const void *indices, bool indices64,
                   const int64_t *piece, float *table, int64_t count,
                   int64_t vocab, int64_t hidden, cudaStream_t stream);
void oneHot(const void *labels, bool labels64, const int64_t *piece, float *y,
            int64_t count, int64_t depth, cudaStream_t stream);
/// nn.moe_dispatch: `mask` [groups, tokens, experts, capacity] from the
/// choices `indices` [groups, tokens, k].
void moeDispatch(const void *indices, bool indices64, float *mask,
                 int64_t groups, int64_t tokens, int64_t k, int64_t experts,
                 int64_t capacity, cudaStream_t stream);
/// x with key > query set to `fill`, over [..., queries, keys].
void causalMask(const float *x, float *y, int64_t count, int64_t queries,
                int64_t keys, float fill, cudaStream_t stream);
/// nn.gather (`scatter` false: the whole input `from` read into the picked
/// result `to`) or nn.scatter_add (true: the picked source `from` added
/// into the whole result `to`, zeroed first, atomically). The picked
/// tensor is laid out [outer, pickedSize, inner] like the indices (`count`
/// elements), the whole one [outer, wholeSize, inner] (`wholeCount`). An
/// index out of range is recorded in `error`.
void indexedAxis(bool scatter, const float *from, float *to,
                 const void *indices, bool indices64, int64_t count,
                 int64_t pickedSize, int64_t wholeSize, int64_t inner,
                 int64_t wholeCount, KernelError *error, cudaStream_t stream);
/// nn.top_k of `rows` rows of `size`: a thread per row (topKRow).
void topK(const float *x, float *values, int64_t *indices, int64_t rows,
          int64_t size, int64_t k, cudaStream_t stream);

/// nn.attention's sizes: q [batch, heads, queries, d], k [batch, kvHeads,
/// keys, d], v [batch, kvHeads, keys, dv]; d and dv at most
/// kAttentionMaxHeadDim.
struct AttentionShape {
  int64_t batch, heads, kvHeads, queries, keys;
  int d, dv;
  float scale;
  bool causal;
  /// Dropout of the probabilities: its rate, seed and the piece's shape
  /// (AttentionDropout), completed on the GPU from the step counter at
  /// `step` and the piece index at `piece` (null: the whole tensor), which
  /// a kernel checks into `error`.
  AttentionDropout dropout = {};
  const void *step = nullptr;
  bool step64 = false;
  const int64_t *piece = nullptr;
  /// A ring block (nn.attention_block): the device's index in the ring
  /// (device memory), the step and the ring's size; its queries start at
  /// the index times them, its keys at (index - step) mod size times them.
  const int64_t *ringIndex = nullptr;
  int64_t ringStep = 0, ringSize = 1;
  /// The sequence stored in zigzag order of 2 zigzag chunks
  /// (SequencePlace), or in natural order where 0.
  int64_t zigzag = 0;
  KernelError *error = nullptr;
};
/// nn.attention: a block per (batch, head) and 64 queries, a thread per
/// query, the keys and values staged through shared memory in tiles; with
/// `lse`, each query row's log-sum-exp there too (-infinity, with an output
/// of 0, where the row sees no key: nn.attention_block).
void attention(const AttentionShape &shape, const float *q, const float *k,
               const float *v, float *out, float *lse, cudaStream_t stream);
/// nn.attention_grad: each query row's log-sum-exp and rowsum(do · o) into
/// `lse` and `rowDot` (batch · heads · queries floats each), then dq a
/// thread per query row, and dk and dv a thread per key row. With
/// `lseGiven` (nn.attention_block_grad), `lse` holds the rows'
/// log-sum-exps already and only rowDot is made.
void attentionGrad(const AttentionShape &shape, const float *q, const float *k,
                   const float *v, const float *out, const float *dout,
                   float *dq, float *dk, float *dv, float *lse, float *rowDot,
                   bool lseGiven, cudaStream_t stream);
void sgd(const float *param, const float *grad, float *y, int64_t count,
         float lr, float weightDecay, cudaStream_t stream);
/// An AdamW update's learning rate by step (getScheduledLr) and its
/// clipping: with `gradNorm` (device memory), the gradient is scaled by
/// getGradientFactor(*gradNorm, maxGradNorm, *lossScale or 1), and a norm
/// that is not finite skips the step.
struct AdamWRate {
  LrSchedule schedule;
  double lr, minLr;
  int64_t warmup, decay;
  const float *gradNorm;
  float maxGradNorm;
  const float *lossScale;
};
/// AdamW with the step read from device memory (bias corrections and the
/// learning rate per step); the gradient is f32, or bf16/f16 (`gradType`)
/// widened as it is read.
void adamw(const float *param, const void *grad, DType gradType, const float *m,
           const float *v, const void *step, bool step64, float *newParam,
           float *newM, float *newV, int64_t count, const AdamWRate &rate,
           double beta1, double beta2, double epsilon, double weightDecay,
           KernelError *error, cudaStream_t stream);
/// Blocks of sumSquares' first pass: the size of its `partials`.
constexpr int kSumSquaresBlocks = 256;
/// nn.sum_squares of `count` f32 or bf16/f16 elements into `result` (one
/// f32), in double: a fixed grid's blocks sum into `partials`, which one
/// block sums in order, so that the sum is the same every run.
void sumSquares(const void *x, DType dtype, int64_t count, double *partials,
                float *result, cudaStream_t stream);

} // namespace tessera::runtime::cuda

#endif // TESSERA_RUNTIME_CUDA_CUDAKERNELS_H
