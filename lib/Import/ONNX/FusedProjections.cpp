//===- FusedProjections.cpp - Parts of a weight as a dim ------------------===//
//
// A projection whose output is cut into k equal parts along its features is
// k projections that share one weight: GPT-2's c_attn and PyTorch's
// in_proj make q, k and v from one [3h, h] weight. Tensor parallelism
// splits each part over the devices (Megatron-LM's per-head layout). A
// split of the fused 3h dim cannot say that: its first device would hold
// all of q and some of k. So the importer gives such a weight, and its
// bias, a dim for the parts: [3h, h] becomes [3, h, h], the projection
// [.., 3, h], and each part a slice of the parts dim. The bytes and their
// order are the initializer's, so the weights file holds PyTorch's tensors,
// each viewed with one more dim.
//
//===----------------------------------------------------------------------===//

#include "FusedProjections.h"

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace tessera;

namespace {
/// One weight read by one projection whose output only slices read.
struct FusedProjection {
  BlockArgument weight;
  nn::TransposeOp transpose; // of the weight, or null
  nn::DotOp dot;
  /// The weight's dim, and the projection operand's, that holds the parts.
  int64_t weightDim, rhsDim;
  /// The bias: a parameter of the parts' dim, broadcast and added.
  BlockArgument bias;
  nn::BroadcastOp broadcast;
  nn::AddOp add;
  SmallVector<nn::SliceOp> slices;
  int64_t parts, width;
};
} // namespace

static bool isParameter(func::FuncOp function, BlockArgument arg) {
  return arg && function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName);
}

/// The slices of `value` along its last dim, of one width that divides it,
/// each at a multiple of that width; none when another op reads `value`.
static SmallVector<nn::SliceOp> getPartSlices(Value value, int64_t &width) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t last = type.getRank() - 1;
  SmallVector<nn::SliceOp> slices;
  width = 0;
  for (Operation *user : value.getUsers()) {
    auto slice = dyn_cast<nn::SliceOp>(user);
    if (!slice)
      return {};
    ArrayRef<int64_t> start = slice.getStart(), limit = slice.getLimit();
    for (int64_t dim = 0; dim < last; ++dim)
      if (start[dim] != 0 || limit[dim] != type.getDimSize(dim))
        return {};
    int64_t sliceWidth = limit[last] - start[last];
    if (width && sliceWidth != width)
      return {};
    width = sliceWidth;
    if (width <= 0 || type.getDimSize(last) % width || start[last] % width)
      return {};
    slices.push_back(slice);
  }
  if (!width || width == type.getDimSize(last))
    return {};
  return slices;
}

static std::optional<FusedProjection>
matchFusedProjection(func::FuncOp function, BlockArgument arg) {
  FusedProjection match;
  match.weight = arg;
  if (!isParameter(function, arg) || !arg.hasOneUse())
    return std::nullopt;
  Operation *user = *arg.getUsers().begin();
  Value rhs = arg;
  if ((match.transpose = dyn_cast<nn::TransposeOp>(user))) {
    rhs = match.transpose.getResult();
    if (!rhs.hasOneUse())
      return std::nullopt;
    user = *rhs.getUsers().begin();
  }
  match.dot = dyn_cast<nn::DotOp>(user);
  if (!match.dot || match.dot.getRhs() != rhs || match.dot.getLhs() == rhs)
    return std::nullopt;
  // The operand's one free dim, which the product puts last.
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  SmallVector<int64_t> free;
  for (int64_t dim = 0; dim < rhsType.getRank(); ++dim)
    if (!llvm::is_contained(match.dot.getRhsBatchingDims(), dim) &&
        !llvm::is_contained(match.dot.getRhsContractingDims(), dim))
      free.push_back(dim);
  if (free.size() != 1)
    return std::nullopt;
  match.rhsDim = free.front();
  match.weightDim = match.transpose
                        ? match.transpose.getPermutation()[match.rhsDim]
                        : match.rhsDim;

  Value output = match.dot.getResult();
  int64_t last = match.dot.getType().getRank() - 1;
  if (output.hasOneUse())
    if (auto add = dyn_cast<nn::AddOp>(*output.getUsers().begin())) {
      Value other = add.getLhs() == output ? add.getRhs() : add.getLhs();
      auto broadcast = other.getDefiningOp<nn::BroadcastOp>();
      auto bias = broadcast ? dyn_cast<BlockArgument>(broadcast.getInput())
                            : BlockArgument();
      if (bias && isParameter(function, bias) && bias.hasOneUse() &&
          other.hasOneUse() && broadcast.getDims() == ArrayRef<int64_t>{last}) {
        match.bias = bias;
        match.broadcast = broadcast;
        match.add = add;
        output = add.getResult();
      }
    }
  match.slices = getPartSlices(output, match.width);
  if (match.slices.empty())
    return std::nullopt;
  match.parts = match.dot.getType().getDimSize(last) / match.width;
  return match;
}

