//===- NNGradients.cpp - reverse-mode derivatives of nn ops ---------------===//
//
// Every nn op's vector-Jacobian product, written with nn ops so that the
// backward program shards, partitions and runs like the forward one. Only
// the embedding's scatter-add (nn.embedding_grad) and cross-entropy's one-hot
// (nn.one_hot) needed ops of their own.
//
//===----------------------------------------------------------------------===//

#include "dialects/Interfaces/GradientOpInterface.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

namespace {

/// Builds the nn ops of a derivative at one insertion point.
class Grad {
public:
  Grad(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  Value splat(RankedTensorType type, double value) {
    Attribute element = b.getFloatAttr(type.getElementType(), value);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, element));
  }
  Value zerosLike(Value v) { return splat(typeOf(v), 0.0); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value scale(Value x, double factor) {
    return mul(x, splat(typeOf(x), factor));
  }
  Value reduceSum(Value x, ArrayRef<int64_t> dims) {
    if (dims.empty())
      return x;
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims));
  }
  Value reduceMean(Value x, ArrayRef<int64_t> dims) {
    return ReduceMeanOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims));
  }
  /// Broadcasts `x`, which is `full` with `reducedDims` removed, back to it.
  Value expand(Value x, RankedTensorType full, ArrayRef<int64_t> reducedDims) {
    if (reducedDims.empty())
      return x;
    SmallVector<int64_t> kept;
    for (int64_t d = 0; d < full.getRank(); ++d)
      if (!llvm::is_contained(reducedDims, d))
        kept.push_back(d);
    return BroadcastOp::create(b, loc, full, x, b.getDenseI64ArrayAttr(kept));
  }
  /// Reduces over `dim` and broadcasts back: the per-row sum.
  Value rowSum(Value x, int64_t dim) {
    return expand(reduceSum(x, {dim}), typeOf(x), {dim});
  }
  Value rowMean(Value x, int64_t dim) {
    return expand(reduceMean(x, {dim}), typeOf(x), {dim});
  }
  Value compare(ComparePredicate predicate, Value x, Value y) {
    return CompareOp::create(b, loc, predicate, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return SelectOp::create(b, loc, c, x, y);
  }
  Value transpose(Value x, ArrayRef<int64_t> permutation) {
    return TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(permutation));
  }

  OpBuilder &b;
  Location loc;
};

/// All dims of a rank but the last.
SmallVector<int64_t> leadingDims(int64_t rank) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d + 1 < rank; ++d)
    dims.push_back(d);
  return dims;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define TESSERA_GRADIENT(OpTy)                                                 \
  LogicalResult OpTy::buildGradients(OpBuilder &builder,                       \
                                     ArrayRef<Value> resultGradients,          \
                                     SmallVectorImpl<Value> &operandGradients)

TESSERA_GRADIENT(AddOp) {
  operandGradients.assign({resultGradients[0], resultGradients[0]});
  return success();
}

TESSERA_GRADIENT(SubOp) {
  Grad g(builder, getLoc());
  operandGradients.assign({resultGradients[0], g.neg(resultGradients[0])});
  return success();
}

TESSERA_GRADIENT(MulOp) {
  Grad g(builder, getLoc());
  Value dy = resultGradients[0];
  operandGradients.assign({g.mul(dy, getRhs()), g.mul(dy, getLhs())});
  return success();
}

TESSERA_GRADIENT(DivOp) {
  Grad g(builder, getLoc());
  Value dy = resultGradients[0];
  Value dLhs = g.div(dy, getRhs());
  // d(l/r)/dr = -(l/r)/r.
  Value dRhs = g.neg(g.div(g.mul(dy, getResult()), getRhs()));
  operandGradients.assign({dLhs, dRhs});
  return success();
}

/// The gradients of max (`larger`: gt) or min (lt): all of dy to the
/// winning operand, half to each on a tie (as PyTorch's maximum and
/// minimum).
static void buildExtremumGradients(OpBuilder &builder, Location loc,
                                   ComparePredicate wins, Value lhs, Value rhs,
                                   Value dy,
                                   SmallVectorImpl<Value> &operandGradients) {
  Grad g(builder, loc);
  Value zero = g.zerosLike(dy), half = g.scale(dy, 0.5);
  Value tie = g.compare(ComparePredicate::eq, lhs, rhs);
  operandGradients.assign(
      {g.select(g.compare(wins, lhs, rhs), dy, g.select(tie, half, zero)),
       g.select(g.compare(wins, rhs, lhs), dy, g.select(tie, half, zero))});
}

