//===- NNCost.cpp - FLOP and byte counts of nn ops ------------------------===//
//
// Counts follow CostOpInterface's convention: one FLOP per arithmetic or
// transcendental operation of the op's formula per element, two per
// multiply-add of a dot. Pure data movement costs bytes only.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

#include <limits>

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

static int64_t numElements(Value value) {
  return getNumElements(value.getType());
}

/// a · b, or the largest int64 where that overflows: a model's tensors are
/// bounded (2^50 elements), but a dot or attention over them can count
/// more FLOPs than int64 holds, which loading the model then refuses.
static int64_t mulSaturated(int64_t a, int64_t b) {
  int64_t product;
  return __builtin_mul_overflow(a, b, &product)
             ? std::numeric_limits<int64_t>::max()
             : product;
}

/// `perElement` FLOPs for every element of result 0.
static int64_t elementwiseFlops(Operation *op, int64_t perElement) {
  return perElement * numElements(op->getResult(0));
}

#define TESSERA_ELEMENTWISE_FLOPS(OpTy, perElement)                            \
  int64_t OpTy::getFlops() { return elementwiseFlops(*this, perElement); }
TESSERA_ELEMENTWISE_FLOPS(AddOp, 1)
TESSERA_ELEMENTWISE_FLOPS(SubOp, 1)
TESSERA_ELEMENTWISE_FLOPS(MulOp, 1)
TESSERA_ELEMENTWISE_FLOPS(DivOp, 1)
TESSERA_ELEMENTWISE_FLOPS(MaxOp, 1)
TESSERA_ELEMENTWISE_FLOPS(MinOp, 1)
TESSERA_ELEMENTWISE_FLOPS(PowOp, 1)
// The two comparisons.
TESSERA_ELEMENTWISE_FLOPS(ClampOp, 2)
TESSERA_ELEMENTWISE_FLOPS(NegOp, 1)
TESSERA_ELEMENTWISE_FLOPS(ExpOp, 1)
TESSERA_ELEMENTWISE_FLOPS(LogOp, 1)
TESSERA_ELEMENTWISE_FLOPS(SqrtOp, 1)
TESSERA_ELEMENTWISE_FLOPS(RsqrtOp, 1)
TESSERA_ELEMENTWISE_FLOPS(TanhOp, 1)
TESSERA_ELEMENTWISE_FLOPS(SinOp, 1)
TESSERA_ELEMENTWISE_FLOPS(CosOp, 1)
TESSERA_ELEMENTWISE_FLOPS(ErfOp, 1)
// exp(-x), + 1, 1 / (...).
TESSERA_ELEMENTWISE_FLOPS(SigmoidOp, 3)
TESSERA_ELEMENTWISE_FLOPS(AbsOp, 1)
TESSERA_ELEMENTWISE_FLOPS(ReluOp, 1)
TESSERA_ELEMENTWISE_FLOPS(CompareOp, 1)
// x³ (2), · 0.044715, + x, · √(2/π), tanh, + 1, · 0.5x (2).
TESSERA_ELEMENTWISE_FLOPS(GeluOp, 9)
// exp(-x), + 1, x / (...), negation.
TESSERA_ELEMENTWISE_FLOPS(SiluOp, 4)
// Selection, conversion and masking move data but compute nothing.
TESSERA_ELEMENTWISE_FLOPS(SelectOp, 0)
TESSERA_ELEMENTWISE_FLOPS(CastOp, 0)
TESSERA_ELEMENTWISE_FLOPS(CausalMaskOp, 0)
TESSERA_ELEMENTWISE_FLOPS(ConstantOp, 0)
TESSERA_ELEMENTWISE_FLOPS(IotaOp, 0)
// Philox-4x32-10 gives four words for ten rounds of two 32 x 32 -> 64-bit
// products and four xors or adds (about 15 per word), then a scale; dropout
// compares and multiplies.
TESSERA_ELEMENTWISE_FLOPS(RandomUniformOp, 16)
TESSERA_ELEMENTWISE_FLOPS(DropoutOp, 18)
TESSERA_ELEMENTWISE_FLOPS(BroadcastOp, 0)
TESSERA_ELEMENTWISE_FLOPS(ReshapeOp, 0)
TESSERA_ELEMENTWISE_FLOPS(TransposeOp, 0)
TESSERA_ELEMENTWISE_FLOPS(SliceOp, 0)
TESSERA_ELEMENTWISE_FLOPS(ConcatOp, 0)
// max, subtract, exp, sum, divide.
TESSERA_ELEMENTWISE_FLOPS(SoftmaxOp, 5)
// max, subtract, exp, sum, subtract the log-sum (the log is per row).
TESSERA_ELEMENTWISE_FLOPS(LogSoftmaxOp, 5)
// mean (1), subtract, square, sum, scale, · gamma, + beta.
TESSERA_ELEMENTWISE_FLOPS(LayerNormOp, 7)
// square, sum, scale, · gamma.
TESSERA_ELEMENTWISE_FLOPS(RmsNormOp, 4)
// The forward's statistics (4), x̂ (2), g = dy · gamma, two row sums (3),
// dx (4).
TESSERA_ELEMENTWISE_FLOPS(LayerNormGradOp, 14)
// mean square (2), x̂, g, one row sum (2), dx (3).
TESSERA_ELEMENTWISE_FLOPS(RmsNormGradOp, 9)
// A gather computes nothing, nor does a one-hot encoding.
TESSERA_ELEMENTWISE_FLOPS(EmbeddingOp, 0)
TESSERA_ELEMENTWISE_FLOPS(OneHotOp, 0)
TESSERA_ELEMENTWISE_FLOPS(GatherOp, 0)
#undef TESSERA_ELEMENTWISE_FLOPS

