//===- AttentionKernels.cpp - The CPU's attention kernels -----------------===//
//
// nn.attention and its gradient (FlashAttention-style tiles), the ring
// blocks of context parallelism and nn.causal_mask.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "VectorMath.h"
#include "tessera/runtime/Random.h"
#include "tessera/runtime/SequencePlace.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <limits>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

namespace {
/// nn.attention's sizes: q [b, heads, s, d], k [b, kv, t, d], v [b, kv, t,
/// dv], and its attributes.
struct AttentionDims {
  int64_t batch, heads, kvHeads, queries, keys, d, dv;
  float scale;
  bool causal;
  /// Dropout of the probabilities [b, heads, s, t].
  random::Dropout dropout;

  /// The dropout's factors of `count` probabilities of (b, h, query) from
  /// key `key` on.
  void getKeep(int64_t b, int64_t h, int64_t query, int64_t key, int64_t count,
               float *scales) const {
    dropout.getRowScales(((b * heads + h) * queries + query) * keys + key,
                         count, scales);
  }

  /// Where the queries and the keys sit in the sequence: a piece of the
  /// queries, a ring block's, or a sequence stored in zigzag order.
  SequencePlace queryPlace, keyPlace;

  /// The keys of run `run` of the keys (SequencePlace) that query `query`
  /// sees: the run's first ones, all of them or with `causal` those up to
  /// its position.
  int64_t getVisibleKeys(int64_t query, int64_t run) const {
    int64_t runKeys = keyPlace.getRunRows();
    return causal ? std::clamp<int64_t>(queryPlace.getPosition(query) -
                                            keyPlace.getRunPosition(run) + 1,
                                        0, runKeys)
                  : runKeys;
  }
  /// The rows of the query tile from `query` on: at most `tile`, within
  /// its run of the queries (whose positions follow one another).
  int64_t getQueryTileRows(int64_t query, int64_t tile) const {
    int64_t runRows = queryPlace.getRunRows();
    return std::min({tile, queries - query, runRows - query % runRows});
  }
  /// Offsets of (batch, head)'s rows in q (and the result), and of its kv
  /// head's in k and v.
  int64_t getQueryOffset(int64_t b, int64_t h) const {
    return (b * heads + h) * queries;
  }
  int64_t getKeyOffset(int64_t b, int64_t h) const {
    return (b * kvHeads + h / (heads / kvHeads)) * keys;
  }
};

/// The query and key tiles of the CPU kernels: a block of scores of
/// kQueryTile x kKeyTile is the only memory beyond O(s).
constexpr int64_t kQueryTile = 64, kKeyTile = 256;
/// The backward keeps a query tile's scores from its log-sum-exp pass to
/// its gradient pass where they fit in this many floats (4 MiB: keys up
/// to 16384), and makes them again where they do not.
constexpr int64_t kKeptScores = int64_t(1) << 20;

/// A key tile a query tile sees some of: keys `start` to `start + cols`,
/// within run `run` of the keys (SequencePlace), which begins at key
/// `runStart`; `offset` keys of the query tile's earlier key tiles before
/// it.
struct KeyTile {
  int64_t start, cols, run, runStart, offset;

  /// The tile's keys that query `query` sees, from its first.
  int64_t getVisible(const AttentionDims &n, int64_t query) const {
    return std::clamp<int64_t>(runStart + n.getVisibleKeys(query, run) - start,
                               0, cols);
  }
};

/// The key tiles that the query tile of `rows` from `query` sees some of:
/// per run of the keys, its keys up to those its last query sees (the
/// queries of a tile are of one run), in kKeyTile tiles.
void getKeyTiles(const AttentionDims &n, int64_t query, int64_t rows,
                 std::vector<KeyTile> &tiles) {
  tiles.clear();
  int64_t offset = 0;
  for (int64_t run = 0; run < n.keyPlace.getRuns(); ++run) {
    int64_t runStart = run * n.keyPlace.getRunRows();
    int64_t end = runStart + n.getVisibleKeys(query + rows - 1, run);
    for (int64_t start = runStart; start < end; start += kKeyTile) {
      int64_t cols = std::min(kKeyTile, end - start);
      tiles.push_back({start, cols, run, runStart, offset});
      offset += cols;
    }
  }
}
} // namespace

