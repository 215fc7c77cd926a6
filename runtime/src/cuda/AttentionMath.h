//===- AttentionMath.h - The CUDA attention kernels' per-row math -*- C++
//-*-===//
//
// What one thread of the nn.attention and nn.attention_grad kernels computes
// for its query (or key) row, as functions that nvcc compiles for the GPU
// and any C++ compiler for the host, where CudaOnHostTest runs them against
// the CPU kernels. The forward is FlashAttention's online softmax one key at
// a time; the backward recomputes each probability from the row's
// log-sum-exp, so no s x t matrix is ever held.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_ATTENTIONMATH_H
#define TESSERA_RUNTIME_CUDA_ATTENTIONMATH_H

#include "ElementMath.h"
#include "tessera/runtime/Random.h"

namespace tessera::runtime::cuda {

/// The largest head dim (d and dv) the GPU kernels hold in a thread's
/// registers.
constexpr int kAttentionMaxHeadDim = 256;

/// A query row's online softmax over the keys seen so far: the largest
/// score and the sum of exp(score - max).
struct AttentionRowState {
  float max = -INFINITY;
  float sum = 0.0f;
};

/// Dropout of the probabilities [b, heads, s, t] (rate 0: none), as
/// nn.attention's CPU kernels draw it.
using AttentionDropout = random::Dropout;

TESSERA_HOST_DEVICE inline float attentionDot(const float *x, const float *y,
                                              int n) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i)
    sum += x[i] * y[i];
  return sum;
}

/// Adds `count` keys (rows of `keys`, d wide, and of `values`, dv wide) to
/// query `q`'s running output `acc` (dv wide, weighted by exp(score - max)
/// and `drop`'s factor of the probability at `drawIndex` + j) and its state;
/// with `values` null, the state alone (the log-sum-exp).
TESSERA_HOST_DEVICE inline void
attentionRowUpdate(const float *q, const float *keys, const float *values,
                   int count, int d, int dv, float scale, float *acc,
                   AttentionRowState &state, const AttentionDropout &drop = {},
                   int64_t drawIndex = 0) {
  for (int j = 0; j < count; ++j) {
    float score = scale * attentionDot(q, keys + j * d, d);
    if (score > state.max) {
      // The running terms were weighted against the old maximum.
      float rescale = expf(state.max - score);
      state.sum *= rescale;
      if (values)
        for (int e = 0; e < dv; ++e)
          acc[e] *= rescale;
      state.max = score;
    }
    float p = expf(score - state.max);
    state.sum += p;
    if (!values)
      continue;
    float kept = p * drop.getScale(drawIndex + j);
    for (int e = 0; e < dv; ++e)
      acc[e] += kept * values[j * dv + e];
  }
}

/// The row's log-sum-exp of its scores.
TESSERA_HOST_DEVICE inline float
attentionLogSumExp(const AttentionRowState &state) {
  return state.max + logf(state.sum);
}

/// dq of one query row over `count` keys: with p = exp(scale q·k - lse),
/// z `drop`'s factor of the probability at `drawIndex` + j and
/// ds = p (z do·v - rowDot), dq = scale Σ ds k (dq is overwritten).
TESSERA_HOST_DEVICE inline void
attentionQueryGrad(const float *q, const float *dout, float rowDot, float lse,
                   const float *keys, const float *values, int count, int d,
                   int dv, float scale, float *dq,
                   const AttentionDropout &drop = {}, int64_t drawIndex = 0) {
  for (int e = 0; e < d; ++e)
    dq[e] = 0.0f;
  for (int j = 0; j < count; ++j) {
    float p = expf(scale * attentionDot(q, keys + j * d, d) - lse);
    float ds = p * (drop.getScale(drawIndex + j) *
                        attentionDot(dout, values + j * dv, dv) -
                    rowDot);
    for (int e = 0; e < d; ++e)
      dq[e] += scale * ds * keys[j * d + e];
  }
}

/// Adds to key row `k`'s gradients `dk` (d wide) and `dv` (dv wide) the
/// terms of `count` queries (rows of `queries` and of `dout`, with their
/// log-sum-exps and rowsum(do · o)), z `drop`'s factor of query i's
/// probability at `drawIndex` + i `drawStride`: dv += z p do,
/// dk += scale p (z do·v - rowDot) q.
TESSERA_HOST_DEVICE inline void
attentionKeyGrad(const float *k, const float *v, const float *queries,
                 const float *dout, const float *lse, const float *rowDot,
                 int count, int d, int dvDim, float scale, float *dk, float *dv,
                 const AttentionDropout &drop = {}, int64_t drawIndex = 0,
                 int64_t drawStride = 0) {
  for (int i = 0; i < count; ++i) {
    const float *q = queries + i * d, *g = dout + i * dvDim;
    float p = expf(scale * attentionDot(q, k, d) - lse[i]);
    float z = drop.getScale(drawIndex + i * drawStride);
    float ds = p * (z * attentionDot(g, v, dvDim) - rowDot[i]);
    for (int e = 0; e < dvDim; ++e)
      dv[e] += z * p * g[e];
    for (int e = 0; e < d; ++e)
      dk[e] += scale * ds * q[e];
  }
}

} // namespace tessera::runtime::cuda

#endif // TESSERA_RUNTIME_CUDA_ATTENTIONMATH_H
