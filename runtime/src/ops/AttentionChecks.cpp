//===- AttentionChecks.cpp - The checks of the attention ops --------------===//
//
// nn.attention and its gradient, the ring blocks of context parallelism and
// their gradient, and nn.causal_mask.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "tessera/runtime/Random.h"

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

/// Checks the tensors every attention kernel has: q, k and v, then for a
/// gradient the forward's result and its gradient (and a ring block's
/// log-sum-exps, `withLse`); the outputs the result (and a block's
/// log-sum-exps), or dq, dk and dv. Answers the sizes.
static std::optional<AttentionInputs>
checkAttentionTensors(KernelCall &c, bool gradient, bool withLse) {
  size_t tensors = (gradient ? 5 : 3) + (gradient && withLse ? 1 : 0);
  const char *names[] = {"q", "k", "v", "result", "result gradient", "lse"};
  for (size_t i = 0; i < tensors; ++i)
    if (!c.expectF32(c.in(i), names[i]))
      return std::nullopt;
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4) {
    c.fail("expects q, k and v of rank 4, got ranks ", q.getRank(), ", ",
           k.getRank(), ", ", v.getRank());
    return std::nullopt;
  }
  AttentionInputs n;
  n.batch = q.shape[0];
  n.heads = q.shape[1];
  n.kvHeads = k.shape[1];
  n.queries = q.shape[2];
  n.keys = k.shape[2];
  n.d = q.shape[3];
  n.dv = v.shape[3];
  if (n.kvHeads == 0 || n.heads % n.kvHeads != 0) {
    c.fail("expects kv heads dividing the query heads, got ", n.kvHeads,
           " for ", n.heads);
    return std::nullopt;
  }
  std::vector<int64_t> result = {n.batch, n.heads, n.queries, n.dv},
                       rows = {n.batch, n.heads, n.queries};
  if (!c.expectShape(k, {n.batch, n.kvHeads, n.keys, n.d}, "k") ||
      !c.expectShape(v, {n.batch, n.kvHeads, n.keys, n.dv}, "v"))
    return std::nullopt;
  if (gradient) {
    if (!c.expectShape(c.in(3), result, "result") ||
        !c.expectShape(c.in(4), result, "result gradient") ||
        (withLse && !c.expectShape(c.in(5), rows, "lse")))
      return std::nullopt;
    for (size_t i = 0; i < 3; ++i)
      if (!c.expectF32(c.out(i), names[i]) ||
          !c.expectShape(c.out(i), c.in(i).shape, names[i]))
        return std::nullopt;
  } else if (!c.expectF32(c.out(0), "result") ||
             !c.expectShape(c.out(0), result, "result") ||
             (withLse && (!c.expectF32(c.out(1), "lse") ||
                          !c.expectShape(c.out(1), rows, "lse")))) {
    return std::nullopt;
  }
  return n;
}

std::optional<AttentionInputs>
tessera::runtime::checkAttentionInputs(KernelCall &c, bool gradient) {
  size_t tensors = gradient ? 5 : 3, outputs = gradient ? 3 : 1;
  if (!c.expectVariadicArity(tensors, outputs))
    return std::nullopt;
  std::optional<AttentionInputs> checked =
      checkAttentionTensors(c, gradient, false);
  if (!checked)
    return std::nullopt;
  AttentionInputs n = *checked;
  std::optional<double> scale = c.getFloat("scale");
  std::optional<int64_t> causal = c.getInt("causal");
  std::optional<double> dropout = c.getFloat("dropout");
  if (!scale || !causal || !dropout)
    return std::nullopt;
  n.scale = static_cast<float>(*scale);
  n.causal = *causal != 0;
  n.dropoutRate = static_cast<float>(*dropout);
  if (!(n.dropoutRate >= 0 && n.dropoutRate < 1)) {
    c.fail("expects a dropout rate in [0, 1), got ", n.dropoutRate);
    return std::nullopt;
  }
  // Then the step (a scalar) where it drops, and the piece index where it
  // is a piece of the draw [b, heads, s, t].
  size_t extra = c.getNumInputs() - tensors;
  bool hasStep = extra > 0 && c.in(tensors).getRank() == 0;
  if (n.dropoutRate > 0 && !hasStep) {
    c.fail("expects the step its dropout mask is drawn for");
    return std::nullopt;
  }
  std::vector<int64_t> draw = {n.batch, n.heads, n.queries, n.keys};
  if (hasStep) {
    if (!checkRandomDraw(c, tensors, outputs, draw))
      return std::nullopt;
    n.stepInput = tensors;
  } else if (extra > 0) {
    // A causal piece without dropout: the piece places the queries alone.
    if (!n.causal || extra > 1) {
      c.fail("expects a piece index without a step only when causal, got ",
             extra, " inputs after ", tensors == 3 ? "q, k, v" : "the tensors");
      return std::nullopt;
    }
    const std::vector<int64_t> *global = c.getList("global_shape");
    if (!global)
      return std::nullopt;
    random::PiecePlace place;
    if (std::string error = random::makePiecePlace(draw, *global, place);
        !error.empty()) {
      c.fail(error);
      return std::nullopt;
    }
    if (!c.expectDType(c.in(tensors), DType::I64, "piece") ||
        !c.expectShape(c.in(tensors), {4}, "piece"))
      return std::nullopt;
  }
  size_t piece = hasStep ? tensors + 1 : tensors;
  if (c.getNumInputs() > piece)
    n.pieceInput = piece;
  std::optional<int64_t> zigzag = c.getInt("zigzag");
  if (!zigzag)
    return std::nullopt;
  if (*zigzag != 0 &&
      (*zigzag < 0 || !n.causal || hasStep || n.pieceInput >= 0 ||
       n.queries != n.keys || n.queries % (2 * *zigzag) != 0)) {
    // The whole sequence, stored in zigzag order.
    c.fail("expects zigzag order (", *zigzag,
           ") only causal, without dropout or a piece, on as many queries "
           "as keys in 2 zigzag chunks, got ",
           n.queries, " queries and ", n.keys, " keys");
    return std::nullopt;
  }
  n.zigzag = *zigzag;
  return n;
}

