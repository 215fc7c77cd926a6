//===- NNOps.cpp - nn dialect operations: verifiers and type inference ----===//

#include "dialects/NN/IR/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallString.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

#include "dialects/NN/IR/NNEnums.cpp.inc"
#include "dialects/NN/IR/NNInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
/// Emits errors of type inference at the op's location, prefixed with the op
/// name as the verifier's errors are: inference runs while parsing (before an
/// op exists) and again while verifying.
class InferError {
public:
  InferError(std::optional<Location> loc, StringRef opName)
      : loc(loc), opName(opName) {}

  template <typename... Args> LogicalResult operator()(Args &&...args) const {
    return emitOptionalError(loc, "'", opName, "' op ",
                             std::forward<Args>(args)...);
  }

private:
  std::optional<Location> loc;
  StringRef opName;
};
} // namespace

/// Prints `[1, 2, 3]` into a diagnostic.
static std::string formatList(ArrayRef<int64_t> values) {
  std::string result = "[";
  llvm::raw_string_ostream os(result);
  llvm::interleaveComma(values, os);
  os << "]";
  return result;
}

/// Checks that `dims` are distinct dimensions of a tensor of rank `rank`.
static LogicalResult checkDims(const InferError &error, ArrayRef<int64_t> dims,
                               int64_t rank, StringRef what) {
  llvm::SmallBitVector seen(rank);
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= rank)
      return error(what, " ", dim, " is out of range for rank ", rank);
    if (seen.test(dim))
      return error(what, " ", dim, " appears twice");
    seen.set(dim);
  }
  return success();
}

static RankedTensorType getRanked(Value value) {
  return dyn_cast<RankedTensorType>(value.getType());
}

//===----------------------------------------------------------------------===//
// DotOp
//===----------------------------------------------------------------------===//

LogicalResult DotOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  InferError error(loc, getOperationName());
  auto lhs = getRanked(adaptor.getLhs());
  auto rhs = getRanked(adaptor.getRhs());
  if (!lhs || !rhs)
    return error("expects ranked tensor operands");
  ArrayRef<int64_t> lhsBatch = adaptor.getLhsBatchingDims();
  ArrayRef<int64_t> rhsBatch = adaptor.getRhsBatchingDims();
  ArrayRef<int64_t> lhsContract = adaptor.getLhsContractingDims();
  ArrayRef<int64_t> rhsContract = adaptor.getRhsContractingDims();
  if (lhsBatch.size() != rhsBatch.size())
    return error("has ", lhsBatch.size(), " lhs batching dims but ",
                 rhsBatch.size(), " rhs batching dims");
  if (lhsContract.size() != rhsContract.size())
    return error("has ", lhsContract.size(), " lhs contracting dims but ",
                 rhsContract.size(), " rhs contracting dims");
  SmallVector<int64_t> lhsUsed(lhsBatch), rhsUsed(rhsBatch);
  llvm::append_range(lhsUsed, lhsContract);
  llvm::append_range(rhsUsed, rhsContract);
  if (failed(checkDims(error, lhsUsed, lhs.getRank(), "lhs dim")) ||
      failed(checkDims(error, rhsUsed, rhs.getRank(), "rhs dim")))
    return failure();
  for (auto [l, r] : llvm::zip(lhsUsed, rhsUsed))
    if (lhs.getDimSize(l) != rhs.getDimSize(r))
      return error("pairs lhs dim ", l, " of size ", lhs.getDimSize(l),
                   " with rhs dim ", r, " of size ", rhs.getDimSize(r));

  SmallVector<int64_t> shape;
  for (int64_t dim : lhsBatch)
    shape.push_back(lhs.getDimSize(dim));
  for (int64_t dim = 0; dim < lhs.getRank(); ++dim)
    if (!llvm::is_contained(lhsUsed, dim))
      shape.push_back(lhs.getDimSize(dim));
  for (int64_t dim = 0; dim < rhs.getRank(); ++dim)
    if (!llvm::is_contained(rhsUsed, dim))
      shape.push_back(rhs.getDimSize(dim));
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult DotOp::verify() {
  Type lhsElement = getLhs().getType().getElementType();
  Type rhsElement = getRhs().getType().getElementType();
  if (lhsElement != rhsElement)
    return emitOpError("expects operands of one element type, got ")
           << lhsElement << " and " << rhsElement;
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  inferred.push_back(adaptor.getOnTrue().getType());
  return success();
}

