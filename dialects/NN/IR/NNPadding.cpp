//===- NNPadding.cpp - how nn ops compute on padded dims (--tessera-pad) --===//
//
// Where --tessera-pad grows a dim that its mesh axes split unevenly, each op
// says what the padding it reads must hold (getPaddingFill), whether its
// result's padding stays zero (keepsZeroPadding), and updates what depends
// on the padding (pad, through the PadContext the pass implements).
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

//===----------------------------------------------------------------------===//
// What padding an op reads
//===----------------------------------------------------------------------===//

/// The fill of an op that reads the padding of factors of kind `handled` as
/// `fill`: nothing for a parallel factor, failure for other kinds.
static FailureOr<PaddingFill> getFillFor(FactorKind kind, FactorKind handled,
                                         PaddingFill fill) {
  if (kind == FactorKind::Parallel)
    return PaddingFill::None;
  if (kind == handled)
    return fill;
  return failure();
}

/// A sum over a factor reads its padding as zeros. Indices are never
/// masked: what they pick is.
static FailureOr<PaddingFill> getSumFill(Operation *op, unsigned operand,
                                         FactorKind kind) {
  bool isFloat =
      isa<FloatType>(cast<RankedTensorType>(op->getOperand(operand).getType())
                         .getElementType());
  return getFillFor(kind, FactorKind::Reduction,
                    isFloat ? PaddingFill::Zero : PaddingFill::None);
}

#define TESSERA_SUM_FILL(OpTy)                                                 \
  FailureOr<PaddingFill> OpTy::getPaddingFill(unsigned operand,                \
                                              FactorKind kind) {               \
    return getSumFill(*this, operand, kind);                                   \
  }
TESSERA_SUM_FILL(DotOp)
TESSERA_SUM_FILL(ReduceSumOp)
TESSERA_SUM_FILL(ReduceMeanOp)
#undef TESSERA_SUM_FILL

FailureOr<PaddingFill> ReduceMaxOp::getPaddingFill(unsigned, FactorKind kind) {
  return getFillFor(kind, FactorKind::Reduction, PaddingFill::Lowest);
}

/// Indices below the vocab never pick a padded row.
FailureOr<PaddingFill> EmbeddingOp::getPaddingFill(unsigned, FactorKind kind) {
  return getFillFor(kind, FactorKind::Reduction, PaddingFill::None);
}

/// A scatter sums into its result (its padding zeros); the rest it reads
/// by index, as a gather does.
#define TESSERA_SCATTER_FILL(OpTy)                                             \
  FailureOr<PaddingFill> OpTy::getPaddingFill(unsigned operand,                \
                                              FactorKind kind) {               \
    if (kind == FactorKind::NeedReplication)                                   \
      return PaddingFill::None;                                                \
    return getSumFill(*this, operand, kind);                                   \
  }
TESSERA_SCATTER_FILL(ScatterAddOp)
TESSERA_SCATTER_FILL(EmbeddingGradOp)
#undef TESSERA_SCATTER_FILL

/// A maximum along the dim (softmax's, top-k's) reads the padding of the
/// values as the lowest value; the other operands (labels) are indices.
#define TESSERA_MAX_ALONG_FILL(OpTy)                                           \
  FailureOr<PaddingFill> OpTy::getPaddingFill(unsigned operand,                \
                                              FactorKind kind) {               \
    return getFillFor(kind, FactorKind::NeedReplication,                       \
                      operand == 0 ? PaddingFill::Lowest : PaddingFill::None); \
  }
TESSERA_MAX_ALONG_FILL(SoftmaxOp)
TESSERA_MAX_ALONG_FILL(LogSoftmaxOp)
TESSERA_MAX_ALONG_FILL(CrossEntropyOp)
TESSERA_MAX_ALONG_FILL(TopKOp)
#undef TESSERA_MAX_ALONG_FILL

/// Real indices pick real elements and padded ones make padding; a causal
/// mask masks every padded key of a real query; a slice and a concat cut
/// or keep the padding (SliceOp::pad, ConcatOp::pad).
#define TESSERA_BY_INDEX_FILL(OpTy)                                            \
  FailureOr<PaddingFill> OpTy::getPaddingFill(unsigned, FactorKind kind) {     \
    return getFillFor(kind, FactorKind::NeedReplication, PaddingFill::None);   \
  }
TESSERA_BY_INDEX_FILL(GatherOp)
TESSERA_BY_INDEX_FILL(OneHotOp)
TESSERA_BY_INDEX_FILL(IotaOp)
TESSERA_BY_INDEX_FILL(CausalMaskOp)
TESSERA_BY_INDEX_FILL(SliceOp)
TESSERA_BY_INDEX_FILL(ConcatOp)
TESSERA_BY_INDEX_FILL(MoeDispatchOp)
#undef TESSERA_BY_INDEX_FILL

//===----------------------------------------------------------------------===//
// Ops that keep zero padding zero
//===----------------------------------------------------------------------===//

/// Maps zeros to zeros elementwise (or only moves elements): zero padding
/// in every operand stays zero.
#define TESSERA_KEEPS_ZEROS(OpTy)                                              \
  bool OpTy::keepsZeroPadding(function_ref<bool(Value)>,                       \
                              function_ref<bool(Value)> isZeroPadded) {        \
    return llvm::all_of(getOperation()->getOperands(), isZeroPadded);          \
  }