std::optional<AttentionInputs>
tessera::runtime::checkAttentionBlockInputs(KernelCall &c, bool gradient) {
  size_t tensors = gradient ? 6 : 3, outputs = gradient ? 3 : 2;
  if (!c.expectArity(tensors + 1, outputs))
    return std::nullopt;
  std::optional<AttentionInputs> checked =
      checkAttentionTensors(c, gradient, true);
  if (!checked)
    return std::nullopt;
  AttentionInputs n = *checked;
  const Tensor &index = c.in(tensors);
  if (!c.expectDType(index, DType::I64, "index") ||
      !c.expectShape(index, {1}, "index"))
    return std::nullopt;
  std::optional<double> scale = c.getFloat("scale");
  std::optional<int64_t> causal = c.getInt("causal"),
                         step = c.getInt("ring_step"),
                         size = c.getInt("ring_size"),
                         zigzag = c.getInt("zigzag");
  if (!scale || !causal || !step || !size || !zigzag)
    return std::nullopt;
  if (*size < 1 || *step < 0 || *step >= *size) {
    c.fail("expects 0 <= ring_step < ring_size, got ", *step, " and ", *size);
    return std::nullopt;
  }
  // In zigzag order each device holds whole chunks.
  if (*zigzag != 0 &&
      (*zigzag < 0 || *causal == 0 || n.queries != n.keys ||
       2 * *zigzag % *size != 0 || n.queries % (2 * *zigzag / *size) != 0)) {
    c.fail("expects zigzag order (", *zigzag,
           ") only causal, on as many queries as keys, in whole chunks of "
           "2 zigzag over the ring of ",
           *size, ", got ", n.queries, " queries and ", n.keys, " keys");
    return std::nullopt;
  }
  n.scale = static_cast<float>(*scale);
  n.causal = *causal != 0;
  n.zigzag = *zigzag;
  n.ringStep = *step;
  n.ringSize = *size;
  n.indexInput = tensors;
  return n;
}

bool tessera::runtime::checkAttention(KernelCall &c) {
  return checkAttentionInputs(c, /*gradient=*/false).has_value();
}
bool tessera::runtime::checkAttentionGrad(KernelCall &c) {
  return checkAttentionInputs(c, /*gradient=*/true).has_value();
}
bool tessera::runtime::checkAttentionBlock(KernelCall &c) {
  return checkAttentionBlockInputs(c, /*gradient=*/false).has_value();
}
bool tessera::runtime::checkAttentionBlockGrad(KernelCall &c) {
  return checkAttentionBlockInputs(c, /*gradient=*/true).has_value();
}

bool tessera::runtime::checkCausalMask(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return false;
  if (c.in(0).getRank() < 2)
    return c.fail(
        "expects scores of rank at least 2 ([..., query, key]), got rank ",
        c.in(0).getRank());
  return c.getFloat("fill").has_value();
}
