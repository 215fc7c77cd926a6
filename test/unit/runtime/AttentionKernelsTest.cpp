//===- AttentionKernelsTest.cpp - the CPU's attention kernels ---------------===//

#include "KernelsTestSupport.h"
#include "tessera/runtime/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

/// Attention as the unfused ops compute it, the whole score matrix at
/// once: o = softmax(scale q kᵀ, masked) v, and the gradients of
/// sum(o · r) (so do = r).
struct NaiveAttention {
  int64_t b, a, kv, s, t, d, dv;
  float scale;
  bool causal;
  std::vector<float> q, k, v, r, o, dq, dk, dvOut;

  void run() {
    o.assign(b * a * s * dv, 0);
    dq.assign(q.size(), 0);
    dk.assign(k.size(), 0);
    dvOut.assign(v.size(), 0);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < a; ++h) {
        int64_t qh = (bi * a + h) * s, kh = (bi * kv + h / (a / kv)) * t;
        std::vector<double> p(s * t, 0.0);
        for (int64_t i = 0; i < s; ++i) {
          double max = -INFINITY, sum = 0;
          for (int64_t j = 0; j < t; ++j) {
            if (causal && j > i)
              continue;
            double score = 0;
            for (int64_t e = 0; e < d; ++e)
              score += q[(qh + i) * d + e] * k[(kh + j) * d + e];
            p[i * t + j] = scale * score;
            max = std::max(max, p[i * t + j]);
          }
          for (int64_t j = 0; j < t; ++j) {
            p[i * t + j] = causal && j > i ? 0.0 : std::exp(p[i * t + j] - max);
            sum += p[i * t + j];
          }
          for (int64_t j = 0; j < t; ++j)
            p[i * t + j] /= sum;
        }
        for (int64_t i = 0; i < s; ++i)
          for (int64_t e = 0; e < dv; ++e) {
            double sum = 0;
            for (int64_t j = 0; j < t; ++j)
              sum += p[i * t + j] * v[(kh + j) * dv + e];
            o[(qh + i) * dv + e] = sum;
          }
        // dp = do vᵀ; ds = p (dp - rowsum(p dp)).
        for (int64_t i = 0; i < s; ++i) {
          std::vector<double> dp(t);
          double rowDot = 0;
          for (int64_t j = 0; j < t; ++j) {
            for (int64_t e = 0; e < dv; ++e)
              dp[j] += r[(qh + i) * dv + e] * v[(kh + j) * dv + e];
            rowDot += p[i * t + j] * dp[j];
          }
          for (int64_t j = 0; j < t; ++j) {
            double ds = p[i * t + j] * (dp[j] - rowDot);
            for (int64_t e = 0; e < d; ++e) {
              dq[(qh + i) * d + e] += scale * ds * k[(kh + j) * d + e];
              dk[(kh + j) * d + e] += scale * ds * q[(qh + i) * d + e];
            }
            for (int64_t e = 0; e < dv; ++e)
              dvOut[(kh + j) * dv + e] += p[i * t + j] * r[(qh + i) * dv + e];
          }
        }
      }
  }
};