TESSERA_KEEPS_ZEROS(AddOp)
TESSERA_KEEPS_ZEROS(SubOp)
TESSERA_KEEPS_ZEROS(MulOp)
TESSERA_KEEPS_ZEROS(MaxOp)
TESSERA_KEEPS_ZEROS(MinOp)
TESSERA_KEEPS_ZEROS(NegOp)
TESSERA_KEEPS_ZEROS(ReluOp)
TESSERA_KEEPS_ZEROS(GeluOp)
TESSERA_KEEPS_ZEROS(SiluOp)
TESSERA_KEEPS_ZEROS(TanhOp)
TESSERA_KEEPS_ZEROS(SinOp)
TESSERA_KEEPS_ZEROS(AbsOp)
TESSERA_KEEPS_ZEROS(ErfOp)
TESSERA_KEEPS_ZEROS(CastOp)
TESSERA_KEEPS_ZEROS(TransposeOp)
TESSERA_KEEPS_ZEROS(ReshapeOp)
#undef TESSERA_KEEPS_ZEROS

/// The condition picks between the two: zeros where both hold zeros.
bool SelectOp::keepsZeroPadding(function_ref<bool(Value)>,
                                function_ref<bool(Value)> isZeroPadded) {
  return isZeroPadded(getOnTrue()) && isZeroPadded(getOnFalse());
}

/// Real labels leave the padded classes zero; a padded label (zero) would
/// pick class 0.
bool OneHotOp::keepsZeroPadding(function_ref<bool(Value)> isPadded,
                                function_ref<bool(Value)>) {
  return !isPadded(getLabels());
}

//===----------------------------------------------------------------------===//
// Attributes that follow the padding
//===----------------------------------------------------------------------===//

/// `elements` grown to `type` with zeros.
static DenseElementsAttr padElements(DenseElementsAttr elements,
                                     RankedTensorType type) {
  if (elements.isSplat())
    return DenseElementsAttr::get(type, elements.getSplatValue<Attribute>());
  ArrayRef<int64_t> before = elements.getType().getShape();
  SmallVector<Attribute> values(elements.getValues<Attribute>());
  SmallVector<Attribute> padded(
      type.getNumElements(),
      OpBuilder(type.getContext()).getZeroAttr(type.getElementType()));
  SmallVector<int64_t> index(before.size(), 0);
  for (Attribute value : values) {
    int64_t offset = 0;
    for (auto [dim, i] : llvm::enumerate(index))
      offset = offset * type.getDimSize(dim) + i;
    padded[offset] = value;
    for (int64_t dim = before.size() - 1; dim >= 0; --dim) {
      if (++index[dim] < before[dim])
        break;
      index[dim] = 0;
    }
  }
  return DenseElementsAttr::get(type, padded);
}

/// A padded constant is its value grown with zeros.
void ConstantOp::pad(PadContext &context, OpBuilder &) {
  if (context.isPadded(getResult()))
    setValueAttr(padElements(cast<DenseElementsAttr>(getValue()),
                             cast<RankedTensorType>(getType())));
}

/// A whole padded dim stays whole, padding included; a part of one is
/// sliced as written and grown to the padded size with zeros.
void SliceOp::pad(PadContext &context, OpBuilder &) {
  Value result = getResult();
  if (!context.isPadded(result))
    return;
  SmallVector<int64_t> before = context.getUnpaddedShape(result);
  SmallVector<int64_t> whole = context.getUnpaddedShape(getInput());
  SmallVector<int64_t> limit(getLimit());
  ArrayRef<int64_t> start = getStart();
  SmallVector<int64_t> grown;
  for (auto [dim, size] : llvm::enumerate(getType().getShape())) {
    if (size == before[dim])
      continue;
    if (start[dim] == 0 && limit[dim] == whole[dim]) {
      limit[dim] = size;
      continue;
    }
    grown.push_back(dim);
  }
  setLimit(limit);
  if (!grown.empty())
    context.regrow(cast<OpResult>(result), grown);
}

/// The table's rows are the (padded) result's.
void EmbeddingGradOp::pad(PadContext &, OpBuilder &) {
  updateLocalAttributes();
}

/// Each input's padding is cut off the dim the inputs are joined along, and
/// the padding of the result follows them, zeros.
void ConcatOp::pad(PadContext &context, OpBuilder &builder) {
  int64_t dim = getDim();
  auto grows = [&](Value value) {
    return context.isPadded(value) &&
           context.getUnpaddedShape(value)[dim] !=
               cast<RankedTensorType>(value.getType()).getDimSize(dim);
  };
  builder.setInsertionPoint(*this);
  int64_t joined = 0;
  for (OpOperand &input : getOperation()->getOpOperands()) {
    Value value = input.get();
    if (grows(value))
      input.set(context.cutPadding(value, dim));
    joined += cast<RankedTensorType>(input.get().getType()).getDimSize(dim);
  }
  int64_t size = getType().getDimSize(dim);
  if (joined == size)
    return;
  SmallVector<int64_t> shape(getType().getShape());
  shape[dim] = size - joined;
  Value zeros = context.createZeros(
      getLoc(), RankedTensorType::get(shape, getType().getElementType()),
      getResult(), dim);
  getOperation()->insertOperands(getNumOperands(), {zeros});
}