LogicalResult SelectOp::verify() {
  if (getCondition().getType().getShape() != getOnTrue().getType().getShape())
    return emitOpError("expects a condition of shape ")
           << formatList(getOnTrue().getType().getShape()) << ", got "
           << formatList(getCondition().getType().getShape());
  return success();
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto lhs = getRanked(adaptor.getLhs());
  if (!lhs)
    return InferError(loc, getOperationName())("expects ranked tensors");
  inferred.push_back(
      RankedTensorType::get(lhs.getShape(), IntegerType::get(context, 1)));
  return success();
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("expects the result shape ")
           << formatList(getInput().getType().getShape()) << ", got "
           << formatList(getResult().getType().getShape());
  return success();
}

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  auto type = dyn_cast_or_null<RankedTensorType>(
      adaptor.getValueAttr() ? adaptor.getValueAttr().getType() : Type());
  if (!type)
    return InferError(loc, getOperationName())(
        "expects a value of ranked tensor type");
  inferred.push_back(type);
  return success();
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  ArrayRef<int64_t> dims = getDims();
  if (input.getElementType() != result.getElementType())
    return emitOpError("expects the result element type ")
           << input.getElementType() << ", got " << result.getElementType();
  if (static_cast<int64_t>(dims.size()) != input.getRank())
    return emitOpError("expects one dim per operand dim (")
           << input.getRank() << "), got " << dims.size();
  for (auto [index, dim] : llvm::enumerate(dims)) {
    if (dim < 0 || dim >= result.getRank())
      return emitOpError("dim ")
             << dim << " is out of range for result rank " << result.getRank();
    if (index > 0 && dim <= dims[index - 1])
      return emitOpError("expects increasing dims, got ") << formatList(dims);
    int64_t inSize = input.getDimSize(index);
    if (inSize != 1 && inSize != result.getDimSize(dim))
      return emitOpError("operand dim ")
             << index << " of size " << inSize << " cannot broadcast to size "
             << result.getDimSize(dim) << " of result dim " << dim;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename ReduceOp>
static LogicalResult inferReduce(std::optional<Location> loc,
                                 typename ReduceOp::Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  InferError error(loc, ReduceOp::getOperationName());
  auto input = getRanked(adaptor.getInput());
  if (!input)
    return error("expects a ranked tensor");
  if (failed(checkDims(error, adaptor.getDims(), input.getRank(), "dim")))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t dim = 0; dim < input.getRank(); ++dim)
    if (!llvm::is_contained(adaptor.getDims(), dim))
      shape.push_back(input.getDimSize(dim));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferReduce<ReduceSumOp>(loc, adaptor, inferred);
}
LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferReduce<ReduceMaxOp>(loc, adaptor, inferred);
}
LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  return inferReduce<ReduceMeanOp>(loc, adaptor, inferred);
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("expects the result element type ")
           << input.getElementType() << ", got " << result.getElementType();
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("cannot reshape ")
           << input.getNumElements() << " elements into "
           << result.getNumElements();
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  InferError error(loc, getOperationName());
  auto input = getRanked(adaptor.getInput());
  if (!input)
    return error("expects a ranked tensor");
  ArrayRef<int64_t> permutation = adaptor.getPermutation();
  if (static_cast<int64_t>(permutation.size()) != input.getRank())
    return error("expects a permutation of ", input.getRank(), " dims, got ",
                 formatList(permutation));
  if (failed(
          checkDims(error, permutation, input.getRank(), "permutation entry")))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation)
    shape.push_back(input.getDimSize(dim));
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  InferError error(loc, getOperationName());
  auto input = getRanked(adaptor.getInput());
  if (!input)
    return error("expects a ranked tensor");
  ArrayRef<int64_t> start = adaptor.getStart();
  ArrayRef<int64_t> limit = adaptor.getLimit();
  if (static_cast<int64_t>(start.size()) != input.getRank() ||
      static_cast<int64_t>(limit.size()) != input.getRank())
    return error("expects start and limit of rank ", input.getRank(), ", got ",
                 start.size(), " and ", limit.size());
  SmallVector<int64_t> shape;
  for (int64_t dim = 0; dim < input.getRank(); ++dim) {
    int64_t size = input.getDimSize(dim);
    if (start[dim] < 0 || start[dim] > limit[dim] || limit[dim] > size)
      return error("dim ", dim, " of size ", size, " cannot be sliced [",
                   start[dim], ", ", limit[dim], ")");
    shape.push_back(limit[dim] - start[dim]);
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  InferError error(loc, getOperationName());
  if (adaptor.getInputs().empty())
    return error("expects at least one input");
  auto first = getRanked(adaptor.getInputs().front());
  if (!first)
    return error("expects ranked tensors");
  int64_t dim = adaptor.getDim();
  if (dim < 0 || dim >= first.getRank())
    return error("dim ", dim, " is out of range for rank ", first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  for (auto [position, value] :
       llvm::enumerate(adaptor.getInputs().drop_front())) {
    int64_t index = position;
    auto type = getRanked(value);
    if (!type)
      return error("expects ranked tensors");
    if (type.getElementType() != first.getElementType())
      return error("input #", index + 1, " has element type ",
                   type.getElementType(), ", expected ",
                   first.getElementType());
    if (type.getRank() != first.getRank())
      return error("input #", index + 1, " has rank ", type.getRank(),
                   ", expected ", first.getRank());
    for (int64_t d = 0; d < first.getRank(); ++d) {
      if (d == dim)
        continue;
      if (type.getDimSize(d) != first.getDimSize(d))
        return error("input #", index + 1, " has size ", type.getDimSize(d),
                     " in dim ", d, ", expected ", first.getDimSize(d));
    }
    shape[dim] += type.getDimSize(dim);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Neural-network layers
//===----------------------------------------------------------------------===//

template <typename SoftmaxLikeOp>
static LogicalResult verifySoftmaxLike(SoftmaxLikeOp op) {
  int64_t rank = op.getInput().getType().getRank();
  auto dim = static_cast<int64_t>(op.getDim());
  if (dim < 0 || dim >= rank)
    return op.emitOpError("dim ")
           << dim << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  if (failed(verifySoftmaxLike(*this)))
    return failure();
  double scale = getScaleAttr().getValueAsDouble();
  if (!std::isfinite(scale))
    return emitOpError("expects a finite scale, got ") << scale;
  int64_t rank = getInput().getType().getRank();
  if (getCausal() && (rank < 2 || static_cast<int64_t>(getDim()) != rank - 1))
    return emitOpError("with causal = true expects scores [..., query, key] "
                       "and dim ")
           << rank - 1 << " (the keys), got rank " << rank << " and dim "
           << getDim();
  return success();
}
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxLike(*this); }

/// Checks a per-feature parameter (gamma, beta) of a norm over the last dim.
static LogicalResult checkNormParam(const InferError &error,
                                    RankedTensorType input, Value param,
                                    StringRef name) {
  auto type = getRanked(param);
  if (!type)
    return error("expects a ranked ", name);
  int64_t features = input.getDimSize(input.getRank() - 1);
  if (type.getRank() != 1 || type.getDimSize(0) != features)
    return error("expects ", name, " of shape [", features, "], got ",
                 formatList(type.getShape()));
  if (type.getElementType() != input.getElementType())
    return error("expects ", name, " of element type ", input.getElementType(),
                 ", got ", type.getElementType());
  return success();
}

template <typename NormOp>
static FailureOr<RankedTensorType> inferNormInput(std::optional<Location> loc,
                                                  Value inputValue) {
  InferError error(loc, NormOp::getOperationName());
  auto input = getRanked(inputValue);
  if (!input || input.getRank() == 0)
    return error("expects an input of rank at least 1");
  return input;
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> input =
      inferNormInput<LayerNormOp>(loc, adaptor.getInput());
  InferError error(loc, getOperationName());
  if (failed(input) ||
      failed(checkNormParam(error, *input, adaptor.getGamma(), "gamma")) ||
      failed(checkNormParam(error, *input, adaptor.getBeta(), "beta")))
    return failure();
  inferred.push_back(*input);
  return success();
}

/// A fused norm gradient's types: dx and x̂ of the input's type.
template <typename NormGradOp>
static LogicalResult inferNormGrad(std::optional<Location> loc,
                                   typename NormGradOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> input =
      inferNormInput<NormGradOp>(loc, adaptor.getInput());
  InferError error(loc, NormGradOp::getOperationName());
  if (failed(input) ||
      failed(checkNormParam(error, *input, adaptor.getGamma(), "gamma")))
    return failure();
  if (adaptor.getResultGrad().getType() != *input)
    return error("expects a result gradient of the input's type ", *input,
                 ", got ", adaptor.getResultGrad().getType());
  inferred.assign({*input, *input});
  return success();
}

LogicalResult
LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  return inferNormGrad<LayerNormGradOp>(loc, adaptor, inferred);
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferNormGrad<RmsNormGradOp>(loc, adaptor, inferred);
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  FailureOr<RankedTensorType> input =
      inferNormInput<RmsNormOp>(loc, adaptor.getInput());
  InferError error(loc, getOperationName());
  if (failed(input) ||
      failed(checkNormParam(error, *input, adaptor.getGamma(), "gamma")))
    return failure();
  inferred.push_back(*input);
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  InferError error(loc, getOperationName());
  auto table = getRanked(adaptor.getTable());
  auto indices = getRanked(adaptor.getIndices());
  if (!table || !indices)
    return error("expects ranked tensors");
  if (table.getRank() != 2)
    return error("expects a table of rank 2 ([vocab, hidden]), got rank ",
                 table.getRank());
  if (Value piece = adaptor.getPiece();
      piece && getRanked(piece).getShape() != ArrayRef<int64_t>{1})
    return error("expects a piece index of shape [1], got ",
                 formatList(getRanked(piece).getShape()));
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult
CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  InferError error(loc, getOperationName());
  auto logits = getRanked(adaptor.getLogits());
  auto labels = getRanked(adaptor.getLabels());
  if (!logits || !labels)
    return error("expects ranked tensors");
  if (logits.getRank() == 0)
    return error("expects logits of rank at least 1");
  if (labels.getShape() != logits.getShape().drop_back())
    return error("expects labels of shape ",
                 formatList(logits.getShape().drop_back()), ", got ",
                 formatList(labels.getShape()));
  inferred.push_back(
      RankedTensorType::get(labels.getShape(), logits.getElementType()));
  return success();
}

/// Checks a random op's piece: `piece` (an index per dim of its draw) and
/// `global_shape` (a whole number of pieces per dim) together, or neither.
static LogicalResult verifyRandomPiece(RandomOpInterface op) {
  Value piece = op.getPiece();
  std::optional<ArrayRef<int64_t>> global = op.getGlobalShape();
  if (!piece != !global)
    return op->emitOpError(
        "expects piece and global_shape together (a device's piece) or "
        "neither (the whole tensor)");
  if (!piece)
    return success();
  SmallVector<int64_t> shape = op.getDrawShape();
  int64_t rank = shape.size();
  if (cast<RankedTensorType>(piece.getType()).getDimSize(0) != rank)
    return op->emitOpError("expects a piece index for each of the ")
           << rank << " dims, got " << piece.getType();
  if (static_cast<int64_t>(global->size()) != rank)
    return op->emitOpError("expects a global_shape of rank ")
           << rank << ", got " << global->size();
  for (auto [dim, size] : llvm::enumerate(*global))
    if (shape[dim] == 0 ? size != 0 : size % shape[dim] != 0)
      return op->emitOpError("expects global_shape to hold whole pieces, "
                             "but dim ")
             << dim << " of size " << size << " is not a multiple of "
             << shape[dim];
  return success();
}

/// Checks a dropout rate: in [0, 1) (the negation catches NaN).
static LogicalResult verifyDropoutRate(Operation *op, float rate) {
  if (!(rate >= 0.0f && rate < 1.0f))
    return op->emitOpError("expects a rate in [0, 1), got ") << rate;
  return success();
}

/// Checks attention's operands: q [b, heads, s, d], k [b, kv, t, d] and
/// v [b, kv, t, dv] with kv dividing heads, one element type.
static LogicalResult verifyAttention(Operation *op, Value query, Value key,
                                     Value value) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return op->emitOpError("expects q, k and v of rank 4 ([batch, heads, "
                           "seq, head dim]), got ranks ")
           << q.getRank() << ", " << k.getRank() << ", " << v.getRank();
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return op->emitOpError("expects q, k and v of one element type, got ")
           << q.getElementType() << ", " << k.getElementType() << ", "
           << v.getElementType();
  if (k.getDimSize(0) != q.getDimSize(0) || v.getDimSize(0) != q.getDimSize(0))
    return op->emitOpError("expects one batch size, got q ")
           << q.getDimSize(0) << ", k " << k.getDimSize(0) << ", v "
           << v.getDimSize(0);
  if (k.getDimSize(1) != v.getDimSize(1) || k.getDimSize(2) != v.getDimSize(2))
    return op->emitOpError("expects k and v with the same kv heads and "
                           "keys, got ")
           << k.getDimSize(1) << "x" << k.getDimSize(2) << " and "
           << v.getDimSize(1) << "x" << v.getDimSize(2);
  if (k.getDimSize(1) == 0 || q.getDimSize(1) % k.getDimSize(1) != 0)
    return op->emitOpError("expects kv heads dividing the query heads, got ")
           << k.getDimSize(1) << " kv heads for " << q.getDimSize(1)
           << " heads";
  if (k.getDimSize(3) != q.getDimSize(3))
    return op->emitOpError("expects q and k of one head dim, got ")
           << q.getDimSize(3) << " and " << k.getDimSize(3);
  return success();
}