/// The sizes and places of an attention kernel whose check accepted it
/// (`checked`), with the dropout's draw and the pieces' places read from
/// its inputs. Fails (none, a data error recorded) where a piece index lies
/// outside the draw.
static std::optional<AttentionDims>
getAttentionDims(KernelCall &c, const AttentionInputs &checked) {
  AttentionDims n{checked.batch,   checked.heads,   checked.kvHeads,
                  checked.queries, checked.keys,    checked.d,
                  checked.dv,      checked.scale,   checked.causal};
  n.dropout.rate = checked.dropoutRate;
  n.queryPlace = SequencePlace::get(0, n.queries, n.queries, 0);
  n.keyPlace = SequencePlace::get(0, n.keys, n.keys, 0);
  std::vector<int64_t> draw = {n.batch, n.heads, n.queries, n.keys};
  if (checked.stepInput >= 0) {
    if (!getRandomDraw(c, checked.stepInput, draw, n.dropout.seed,
                       n.dropout.step, n.dropout.place))
      return std::nullopt;
  } else if (checked.pieceInput >= 0) {
    // A causal piece without dropout: the piece places the queries alone.
    const std::vector<int64_t> &global = *c.getList("global_shape");
    random::makePiecePlace(draw, global, n.dropout.place);
    const int64_t *index = c.in(checked.pieceInput).as<int64_t>();
    if (int dim = n.dropout.place.setPieceIndex(index); dim >= 0) {
      c.failOnData("piece ", index[dim], " of size ", draw[dim],
                   " lies outside dim ", dim, " of size ", global[dim]);
      return std::nullopt;
    }
  }
  // A causal piece of the queries starts at its piece index times them.
  if (n.causal && checked.pieceInput >= 0)
    n.queryPlace = SequencePlace::get(
        c.in(checked.pieceInput).as<int64_t>()[2] * n.queries, n.queries,
        n.queries, 0);
  if (checked.zigzag != 0) {
    // The whole sequence, stored in zigzag order.
    n.queryPlace = SequencePlace::get(0, n.queries, n.queries, checked.zigzag);
    n.keyPlace = SequencePlace::get(0, n.keys, n.keys, checked.zigzag);
  }
  return n;
}

/// The largest of x[j] for j < n (-inf for none), in sixteen lanes that
/// vectorise: a row's running maximum is otherwise a chain of dependent
/// compares, a fifth of the attention kernels' time.
TESSERA_CLONES static float maxInLanes(const float *x, int64_t n) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t whole = n - n % kLanes;
  for (int64_t j = 0; j < whole; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k)
      lanes[k] = std::max(lanes[k], x[j + k]);
  for (int64_t j = whole; j < n; ++j)
    lanes[j - whole] = std::max(lanes[j - whole], x[j]);
  float largest = lanes[0];
  for (int64_t k = 1; k < kLanes; ++k)
    largest = std::max(largest, lanes[k]);
  return largest;
}

/// x[j] = exp(x[j] - shift) for j < n; answers their sum.
static float expShiftedAndSum(float *x, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j)
    x[j] -= shift;
  cpu::vectorExp(x, x, n);
  return static_cast<float>(sumInLanes(n, [&](int64_t j) { return x[j]; }));
}

/// scores[r][c] = scale · q[r] · k[c] for a tile of `rows` queries and
/// `cols` keys (row-major, `cols` wide).
static void scoreTile(const AttentionDims &n, const float *q, const float *k,
                      int64_t rows, int64_t cols, float *scores) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, n.d, n.scale,
              q, n.d, k, n.d, 0.0f, scores, cols);
}