TESSERA_GRADIENT(MaxOp) {
  buildExtremumGradients(builder, getLoc(), ComparePredicate::gt, getLhs(),
                         getRhs(), resultGradients[0], operandGradients);
  return success();
}

TESSERA_GRADIENT(MinOp) {
  buildExtremumGradients(builder, getLoc(), ComparePredicate::lt, getLhs(),
                         getRhs(), resultGradients[0], operandGradients);
  return success();
}

TESSERA_GRADIENT(PowOp) {
  Grad g(builder, getLoc());
  Value dy = resultGradients[0], x = getLhs(), p = getRhs();
  // d(x^p)/dx = p x^(p-1); d(x^p)/dp = x^p log(x), 0 where x <= 0.
  Value ones = g.splat(Grad::typeOf(p), 1.0);
  Value dx =
      g.mul(dy, g.mul(p, PowOp::create(builder, getLoc(), x, g.sub(p, ones))));
  Value zero = g.zerosLike(x);
  Value positive = g.compare(ComparePredicate::gt, x, zero);
  // log of a clamped base, so that the masked lanes hold no NaN.
  Value safe = g.select(positive, x, g.splat(Grad::typeOf(x), 1.0));
  Value dp = g.select(
      positive,
      g.mul(dy, g.mul(getResult(), LogOp::create(builder, getLoc(), safe))),
      zero);
  operandGradients.assign({dx, dp});
  return success();
}

TESSERA_GRADIENT(ClampOp) {
  Grad g(builder, getLoc());
  Value x = getInput(), dy = resultGradients[0];
  auto type = Grad::typeOf(x);
  Value inside = g.select(g.compare(ComparePredicate::ge, x,
                                    g.splat(type, getMin().convertToDouble())),
                          dy, g.zerosLike(dy));
  operandGradients.assign(
      {g.select(g.compare(ComparePredicate::le, x,
                          g.splat(type, getMax().convertToDouble())),
                inside, g.zerosLike(dy))});
  return success();
}

TESSERA_GRADIENT(NegOp) {
  Grad g(builder, getLoc());
  operandGradients.assign({g.neg(resultGradients[0])});
  return success();
}

TESSERA_GRADIENT(ExpOp) {
  Grad g(builder, getLoc());
  operandGradients.assign({g.mul(resultGradients[0], getResult())});
  return success();
}

TESSERA_GRADIENT(LogOp) {
  Grad g(builder, getLoc());
  operandGradients.assign({g.div(resultGradients[0], getInput())});
  return success();
}

TESSERA_GRADIENT(SqrtOp) {
  Grad g(builder, getLoc());
  // d sqrt(x) = 1 / (2 sqrt(x)).
  operandGradients.assign(
      {g.div(resultGradients[0], g.scale(getResult(), 2.0))});
  return success();
}

TESSERA_GRADIENT(RsqrtOp) {
  Grad g(builder, getLoc());
  // d x^-1/2 = -x^-3/2 / 2 = -y^3 / 2.
  Value y = getResult();
  Value cube = g.mul(g.mul(y, y), y);
  operandGradients.assign({g.mul(resultGradients[0], g.scale(cube, -0.5))});
  return success();
}

TESSERA_GRADIENT(TanhOp) {
  Grad g(builder, getLoc());
  Value y = getResult();
  Value one = g.splat(Grad::typeOf(y), 1.0);
  operandGradients.assign({g.mul(resultGradients[0], g.sub(one, g.mul(y, y)))});
  return success();
}

TESSERA_GRADIENT(SinOp) {
  Grad g(builder, getLoc());
  Value cos = CosOp::create(builder, getLoc(), getInput());
  operandGradients.assign({g.mul(resultGradients[0], cos)});
  return success();
}

TESSERA_GRADIENT(CosOp) {
  Grad g(builder, getLoc());
  Value sin = SinOp::create(builder, getLoc(), getInput());
  operandGradients.assign({g.mul(resultGradients[0], g.scale(sin, -1.0))});
  return success();
}