/// q's shape with v's head dim: the attention's result.
static SmallVector<int64_t> getAttentionResultShape(Value query, Value value) {
  SmallVector<int64_t> shape(
      cast<RankedTensorType>(query.getType()).getShape());
  shape[3] = cast<RankedTensorType>(value.getType()).getDimSize(3);
  return shape;
}

/// Checks that `actual` is `expected` with the element type of `like`.
static LogicalResult verifyType(Operation *op, StringRef what, Type actual,
                                ArrayRef<int64_t> expected, Value like) {
  auto type = RankedTensorType::get(expected, getElementTypeOrSelf(like));
  if (actual != type)
    return op->emitOpError("expects ")
           << what << " of type " << type << ", got " << actual;
  return success();
}

/// Checks an attention op's dropout: a rate in [0, 1), the step counter
/// its mask is drawn for when above 0, and its piece.
static LogicalResult verifyAttentionDropout(RandomOpInterface op, float rate) {
  if (failed(verifyDropoutRate(op, rate)))
    return failure();
  if (rate > 0 && !op.getStep())
    return op->emitOpError("expects the step counter (`step`) its dropout "
                           "mask is drawn for");
  return verifyRandomPiece(op);
}

/// nn.attention's (and its gradient's) draw: the probabilities
/// [b, heads, s, t], split as the result's first three dims.
static SmallVector<int64_t> getAttentionDrawShape(Value query, Value key) {
  ArrayRef<int64_t> q = cast<RankedTensorType>(query.getType()).getShape();
  return {q[0], q[1], q[2],
          cast<RankedTensorType>(key.getType()).getDimSize(2)};
}

