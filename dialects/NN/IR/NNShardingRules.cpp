//===- NNShardingRules.cpp - factor sharding rules of nn ops --------------===//
//
// Each nn op describes its iteration space as factors (ShardingRule.h); the
// propagation and partitioning passes read nothing op-specific but this.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

static constexpr int64_t kNoDim = ShardingRuleBuilder::kNoDim;

static ArrayRef<int64_t> getShape(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

static ShardingRuleBuilder makeBuilder(Operation *op) {
  return ShardingRuleBuilder(op->getOperandTypes(), op->getResultTypes());
}

/// Every tensor has the shape of result 0 and shares its factors; the
/// factors of `exceptDims` cannot be split.
static ShardingRule getPointwiseRule(Operation *op,
                                     ArrayRef<int64_t> exceptDims = {}) {
  return makeBuilder(op)
      .addPointwise(getShape(op->getResult(0)), exceptDims)
      .build();
}

#define TESSERA_POINTWISE_RULE(OpTy)                                           \
  ShardingRule OpTy::getShardingRule() { return getPointwiseRule(*this); }
TESSERA_POINTWISE_RULE(AddOp)
TESSERA_POINTWISE_RULE(SubOp)
TESSERA_POINTWISE_RULE(MulOp)
TESSERA_POINTWISE_RULE(DivOp)
TESSERA_POINTWISE_RULE(MaxOp)
TESSERA_POINTWISE_RULE(MinOp)
TESSERA_POINTWISE_RULE(PowOp)
TESSERA_POINTWISE_RULE(ClampOp)
TESSERA_POINTWISE_RULE(NegOp)
TESSERA_POINTWISE_RULE(ExpOp)
TESSERA_POINTWISE_RULE(LogOp)
TESSERA_POINTWISE_RULE(SqrtOp)
TESSERA_POINTWISE_RULE(RsqrtOp)
TESSERA_POINTWISE_RULE(TanhOp)
TESSERA_POINTWISE_RULE(SinOp)
TESSERA_POINTWISE_RULE(CosOp)
TESSERA_POINTWISE_RULE(ErfOp)
TESSERA_POINTWISE_RULE(SigmoidOp)
TESSERA_POINTWISE_RULE(AbsOp)
TESSERA_POINTWISE_RULE(ReluOp)
TESSERA_POINTWISE_RULE(GeluOp)
TESSERA_POINTWISE_RULE(SiluOp)
TESSERA_POINTWISE_RULE(SelectOp)
TESSERA_POINTWISE_RULE(CompareOp)
TESSERA_POINTWISE_RULE(CastOp)
TESSERA_POINTWISE_RULE(SgdOp)
#undef TESSERA_POINTWISE_RULE

ShardingRule DotOp::getShardingRule() {
  ArrayRef<int64_t> lhsShape = getShape(getLhs());
  ArrayRef<int64_t> rhsShape = getShape(getRhs());
  ArrayRef<int64_t> lhsBatch = getLhsBatchingDims();
  ArrayRef<int64_t> rhsBatch = getRhsBatchingDims();
  ArrayRef<int64_t> lhsContract = getLhsContractingDims();
  ArrayRef<int64_t> rhsContract = getRhsContractingDims();
  ShardingRuleBuilder builder = makeBuilder(*this);
  int64_t resultDim = 0;
  for (auto [l, r] : llvm::zip(lhsBatch, rhsBatch))
    builder.addFactor({l, r}, {resultDim++}, lhsShape[l]);
  for (int64_t l = 0, e = lhsShape.size(); l < e; ++l)
    if (!llvm::is_contained(lhsBatch, l) && !llvm::is_contained(lhsContract, l))
      builder.addFactor({l, kNoDim}, {resultDim++}, lhsShape[l]);
  for (int64_t r = 0, e = rhsShape.size(); r < e; ++r)
    if (!llvm::is_contained(rhsBatch, r) && !llvm::is_contained(rhsContract, r))
      builder.addFactor({kNoDim, r}, {resultDim++}, rhsShape[r]);
  for (auto [l, r] : llvm::zip(lhsContract, rhsContract))
    builder.addFactor({l, r}, {kNoDim}, lhsShape[l], FactorKind::Reduction);
  return builder.build();
}

ShardingRule ConstantOp::getShardingRule() {
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (auto [dim, size] : llvm::enumerate(getShape(getResult())))
    builder.addFactor({}, {static_cast<int64_t>(dim)}, size);
  return builder.build();
}

/// Constants that are not splats are materialized whole and sliced.
bool ConstantOp::isFactorPartitionable(int64_t) {
  auto elements = dyn_cast<DenseElementsAttr>(getValue());
  return elements && elements.isSplat();
}

/// A splat takes its local type.
void ConstantOp::updateLocalAttributes() {
  auto elements = cast<DenseElementsAttr>(getValue());
  if (elements.isSplat())
    setValueAttr(
        DenseElementsAttr::get(getType(), elements.getSplatValue<Attribute>()));
}

/// An op's piece index (its last operand, if it has one: a random op's,
/// an nn.OffsetOpInterface op's) is whole.
static void addPieceFactor(ShardingRuleBuilder &builder, Operation *op,
                           Value piece) {
  if (!piece)
    return;
  SmallVector<int64_t> operandDims(op->getNumOperands(), kNoDim);
  operandDims.back() = 0;
  builder.addFactor(operandDims, {kNoDim}, getShape(piece)[0],
                    FactorKind::NeedReplication);
}

/// Every dim splits: a piece of `dim` is placed by the piece index
/// (getOffsetFactor), which is whole.
ShardingRule IotaOp::getShardingRule() {
  ShardingRuleBuilder builder = makeBuilder(*this);
  SmallVector<int64_t> none(getNumOperands(), kNoDim);
  for (auto [dim, size] : llvm::enumerate(getShape(getResult())))
    builder.addFactor(none, {static_cast<int64_t>(dim)}, size);
  addPieceFactor(builder, *this, getPiece());
  return builder.build();
}

int64_t IotaOp::getOffsetFactor() { return getDimAttr().getInt(); }

/// `dims` of the attention op's tensor operands, then none of its dropout's
/// step and piece.
static SmallVector<int64_t> withDropoutKey(Operation *op,
                                           ArrayRef<int64_t> dims) {
  SmallVector<int64_t> all(dims);
  all.resize(op->getNumOperands(), kNoDim);
  return all;
}

/// A random op splits every dim freely: the partitioner gives each piece
/// its index (`piece`), so a piece draws what the whole tensor holds there.
/// `input` (dropout's) shares the result's factors; the step and the piece
/// index are whole.
static ShardingRule getRandomRule(Operation *op) {
  auto random = cast<RandomOpInterface>(op);
  ArrayRef<int64_t> shape = getShape(op->getResult(0));
  bool hasInput = isa<DropoutOp>(op);
  bool hasPiece = static_cast<bool>(random.getPiece());
  ShardingRuleBuilder builder = makeBuilder(op);
  for (auto [dim, size] : llvm::enumerate(shape)) {
    SmallVector<int64_t> operandDims;
    if (hasInput)
      operandDims.push_back(dim);
    operandDims.push_back(kNoDim);
    if (hasPiece)
      operandDims.push_back(kNoDim);
    builder.addFactor(operandDims, {static_cast<int64_t>(dim)}, size);
  }
  addPieceFactor(builder, op, random.getPiece());
  return builder.build();
}

ShardingRule RandomUniformOp::getShardingRule() { return getRandomRule(*this); }
ShardingRule DropoutOp::getShardingRule() { return getRandomRule(*this); }

ShardingRule BroadcastOp::getShardingRule() {
  ArrayRef<int64_t> inShape = getShape(getInput());
  ArrayRef<int64_t> outShape = getShape(getResult());
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t out = 0, e = outShape.size(); out < e; ++out) {
    const int64_t *in = llvm::find(getDims(), out);
    int64_t inDim = in == getDims().end() ? kNoDim : in - getDims().begin();
    if (inDim != kNoDim && inShape[inDim] == outShape[out]) {
      builder.addFactor({inDim}, {out}, outShape[out]);
      continue;
    }
    // An expanded size-1 dim has a factor of its own.
    if (inDim != kNoDim)
      builder.addFactor({inDim}, {kNoDim}, 1);
    builder.addFactor({kNoDim}, {out}, outShape[out]);
  }
  return builder.build();
}