/// `type` with `dim` as [parts, size / parts].
static RankedTensorType splitDim(RankedTensorType type, int64_t dim,
                                 int64_t parts) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= parts;
  shape.insert(shape.begin() + dim, parts);
  return RankedTensorType::get(shape, type.getElementType());
}

/// `dims` (of a tensor whose `dim` is split in two) as they index the split
/// tensor.
static SmallVector<int64_t> shiftDims(ArrayRef<int64_t> dims, int64_t dim) {
  SmallVector<int64_t> result;
  for (int64_t d : dims)
    result.push_back(d > dim ? d + 1 : d);
  return result;
}

static void rewrite(FusedProjection &match) {
  OpBuilder builder(match.dot);
  Location loc = match.dot.getLoc();
  auto weightType = cast<RankedTensorType>(match.weight.getType());
  match.weight.setType(splitDim(weightType, match.weightDim, match.parts));
  Value rhs = match.weight;
  if (match.transpose) {
    // Each dim of the split weight where its dim stood, the parts' dim
    // before the one it was split from.
    SmallVector<int64_t> permutation;
    for (int64_t dim : match.transpose.getPermutation()) {
      if (dim == match.weightDim)
        permutation.push_back(dim);
      permutation.push_back(dim >= match.weightDim ? dim + 1 : dim);
    }
    builder.setInsertionPoint(match.transpose);
    rhs = nn::TransposeOp::create(builder, match.transpose.getLoc(), rhs,
                                  builder.getDenseI64ArrayAttr(permutation));
    builder.setInsertionPoint(match.dot);
  }
  Value output = nn::DotOp::create(
      builder, loc, match.dot.getLhs(), rhs, match.dot.getLhsBatchingDimsAttr(),
      builder.getDenseI64ArrayAttr(
          shiftDims(match.dot.getRhsBatchingDims(), match.rhsDim)),
      match.dot.getLhsContractingDimsAttr(),
      builder.getDenseI64ArrayAttr(
          shiftDims(match.dot.getRhsContractingDims(), match.rhsDim)));
  auto outputType = cast<RankedTensorType>(output.getType());
  int64_t partsDim = outputType.getRank() - 2;
  if (match.add) {
    auto biasType = cast<RankedTensorType>(match.bias.getType());
    match.bias.setType(splitDim(biasType, 0, match.parts));
    builder.setInsertionPoint(match.add);
    Value bias = nn::BroadcastOp::create(
        builder, match.broadcast.getLoc(), outputType, match.bias,
        builder.getDenseI64ArrayAttr({partsDim, partsDim + 1}));
    bool biasFirst = match.add.getLhs() != match.dot.getResult();
    output = biasFirst
                 ? nn::AddOp::create(builder, match.add.getLoc(), bias, output)
                 : nn::AddOp::create(builder, match.add.getLoc(), output, bias);
  }
  for (nn::SliceOp slice : match.slices) {
    builder.setInsertionPoint(slice);
    SmallVector<int64_t> start(slice.getStart().drop_back());
    SmallVector<int64_t> limit(slice.getLimit().drop_back());
    int64_t part = slice.getStart().back() / match.width;
    start.append({part, 0});
    limit.append({part + 1, match.width});
    Value piece = nn::SliceOp::create(builder, slice.getLoc(), output,
                                      builder.getDenseI64ArrayAttr(start),
                                      builder.getDenseI64ArrayAttr(limit));
    piece =
        nn::ReshapeOp::create(builder, slice.getLoc(), slice.getType(), piece);
    slice.replaceAllUsesWith(piece);
    slice.erase();
  }
  if (match.add) {
    match.add.erase();
    match.broadcast.erase();
  }
  match.dot.erase();
  if (match.transpose)
    match.transpose.erase();
}

void tessera::onnx_import::splitFusedProjections(func::FuncOp function) {
  SmallVector<FusedProjection> matches;
  for (BlockArgument arg : function.getArguments())
    if (auto match = matchFusedProjection(function, arg))
      matches.push_back(*match);
  for (FusedProjection &match : matches)
    rewrite(match);
  SmallVector<Type> inputs(function.getBody().getArgumentTypes());
  function.setType(FunctionType::get(function.getContext(), inputs,
                                     function.getResultTypes()));
}