SmallVector<int64_t> AttentionOp::getDrawShape() {
  return getAttentionDrawShape(getQuery(), getKey());
}
SmallVector<int64_t> AttentionOp::getDrawDims() { return {0, 1, 2, -1}; }
/// A causal piece of the queries (draw dim 2) reads its place.
SmallVector<int64_t> AttentionOp::getPositionedDims() {
  return getCausal() ? SmallVector<int64_t>{2} : SmallVector<int64_t>();
}
SmallVector<int64_t> AttentionGradOp::getDrawShape() {
  return getAttentionDrawShape(getQuery(), getKey());
}
SmallVector<int64_t> AttentionGradOp::getDrawDims() { return {0, 1, 2, -1}; }
SmallVector<int64_t> AttentionGradOp::getPositionedDims() {
  return getCausal() ? SmallVector<int64_t>{2} : SmallVector<int64_t>();
}
/// An attention draws its dropout mask; without dropout it draws nothing,
/// whether or not it has a step.
bool AttentionOp::drawsNumbers() { return !getDropout().isZero(); }
bool AttentionGradOp::drawsNumbers() { return !getDropout().isZero(); }

/// Checks an attention's zigzag order (nn.attention's `zigzag`): a causal
/// attention's, without dropout or a piece, on as many queries as keys in
/// `2 zigzag` chunks.
template <typename AttentionLikeOp>
static LogicalResult verifyZigzag(AttentionLikeOp op) {
  int64_t zigzag = op.getZigzag();
  if (zigzag == 0)
    return success();
  int64_t queries =
      cast<RankedTensorType>(op.getQuery().getType()).getDimSize(2);
  int64_t keys = cast<RankedTensorType>(op.getKey().getType()).getDimSize(2);
  if (zigzag < 0 || !op.getCausal() || op.getDropout().convertToFloat() > 0 ||
      op.getPiece() || queries != keys || queries % (2 * zigzag) != 0)
    return op.emitOpError("expects zigzag order (")
           << zigzag
           << ") only causal, without dropout or a piece, on as many queries "
              "as keys in 2 zigzag chunks, got "
           << queries << " queries and " << keys << " keys";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue())) ||
      failed(verifyAttentionDropout(*this, getDropout().convertToFloat())) ||
      failed(verifyZigzag(*this)))
    return failure();
  return verifyType(*this, "a result", getType(),
                    getAttentionResultShape(getQuery(), getValue()),
                    getQuery());
}