/// nn.attention: per (batch, head), query tiles against key tiles with an
/// online softmax (FlashAttention's forward): each tile's scores are made,
/// exponentiated against the running row maximum, and multiplied into the
/// running output, which is rescaled when the maximum grows.
/// The forward of `n` into `out`, and each query row's log-sum-exp into
/// `lse` where given (-infinity, with an output of 0, for a row that sees
/// no key).
static void computeAttention(const AttentionDims &n, const float *q,
                             const float *k, const float *v, float *out,
                             float *lse) {
  const float minusInfinity = -std::numeric_limits<float>::infinity();
  // The (batch, head) pairs split over the kernel threads.
  cpu::parallelFor(n.batch * n.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kQueryTile * kKeyTile);
    std::vector<float> acc(kQueryTile * n.dv), rowMax(kQueryTile),
        rowSum(kQueryTile), keepRow(kKeyTile);
    std::vector<KeyTile> keyTiles;
    for (int64_t pair = begin; pair < end; ++pair) {
      int64_t b = pair / n.heads, h = pair % n.heads;
      const float *qh = q + n.getQueryOffset(b, h) * n.d;
      const float *kh = k + n.getKeyOffset(b, h) * n.d;
      const float *vh = v + n.getKeyOffset(b, h) * n.dv;
      float *oh = out + n.getQueryOffset(b, h) * n.dv;
      for (int64_t i0 = 0, rows; i0 < n.queries; i0 += rows) {
        rows = n.getQueryTileRows(i0, kQueryTile);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(rowMax.begin(), rowMax.end(), minusInfinity);
        std::fill(rowSum.begin(), rowSum.end(), 0.0f);
        getKeyTiles(n, i0, rows, keyTiles);
        for (const KeyTile &keyTile : keyTiles) {
          int64_t j0 = keyTile.start, cols = keyTile.cols;
          scoreTile(n, qh + i0 * n.d, kh + j0 * n.d, rows, cols, scores.data());
          for (int64_t r = 0; r < rows; ++r) {
            float *row = scores.data() + r * cols;
            int64_t visible = keyTile.getVisible(n, i0 + r);
            float newMax = std::max(rowMax[r], maxInLanes(row, visible));
            // A row that sees no key of this tile adds nothing.
            float rescale =
                newMax == minusInfinity ? 1.0f : std::exp(rowMax[r] - newMax);
            float sum = expShiftedAndSum(row, visible, newMax);
            std::fill(row + visible, row + cols, 0.0f);
            rowSum[r] = rowSum[r] * rescale + sum;
            rowMax[r] = newMax;
            for (int64_t e = 0; e < n.dv; ++e)
              acc[r * n.dv + e] *= rescale;
            // The softmax sums every probability; the values see the kept.
            if (n.dropout.rate > 0) {
              n.getKeep(b, h, i0 + r, j0, visible, keepRow.data());
              for (int64_t col = 0; col < visible; ++col)
                row[col] *= keepRow[col];
            }
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n.dv,
                      cols, 1.0f, scores.data(), cols, vh + j0 * n.dv, n.dv,
                      1.0f, acc.data(), n.dv);
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t e = 0; e < n.dv; ++e)
            oh[(i0 + r) * n.dv + e] =
                rowSum[r] > 0 ? acc[r * n.dv + e] / rowSum[r] : 0.0f;
        if (lse)
          for (int64_t r = 0; r < rows; ++r)
            lse[n.getQueryOffset(b, h) + i0 + r] =
                rowSum[r] > 0 ? rowMax[r] + std::log(rowSum[r]) : minusInfinity;
      }
    }
  });
}

void runAttention(KernelCall &c) {
  std::optional<AttentionDims> dims =
      getAttentionDims(c, *checkAttentionInputs(c, /*gradient=*/false));
  if (!dims)
    return;
  computeAttention(*dims, c.in(0).as<float>(), c.in(1).as<float>(),
                   c.in(2).as<float>(), c.out(0).as<float>(), nullptr);
}

