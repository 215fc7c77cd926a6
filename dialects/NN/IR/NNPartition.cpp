//===- NNPartition.cpp - nn ops that partition themselves: ring attention -===//
//
// nn.attention and nn.attention_grad with `ring`, their sequence split, are
// not computed as their factor rule lays them out: each partitions itself
// (ShardingRuleOpInterface::partition) into a ring of blocks, asking
// --tessera-partition for its pieces and collectives through the
// PartitionContext, so that nn needs neither dist nor the sharding analysis.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

#include <array>
#include <type_traits>

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

namespace {

/// Builds one ring attention's blocks on a device's pieces, at the builder's
/// point: the blocks share the ring, the device's index in it and the
/// attention's attributes.
class RingBuilder {
public:
  RingBuilder(OpBuilder &builder, PartitionContext &context, Location loc,
              ArrayRef<StringAttr> ring, Value index, bool causal,
              APFloat scale, int64_t zigzag)
      : builder(builder), context(context), loc(loc), ring(ring), index(index),
        causal(causal), scale(std::move(scale)), zigzag(zigzag) {}

  std::pair<Value, Value> buildForward(Value query, Value key, Value value);
  std::array<Value, 3> buildGradient(ArrayRef<Value> local, Value lse);

private:
  /// `value` sent one step along the ring.
  Value passAlongRing(Value value) {
    return context.createRingShift(loc, value, ring);
  }

  OpBuilder &builder;
  PartitionContext &context;
  Location loc;
  ArrayRef<StringAttr> ring;
  /// The device's index in the ring (a tensor<1xi64>).
  Value index;
  bool causal;
  APFloat scale;
  int64_t zigzag;
};

} // namespace

/// Ring attention's forward on local pieces: each step's block against the
/// keys and values the ring passed on (the next step's sent before the
/// block computes, so that the transfer overlaps it), combined by the
/// blocks' log-sum-exps. Answers the output and the rows' log-sum-exps.
std::pair<Value, Value> RingBuilder::buildForward(Value query, Value key,
                                                  Value value) {
  MLIRContext *mlirContext = builder.getContext();
  int64_t size = context.getGroupSize(ring);
  auto queryType = cast<RankedTensorType>(query.getType());
  auto outType = RankedTensorType::get(
      {queryType.getDimSize(0), queryType.getDimSize(1),
       queryType.getDimSize(2),
       cast<RankedTensorType>(value.getType()).getDimSize(3)},
      queryType.getElementType());
  auto lseType = RankedTensorType::get(queryType.getShape().drop_back(),
                                       Float32Type::get(mlirContext));
  auto wideType = outType.clone(Float32Type::get(mlirContext));
  Value out, lse;
  for (int64_t step = 0; step < size; ++step) {
    Value nextKey, nextValue;
    if (step + 1 < size) {
      nextKey = passAlongRing(key);
      nextValue = passAlongRing(value);
    }
    auto block = AttentionBlockOp::create(
        builder, loc, TypeRange{outType, lseType}, query, key, value, index,
        causal, scale, step, size, zigzag);
    // The blocks combine in f32 (the kernels compute in it).
    Value blockOut = block.getResult();
    if (!outType.getElementType().isF32())
      blockOut = CastOp::create(builder, loc, wideType, blockOut);
    if (step == 0) {
      out = blockOut;
      lse = block.getLse();
    } else {
      // l = m + log(exp(l1 - m) + exp(l2 - m)), m their maximum (finite:
      // the first block holds each query's own position);
      // o = (o1 exp(l1 - m) + o2 exp(l2 - m)) / (exp(l1 - m) + exp(l2 - m)).
      Value high = MaxOp::create(builder, loc, lse, block.getLse());
      Value a =
          ExpOp::create(builder, loc, SubOp::create(builder, loc, lse, high));
      Value b = ExpOp::create(
          builder, loc, SubOp::create(builder, loc, block.getLse(), high));
      Value sum = AddOp::create(builder, loc, a, b);
      lse = AddOp::create(builder, loc, high, LogOp::create(builder, loc, sum));
      auto spread = [&](Value weight) {
        return BroadcastOp::create(builder, loc, wideType,
                                   DivOp::create(builder, loc, weight, sum),
                                   builder.getDenseI64ArrayAttr({0, 1, 2}));
      };
      out = AddOp::create(builder, loc,
                          MulOp::create(builder, loc, out, spread(a)),
                          MulOp::create(builder, loc, blockOut, spread(b)));
    }
    key = nextKey;
    value = nextValue;
  }
  if (out.getType() != outType)
    out = CastOp::create(builder, loc, outType, out);
  return {out, lse};
}

/// Ring attention's gradient on local pieces (`local`: q, k, v, o and do)
/// with the rows' log-sum-exps `lse`: dq sums the blocks' terms here; each
/// block's dk and dv sum as they travel the ring with its keys and values,
/// and go home at the end. Answers dq, dk and dv.
std::array<Value, 3> RingBuilder::buildGradient(ArrayRef<Value> local,
                                                Value lse) {
  int64_t size = context.getGroupSize(ring);
  Value key = local[1], value = local[2], dq, dk, dv;
  for (int64_t step = 0; step < size; ++step) {
    Value nextKey, nextValue;
    if (step + 1 < size) {
      nextKey = passAlongRing(key);
      nextValue = passAlongRing(value);
    }
    auto block = AttentionBlockGradOp::create(
        builder, loc,
        TypeRange{local[0].getType(), key.getType(), value.getType()}, local[0],
        key, value, local[3], local[4], lse, index, causal, scale, step, size,
        zigzag);
    auto sum = [&](Value total, Value term) -> Value {
      return total ? AddOp::create(builder, loc, total, term).getResult()
                   : term;
    };
    dq = sum(dq, block.getQueryGrad());
    dk = sum(dk, block.getKeyGrad());
    dv = sum(dv, block.getValueGrad());
    dk = passAlongRing(dk);
    dv = passAlongRing(dv);
    key = nextKey;
    value = nextValue;
  }
  return {dq, dk, dv};
}