/// Checks an attention gradient's types: the forward's result and its
/// gradient as attention's result, and each operand's gradient as it.
template <typename GradOp>
static LogicalResult verifyAttentionGradTypes(GradOp op) {
  SmallVector<int64_t> result =
      getAttentionResultShape(op.getQuery(), op.getValue());
  if (failed(verifyType(op, "the forward's result", op.getResult().getType(),
                        result, op.getQuery())) ||
      failed(verifyType(op, "a result gradient", op.getResultGrad().getType(),
                        result, op.getQuery())))
    return failure();
  for (auto [what, gradient, operand] :
       {std::tuple(StringRef("a q gradient"), op.getQueryGrad(), op.getQuery()),
        std::tuple(StringRef("a k gradient"), op.getKeyGrad(), op.getKey()),
        std::tuple(StringRef("a v gradient"), op.getValueGrad(),
                   op.getValue())})
    if (failed(verifyType(op, what, gradient.getType(),
                          cast<RankedTensorType>(operand.getType()).getShape(),
                          operand)))
      return failure();
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue())) ||
      failed(verifyAttentionDropout(*this, getDropout().convertToFloat())) ||
      failed(verifyZigzag(*this)))
    return failure();
  return verifyAttentionGradTypes(*this);
}

/// Checks a ring attention block's operands and attributes: its index
/// one element, the step within the ring, the rows' log-sum-exps
/// [b, heads, s] in f32, and a zigzag order's whole chunks on each device.
template <typename BlockOp>
static LogicalResult verifyAttentionBlock(BlockOp op, Value lse) {
  if (cast<RankedTensorType>(op.getIndex().getType()).getDimSize(0) != 1)
    return op.emitOpError("expects an index of one element, got ")
           << op.getIndex().getType();
  int64_t step = op.getRingStep(), size = op.getRingSize();
  if (size < 1 || step < 0 || step >= size)
    return op.emitOpError("expects 0 <= ring_step < ring_size, got ")
           << step << " and " << size;
  ArrayRef<int64_t> q =
      cast<RankedTensorType>(op.getQuery().getType()).getShape();
  int64_t keys = cast<RankedTensorType>(op.getKey().getType()).getDimSize(2);
  if (int64_t zigzag = op.getZigzag();
      zigzag != 0 &&
      (zigzag < 0 || !op.getCausal() || q[2] != keys ||
       2 * zigzag % size != 0 || q[2] % (2 * zigzag / size) != 0))
    return op.emitOpError("expects zigzag order (")
           << zigzag
           << ") only causal, on as many queries as keys, in whole chunks of "
              "2 zigzag over the ring of "
           << size << ", got " << q[2] << " queries and " << keys << " keys";
  return verifyType(op, "a log-sum-exp", lse.getType(), {q[0], q[1], q[2]},
                    lse);
}