template <typename ReduceOp> static ShardingRule getReduceRule(ReduceOp op) {
  ShardingRuleBuilder builder = makeBuilder(op);
  int64_t resultDim = 0;
  for (auto [dim, size] : llvm::enumerate(getShape(op.getInput()))) {
    int64_t d = dim;
    if (llvm::is_contained(op.getDims(), d))
      builder.addFactor({d}, {kNoDim}, size, FactorKind::Reduction);
    else
      builder.addFactor({d}, {resultDim++}, size);
  }
  return builder.build();
}

ShardingRule ReduceSumOp::getShardingRule() { return getReduceRule(*this); }
ShardingRule ReduceMaxOp::getShardingRule() { return getReduceRule(*this); }
ShardingRule ReduceMeanOp::getShardingRule() { return getReduceRule(*this); }
PartialCombiner ReduceMaxOp::getPartialCombiner() {
  return PartialCombiner::Max;
}
PartialCombiner ReduceMeanOp::getPartialCombiner() {
  return PartialCombiner::Mean;
}

ShardingRule ReshapeOp::getShardingRule() {
  return makeBuilder(*this)
      .addReshape(getShape(getInput()), getShape(getResult()))
      .build();
}

ShardingRule TransposeOp::getShardingRule() {
  ArrayRef<int64_t> inShape = getShape(getInput());
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t in = 0, e = inShape.size(); in < e; ++in) {
    int64_t out = llvm::find(getPermutation(), in) - getPermutation().begin();
    builder.addFactor({in}, {out}, inShape[in]);
  }
  return builder.build();
}