TEST(KernelsTest, AttentionMatchesTheUnfusedFormulaAcrossTiles) {
  // Causal and not: 130 queries and keys (three 64-query tiles, the last
  // partial, and one key tile) with 4 heads on 2 kv heads; 300 (two
  // 256-key tiles); and 16400 keys against 70 queries, whose backward
  // makes each tile's scores again rather than keep them (past 2^20).
  struct Size {
    int64_t b, a, kv, s, t, d, dv;
  };
  for (auto [size, causal] : {std::pair{Size{2, 4, 2, 130, 130, 8, 6}, true},
                              {Size{2, 4, 2, 130, 130, 8, 6}, false},
                              {Size{1, 2, 1, 300, 300, 4, 3}, true},
                              {Size{1, 2, 1, 300, 300, 4, 3}, false},
                              {Size{1, 1, 1, 70, 16400, 2, 2}, false}}) {
    SCOPED_TRACE("queries " + std::to_string(size.s) + ", keys " +
                 std::to_string(size.t) + (causal ? ", causal" : ""));
    NaiveAttention ref{size.b, size.a,  size.kv, size.s, size.t,
                       size.d, size.dv, 0.35f,   causal};
    ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
    ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
    ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
    ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
    ref.run();
    OwnedTensor q = f32({ref.b, ref.a, ref.s, ref.d}, ref.q),
                k = f32({ref.b, ref.kv, ref.t, ref.d}, ref.k),
                v = f32({ref.b, ref.kv, ref.t, ref.dv}, ref.v),
                r = f32({ref.b, ref.a, ref.s, ref.dv}, ref.r);
    KernelAttrs attrs;
    attrs.floats["scale"] = ref.scale;
    attrs.ints["causal"] = causal;
    attrs.floats["dropout"] = 0;
    attrs.ints["zigzag"] = 0;
    OwnedTensor o(DType::F32, {ref.b, ref.a, ref.s, ref.dv});
    ASSERT_EQ(run("nn.attention", attrs, {&q, &k, &v}, {&o}), "");
    expectNear(read<float>(o), ref.o, 1e-5f);
    OwnedTensor dq(DType::F32, q.view.shape), dk(DType::F32, k.view.shape),
        dv(DType::F32, v.view.shape);
    ASSERT_EQ(
        run("nn.attention_grad", attrs, {&q, &k, &v, &o, &r}, {&dq, &dk, &dv}),
        "");
    expectNear(read<float>(dq), ref.dq, 1e-4f);
    expectNear(read<float>(dk), ref.dk, 1e-4f);
    expectNear(read<float>(dv), ref.dvOut, 1e-4f);
  }
}

TEST(KernelsTest, CausalAttentionOnAPieceOfTheQueriesPlacesThemByThePiece) {
  // 130 queries and keys over 2 pieces of 65 queries (context parallelism
  // that gathers the keys): each piece's output is the whole's rows, and
  // its dk and dv sum to the whole's.
  NaiveAttention ref{1, 4, 2, 130, 130, 8, 6, 0.35f, true};
  ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
  ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
  ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
  ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
  ref.run();
  int64_t rows = 65;
  OwnedTensor k = f32({ref.b, ref.kv, ref.t, ref.d}, ref.k),
              v = f32({ref.b, ref.kv, ref.t, ref.dv}, ref.v);
  std::vector<float> dkSum(ref.k.size(), 0), dvSum(ref.v.size(), 0);
  KernelAttrs attrs;
  attrs.floats["scale"] = ref.scale;
  attrs.ints["causal"] = 1;
  attrs.floats["dropout"] = 0;
  attrs.ints["zigzag"] = 0;
  attrs.lists["global_shape"] = {ref.b, ref.a, ref.s, ref.t};
  // The piece's rows of a [b, heads, s, width] tensor.
  auto rowsOf = [&](const std::vector<float> &whole, int64_t width,
                    int64_t piece) {
    std::vector<float> part;
    for (int64_t bh = 0; bh < ref.b * ref.a; ++bh)
      for (int64_t i = piece * rows; i < (piece + 1) * rows; ++i)
        part.insert(part.end(), whole.begin() + (bh * ref.s + i) * width,
                    whole.begin() + (bh * ref.s + i + 1) * width);
    return part;
  };
  for (int64_t piece = 0; piece < 2; ++piece) {
    SCOPED_TRACE("piece " + std::to_string(piece));
    OwnedTensor q = f32({ref.b, ref.a, rows, ref.d},
                        rowsOf(ref.q, ref.d, piece)),
                r = f32({ref.b, ref.a, rows, ref.dv},
                        rowsOf(ref.r, ref.dv, piece)),
                index = i64({4}, {0, 0, piece, 0});
    OwnedTensor o(DType::F32, {ref.b, ref.a, rows, ref.dv});
    ASSERT_EQ(run("nn.attention", attrs, {&q, &k, &v, &index}, {&o}), "");
    expectNear(read<float>(o), rowsOf(ref.o, ref.dv, piece), 1e-5f);
    // The gradient reads the whole output's rows, as the forward's are.
    OwnedTensor wholeRows = f32(o.view.shape, rowsOf(ref.o, ref.dv, piece));
    OwnedTensor dq(DType::F32, q.view.shape), dk(DType::F32, k.view.shape),
        dv(DType::F32, v.view.shape);
    ASSERT_EQ(run("nn.attention_grad", attrs,
                  {&q, &k, &v, &wholeRows, &r, &index}, {&dq, &dk, &dv}),
              "");
    expectNear(read<float>(dq), rowsOf(ref.dq, ref.d, piece), 1e-4f);
    std::vector<float> dkPiece = read<float>(dk), dvPiece = read<float>(dv);
    for (size_t e = 0; e < dkSum.size(); ++e)
      dkSum[e] += dkPiece[e];
    for (size_t e = 0; e < dvSum.size(); ++e)
      dvSum[e] += dvPiece[e];
  }
  expectNear(dkSum, ref.dk, 1e-4f);
  expectNear(dvSum, ref.dvOut, 1e-4f);
  // A piece without a step is a causal op's only.
  attrs.ints["causal"] = 0;
  OwnedTensor q(DType::F32, {1, 4, 65, 8}), o(DType::F32, {1, 4, 65, 6}),
      index = i64({4}, {0, 0, 1, 0});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k, &v, &index}, {&o}),
            "nn.attention: expects a piece index without a step only when "
            "causal, got 1 inputs after q, k, v");
}