/// nn.attention_grad (FlashAttention's backward): a first pass recomputes
/// each query row's log-sum-exp, then every tile's probabilities are made
/// again from it, and the tile adds its terms to dv, dq and dk (a kv head's
/// from each query head of its group).
/// The gradients of `n` into dq, dk and dv (set whole), from the forward's
/// output and its gradient; with `givenLse` (a ring block's: the rows'
/// log-sum-exps over every block), the probabilities are made against it
/// instead of the rows' own.
static void computeAttentionGrad(const AttentionDims &n, const float *q,
                                 const float *k, const float *v,
                                 const float *out, const float *dout,
                                 const float *givenLse, float *dq, float *dk,
                                 float *dv) {
  std::fill(dq, dq + n.batch * n.heads * n.queries * n.d, 0.0f);
  std::fill(dk, dk + n.batch * n.kvHeads * n.keys * n.d, 0.0f);
  std::fill(dv, dv + n.batch * n.kvHeads * n.keys * n.dv, 0.0f);
  const float minusInfinity = -std::numeric_limits<float>::infinity();
  // The (batch, kv head) pairs split over the kernel threads, each taking
  // its group's query heads in order (they add to its dk and dv).
  int64_t group = n.heads / n.kvHeads;
  cpu::parallelFor(n.batch * n.kvHeads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(kQueryTile * kKeyTile),
        dprobs(kQueryTile * kKeyTile);
    // With dropout: each probability's keep factor, and the kept ones.
    std::vector<float> keep, kept;
    if (n.dropout.rate > 0) {
      keep.resize(kQueryTile * kKeyTile);
      kept.resize(kQueryTile * kKeyTile);
    }
    // Per query of a tile: the running maximum and sum of its scores'
    // exps, their log-sum-exp, and rowsum(do · o).
    std::vector<float> rowMax(kQueryTile), rowSum(kQueryTile),
        logSumExp(kQueryTile), rowDot(kQueryTile);
    std::vector<float> scores(std::min(kKeptScores, kQueryTile * n.keys));
    std::vector<KeyTile> keyTiles;
    for (int64_t pair = begin; pair < end; ++pair)
      for (int64_t b = pair / n.kvHeads, h = pair % n.kvHeads * group,
                   last = h + group;
           h < last; ++h) {
        int64_t qOffset = n.getQueryOffset(b, h),
                kOffset = n.getKeyOffset(b, h);
        const float *qh = q + qOffset * n.d, *kh = k + kOffset * n.d,
                    *vh = v + kOffset * n.dv, *oh = out + qOffset * n.dv,
                    *doh = dout + qOffset * n.dv;
        float *dqh = dq + qOffset * n.d, *dkh = dk + kOffset * n.d,
              *dvh = dv + kOffset * n.dv;
        for (int64_t i0 = 0, rows; i0 < n.queries; i0 += rows) {
          rows = n.getQueryTileRows(i0, kQueryTile);
          getKeyTiles(n, i0, rows, keyTiles);
          int64_t seen = keyTiles.empty()
                             ? 0
                             : keyTiles.back().offset + keyTiles.back().cols;
          // The log-sum-exp of each query's scores, and rowsum(do · o). The
          // scores stay for the tiles below where they fit (a key tile at
          // its offset times the rows), and are made again where they do
          // not. A given log-sum-exp needs no first pass.
          bool keepScores = !givenLse && rows * seen <= kKeptScores;
          std::fill(rowMax.begin(), rowMax.end(), minusInfinity);
          std::fill(rowSum.begin(), rowSum.end(), 0.0f);
          for (const KeyTile &keyTile : keyTiles) {
            if (givenLse)
              break;
            int64_t j0 = keyTile.start, cols = keyTile.cols;
            float *tile = keepScores ? scores.data() + keyTile.offset * rows
                                     : probs.data();
            scoreTile(n, qh + i0 * n.d, kh + j0 * n.d, rows, cols, tile);
            for (int64_t r = 0; r < rows; ++r) {
              const float *row = tile + r * cols;
              int64_t visible = keyTile.getVisible(n, i0 + r);
              float newMax = std::max(rowMax[r], maxInLanes(row, visible));
              if (newMax == minusInfinity)
                continue;
              float *shifted = dprobs.data();
              std::copy(row, row + visible, shifted);
              float sum = expShiftedAndSum(shifted, visible, newMax);
              rowSum[r] = rowSum[r] * std::exp(rowMax[r] - newMax) + sum;
              rowMax[r] = newMax;
            }
          }
          for (int64_t r = 0; r < rows; ++r) {
            logSumExp[r] = givenLse ? givenLse[qOffset + i0 + r]
                                    : rowMax[r] + std::log(rowSum[r]);
            const float *dor = doh + (i0 + r) * n.dv,
                        *outr = oh + (i0 + r) * n.dv;
            rowDot[r] = static_cast<float>(
                sumInLanes(n.dv, [&](int64_t e) { return dor[e] * outr[e]; }));
          }
          for (const KeyTile &keyTile : keyTiles) {
            int64_t j0 = keyTile.start, cols = keyTile.cols;
            float *tile = probs.data();
            if (keepScores)
              tile = scores.data() + keyTile.offset * rows;
            else
              scoreTile(n, qh + i0 * n.d, kh + j0 * n.d, rows, cols, tile);
            for (int64_t r = 0; r < rows; ++r) {
              float *row = tile + r * cols;
              int64_t visible = keyTile.getVisible(n, i0 + r);
              float shift = logSumExp[r];
              for (int64_t col = 0; col < visible; ++col)
                row[col] -= shift;
              cpu::vectorExp(row, row, visible);
              std::fill(row + visible, row + cols, 0.0f);
              if (n.dropout.rate > 0) {
                float *z = keep.data() + r * cols;
                n.getKeep(b, h, i0 + r, j0, cols, z);
                for (int64_t col = 0; col < cols; ++col)
                  kept[r * cols + col] = z[col] * row[col];
              }
            }
            // dv += (z p)ᵀ do; dp = do vᵀ.
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, n.dv,
                        rows, 1.0f, n.dropout.rate > 0 ? kept.data() : tile,
                        cols, doh + i0 * n.dv, n.dv, 1.0f, dvh + j0 * n.dv,
                        n.dv);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols,
                        n.dv, 1.0f, doh + i0 * n.dv, n.dv, vh + j0 * n.dv, n.dv,
                        0.0f, dprobs.data(), cols);
            // ds = p · (z dp - rowsum(do · o)), in place of dp.
            if (n.dropout.rate > 0)
              for (int64_t e = 0; e < rows * cols; ++e)
                dprobs[e] *= keep[e];
            for (int64_t r = 0; r < rows; ++r) {
              float *ds = dprobs.data() + r * cols;
              const float *p = tile + r * cols;
              float dot = rowDot[r];
              for (int64_t col = 0; col < cols; ++col)
                ds[col] = p[col] * (ds[col] - dot);
            }
            // dq += scale · ds k; dk += scale · dsᵀ q.
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n.d,
                        cols, n.scale, dprobs.data(), cols, kh + j0 * n.d, n.d,
                        1.0f, dqh + i0 * n.d, n.d);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, n.d,
                        rows, n.scale, dprobs.data(), cols, qh + i0 * n.d, n.d,
                        1.0f, dkh + j0 * n.d, n.d);
          }
        }
      }
  });
}