std::optional<SmallVector<int64_t>> TransposeOp::getDimPermutation() {
  return SmallVector<int64_t>(getPermutation());
}

ShardingRule SliceOp::getShardingRule() {
  ArrayRef<int64_t> inShape = getShape(getInput());
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t dim = 0, e = inShape.size(); dim < e; ++dim) {
    int64_t size = getLimit()[dim] - getStart()[dim];
    if (size == inShape[dim]) {
      builder.addFactor({dim}, {dim}, size);
      continue;
    }
    builder.addFactor({dim}, {kNoDim}, inShape[dim],
                      FactorKind::NeedReplication);
    builder.addFactor({kNoDim}, {dim}, size, FactorKind::NeedReplication);
  }
  return builder.build();
}

/// The limits follow the local sizes (only whole dims are split).
void SliceOp::updateLocalAttributes() {
  SmallVector<int64_t> limit(getLimit());
  for (auto [dim, size] : llvm::enumerate(getType().getShape()))
    limit[dim] = getStart()[dim] + size;
  setLimit(limit);
}

ShardingRule ConcatOp::getShardingRule() {
  ArrayRef<int64_t> outShape = getShape(getResult());
  int64_t numInputs = getInputs().size();
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t dim = 0, e = outShape.size(); dim < e; ++dim) {
    if (dim != static_cast<int64_t>(getDim())) {
      builder.addFactor(SmallVector<int64_t>(numInputs, dim), {dim},
                        outShape[dim]);
      continue;
    }
    for (int64_t input = 0; input < numInputs; ++input) {
      SmallVector<int64_t> dims(numInputs, kNoDim);
      dims[input] = dim;
      builder.addFactor(dims, {kNoDim}, getShape(getInputs()[input])[dim],
                        FactorKind::NeedReplication);
    }
    builder.addFactor({}, {dim}, outShape[dim], FactorKind::NeedReplication);
  }
  return builder.build();
}

ShardingRule SoftmaxOp::getShardingRule() {
  // A causal softmax masks by global query and key positions, as
  // nn.causal_mask does.
  auto dim = static_cast<int64_t>(getDim());
  if (getCausal())
    return getPointwiseRule(*this, {dim - 1, dim});
  return getPointwiseRule(*this, {dim});
}
ShardingRule LogSoftmaxOp::getShardingRule() {
  return getPointwiseRule(*this, {static_cast<int64_t>(getDim())});
}

/// Norms over the last dim: leading dims are parallel; the normalized dim is
/// shared with the per-feature parameters and cannot be split.
static ShardingRule getNormRule(Operation *op) {
  ArrayRef<int64_t> shape = getShape(op->getOperand(0));
  int64_t numParams = op->getNumOperands() - 1;
  ShardingRuleBuilder builder = makeBuilder(op);
  int64_t last = shape.size() - 1;
  for (int64_t dim = 0; dim < last; ++dim) {
    SmallVector<int64_t> operandDims(numParams + 1, kNoDim);
    operandDims[0] = dim;
    builder.addFactor(operandDims, {dim}, shape[dim]);
  }
  SmallVector<int64_t> operandDims(numParams + 1, 0);
  operandDims[0] = last;
  builder.addFactor(operandDims, {last}, shape[last],
                    FactorKind::NeedReplication);
  return builder.build();
}