int64_t DotOp::getFlops() {
  auto lhs = getLhs().getType();
  int64_t contracted = 1;
  for (int64_t dim : getLhsContractingDims())
    contracted *= lhs.getDimSize(dim);
  return mulSaturated(2 * contracted, numElements(getResult()));
}

/// A reduction combines each input element once.
int64_t ReduceSumOp::getFlops() { return numElements(getInput()); }
int64_t ReduceMaxOp::getFlops() { return numElements(getInput()); }
/// Plus one division per result element.
int64_t ReduceMeanOp::getFlops() {
  return numElements(getInput()) + numElements(getResult());
}

/// A multiply and an add per element.
int64_t SumSquaresOp::getFlops() { return 2 * numElements(getInput()); }

int64_t CrossEntropyOp::getFlops() {
  // Per logit: max, subtract, exp, sum; per row: log, subtract the label's.
  return 4 * numElements(getLogits()) + 2 * numElements(getResult());
}

int64_t SgdOp::getFlops() {
  // lr · g and the subtraction, plus the decay's multiply-add when present.
  int64_t perElement = getWeightDecay().isZero() ? 2 : 4;
  return perElement * numElements(getParam());
}

int64_t AdamWOp::getFlops() {
  // m: 3, v: 4, the bias corrections: 2, sqrt and + epsilon: 2, the divide:
  // 1, the decay's multiply-add: 2, · lr and the subtraction: 2.
  return 16 * numElements(getParam());
}

int64_t EmbeddingOp::getBytesAccessed() {
  // Reads only the looked-up rows, not the whole table.
  int64_t resultBytes = getTensorBytes(getResult().getType());
  return getTensorBytes(getIndices().getType()) + 2 * resultBytes;
}

/// One addition per gradient element scattered.
int64_t EmbeddingGradOp::getFlops() { return numElements(getGrad()); }

/// The scores attention computes per batch and head: every (query, key)
/// pair, or with `causal` those of keys at or before their query (the
/// kernels skip the rest). A device's piece of the queries (`piece`) is
/// placed where it sees the most: last, its first query after the keys
/// before it (the slowest device sets an SPMD step's pace).
static int64_t getAttentionScores(Value query, Value key, bool causal,
                                  bool piece = false) {
  int64_t queries = cast<RankedTensorType>(query.getType()).getDimSize(2);
  int64_t keys = cast<RankedTensorType>(key.getType()).getDimSize(2);
  if (!causal)
    return mulSaturated(queries, keys);
  // Query i sees min(before + i + 1, keys) keys.
  int64_t before = piece ? std::max<int64_t>(0, keys - queries) : 0;
  int64_t seen = std::min(queries, keys - before);
  int64_t triangle = seen % 2 == 0 ? mulSaturated(seen / 2, seen + 1)
                                   : mulSaturated(seen, (seen + 1) / 2);
  int64_t rest = mulSaturated(queries - seen, keys);
  int64_t total = triangle;
  for (int64_t term : {rest, mulSaturated(seen, before)}) {
    if (total > std::numeric_limits<int64_t>::max() - term)
      return std::numeric_limits<int64_t>::max();
    total += term;
  }
  return total;
}