/// The natural position of each stored row of a sequence of `length` in
/// zigzag order of 2 `zigzag` chunks (chunks 0, 2 zigzag - 1, 1, ...), or
/// in natural order where `zigzag` is 0.
static std::vector<int64_t> getStoredPositions(int64_t length, int64_t zigzag) {
  std::vector<int64_t> positions(length);
  for (int64_t row = 0; row < length; ++row)
    positions[row] = row;
  if (zigzag == 0)
    return positions;
  int64_t rows = length / (2 * zigzag);
  for (int64_t row = 0; row < length; ++row) {
    int64_t stored = row / rows;
    int64_t chunk = stored % 2 == 0 ? stored / 2 : 2 * zigzag - 1 - stored / 2;
    positions[row] = chunk * rows + row % rows;
  }
  return positions;
}

/// A [b, heads, s, width] tensor's rows along s in stored order: row i is
/// the row at `positions[i]`.
static std::vector<float> storeRows(const std::vector<float> &whole,
                                    int64_t width,
                                    const std::vector<int64_t> &positions) {
  int64_t length = static_cast<int64_t>(positions.size());
  std::vector<float> stored(whole.size());
  for (size_t bh = 0; bh < whole.size() / (length * width); ++bh)
    for (int64_t i = 0; i < length; ++i)
      std::copy_n(whole.begin() + (bh * length + positions[i]) * width, width,
                  stored.begin() + (bh * length + i) * width);
  return stored;
}