ShardingRule LayerNormOp::getShardingRule() { return getNormRule(*this); }
ShardingRule RmsNormOp::getShardingRule() { return getNormRule(*this); }

/// Fused norm gradients (input, gamma, result gradient -> dx, x̂): as the
/// norm, with the result gradient and both results laid out as the input.
static ShardingRule getNormGradRule(Operation *op) {
  ArrayRef<int64_t> shape = getShape(op->getOperand(0));
  ShardingRuleBuilder builder = makeBuilder(op);
  int64_t last = shape.size() - 1;
  for (int64_t dim = 0; dim < last; ++dim)
    builder.addFactor({dim, kNoDim, dim}, {dim, dim}, shape[dim]);
  builder.addFactor({last, 0, last}, {last, last}, shape[last],
                    FactorKind::NeedReplication);
  return builder.build();
}

ShardingRule LayerNormGradOp::getShardingRule() {
  return getNormGradRule(*this);
}
ShardingRule RmsNormGradOp::getShardingRule() { return getNormGradRule(*this); }

/// `dims` of an op's operands, then none of its piece index, if any (the
/// last operand of an nn.OffsetOpInterface op).
static SmallVector<int64_t> withPiece(Operation *op, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> all(dims);
  all.resize(op->getNumOperands(), kNoDim);
  return all;
}

ShardingRule EmbeddingOp::getShardingRule() {
  ArrayRef<int64_t> tableShape = getShape(getTable());
  ArrayRef<int64_t> indexShape = getShape(getIndices());
  ShardingRuleBuilder builder = makeBuilder(*this);
  int64_t rank = indexShape.size();
  for (int64_t dim = 0; dim < rank; ++dim)
    builder.addFactor(withPiece(*this, {kNoDim, dim}), {dim}, indexShape[dim]);
  builder.addFactor(withPiece(*this, {1, kNoDim}), {rank}, tableShape[1]);
  // A lookup is a product with a one-hot matrix: a vocab-split table gives
  // partial sums (Megatron-LM's vocab-parallel embedding), each device's
  // rows placed by its piece index (getOffsetFactor).
  builder.addFactor(withPiece(*this, {0, kNoDim}), {kNoDim}, tableShape[0],
                    FactorKind::Reduction);
  addPieceFactor(builder, *this, getPiece());
  return builder.build();
}

int64_t EmbeddingOp::getOffsetFactor() {
  return getIndices().getType().getRank() + 1;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  ArrayRef<int64_t> shape = getShape(getLogits());
  ShardingRuleBuilder builder = makeBuilder(*this);
  int64_t last = shape.size() - 1;
  for (int64_t dim = 0; dim < last; ++dim)
    builder.addFactor({dim, dim}, {dim}, shape[dim]);
  // The log-sum-exp over classes needs the whole row.
  builder.addFactor({last, kNoDim}, {kNoDim}, shape[last],
                    FactorKind::NeedReplication);
  return builder.build();
}

ShardingRule CausalMaskOp::getShardingRule() {
  // The mask depends on the global query and key positions; a local op on a
  // split of them would mask the wrong entries.
  int64_t rank = getShape(getInput()).size();
  return getPointwiseRule(*this, {rank - 2, rank - 1});
}

namespace {
/// Attention's sizes: q [b, heads, s, d], k [b, kv, t, d], v [b, kv, t, dv].
struct AttentionSizes {
  int64_t batch, heads, kvHeads, queries, keys, headDim, valueDim;
  AttentionSizes(Value query, Value value) {
    ArrayRef<int64_t> q = getShape(query), v = getShape(value);
    batch = q[0];
    heads = q[1];
    kvHeads = v[1];
    queries = q[2];
    keys = v[2];
    headDim = q[3];
    valueDim = v[3];
  }
};
} // namespace

