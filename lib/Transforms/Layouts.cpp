//===- Layouts.cpp - nn ops that lay a tensor's elements out again --------===//

#include "tessera/Transforms/Layouts.h"

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace tessera;

Value tessera::reshapeTo(OpBuilder &builder, Location loc, Value value,
                         ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return nn::ReshapeOp::create(builder, loc, type.clone(shape), value);
}

/// `value` transposed by `permutation`.
static Value transpose(OpBuilder &builder, Location loc, Value value,
                       ArrayRef<int64_t> permutation) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> moved;
  for (int64_t d : permutation)
    moved.push_back(type.getDimSize(d));
  return nn::TransposeOp::create(builder, loc, type.clone(moved), value,
                                 builder.getDenseI64ArrayAttr(permutation));
}

Value tessera::unstackRows(OpBuilder &builder, Location loc, Value rows,
                           ArrayRef<int64_t> piece, int64_t dim) {
  int64_t n = cast<RankedTensorType>(rows.getType()).getDimSize(0);
  // [n, s0, ..., s(r-1)], then n next to s(dim), merged.
  SmallVector<int64_t> stacked = {n};
  llvm::append_range(stacked, piece);
  Value value = reshapeTo(builder, loc, rows, stacked);
  if (dim > 0) {
    SmallVector<int64_t> permutation;
    for (int64_t d = 1; d <= dim; ++d)
      permutation.push_back(d);
    permutation.push_back(0);
    for (int64_t d = dim + 1, e = stacked.size(); d < e; ++d)
      permutation.push_back(d);
    value = transpose(builder, loc, value, permutation);
  }
  SmallVector<int64_t> whole(piece);
  whole[dim] *= n;
  return reshapeTo(builder, loc, value, whole);
}

Value tessera::stackRows(OpBuilder &builder, Location loc, Value value,
                         int64_t dim, int64_t n) {
  auto type = cast<RankedTensorType>(value.getType());
  // [s0, ..., n, s(dim) / n, ...], then n first.
  SmallVector<int64_t> split;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    if (static_cast<int64_t>(d) == dim)
      split.push_back(n);
    split.push_back(static_cast<int64_t>(d) == dim ? size / n : size);
  }
  value = reshapeTo(builder, loc, value, split);
  if (dim > 0) {
    SmallVector<int64_t> permutation = {dim};
    for (int64_t d = 0, e = split.size(); d < e; ++d)
      if (d != dim)
        permutation.push_back(d);
    value = transpose(builder, loc, value, permutation);
  }
  return reshapeTo(builder, loc, value, {n, type.getNumElements() / n});
}
