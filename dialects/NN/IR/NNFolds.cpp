//===- NNFolds.cpp - folders of nn ops ------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace tessera::nn;

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

/// Whether `dims` is 0, 1, ..., n-1.
static bool isIdentity(ArrayRef<int64_t> dims) {
  for (auto [index, dim] : llvm::enumerate(dims))
    if (static_cast<int64_t>(index) != dim)
      return false;
  return true;
}

/// A transposed operand is read where it lies, its dims mapped through the
/// permutation, when a GEMM takes it so (each batch a matrix or its
/// transpose, a BLAS flag) and the result's dims keep their order: the
/// transpose's copy is saved (the backward's xᵀ·dy and dy·Wᵀ).
OpFoldResult DotOp::fold(FoldAdaptor) {
  bool folded = false;
  for (bool isLhs : {true, false}) {
    auto transpose = (isLhs ? getLhs() : getRhs()).getDefiningOp<TransposeOp>();
    if (!transpose)
      continue;
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    ArrayRef<int64_t> batching =
        isLhs ? getLhsBatchingDims() : getRhsBatchingDims();
    ArrayRef<int64_t> contracting =
        isLhs ? getLhsContractingDims() : getRhsContractingDims();
    SmallVector<int64_t> newBatching, newContracting, newFree;
    for (int64_t dim : batching)
      newBatching.push_back(permutation[dim]);
    for (int64_t dim : contracting)
      newContracting.push_back(permutation[dim]);
    for (int64_t dim = 0, e = permutation.size(); dim < e; ++dim)
      if (!llvm::is_contained(batching, dim) &&
          !llvm::is_contained(contracting, dim))
        newFree.push_back(permutation[dim]);
    if (!llvm::is_sorted(newFree))
      continue;
    // lhs [batch, free, contracting] or [batch, contracting, free]; rhs
    // likewise.
    SmallVector<int64_t> straight(newBatching), flipped(newBatching);
    llvm::append_range(straight, newFree);
    llvm::append_range(straight, newContracting);
    llvm::append_range(flipped, newContracting);
    llvm::append_range(flipped, newFree);
    if (!isIdentity(straight) && !isIdentity(flipped))
      continue;
    if (isLhs) {
      setLhsBatchingDims(newBatching);
      setLhsContractingDims(newContracting);
      getLhsMutable().assign(transpose.getInput());
    } else {
      setRhsBatchingDims(newBatching);
      setRhsContractingDims(newContracting);
      getRhsMutable().assign(transpose.getInput());
    }
    folded = true;
  }
  return folded ? getResult() : OpFoldResult();
}

/// neg(neg(x)) -> x.
OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

/// A cast to the operand's own type is the operand.
OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

/// A broadcast that adds and expands nothing is the operand.
OpFoldResult BroadcastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

/// reshape(x) to x's type is x; reshape(reshape(x)) reshapes x once.
OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

/// The identity permutation is the operand; two transposes compose into one.
OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> permutation = getPermutation();
  if (isIdentity(permutation))
    return getInput();
  auto inner = getInput().getDefiningOp<TransposeOp>();
  if (!inner)
    return {};
  SmallVector<int64_t> composed;
  for (int64_t dim : permutation)
    composed.push_back(inner.getPermutation()[dim]);
  if (isIdentity(composed))
    return inner.getInput();
  getInputMutable().assign(inner.getInput());
  setPermutation(composed);
  return getResult();
}

/// A slice of the whole tensor is the tensor.
OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

/// Concatenating one tensor is that tensor.
OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}

/// The splat value of `value` made by a splat nn.constant, if it is one.
static std::optional<double> getSplatValue(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant || !constant.getValue().isSplat())
    return std::nullopt;
  auto elements = dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!elements)
    return std::nullopt;
  return elements.getSplatValue<APFloat>().convertToDouble();
}

/// softmax(causal_mask(x)) over the keys is a causal softmax of x, and the
/// softmax of x times a splat constant scales x itself: attention that is
/// not fused reads its scores once. A positive scale keeps the mask's
/// -infinity where it is; the product folds only in f32, since in 16 bits
/// the multiply rounds it.
OpFoldResult SoftmaxOp::fold(FoldAdaptor) {
  bool folded = false;
  double scale = getScaleAttr().getValueAsDouble();
  int64_t last = getInput().getType().getRank() - 1;
  if (auto mask = getInput().getDefiningOp<CausalMaskOp>();
      mask && !getCausal() && static_cast<int64_t>(getDim()) == last &&
      last >= 1 && scale > 0 && std::isinf(mask.getFill().convertToDouble()) &&
      mask.getFill().isNegative()) {
    setCausal(true);
    getInputMutable().assign(mask.getInput());
    folded = true;
  }
  if (auto mul = getInput().getDefiningOp<MulOp>();
      mul && scale == 1.0 && getInput().getType().getElementType().isF32()) {
    for (auto [factor, other] : {std::pair(mul.getLhs(), mul.getRhs()),
                                 std::pair(mul.getRhs(), mul.getLhs())}) {
      std::optional<double> splat = getSplatValue(factor);
      if (!splat)
        continue;
      setScaleAttr(FloatAttr::get(Float32Type::get(getContext()), *splat));
      getInputMutable().assign(other);
      folded = true;
      break;
    }
  }
  return folded ? getResult() : OpFoldResult();
}