ShardingRule AttentionOp::getShardingRule() {
  AttentionSizes n(getQuery(), getValue());
  ShardingRuleBuilder builder = makeBuilder(*this);
  builder.addFactor(withDropoutKey(*this, {0, 0, 0}), {0}, n.batch);
  // A query head is (kv head, its place in the group), kv head major. A
  // split of the group reads its kv head on every device of the split:
  // with more TP ranks than kv heads, Megatron's replicated kv heads.
  builder.addFactor(withDropoutKey(*this, {1, 1, 1}), {1}, n.kvHeads);
  if (n.heads != n.kvHeads)
    builder.addFactor(withDropoutKey(*this, {1, kNoDim, kNoDim}), {1},
                      n.heads / n.kvHeads);
  // A causal piece of the queries is placed by its piece index.
  builder.addFactor(withDropoutKey(*this, {2, kNoDim, kNoDim}), {2}, n.queries);
  // The softmax reads every key, and every score all of d.
  builder.addFactor(withDropoutKey(*this, {kNoDim, 2, 2}), {kNoDim}, n.keys,
                    FactorKind::NeedReplication);
  builder.addFactor(withDropoutKey(*this, {3, 3, kNoDim}), {kNoDim}, n.headDim,
                    FactorKind::NeedReplication);
  builder.addFactor(withDropoutKey(*this, {kNoDim, kNoDim, 3}), {3},
                    n.valueDim);
  addPieceFactor(builder, *this, getPiece());
  return builder.build();
}

ShardingRule AttentionGradOp::getShardingRule() {
  AttentionSizes n(getQuery(), getValue());
  ShardingRuleBuilder builder = makeBuilder(*this);
  // Operands q, k, v, o, do; results dq, dk, dv. The batch and the heads
  // split: dk and dv sum over the query heads of their group (partial where
  // the group splits) and over the queries, dq over the keys, and the
  // scores need all of d and dv.
  builder.addFactor(withDropoutKey(*this, {0, 0, 0, 0, 0}), {0, 0, 0}, n.batch);
  builder.addFactor(withDropoutKey(*this, {1, 1, 1, 1, 1}), {1, 1, 1},
                    n.kvHeads);
  if (n.heads != n.kvHeads)
    builder.addFactor(withDropoutKey(*this, {1, kNoDim, kNoDim, 1, 1}),
                      {1, kNoDim, kNoDim}, n.heads / n.kvHeads,
                      FactorKind::Reduction);
  // dk and dv sum over the queries: partial on a piece of them.
  builder.addFactor(withDropoutKey(*this, {2, kNoDim, kNoDim, 2, 2}),
                    {2, kNoDim, kNoDim}, n.queries, FactorKind::Reduction);
  builder.addFactor(withDropoutKey(*this, {kNoDim, 2, 2, kNoDim, kNoDim}),
                    {kNoDim, 2, 2}, n.keys, FactorKind::NeedReplication);
  builder.addFactor(withDropoutKey(*this, {3, 3, kNoDim, kNoDim, kNoDim}),
                    {3, 3, kNoDim}, n.headDim, FactorKind::NeedReplication);
  builder.addFactor(withDropoutKey(*this, {kNoDim, kNoDim, 3, 3, 3}),
                    {kNoDim, kNoDim, 3}, n.valueDim,
                    FactorKind::NeedReplication);
  addPieceFactor(builder, *this, getPiece());
  return builder.build();
}

/// The query heads as groups, one per kv head (major) of the query heads
/// that read it (minor), as the rules' factors split them: the kv heads and
/// the query heads.
static std::pair<int64_t, int64_t> getHeadGroups(Value query, Value key) {
  return {getShape(key)[1], getShape(query)[1]};
}

std::optional<std::pair<int64_t, int64_t>> AttentionOp::getSubAxisGroups() {
  return getHeadGroups(getQuery(), getKey());
}

std::optional<std::pair<int64_t, int64_t>> AttentionGradOp::getSubAxisGroups() {
  return getHeadGroups(getQuery(), getKey());
}