LogicalResult AttentionBlockOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue())) ||
      failed(verifyAttentionBlock(*this, getLse())))
    return failure();
  return verifyType(*this, "a result", getResult().getType(),
                    getAttentionResultShape(getQuery(), getValue()),
                    getQuery());
}

LogicalResult AttentionBlockGradOp::verify() {
  if (failed(verifyAttention(*this, getQuery(), getKey(), getValue())) ||
      failed(verifyAttentionBlock(*this, getLse())))
    return failure();
  return verifyAttentionGradTypes(*this);
}

LogicalResult ClampOp::verify() {
  // The negation catches NaN bounds too.
  if (!(getMin().convertToFloat() <= getMax().convertToFloat()))
    return emitOpError("expects min <= max, got ")
           << getMin().convertToFloat() << " > " << getMax().convertToFloat();
  return success();
}

/// Checks gather's or scatter_add's operands: `indices` of the rank of
/// `whole` (the gathered input, the scattered result) and its dims but at
/// `axis`, where `picked` (the gathered result, the scattered source) has
/// the shape of `indices`.
static LogicalResult verifyIndexedAxis(Operation *op, int64_t axis,
                                       RankedTensorType whole,
                                       RankedTensorType indices,
                                       RankedTensorType picked,
                                       StringRef pickedName) {
  if (axis < 0 || axis >= whole.getRank())
    return op->emitOpError("expects axis in [0, ")
           << whole.getRank() << "), got " << axis;
  if (indices.getRank() != whole.getRank())
    return op->emitOpError("expects indices of rank ")
           << whole.getRank() << ", got " << indices.getRank();
  for (int64_t dim = 0; dim < whole.getRank(); ++dim)
    if (dim != axis && indices.getDimSize(dim) != whole.getDimSize(dim))
      return op->emitOpError("expects indices of size ")
             << whole.getDimSize(dim) << " in dim " << dim << ", got "
             << indices.getDimSize(dim);
  if (picked.getShape() != indices.getShape())
    return op->emitOpError("expects the ")
           << pickedName << " in the shape of the indices, got " << picked;
  if (picked.getElementType() != whole.getElementType())
    return op->emitOpError("expects one element type, got ")
           << whole.getElementType() << " and " << picked.getElementType();
  return success();
}

LogicalResult GatherOp::verify() {
  return verifyIndexedAxis(*this, getAxisAttr().getInt(), getInput().getType(),
                           getIndices().getType(), getResult().getType(),
                           "result");
}

LogicalResult ScatterAddOp::verify() {
  return verifyIndexedAxis(*this, getAxisAttr().getInt(), getResult().getType(),
                           getIndices().getType(), getSource().getType(),
                           "source");
}

LogicalResult TopKOp::verify() {
  RankedTensorType input = getInput().getType();
  int64_t k = getKAttr().getInt();
  if (input.getRank() == 0)
    return emitOpError("expects an input of rank at least 1");
  int64_t size = input.getShape().back();
  if (k < 1 || k > size)
    return emitOpError("expects k in [1, ") << size << "], got " << k;
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = k;
  auto values = RankedTensorType::get(shape, input.getElementType());
  if (getValues().getType() != values)
    return emitOpError("expects values of type ")
           << values << ", got " << getValues().getType();
  if (getIndices().getType().getShape() != ArrayRef<int64_t>(shape) ||
      !getIndices().getType().getElementType().isInteger(64))
    return emitOpError("expects i64 indices of shape [..., k], got ")
           << getIndices().getType();
  return success();
}

LogicalResult MoeDispatchOp::verify() {
  ArrayRef<int64_t> indices = getIndices().getType().getShape();
  ArrayRef<int64_t> result = getResult().getType().getShape();
  if (indices.size() < 2)
    return emitOpError("expects indices of rank at least 2 ([..., tokens, "
                       "k]), got rank ")
           << indices.size();
  if (result.size() != indices.size() + 1 ||
      result.take_front(indices.size() - 1) != indices.drop_back())
    return emitOpError("expects a result of shape ")
           << formatList(indices.drop_back()) << " ++ [experts, capacity], got "
           << formatList(result);
  return success();
}