TEST(KernelsTest, ZigzagAttentionIsTheAttentionOfTheStoredRows) {
  // 136 queries and keys stored in zigzag order of 4 chunks of 34 (the
  // query tiles end at the chunks), and of 8 chunks of 17: the output and
  // the gradients are the natural order's, stored likewise.
  for (int64_t zigzag : {2, 4}) {
    SCOPED_TRACE("zigzag " + std::to_string(zigzag));
    NaiveAttention ref{2, 4, 2, 136, 136, 8, 6, 0.35f, true};
    ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
    ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
    ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
    ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
    ref.run();
    std::vector<int64_t> positions = getStoredPositions(ref.s, zigzag);
    OwnedTensor q = f32({ref.b, ref.a, ref.s, ref.d},
                        storeRows(ref.q, ref.d, positions)),
                k = f32({ref.b, ref.kv, ref.t, ref.d},
                        storeRows(ref.k, ref.d, positions)),
                v = f32({ref.b, ref.kv, ref.t, ref.dv},
                        storeRows(ref.v, ref.dv, positions)),
                r = f32({ref.b, ref.a, ref.s, ref.dv},
                        storeRows(ref.r, ref.dv, positions));
    KernelAttrs attrs;
    attrs.floats["scale"] = ref.scale;
    attrs.ints["causal"] = 1;
    attrs.floats["dropout"] = 0;
    attrs.ints["zigzag"] = zigzag;
    OwnedTensor o(DType::F32, {ref.b, ref.a, ref.s, ref.dv});
    ASSERT_EQ(run("nn.attention", attrs, {&q, &k, &v}, {&o}), "");
    expectNear(read<float>(o), storeRows(ref.o, ref.dv, positions), 1e-5f);
    OwnedTensor dq(DType::F32, q.view.shape), dk(DType::F32, k.view.shape),
        dv(DType::F32, v.view.shape);
    ASSERT_EQ(
        run("nn.attention_grad", attrs, {&q, &k, &v, &o, &r}, {&dq, &dk, &dv}),
        "");
    expectNear(read<float>(dq), storeRows(ref.dq, ref.d, positions), 1e-4f);
    expectNear(read<float>(dk), storeRows(ref.dk, ref.d, positions), 1e-4f);
    expectNear(read<float>(dv), storeRows(ref.dvOut, ref.dv, positions), 1e-4f);
  }
  // Zigzag order is causal attention's, of whole chunks.
  KernelAttrs attrs;
  attrs.floats["scale"] = 1.0;
  attrs.ints["causal"] = 1;
  attrs.floats["dropout"] = 0;
  attrs.ints["zigzag"] = 3;
  OwnedTensor q(DType::F32, {1, 1, 8, 2}), o(DType::F32, {1, 1, 8, 2});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &q, &q}, {&o}),
            "nn.attention: expects zigzag order (3) only causal, without "
            "dropout or a piece, on as many queries as keys in 2 zigzag "
            "chunks, got 8 queries and 8 keys");
}