/// The axes that split the queries of `op` on the chosen factor axes when
/// it has `ring` and they span more than one device; else none.
template <typename OpTy>
static AxisList getRingAxes(OpTy op, PartitionContext &context) {
  if (!op.getRing())
    return {};
  // The factor of the queries' sequence (dim 2 of q).
  int64_t queries = context.getRule().getOperandDimFactors(0, 2).front();
  AxisList axes = context.getFactorAxes()[queries];
  return context.getGroupSize(axes) > 1 ? axes : AxisList();
}

/// The first `count` operands (q, k, v, and o and do for the gradient)
/// laid out as the chosen factors give them, but the keys' and values'
/// sequence over `ring` too.
static FailureOr<SmallVector<Value>>
reshardRingOperands(PartitionContext &context, unsigned count,
                    ArrayRef<StringAttr> ring) {
  SmallVector<Value> local;
  for (unsigned index = 0; index < count; ++index) {
    SmallVector<AxisList> dimAxes = context.getOperandDimAxes(index);
    if (index == 1 || index == 2)
      dimAxes[2].assign(ring.begin(), ring.end());
    FailureOr<Value> piece = context.reshardOperand(index, dimAxes);
    if (failed(piece))
      return failure();
    local.push_back(*piece);
  }
  return local;
}

/// Replaces the op's results by the ring's `made`: laid out as the chosen
/// factors give them, but complete over the ring, and the gradient's keys'
/// and values' gradients on their piece of the sequence.
static LogicalResult replaceRingResults(PartitionContext &context,
                                        ArrayRef<Value> made,
                                        ArrayRef<StringAttr> ring,
                                        bool isGradient) {
  for (auto [index, local] : llvm::enumerate(made)) {
    SmallVector<AxisList> dimAxes = context.getResultDimAxes(index);
    AxisList unreduced = context.getResultUnreduced(index);
    llvm::erase_if(unreduced, [&](StringAttr axis) {
      return llvm::is_contained(ring, axis);
    });
    if (isGradient && index > 0)
      dimAxes[2].assign(ring.begin(), ring.end());
    if (failed(context.replaceResult(index, local, dimAxes, unreduced)))
      return failure();
  }
  return success();
}

/// nn.attention or nn.attention_grad with `ring`, its queries split over
/// more than one device, computed as a ring: the operands resharded (the
/// keys and values on their piece of the sequence), this device's index in
/// the ring, the blocks and the results, in that order. Answers false for
/// one without a ring, which the factor partitioning computes.
template <typename OpTy>
static FailureOr<bool> partitionRing(OpTy op, PartitionContext &context,
                                     OpBuilder &builder) {
  constexpr bool isGradient = std::is_same_v<OpTy, AttentionGradOp>;
  AxisList ring = getRingAxes(op, context);
  if (ring.empty())
    return false;
  if (op.getDropout().convertToFloat() > 0) {
    op.emitOpError("with ring and dropout is not built: drop the ring (the "
                   "keys are then gathered) or the dropout");
    return failure();
  }
  Location loc = op.getLoc();
  FailureOr<SmallVector<Value>> local =
      reshardRingOperands(context, isGradient ? 5 : 3, ring);
  if (failed(local))
    return failure();
  Value index = context.createAxisIndex(loc, {ring});
  // In zigzag order each device of the ring holds whole chunks.
  int64_t zigzag = op.getZigzag();
  int64_t size = context.getGroupSize(ring);
  if (zigzag > 0 && 2 * zigzag % size != 0) {
    op.emitOpError("stores its sequence in zigzag order of ")
        << 2 * zigzag << " chunks, which a ring of " << size
        << " devices does not split into whole chunks (it was balanced for a "
           "ring of "
        << zigzag << ")";
    return failure();
  }
  RingBuilder blocks(builder, context, loc, ring, index, op.getCausal(),
                     op.getScale(), zigzag);
  ArrayRef<Value> pieces = *local;
  SmallVector<Value> made;
  if constexpr (isGradient) {
    // The forward's log-sum-exps, or the forward again where they are not
    // at hand (a gradient without its ring forward).
    Value lse = context.getCompanion(pieces[3]);
    if (!lse)
      lse = blocks.buildForward(pieces[0], pieces[1], pieces[2]).second;
    llvm::append_range(made, blocks.buildGradient(pieces, lse));
  } else {
    auto [out, lse] = blocks.buildForward(pieces[0], pieces[1], pieces[2]);
    context.setCompanion(out, lse);
    made.push_back(out);
  }
  if (failed(replaceRingResults(context, made, ring, isGradient)))
    return failure();
  return true;
}

FailureOr<bool> AttentionOp::partition(PartitionContext &context,
                                       OpBuilder &builder) {
  return partitionRing(*this, context, builder);
}

FailureOr<bool> AttentionGradOp::partition(PartitionContext &context,
                                           OpBuilder &builder) {
  return partitionRing(*this, context, builder);
}
