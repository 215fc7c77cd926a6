//===- NNFolds.cpp - folders of nn ops ------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace tessera::nn;

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

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
  auto isIdentity = [](ArrayRef<int64_t> p) {
    for (auto [index, dim] : llvm::enumerate(p))
      if (static_cast<int64_t>(index) != dim)
        return false;
    return true;
  };
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