TEST(KernelsTest, RingAttentionBlocksCombineToTheWholeAttention) {
  // 130 queries and keys in a ring of 2 devices of 65: device i's queries
  // against the keys of device (i - step) mod 2 at each step, combined by
  // the blocks' log-sum-exps, are the whole attention's rows; the blocks'
  // gradients against the combined log-sum-exps sum to the whole's. Then
  // the sequence stored in zigzag order (Megatron-LM's causal load
  // balance): 136 in 4 chunks on rings of 2 and 4, and 144 in 8 chunks on
  // a ring of 2 (two runs of positions per device).
  struct Ring {
    bool causal;
    int64_t length, ring, zigzag;
  };
  for (Ring config :
       {Ring{true, 130, 2, 0}, Ring{false, 130, 2, 0}, Ring{true, 136, 2, 2},
        Ring{true, 136, 4, 2}, Ring{true, 144, 2, 4}}) {
    bool causal = config.causal;
    SCOPED_TRACE((causal ? "causal, " : "") + std::to_string(config.length) +
                 " on " + std::to_string(config.ring) + ", zigzag " +
                 std::to_string(config.zigzag));
    NaiveAttention ref{1, 4, 2,     config.length, config.length,
                       8, 6, 0.35f, causal};
    ref.q = noise(ref.b * ref.a * ref.s * ref.d, 1);
    ref.k = noise(ref.b * ref.kv * ref.t * ref.d, 2);
    ref.v = noise(ref.b * ref.kv * ref.t * ref.dv, 3);
    ref.r = noise(ref.b * ref.a * ref.s * ref.dv, 4);
    ref.run();
    int64_t ring = config.ring, rows = ref.s / ring;
    std::vector<int64_t> positions = getStoredPositions(ref.s, config.zigzag);
    // Piece `piece` of a [b, heads, s, width] tensor's stored rows.
    auto pieceOf = [&](const std::vector<float> &whole, int64_t heads,
                       int64_t width, int64_t piece) {
      std::vector<float> stored = storeRows(whole, width, positions), part;
      for (int64_t bh = 0; bh < ref.b * heads; ++bh)
        part.insert(part.end(),
                    stored.begin() + (bh * ref.s + piece * rows) * width,
                    stored.begin() + (bh * ref.s + (piece + 1) * rows) * width);
      return part;
    };
    KernelAttrs attrs;
    attrs.floats["scale"] = ref.scale;
    attrs.ints["causal"] = causal;
    attrs.ints["ring_size"] = ring;
    attrs.ints["zigzag"] = config.zigzag;
    std::vector<std::vector<float>> dkSum(ring), dvSum(ring);
    for (int64_t device = 0; device < ring; ++device) {
      OwnedTensor q = f32({1, 4, rows, 8}, pieceOf(ref.q, 4, 8, device)),
                  r = f32({1, 4, rows, 6}, pieceOf(ref.r, 4, 6, device)),
                  index = i64({1}, {device});
      std::vector<float> o(4 * rows * 6, 0.0f), lse(4 * rows, -INFINITY);
      std::vector<OwnedTensor> ks, vs;
      for (int64_t step = 0; step < ring; ++step) {
        int64_t from = (device - step + ring) % ring;
        ks.push_back(f32({1, 2, rows, 8}, pieceOf(ref.k, 2, 8, from)));
        vs.push_back(f32({1, 2, rows, 6}, pieceOf(ref.v, 2, 6, from)));
        attrs.ints["ring_step"] = step;
        OwnedTensor block(DType::F32, {1, 4, rows, 6}),
            blockLse(DType::F32, {1, 4, rows});
        ASSERT_EQ(run("nn.attention_block", attrs,
                      {&q, &ks.back(), &vs.back(), &index},
                      {&block, &blockLse}),
                  "");
        std::vector<float> ob = read<float>(block), lb = read<float>(blockLse);
        for (int64_t row = 0; row < 4 * rows; ++row) {
          float high = std::max(lse[row], lb[row]);
          if (high == -INFINITY)
            continue;
          float a = std::exp(lse[row] - high), c = std::exp(lb[row] - high);
          for (int64_t e = 0; e < 6; ++e)
            o[row * 6 + e] =
                (o[row * 6 + e] * a + ob[row * 6 + e] * c) / (a + c);
          lse[row] = high + std::log(a + c);
        }
      }
      expectNear(o, pieceOf(ref.o, 4, 6, device), 1e-5f);
      OwnedTensor whole = f32({1, 4, rows, 6}, o),
                  lses = f32({1, 4, rows}, lse);
      std::vector<float> dq(4 * rows * 8, 0.0f);
      for (int64_t step = 0; step < ring; ++step) {
        int64_t from = (device - step + ring) % ring;
        attrs.ints["ring_step"] = step;
        OwnedTensor dqb(DType::F32, q.view.shape),
            dkb(DType::F32, ks[step].view.shape),
            dvb(DType::F32, vs[step].view.shape);
        ASSERT_EQ(run("nn.attention_block_grad", attrs,
                      {&q, &ks[step], &vs[step], &whole, &r, &lses, &index},
                      {&dqb, &dkb, &dvb}),
                  "");
        std::vector<float> part = read<float>(dqb);
        for (size_t e = 0; e < dq.size(); ++e)
          dq[e] += part[e];
        for (auto [sum, gradient] :
             {std::pair(&dkSum[from], &dkb), std::pair(&dvSum[from], &dvb)}) {
          std::vector<float> terms = read<float>(*gradient);
          sum->resize(terms.size(), 0.0f);
          for (size_t e = 0; e < terms.size(); ++e)
            (*sum)[e] += terms[e];
        }
      }
      expectNear(dq, pieceOf(ref.dq, 4, 8, device), 1e-4f);
    }
    for (int64_t piece = 0; piece < ring; ++piece) {
      expectNear(dkSum[piece], pieceOf(ref.dk, 2, 8, piece), 1e-4f);
      expectNear(dvSum[piece], pieceOf(ref.dvOut, 2, 6, piece), 1e-4f);
    }
  }
  // The index lies in the ring, the step within it.
  KernelAttrs attrs;
  attrs.floats["scale"] = 1.0;
  attrs.ints["causal"] = 1;
  attrs.ints["ring_size"] = 2;
  attrs.ints["ring_step"] = 2;
  attrs.ints["zigzag"] = 0;
  OwnedTensor q(DType::F32, {1, 1, 4, 2}), k(DType::F32, {1, 1, 4, 2}),
      o(DType::F32, {1, 1, 4, 2}), lse(DType::F32, {1, 1, 4}),
      index = i64({1}, {0});
  EXPECT_EQ(run("nn.attention_block", attrs, {&q, &k, &k, &index}, {&o, &lse}),
            "nn.attention_block: expects 0 <= ring_step < ring_size, got 2 "
            "and 2");
  attrs.ints["ring_step"] = 1;
  OwnedTensor outside = i64({1}, {5});
  EXPECT_EQ(
      run("nn.attention_block", attrs, {&q, &k, &k, &outside}, {&o, &lse}),
      "nn.attention_block: index 5 lies outside the ring of 2");
  // In zigzag order a device holds whole chunks: 4 rows are not of 3.
  attrs.ints["zigzag"] = 3;
  EXPECT_EQ(run("nn.attention_block", attrs, {&q, &k, &k, &index}, {&o, &lse}),
            "nn.attention_block: expects zigzag order (3) only causal, on as "
            "many queries as keys, in whole chunks of 2 zigzag over the ring "
            "of 2, got 4 queries and 4 keys");
}