TESSERA_GRADIENT(ErfOp) {
  Grad g(builder, getLoc());
  // d erf(x) = 2/sqrt(pi) exp(-x^2).
  Value x = getInput();
  Value gauss = ExpOp::create(builder, getLoc(), g.scale(g.mul(x, x), -1.0));
  operandGradients.assign(
      {g.mul(resultGradients[0], g.scale(gauss, 2.0 / std::sqrt(M_PI)))});
  return success();
}

TESSERA_GRADIENT(SigmoidOp) {
  Grad g(builder, getLoc());
  // d sigmoid(x) = y (1 - y).
  Value y = getResult();
  Value one = g.splat(Grad::typeOf(y), 1.0);
  operandGradients.assign({g.mul(resultGradients[0], g.mul(y, g.sub(one, y)))});
  return success();
}

TESSERA_GRADIENT(AbsOp) {
  Grad g(builder, getLoc());
  // d |x| = sign(x), 0 at 0.
  Value x = getInput();
  Value zero = g.zerosLike(x);
  Value gradient = resultGradients[0];
  Value negated = g.scale(gradient, -1.0);
  Value positive = g.compare(ComparePredicate::gt, x, zero);
  Value negative = g.compare(ComparePredicate::lt, x, zero);
  operandGradients.assign(
      {g.select(positive, gradient, g.select(negative, negated, zero))});
  return success();
}

TESSERA_GRADIENT(ReluOp) {
  Grad g(builder, getLoc());
  Value zero = g.zerosLike(getInput());
  Value positive = g.compare(ComparePredicate::gt, getInput(), zero);
  operandGradients.assign({g.select(positive, resultGradients[0], zero)});
  return success();
}

TESSERA_GRADIENT(GeluOp) {
  Grad g(builder, getLoc());
  // y = x/2 (1 + t), t = tanh(u), u = c (x + a x^3):
  // dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 a x^2).
  constexpr double a = 0.044715;
  const double c = std::sqrt(2.0 / M_PI);
  Value x = getInput();
  RankedTensorType type = Grad::typeOf(x);
  Value x2 = g.mul(x, x);
  Value u = g.scale(g.add(x, g.scale(g.mul(x2, x), a)), c);
  Value t = TanhOp::create(builder, getLoc(), u);
  Value one = g.splat(type, 1.0);
  Value left = g.scale(g.add(one, t), 0.5);
  Value sech2 = g.sub(one, g.mul(t, t));
  Value du = g.scale(g.add(one, g.scale(x2, 3 * a)), c);
  Value right = g.mul(g.scale(x, 0.5), g.mul(sech2, du));
  operandGradients.assign({g.mul(resultGradients[0], g.add(left, right))});
  return success();
}

TESSERA_GRADIENT(SiluOp) {
  Grad g(builder, getLoc());
  // s = sigmoid(x); d(x s)/dx = s (1 + x (1 - s)).
  Value x = getInput();
  Value one = g.splat(Grad::typeOf(x), 1.0);
  Value s = g.div(one, g.add(one, ExpOp::create(builder, getLoc(), g.neg(x))));
  Value d = g.mul(s, g.add(one, g.mul(x, g.sub(one, s))));
  operandGradients.assign({g.mul(resultGradients[0], d)});
  return success();
}

TESSERA_GRADIENT(SelectOp) {
  Grad g(builder, getLoc());
  Value dy = resultGradients[0];
  if (!isa<FloatType>(Grad::typeOf(dy).getElementType())) {
    operandGradients.assign({Value(), Value(), Value()});
    return success();
  }
  Value zero = g.zerosLike(dy);
  operandGradients.assign({Value(), g.select(getCondition(), dy, zero),
                           g.select(getCondition(), zero, dy)});
  return success();
}

TESSERA_GRADIENT(CompareOp) {
  operandGradients.assign({Value(), Value()});
  return success();
}

TESSERA_GRADIENT(CastOp) {
  Type inputType = getInput().getType();
  if (!isa<FloatType>(getElementTypeOrSelf(inputType))) {
    operandGradients.assign({Value()});
    return success();
  }
  operandGradients.assign(
      {CastOp::create(builder, getLoc(), inputType, resultGradients[0])});
  return success();
}