LogicalResult RandomUniformOp::verify() { return verifyRandomPiece(*this); }

LogicalResult DropoutOp::verify() {
  if (failed(verifyDropoutRate(*this, getRate().convertToFloat())))
    return failure();
  return verifyRandomPiece(*this);
}

LogicalResult IotaOp::verify() {
  RankedTensorType type = getResult().getType();
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= type.getRank())
    return emitOpError("expects dim in [0, ")
           << type.getRank() << "), got " << dim;
  if (type.getElementType().isInteger(1))
    return emitOpError("expects a float or i32/i64 result, got i1");
  if (Value piece = getPiece();
      piece && cast<RankedTensorType>(piece.getType()).getShape() !=
                   ArrayRef<int64_t>{1})
    return emitOpError("expects a piece index of shape [1], got ")
           << formatList(cast<RankedTensorType>(piece.getType()).getShape());
  return success();
}

LogicalResult CausalMaskOp::verify() {
  int64_t rank = getInput().getType().getRank();
  if (rank < 2)
    return emitOpError("expects scores of rank at least 2 ([..., query, "
                       "key]), got rank ")
           << rank;
  return success();
}

//===----------------------------------------------------------------------===//
// Backward helpers
//===----------------------------------------------------------------------===//

LogicalResult OneHotOp::verify() {
  ArrayRef<int64_t> labels = getLabels().getType().getShape();
  ArrayRef<int64_t> result = getResult().getType().getShape();
  if (result.size() != labels.size() + 1 || result.drop_back() != labels ||
      result.back() < 1)
    return emitOpError("expects a result of shape ")
           << formatList(labels) << " ++ [depth >= 1], got "
           << formatList(result);
  if (Value piece = getPiece();
      piece && cast<RankedTensorType>(piece.getType()).getShape() !=
                   ArrayRef<int64_t>{1})
    return emitOpError("expects a piece index of shape [1], got ")
           << formatList(cast<RankedTensorType>(piece.getType()).getShape());
  return success();
}

LogicalResult
EmbeddingGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  InferError error(loc, getOperationName());
  auto grad = getRanked(adaptor.getGrad());
  auto indices = getRanked(adaptor.getIndices());
  if (!grad || !indices)
    return error("expects ranked tensors");
  if (grad.getRank() != indices.getRank() + 1 ||
      grad.getShape().drop_back() != indices.getShape())
    return error("expects a gradient of shape ", formatList(indices.getShape()),
                 " ++ [hidden], got ", formatList(grad.getShape()));
  auto vocab = static_cast<int64_t>(adaptor.getVocab());
  if (vocab < 1)
    return error("expects a vocab of at least 1, got ", vocab);
  if (Value piece = adaptor.getPiece();
      piece && getRanked(piece).getShape() != ArrayRef<int64_t>{1})
    return error("expects a piece index of shape [1], got ",
                 formatList(getRanked(piece).getShape()));
  inferred.push_back(RankedTensorType::get({vocab, grad.getShape().back()},
                                           grad.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// Checks that a hyperparameter is finite and at least `low`, and below
/// `high` when given.
static LogicalResult checkHyperparameter(Operation *op, StringRef name,
                                         APFloat value, int low,
                                         std::optional<int> high = {}) {
  double v = value.convertToDouble();
  if (std::isfinite(v) && v >= low && (!high || v < *high))
    return success();
  SmallString<16> text;
  value.toString(text, /*FormatPrecision=*/6);
  InFlightDiagnostic diag = op->emitOpError("expects ");
  diag << name << " in [" << low << ", ";
  if (high)
    diag << *high << ")";
  else
    diag << "inf)";
  return diag << ", got " << text;
}

LogicalResult SgdOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  inferred.push_back(adaptor.getParam().getType());
  return success();
}

LogicalResult SgdOp::verify() {
  if (failed(checkHyperparameter(*this, "lr", getLr(), 0)) ||
      failed(checkHyperparameter(*this, "weight_decay", getWeightDecay(), 0)))
    return failure();
  return success();
}

SmallVector<Value> SgdOp::getState() { return {}; }

LogicalResult AdamWOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  inferred.push_back(adaptor.getParam().getType());
  inferred.push_back(adaptor.getM().getType());
  inferred.push_back(adaptor.getV().getType());
  return success();
}

/// An update's gradient type: printed (`grad <type>`) only where it is not
/// the parameter's.
static ParseResult parseGradType(OpAsmParser &parser, Type &grad, Type param) {
  if (failed(parser.parseOptionalKeyword("grad"))) {
    grad = param;
    return success();
  }
  return parser.parseType(grad);
}

static void printGradType(OpAsmPrinter &printer, Operation *, Type grad,
                          Type param) {
  if (grad != param)
    printer << "grad " << grad;
}