TEST(KernelsTest, AttentionRejectsMismatchedShapes) {
  KernelAttrs attrs;
  attrs.floats["scale"] = 1.0;
  attrs.ints["causal"] = 0;
  attrs.floats["dropout"] = 0;
  attrs.ints["zigzag"] = 0;
  OwnedTensor q(DType::F32, {1, 4, 8, 16}), k(DType::F32, {1, 3, 8, 16}),
      v(DType::F32, {1, 3, 8, 16}), o(DType::F32, {1, 4, 8, 16});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k, &v}, {&o}),
            "nn.attention: expects kv heads dividing the query heads, got 3 "
            "for 4");
  OwnedTensor k2(DType::F32, {1, 2, 8, 8}), v2(DType::F32, {1, 2, 8, 16});
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k2, &v2}, {&o}),
            "nn.attention: expects k of shape [1, 2, 8, 16], got [1, 2, 8, 8]");
  // Dropout needs the step its mask is drawn for.
  OwnedTensor k4(DType::F32, {1, 4, 8, 16}), v4(DType::F32, {1, 4, 8, 16});
  attrs.floats["dropout"] = 0.1;
  attrs.ints["seed"] = 0;
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k4, &v4}, {&o}),
            "nn.attention: expects the step its dropout mask is drawn for");
  attrs.floats["dropout"] = 1.0;
  EXPECT_EQ(run("nn.attention", attrs, {&q, &k4, &v4}, {&o}),
            "nn.attention: expects a dropout rate in [0, 1), got 1");
}

TEST(KernelsTest, CausalMaskHidesFutureKeys) {
  OwnedTensor scores = f32({2, 2, 3}, iota(12));
  OwnedTensor result(DType::F32, {2, 2, 3});
  // -inf for the forward's scores, 0 for their gradient.
  for (float fill : {-std::numeric_limits<float>::infinity(), 0.0f}) {
    KernelAttrs attrs;
    attrs.floats["fill"] = fill;
    ASSERT_EQ(run("nn.causal_mask", attrs, {&scores}, {&result}), "");
    std::vector<float> x = read<float>(scores), y = read<float>(result);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t query = 0; query < 2; ++query)
        for (int64_t key = 0; key < 3; ++key) {
          int64_t i = (b * 2 + query) * 3 + key;
          EXPECT_EQ(y[i], key > query ? fill : x[i]) << "at element " << i;
        }
  }
  EXPECT_EQ(run("nn.causal_mask", {}, {&scores}, {&result}),
            "nn.causal_mask: missing float attribute 'fill'");
}

} // namespace