TESSERA_GRADIENT(ConstantOp) { return success(); }

TESSERA_GRADIENT(IotaOp) { return success(); }

TESSERA_GRADIENT(RandomUniformOp) {
  operandGradients.assign(getNumOperands(), Value());
  return success();
}

/// The same key draws the same mask: the gradient is dropped where the
/// input was, and scaled alike.
TESSERA_GRADIENT(DropoutOp) {
  Value dx = DropoutOp::create(builder, getLoc(), resultGradients[0], getStep(),
                               getPiece(), getRateAttr(), getSeedAttr(),
                               getGlobalShapeAttr());
  operandGradients.assign(getNumOperands(), Value());
  operandGradients[0] = dx;
  return success();
}

TESSERA_GRADIENT(BroadcastOp) {
  Grad g(builder, getLoc());
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  // Sum over the new dims and the expanded size-1 dims, then restore the
  // size-1 dims with a reshape.
  SmallVector<int64_t> summed;
  for (int64_t d = 0; d < out.getRank(); ++d) {
    const int64_t *it = llvm::find(getDims(), d);
    if (it == getDims().end() || in.getDimSize(it - getDims().begin()) == 1)
      if (out.getDimSize(d) != 1 || it == getDims().end())
        summed.push_back(d);
  }
  Value reduced = g.reduceSum(resultGradients[0], summed);
  if (reduced.getType() != in)
    reduced = ReshapeOp::create(builder, getLoc(), in, reduced);
  operandGradients.assign({reduced});
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TESSERA_GRADIENT(ReduceSumOp) {
  Grad g(builder, getLoc());
  operandGradients.assign(
      {g.expand(resultGradients[0], getInput().getType(), getDims())});
  return success();
}

TESSERA_GRADIENT(SumSquaresOp) {
  Grad g(builder, getLoc());
  // d sum(x²) = 2 x dy, in the input's type.
  auto type = getInput().getType();
  Value dy = resultGradients[0];
  if (!type.getElementType().isF32())
    dy = CastOp::create(builder, getLoc(),
                        RankedTensorType::get({}, type.getElementType()), dy);
  SmallVector<int64_t> every =
      llvm::to_vector(llvm::seq<int64_t>(type.getRank()));
  operandGradients.assign(
      {g.scale(g.mul(getInput(), g.expand(dy, type, every)), 2.0)});
  return success();
}

TESSERA_GRADIENT(ReduceMeanOp) {
  Grad g(builder, getLoc());
  int64_t count = 1;
  for (int64_t d : getDims())
    count *= getInput().getType().getDimSize(d);
  Value spread = g.expand(resultGradients[0], getInput().getType(), getDims());
  operandGradients.assign({g.scale(spread, 1.0 / count)});
  return success();
}

TESSERA_GRADIENT(ReduceMaxOp) {
  Grad g(builder, getLoc());
  // The gradient goes to every element that equals the maximum (ties share
  // it, as in XLA's reduce-max derivative).
  RankedTensorType type = getInput().getType();
  Value max = g.expand(getResult(), type, getDims());
  Value isMax = g.compare(ComparePredicate::eq, getInput(), max);
  Value spread = g.expand(resultGradients[0], type, getDims());
  operandGradients.assign({g.select(isMax, spread, g.zerosLike(spread))});
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

TESSERA_GRADIENT(ReshapeOp) {
  if (!isa<FloatType>(getInput().getType().getElementType())) {
    operandGradients.assign({Value()});
    return success();
  }
  operandGradients.assign({ReshapeOp::create(
      builder, getLoc(), getInput().getType(), resultGradients[0])});
  return success();
}

TESSERA_GRADIENT(TransposeOp) {
  Grad g(builder, getLoc());
  SmallVector<int64_t> inverse(getPermutation().size());
  for (auto [index, dim] : llvm::enumerate(getPermutation()))
    inverse[dim] = index;
  operandGradients.assign({g.transpose(resultGradients[0], inverse)});
  return success();
}

TESSERA_GRADIENT(SliceOp) {
  Grad g(builder, getLoc());
  // Pad the gradient with zeros back to the operand's shape, dim by dim.
  Value grad = resultGradients[0];
  RankedTensorType in = getInput().getType();
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t before = getStart()[d], after = in.getDimSize(d) - getLimit()[d];
    if (before == 0 && after == 0)
      continue;
    SmallVector<Value> pieces;
    auto zeros = [&](int64_t size) {
      SmallVector<int64_t> shape(Grad::typeOf(grad).getShape());
      shape[d] = size;
      return g.splat(RankedTensorType::get(shape, in.getElementType()), 0.0);
    };
    if (before)
      pieces.push_back(zeros(before));
    pieces.push_back(grad);
    if (after)
      pieces.push_back(zeros(after));
    grad = ConcatOp::create(builder, getLoc(), pieces, d);
  }
  operandGradients.assign({grad});
  return success();
}

TESSERA_GRADIENT(ConcatOp) {
  int64_t dim = getDim();
  RankedTensorType out = getResult().getType();
  int64_t offset = 0;
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> start(out.getRank(), 0), limit(out.getShape());
    start[dim] = offset;
    limit[dim] = offset + type.getDimSize(dim);
    offset = limit[dim];
    operandGradients.push_back(
        SliceOp::create(builder, getLoc(), resultGradients[0],
                        builder.getDenseI64ArrayAttr(start),
                        builder.getDenseI64ArrayAttr(limit)));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// The gradient of one dot operand: `grad` contracted with the other operand
/// over the dims of the result that the other operand brought, transposed
/// back into the operand's dim order.
static Value
dotOperandGradient(OpBuilder &builder, Location loc, Value grad, Value other,
                   int64_t rank, ArrayRef<int64_t> batch,
                   ArrayRef<int64_t> contract, ArrayRef<int64_t> otherBatch,
                   ArrayRef<int64_t> otherContract, int64_t gradFreeOffset,
                   int64_t gradOtherOffset) {
  auto otherType = cast<RankedTensorType>(other.getType());
  int64_t numBatch = batch.size();
  // The other operand's free dims, in order: they are in `grad` from
  // `gradOtherOffset` on.
  SmallVector<int64_t> otherFree, gradOtherFree;
  for (int64_t d = 0; d < otherType.getRank(); ++d)
    if (!llvm::is_contained(otherBatch, d) &&
        !llvm::is_contained(otherContract, d)) {
      gradOtherFree.push_back(gradOtherOffset + otherFree.size());
      otherFree.push_back(d);
    }
  SmallVector<int64_t> gradBatch, otherBatchDims(otherBatch);
  for (int64_t i = 0; i < numBatch; ++i)
    gradBatch.push_back(i);
  Value partial = DotOp::create(builder, loc, grad, other,
                                builder.getDenseI64ArrayAttr(gradBatch),
                                builder.getDenseI64ArrayAttr(otherBatchDims),
                                builder.getDenseI64ArrayAttr(gradOtherFree),
                                builder.getDenseI64ArrayAttr(otherFree));
  // `partial` holds: batch dims, this operand's free dims (from `grad`),
  // then the other operand's contracting dims in increasing order.
  SmallVector<int64_t> sortedOtherContract(otherContract);
  llvm::sort(sortedOtherContract);
  int64_t numFree = rank - numBatch - contract.size();
  SmallVector<int64_t> permutation(rank);
  int64_t nextFree = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (const int64_t *it = llvm::find(batch, d); it != batch.end()) {
      permutation[d] = it - batch.begin();
    } else if (const int64_t *c = llvm::find(contract, d);
               c != contract.end()) {
      int64_t pairedOther = otherContract[c - contract.begin()];
      permutation[d] = numBatch + numFree +
                       (llvm::find(sortedOtherContract, pairedOther) -
                        sortedOtherContract.begin());
    } else {
      permutation[d] = numBatch + nextFree++;
    }
  }
  (void)gradFreeOffset;
  bool identity = true;
  for (auto [index, dim] : llvm::enumerate(permutation))
    identity &= static_cast<int64_t>(index) == dim;
  if (identity)
    return partial;
  return TransposeOp::create(builder, loc, partial,
                             builder.getDenseI64ArrayAttr(permutation));
}

TESSERA_GRADIENT(DotOp) {
  Value grad = resultGradients[0];
  int64_t numBatch = getLhsBatchingDims().size();
  int64_t lhsRank = getLhs().getType().getRank();
  int64_t rhsRank = getRhs().getType().getRank();
  int64_t lhsFree = lhsRank - numBatch - getLhsContractingDims().size();
  Value dLhs = dotOperandGradient(builder, getLoc(), grad, getRhs(), lhsRank,
                                  getLhsBatchingDims(), getLhsContractingDims(),
                                  getRhsBatchingDims(), getRhsContractingDims(),
                                  numBatch, numBatch + lhsFree);
  // For the rhs, `grad`'s dims are batch, lhs free (the "other"), rhs free:
  // move the rhs free dims ahead of the lhs free ones first.
  int64_t rhsFree = rhsRank - numBatch - getRhsContractingDims().size();
  SmallVector<int64_t> swap;
  for (int64_t i = 0; i < numBatch; ++i)
    swap.push_back(i);
  for (int64_t i = 0; i < rhsFree; ++i)
    swap.push_back(numBatch + lhsFree + i);
  for (int64_t i = 0; i < lhsFree; ++i)
    swap.push_back(numBatch + i);
  Value swapped = grad;
  bool isIdentity = true;
  for (auto [index, dim] : llvm::enumerate(swap))
    isIdentity &= static_cast<int64_t>(index) == dim;
  if (!isIdentity)
    swapped = TransposeOp::create(builder, getLoc(), grad,
                                  builder.getDenseI64ArrayAttr(swap));
  Value dRhs = dotOperandGradient(builder, getLoc(), swapped, getLhs(), rhsRank,
                                  getRhsBatchingDims(), getRhsContractingDims(),
                                  getLhsBatchingDims(), getLhsContractingDims(),
                                  numBatch, numBatch + rhsFree);
  operandGradients.assign({dLhs, dRhs});
  return success();
}

//===----------------------------------------------------------------------===//
// Neural-network layers
//===----------------------------------------------------------------------===//

TESSERA_GRADIENT(SoftmaxOp) {
  Grad g(builder, getLoc());
  // dx = scale y (dy - sum(dy y)); a causal softmax's masked entries have
  // y = 0, and so no gradient.
  Value y = getResult(), dy = resultGradients[0];
  int64_t dim = getDim();
  Value dx = g.mul(y, g.sub(dy, g.rowSum(g.mul(dy, y), dim)));
  double scale = getScaleAttr().getValueAsDouble();
  operandGradients.assign({scale == 1.0 ? dx : g.scale(dx, scale)});
  return success();
}

TESSERA_GRADIENT(LogSoftmaxOp) {
  Grad g(builder, getLoc());
  // dx = dy - softmax(x) sum(dy), softmax(x) = exp(y).
  Value dy = resultGradients[0];
  Value softmax = ExpOp::create(builder, getLoc(), getResult());
  operandGradients.assign({g.sub(dy, g.mul(softmax, g.rowSum(dy, getDim())))});
  return success();
}

// The input gradients of the norms are one fused op per norm (a row pass);
// the parameter gradients are sums over the leading dims, which shard as
// any reduction.
TESSERA_GRADIENT(LayerNormOp) {
  Grad g(builder, getLoc());
  Value dy = resultGradients[0];
  SmallVector<int64_t> lead = leadingDims(Grad::typeOf(dy).getRank());
  auto fused = LayerNormGradOp::create(builder, getLoc(), getInput(),
                                       getGamma(), dy, getEpsilon());
  Value dGamma = g.reduceSum(g.mul(dy, fused.getNormalized()), lead);
  Value dBeta = g.reduceSum(dy, lead);
  operandGradients.assign({fused.getInputGrad(), dGamma, dBeta});
  return success();
}

TESSERA_GRADIENT(RmsNormOp) {
  Grad g(builder, getLoc());
  Value dy = resultGradients[0];
  SmallVector<int64_t> lead = leadingDims(Grad::typeOf(dy).getRank());
  auto fused = RmsNormGradOp::create(builder, getLoc(), getInput(), getGamma(),
                                     dy, getEpsilon());
  Value dGamma = g.reduceSum(g.mul(dy, fused.getNormalized()), lead);
  operandGradients.assign({fused.getInputGrad(), dGamma});
  return success();
}

TESSERA_GRADIENT(LayerNormGradOp) {
  return emitOpError("has no derivative (second derivatives of norms are "
                     "not built)");
}

TESSERA_GRADIENT(RmsNormGradOp) {
  return emitOpError("has no derivative (second derivatives of norms are "
                     "not built)");
}

TESSERA_GRADIENT(EmbeddingOp) {
  int64_t vocab = getTable().getType().getDimSize(0);
  operandGradients.assign(
      {EmbeddingGradOp::create(builder, getLoc(), resultGradients[0],
                               getIndices(), vocab),
       Value()});
  return success();
}

TESSERA_GRADIENT(GatherOp) {
  operandGradients.assign(
      {ScatterAddOp::create(builder, getLoc(), getInput().getType(),
                            resultGradients[0], getIndices(), getAxisAttr()),
       Value()});
  return success();
}

TESSERA_GRADIENT(ScatterAddOp) {
  operandGradients.assign(
      {GatherOp::create(builder, getLoc(), getSource().getType(),
                        resultGradients[0], getIndices(), getAxisAttr()),
       Value()});
  return success();
}

TESSERA_GRADIENT(TopKOp) {
  // The indices carry no gradient; each value's goes back to its index.
  int64_t last = getInput().getType().getRank() - 1;
  operandGradients.assign({ScatterAddOp::create(
      builder, getLoc(), getInput().getType(), resultGradients[0], getIndices(),
      builder.getI64IntegerAttr(last))});
  return success();
}

TESSERA_GRADIENT(CrossEntropyOp) {
  Grad g(builder, getLoc());
  // d/dlogits = (softmax(logits) - onehot(labels)) dloss.
  RankedTensorType logits = getLogits().getType();
  int64_t last = logits.getRank() - 1;
  Value softmax = SoftmaxOp::create(builder, getLoc(), getLogits(), last);
  Value onehot = OneHotOp::create(builder, getLoc(), logits, getLabels());
  Value spread = g.expand(resultGradients[0], logits, {last});
  operandGradients.assign({g.mul(g.sub(softmax, onehot), spread), Value()});
  return success();
}

TESSERA_GRADIENT(AttentionOp) {
  auto fused = AttentionGradOp::create(
      builder, getLoc(),
      TypeRange{getQuery().getType(), getKey().getType(), getValue().getType()},
      getQuery(), getKey(), getValue(), getResult(), resultGradients[0],
      getStep(), getPiece(), getCausal(), getScale(), getDropout(), getSeed(),
      getGlobalShapeAttr(), getRing(), getZigzag());
  operandGradients.assign(
      {fused.getQueryGrad(), fused.getKeyGrad(), fused.getValueGrad()});
  // The step and piece carry no gradient.
  operandGradients.resize(getNumOperands(), Value());
  return success();
}

TESSERA_GRADIENT(AttentionGradOp) {
  return emitOpError("has no derivative (second derivatives of attention are "
                     "not built)");
}

TESSERA_GRADIENT(AttentionBlockOp) {
  return emitOpError("has no derivative here: the partitioner makes it from "
                     "an nn.attention, whose gradient is taken before");
}

TESSERA_GRADIENT(AttentionBlockGradOp) {
  return emitOpError("has no derivative (second derivatives of attention are "
                     "not built)");
}

TESSERA_GRADIENT(CausalMaskOp) {
  // Masked entries pass no gradient: the output gradient, masked with 0.
  operandGradients.assign({CausalMaskOp::create(
      builder, getLoc(), resultGradients[0], builder.getF32FloatAttr(0))});
  return success();
}

TESSERA_GRADIENT(OneHotOp) {
  operandGradients.assign({Value()});
  return success();
}

TESSERA_GRADIENT(MoeDispatchOp) {
  operandGradients.assign({Value()});
  return success();
}

TESSERA_GRADIENT(EmbeddingGradOp) {
  operandGradients.assign(
      {EmbeddingOp::create(builder, getLoc(), resultGradients[0], getIndices()),
       Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

TESSERA_GRADIENT(SgdOp) {
  return emitOpError("has no derivative: optimizer updates follow the "
                     "gradient, they are not differentiated");
}

TESSERA_GRADIENT(AdamWOp) {
  return emitOpError("has no derivative: optimizer updates follow the "
                     "gradient, they are not differentiated");
}

#undef TESSERA_GRADIENT