/// A ring attention block (and its gradient), which the partitioner makes
/// on local pieces: the batch and the kv heads with their groups split;
/// the sequence and head dims it reads whole, as a block is one device's.
static ShardingRule getAttentionBlockRule(Operation *op, Value query,
                                          Value value, bool gradient) {
  AttentionSizes n(query, value);
  ShardingRuleBuilder builder = makeBuilder(op);
  // Operands q, k, v, (o, do, lse,) index; results o, lse or dq, dk, dv.
  auto dims = [&](SmallVector<int64_t> q, SmallVector<int64_t> kv,
                  SmallVector<int64_t> rows) {
    SmallVector<int64_t> operands = {q[0], kv[0], kv[1]};
    if (gradient)
      operands.append({q[1], q[1], rows[0]});
    operands.push_back(kNoDim);
    SmallVector<int64_t> results =
        gradient ? SmallVector<int64_t>{q[0], kv[0], kv[1]}
                 : SmallVector<int64_t>{q[1], rows[0]};
    return std::pair(operands, results);
  };
  auto add = [&](SmallVector<int64_t> q, SmallVector<int64_t> kv,
                 SmallVector<int64_t> rows, int64_t size,
                 FactorKind kind = FactorKind::Parallel) {
    auto [operands, results] = dims(q, kv, rows);
    builder.addFactor(operands, results, size, kind);
  };
  // {q, o/dq dims}, {k, v dims}, {lse dim}: batch, kv heads, their groups.
  add({0, 0}, {0, 0}, {0}, n.batch);
  add({1, 1}, {1, 1}, {1}, n.kvHeads);
  if (n.heads != n.kvHeads)
    add({1, 1}, {kNoDim, kNoDim}, {1}, n.heads / n.kvHeads,
        gradient ? FactorKind::Reduction : FactorKind::Parallel);
  add({2, 2}, {kNoDim, kNoDim}, {2}, n.queries, FactorKind::NeedReplication);
  add({kNoDim, kNoDim}, {2, 2}, {kNoDim}, n.keys, FactorKind::NeedReplication);
  add({3, kNoDim}, {3, kNoDim}, {kNoDim}, n.headDim,
      FactorKind::NeedReplication);
  add({kNoDim, 3}, {kNoDim, 3}, {kNoDim}, n.valueDim,
      FactorKind::NeedReplication);
  return builder.build();
}

ShardingRule AttentionBlockOp::getShardingRule() {
  return getAttentionBlockRule(*this, getQuery(), getValue(), false);
}

ShardingRule AttentionBlockGradOp::getShardingRule() {
  return getAttentionBlockRule(*this, getQuery(), getValue(), true);
}

ShardingRule GatherOp::getShardingRule() {
  ArrayRef<int64_t> in = getShape(getInput()), out = getShape(getResult());
  int64_t axis = getAxisAttr().getInt();
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t dim = 0, e = in.size(); dim < e; ++dim) {
    if (dim != axis) {
      builder.addFactor({dim, dim}, {dim}, in[dim]);
      continue;
    }
    // An index may pick any element of the input's axis.
    builder.addFactor({dim, kNoDim}, {kNoDim}, in[dim],
                      FactorKind::NeedReplication);
    builder.addFactor({kNoDim, dim}, {dim}, out[dim]);
  }
  return builder.build();
}

ShardingRule ScatterAddOp::getShardingRule() {
  ArrayRef<int64_t> in = getShape(getSource()), out = getShape(getResult());
  int64_t axis = getAxisAttr().getInt();
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t dim = 0, e = in.size(); dim < e; ++dim) {
    if (dim != axis) {
      builder.addFactor({dim, dim}, {dim}, in[dim]);
      continue;
    }
    // A piece of the sources scatters into the whole axis: partial sums.
    builder.addFactor({dim, dim}, {kNoDim}, in[dim], FactorKind::Reduction);
    builder.addFactor({kNoDim, kNoDim}, {dim}, out[dim],
                      FactorKind::NeedReplication);
  }
  return builder.build();
}

ShardingRule TopKOp::getShardingRule() {
  ArrayRef<int64_t> in = getShape(getInput());
  int64_t last = in.size() - 1;
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t dim = 0; dim < last; ++dim)
    builder.addFactor({dim}, {dim, dim}, in[dim]);
  // A row's k largest need the whole row.
  builder.addFactor({last}, {kNoDim, kNoDim}, in[last],
                    FactorKind::NeedReplication);
  builder.addFactor({kNoDim}, {last, last}, getKAttr().getInt(),
                    FactorKind::NeedReplication);
  return builder.build();
}