void runAttentionGrad(KernelCall &c) {
  std::optional<AttentionDims> dims =
      getAttentionDims(c, *checkAttentionInputs(c, /*gradient=*/true));
  if (!dims)
    return;
  computeAttentionGrad(*dims, c.in(0).as<float>(), c.in(1).as<float>(),
                       c.in(2).as<float>(), c.in(3).as<float>(),
                       c.in(4).as<float>(), nullptr, c.out(0).as<float>(),
                       c.out(1).as<float>(), c.out(2).as<float>());
}

/// The sizes and places of a ring block whose check accepted it
/// (`checked`): its queries from its index in the ring × queries, its keys
/// from the index of the device they came from, (index - ring_step) mod
/// ring_size, times the keys. Fails (none, a data error recorded) on an
/// index outside the ring.
static std::optional<AttentionDims>
getAttentionBlockDims(KernelCall &c, const AttentionInputs &checked) {
  AttentionDims n{checked.batch,   checked.heads,   checked.kvHeads,
                  checked.queries, checked.keys,    checked.d,
                  checked.dv,      checked.scale,   checked.causal};
  int64_t size = checked.ringSize;
  int64_t at = c.in(checked.indexInput).as<int64_t>()[0];
  if (at < 0 || at >= size) {
    c.failOnData("index ", at, " lies outside the ring of ", size);
    return std::nullopt;
  }
  int64_t from = (at - checked.ringStep + size) % size;
  n.queryPlace = SequencePlace::get(at * n.queries, n.queries,
                                    size * n.queries, checked.zigzag);
  n.keyPlace =
      SequencePlace::get(from * n.keys, n.keys, size * n.keys, checked.zigzag);
  return n;
}

void runAttentionBlock(KernelCall &c) {
  std::optional<AttentionDims> dims =
      getAttentionBlockDims(c, *checkAttentionBlockInputs(c, false));
  if (!dims)
    return;
  computeAttention(*dims, c.in(0).as<float>(), c.in(1).as<float>(),
                   c.in(2).as<float>(), c.out(0).as<float>(),
                   c.out(1).as<float>());
}

void runAttentionBlockGrad(KernelCall &c) {
  std::optional<AttentionDims> dims =
      getAttentionBlockDims(c, *checkAttentionBlockInputs(c, true));
  if (!dims)
    return;
  computeAttentionGrad(
      *dims, c.in(0).as<float>(), c.in(1).as<float>(), c.in(2).as<float>(),
      c.in(3).as<float>(), c.in(4).as<float>(), c.in(5).as<float>(),
      c.out(0).as<float>(), c.out(1).as<float>(), c.out(2).as<float>());
}

void runCausalMask(KernelCall &c) {
  const Tensor &input = c.in(0);
  std::optional<double> fill = c.getFloat("fill");
  if (input.getNumElements() == 0)
    return;
  int64_t queries = input.shape[input.getRank() - 2];
  int64_t keys = input.shape.back();
  const float *x = input.as<float>();
  float *y = c.out(0).as<float>();
  const float masked = static_cast<float>(*fill);
  // Row r holds query r % queries: its keys up to it are kept.
  forEachRow(input, keys, [&](int64_t row) {
    int64_t seen = std::min(keys, row % queries + 1);
    std::copy(x + row * keys, x + row * keys + seen, y + row * keys);
    std::fill(y + row * keys + seen, y + (row + 1) * keys, masked);
  });
}

} // namespace tessera::runtime::cpu