int64_t AttentionOp::getFlops() {
  auto q = getQuery().getType(), v = getValue().getType();
  int64_t pairs =
      mulSaturated(q.getDimSize(0) * q.getDimSize(1),
                   getAttentionScores(getQuery(), getKey(), getCausal(),
                                      static_cast<bool>(getPiece())));
  // q kᵀ and p v (two per multiply-add), and per score the scale, the
  // online max, exp, sum and the rescaling; with dropout, the draw (as
  // nn.dropout's).
  return mulSaturated(pairs, 2 * q.getDimSize(3) + 2 * v.getDimSize(3) + 5 +
                                 (getDropout().convertToFloat() > 0 ? 18 : 0));
}

int64_t AttentionGradOp::getFlops() {
  auto q = getQuery().getType(), v = getValue().getType();
  int64_t pairs =
      mulSaturated(q.getDimSize(0) * q.getDimSize(1),
                   getAttentionScores(getQuery(), getKey(), getCausal(),
                                      static_cast<bool>(getPiece())));
  int64_t d = q.getDimSize(3), dv = v.getDimSize(3);
  // The log-sum-exp pass (q kᵀ again and 3 per score), then q kᵀ, pᵀ do,
  // do vᵀ, ds k and dsᵀ q, and per score p, ds and the scales (6); with
  // dropout, the draw again.
  return mulSaturated(pairs, 2 * d + 3 + 2 * d + 2 * dv + 2 * dv + 2 * d +
                                 2 * d + 6 +
                                 (getDropout().convertToFloat() > 0 ? 18 : 0));
}

/// A ring block's scores: every pair of a block, counted as if seen (the
/// block's place in the causal order is known only when it runs; the ring's
/// blocks average half of them); in zigzag order, where every causal block
/// sees half of them, half.
template <typename BlockOp> static int64_t getBlockPairs(BlockOp op) {
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  int64_t pairs = mulSaturated(q.getDimSize(0) * q.getDimSize(1),
                               getAttentionScores(op.getQuery(), op.getKey(),
                                                  /*causal=*/false));
  return op.getCausal() && op.getZigzag() > 0 ? pairs / 2 : pairs;
}

int64_t AttentionBlockOp::getFlops() {
  auto q = getQuery().getType(), v = getValue().getType();
  // As nn.attention's, and the log-sum-exp per row.
  return mulSaturated(getBlockPairs(*this),
                      2 * q.getDimSize(3) + 2 * v.getDimSize(3) + 5);
}

int64_t AttentionBlockGradOp::getFlops() {
  auto q = getQuery().getType(), v = getValue().getType();
  int64_t d = q.getDimSize(3), dv = v.getDimSize(3);
  // As nn.attention_grad's without its log-sum-exp pass (it is given).
  return mulSaturated(getBlockPairs(*this),
                      2 * d + 2 * dv + 2 * dv + 2 * d + 2 * d + 6);
}

/// One addition per source element.
int64_t ScatterAddOp::getFlops() { return numElements(getSource()); }

/// One comparison per input element for each of the k picks.
int64_t TopKOp::getFlops() {
  return mulSaturated(numElements(getInput()), getKAttr().getInt());
}

/// One count per routed choice (the mask's zeros are memory traffic).
int64_t MoeDispatchOp::getFlops() { return numElements(getIndices()); }

/// The FLOPs of the fused ops; its bytes are the default, each input read
/// and each result written once: what fusion saves.
int64_t FusedOp::getFlops() {
  int64_t flops = 0;
  for (auto op : getBody().front().getOps<CostOpInterface>())
    if (__builtin_add_overflow(flops, op.getFlops(), &flops))
      return std::numeric_limits<int64_t>::max();
  return flops;
}