ShardingRule MoeDispatchOp::getShardingRule() {
  ArrayRef<int64_t> in = getShape(getIndices());
  ArrayRef<int64_t> out = getShape(getResult());
  int64_t tokens = in.size() - 2;
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (int64_t dim = 0; dim < tokens; ++dim)
    builder.addFactor({dim}, {dim}, in[dim]);
  // An expert's slots are counted over every token and choice of a group.
  builder.addFactor({tokens}, {tokens}, in[tokens],
                    FactorKind::NeedReplication);
  builder.addFactor({tokens + 1}, {kNoDim}, in[tokens + 1],
                    FactorKind::NeedReplication);
  builder.addFactor({kNoDim}, {tokens + 1}, out[tokens + 1],
                    FactorKind::NeedReplication);
  builder.addFactor({kNoDim}, {tokens + 2}, out[tokens + 2],
                    FactorKind::NeedReplication);
  return builder.build();
}

ShardingRule AdamWOp::getShardingRule() {
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (auto [dim, size] : llvm::enumerate(getShape(getParam()))) {
    int64_t d = dim;
    // The step counter, the gradient norm and the loss scale are scalars.
    SmallVector<int64_t> operands = {d, d, d, d, kNoDim};
    if (getGradNorm())
      operands.push_back(kNoDim);
    if (getLossScale())
      operands.push_back(kNoDim);
    builder.addFactor(operands, {d, d, d}, size);
  }
  return builder.build();
}

ShardingRule SumSquaresOp::getShardingRule() {
  ShardingRuleBuilder builder = makeBuilder(*this);
  for (auto [dim, size] : llvm::enumerate(getShape(getInput())))
    builder.addFactor({static_cast<int64_t>(dim)}, {kNoDim}, size,
                      FactorKind::Reduction);
  return builder.build();
}

/// Squares map the zero padding of a flat piece to zeros.
bool SumSquaresOp::reducesFlatPieces() { return true; }

ShardingRule OneHotOp::getShardingRule() {
  ArrayRef<int64_t> shape = getShape(getResult());
  ShardingRuleBuilder builder = makeBuilder(*this);
  int64_t last = shape.size() - 1;
  for (int64_t dim = 0; dim < last; ++dim)
    builder.addFactor(withPiece(*this, {dim}), {dim}, shape[dim]);
  // A split depth is placed by the piece index (getOffsetFactor).
  builder.addFactor(withPiece(*this, {kNoDim}), {last}, shape[last]);
  addPieceFactor(builder, *this, getPiece());
  return builder.build();
}

int64_t OneHotOp::getOffsetFactor() {
  return getResult().getType().getRank() - 1;
}

ShardingRule EmbeddingGradOp::getShardingRule() {
  ArrayRef<int64_t> gradShape = getShape(getGrad());
  ShardingRuleBuilder builder = makeBuilder(*this);
  int64_t rank = gradShape.size() - 1;
  // Positions are summed over: a split one leaves partial tables.
  for (int64_t dim = 0; dim < rank; ++dim)
    builder.addFactor(withPiece(*this, {dim, dim}), {kNoDim}, gradShape[dim],
                      FactorKind::Reduction);
  builder.addFactor(withPiece(*this, {rank, kNoDim}), {1}, gradShape[rank]);
  // A split vocab: each device scatters into its rows, placed by the piece
  // index (getOffsetFactor).
  builder.addFactor(withPiece(*this, {kNoDim, kNoDim}), {0},
                    getShape(getResult())[0]);
  addPieceFactor(builder, *this, getPiece());
  return builder.build();
}

int64_t EmbeddingGradOp::getOffsetFactor() {
  return getIndices().getType().getRank() + 1;
}

/// A device's rows of a vocab-split table gradient.
void EmbeddingGradOp::updateLocalAttributes() {
  setVocab(getResult().getType().getDimSize(0));
}

//===----------------------------------------------------------------------===//
// Linear ops: partial sums in, partial sums out
//===----------------------------------------------------------------------===//

bool AddOp::isLinear() { return true; }
bool SubOp::isLinear() { return true; }
bool NegOp::isLinear() { return true; }
bool ReshapeOp::isLinear() { return true; }
bool TransposeOp::isLinear() { return true; }
/// Up to rounding: the sum of cast partial sums is at least as exact as the
/// cast of their sum (mixed precision sums bf16 gradients in f32).
bool CastOp::isLinear() { return true; }
/// Of operands that are all partial sums over the same axes.
bool ConcatOp::isLinear() { return true; }