LogicalResult AdamWOp::verify() {
  auto param = getParam().getType(), grad = getGrad().getType();
  Type narrow = grad.getElementType();
  if (grad.getShape() != param.getShape() ||
      (grad != param && (!param.getElementType().isF32() ||
                         !(narrow.isBF16() || narrow.isF16()))))
    return emitOpError("expects a gradient of the parameter's type, or of "
                       "its shape in bf16 or f16 for an f32 parameter; got ")
           << grad << " for " << param;
  if (getM().getType().getShape() != getParam().getType().getShape())
    return emitOpError("expects moments of the parameter's shape ")
           << formatList(getParam().getType().getShape()) << ", got "
           << formatList(getM().getType().getShape());
  if (failed(checkHyperparameter(*this, "lr", getLr(), 0)) ||
      failed(checkHyperparameter(*this, "beta1", getBeta1(), 0, 1)) ||
      failed(checkHyperparameter(*this, "beta2", getBeta2(), 0, 1)) ||
      failed(checkHyperparameter(*this, "epsilon", getEpsilon(), 0)) ||
      failed(checkHyperparameter(*this, "weight_decay", getWeightDecay(), 0)) ||
      failed(checkHyperparameter(*this, "min_lr", getMinLr(), 0)) ||
      failed(checkHyperparameter(*this, "max_grad_norm", getMaxGradNorm(), 0)))
    return failure();
  if (getMinLr() > getLr())
    return emitOpError("expects min_lr (")
           << getMinLr().convertToFloat() << ") at most lr ("
           << getLr().convertToFloat() << ")";
  if (getWarmupSteps() < 0)
    return emitOpError("expects warmup_steps >= 0, got ") << getWarmupSteps();
  if (getSchedule() != LrSchedule::constant &&
      getDecaySteps() <= getWarmupSteps())
    return emitOpError("expects decay_steps (")
           << getDecaySteps() << ") past warmup_steps (" << getWarmupSteps()
           << ") for a " << stringifyLrSchedule(getSchedule()) << " schedule";
  if (getGradNorm() && getMaxGradNorm().isZero() && !getLossScale())
    return emitOpError("reads a gradient norm but clips to no max_grad_norm "
                       "and scales no loss");
  return success();
}

SmallVector<Value> AdamWOp::getState() { return {getM(), getV()}; }

LogicalResult SumSquaresOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location>, Adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

#define GET_OP_CLASSES
#include "dialects/NN/IR/NNOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

/// f32, bf16, f16: what a fused body computes in (f32 registers, rounded to
/// the 16-bit types).
static bool isFusedFloat(Type type) {
  return isa<Float32Type, BFloat16Type, Float16Type>(
      getElementTypeOrSelf(type));
}

static bool isFusedValue(Type type) {
  return isFusedFloat(type) || getElementTypeOrSelf(type).isInteger(1);
}

bool tessera::nn::isFusible(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op))
    return isFusedFloat(constant.getType()) && constant.getValue().isSplat();
  if (isa<BroadcastOp>(op))
    return isFusedValue(op->getResultTypes()[0]);
  if (isa<CompareOp>(op))
    return isFusedFloat(op->getOperandTypes()[0]);
  if (isa<SelectOp>(op))
    return isFusedFloat(op->getResultTypes()[0]);
  if (isa<CastOp>(op))
    return isFusedFloat(op->getOperandTypes()[0]) &&
           isFusedFloat(op->getResultTypes()[0]);
  if (!isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, NegOp, ExpOp, LogOp,
           SqrtOp, RsqrtOp, TanhOp, SinOp, CosOp, SigmoidOp, AbsOp, ErfOp,
           ReluOp, GeluOp, SiluOp, ClampOp>(op))
    return false;
  return isFusedFloat(op->getResultTypes()[0]);
}

LogicalResult FusedOp::verifyRegions() {
  if (getNumResults() == 0)
    return emitOpError("expects at least one result");
  ArrayRef<int64_t> shape = getShape();
  for (Type type : getResultTypes())
    if (cast<RankedTensorType>(type).getShape() != shape)
      return emitOpError("expects results of one shape, got ")
             << formatList(cast<RankedTensorType>(type).getShape()) << " and "
             << formatList(shape);
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("expects the body's arguments to have the inputs' "
                       "types");
  for (Operation &op : body.without_terminator()) {
    if (!isFusible(&op))
      return op.emitOpError("cannot be fused: expects an elementwise op of "
                            "f32, bf16, f16 or i1 values, a splat float "
                            "constant or a broadcast");
    auto type = cast<RankedTensorType>(op.getResultTypes()[0]);
    if (type.getShape() != shape)
      return op.emitOpError("expects the fused shape ")
             << formatList(shape) << ", got " << formatList(type.getShape());
    if (isa<BroadcastOp>(op) && !isa<BlockArgument>(op.getOperand(0)))
      return op.emitOpError("expects to broadcast an input of the fused op");
  }
  if (body.getTerminator()->getOperandTypes() != getResultTypes())
    return emitOpError("expects the body to yield the results' types");
  return success();
}
