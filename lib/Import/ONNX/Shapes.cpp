//===- Shapes.cpp - ONNX's shape and indexing ops as nn -------------------===//
//
// Reshape, Flatten, Squeeze and Unsqueeze are nn.reshape; Transpose,
// Concat and Slice have nn ops of their own; Split is slices; Gather of
// computed indices is an nn.embedding (a table looked up by rows), of known
// indices slices; Expand is a broadcast and Tile a concatenation. Shape,
// Size and ConstantOfShape are known at import.
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "dialects/NN/IR/NNOps.h"

#include "mlir/IR/TypeUtilities.h"

#include <numeric>

using namespace mlir;
using namespace tessera;
using namespace tessera::onnx_import;

static llvm::Expected<RankedTensorType> getType(GraphImporter &importer,
                                                const onnx::NodeProto &node,
                                                int index, Value &value) {
  llvm::Expected<Value> input = importer.getValue(node, index);
  if (!input)
    return input.takeError();
  value = *input;
  return cast<RankedTensorType>(value.getType());
}

static llvm::Error convertReshape(GraphImporter &importer,
                                  const onnx::NodeProto &node) {
  Value input;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, input);
  if (!type)
    return type.takeError();
  SmallVector<int64_t> target;
  if (node.op_type() == "Reshape") {
    llvm::Expected<HostTensor> shape =
        importer.getConstant(node, 1, "the shape");
    if (!shape)
      return shape.takeError();
    llvm::Expected<SmallVector<int64_t>> resolved = getReshapeShape(
        type->getShape(), shape->getInts(), getIntAttr(node, "allowzero", 0));
    if (!resolved)
      return resolved.takeError();
    target = std::move(*resolved);
  } else if (node.op_type() == "Flatten") {
    llvm::Expected<int64_t> axis =
        normalizeFlattenAxis(getIntAttr(node, "axis", 1), type->getRank());
    if (!axis)
      return axis.takeError();
    int64_t outer = 1, inner = 1;
    for (int64_t dim = 0; dim < type->getRank(); ++dim)
      (dim < *axis ? outer : inner) *= type->getDimSize(dim);
    target = {outer, inner};
  } else {
    std::optional<HostTensor> axes;
    if (importer.getInput(node, 1)) {
      llvm::Expected<HostTensor> known =
          importer.getConstant(node, 1, "the axes");
      if (!known)
        return known.takeError();
      axes = std::move(*known);
    }
    SmallVector<int64_t> axisList =
        axes ? axes->getInts() : SmallVector<int64_t>();
    llvm::Expected<SmallVector<int64_t>> shape =
        node.op_type() == "Squeeze"
            ? getSqueezedShape(type->getShape(),
                               axes ? std::optional<ArrayRef<int64_t>>(axisList)
                                    : std::nullopt)
            : getUnsqueezedShape(type->getShape(), axisList);
    if (!shape)
      return shape.takeError();
    target = std::move(*shape);
  }
  importer.setOutput(node, 0, importer.reshape(input, target));
  return llvm::Error::success();
}

static llvm::Error convertTranspose(GraphImporter &importer,
                                    const onnx::NodeProto &node) {
  Value input;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, input);
  if (!type)
    return type.takeError();
  SmallVector<int64_t> permutation;
  for (int64_t dim = type->getRank() - 1; dim >= 0; --dim)
    permutation.push_back(dim);
  if (auto perm = getIntsAttr(node, "perm"))
    permutation = *perm;
  SmallVector<bool> seen(type->getRank(), false);
  for (int64_t dim : permutation) {
    if (dim < 0 || dim >= type->getRank() || seen[dim] ||
        permutation.size() != static_cast<size_t>(type->getRank()))
      return makeError("perm is not a permutation of the input's " +
                       llvm::Twine(type->getRank()) + " dims");
    seen[dim] = true;
  }
  OpBuilder &builder = importer.getBuilder();
  importer.setOutput(
      node, 0,
      nn::TransposeOp::create(builder, importer.getLoc(), input,
                              builder.getDenseI64ArrayAttr(permutation)));
  return llvm::Error::success();
}

static Value concat(GraphImporter &importer, ArrayRef<Value> values,
                    int64_t dim) {
  if (values.size() == 1)
    return values.front();
  return nn::ConcatOp::create(importer.getBuilder(), importer.getLoc(), values,
                              dim);
}

static llvm::Error convertConcat(GraphImporter &importer,
                                 const onnx::NodeProto &node) {
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    llvm::Expected<Value> input = importer.getValue(node, i);
    if (!input)
      return input.takeError();
    // Empty inputs (a shape's [0] piece) add nothing.
    if (cast<RankedTensorType>(input->getType()).getNumElements() != 0 ||
        i + 1 == node.input_size())
      inputs.push_back(*input);
  }
  auto type = cast<RankedTensorType>(inputs.front().getType());
  llvm::Expected<int64_t> axis =
      normalizeAxis(getIntAttr(node, "axis", 0), type.getRank(), "axis");
  if (!axis)
    return axis.takeError();
  for (Value input : inputs) {
    auto each = cast<RankedTensorType>(input.getType());
    if (each.getRank() != type.getRank() ||
        each.getElementType() != type.getElementType())
      return makeError("the inputs differ in rank or element type");
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      if (dim != *axis && each.getDimSize(dim) != type.getDimSize(dim))
        return makeError("the inputs differ in dim " + llvm::Twine(dim) + " (" +
                         llvm::Twine(type.getDimSize(dim)) + " and " +
                         llvm::Twine(each.getDimSize(dim)) + ")");
  }
  importer.setOutput(node, 0, concat(importer, inputs, *axis));
  return llvm::Error::success();
}

/// `input`'s [start, limit) along each dim.
static Value slice(GraphImporter &importer, Value input,
                   ArrayRef<int64_t> start, ArrayRef<int64_t> limit) {
  auto type = cast<RankedTensorType>(input.getType());
  if (llvm::all_of(start, [](int64_t s) { return s == 0; }) &&
      limit == type.getShape())
    return input;
  OpBuilder &builder = importer.getBuilder();
  return nn::SliceOp::create(builder, importer.getLoc(), input,
                             builder.getDenseI64ArrayAttr(start),
                             builder.getDenseI64ArrayAttr(limit));
}

/// `input`'s [begin, end) along `dim`.
static Value sliceDim(GraphImporter &importer, Value input, int64_t dim,
                      int64_t begin, int64_t end) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> start(type.getRank(), 0);
  SmallVector<int64_t> limit(type.getShape());
  start[dim] = begin;
  limit[dim] = end;
  return slice(importer, input, start, limit);
}

static llvm::Error convertSlice(GraphImporter &importer,
                                const onnx::NodeProto &node) {
  Value input;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, input);
  if (!type)
    return type.takeError();
  SmallVector<SmallVector<int64_t>> known;
  SmallVector<bool> given;
  for (int index = 1; index <= 4; ++index) {
    given.push_back(importer.getInput(node, index) != nullptr);
    known.emplace_back();
    if (!given.back())
      continue;
    static const char *const names[] = {"starts", "ends", "axes", "steps"};
    llvm::Expected<HostTensor> tensor =
        importer.getConstant(node, index, names[index - 1]);
    if (!tensor)
      return tensor.takeError();
    known.back() = tensor->getInts();
  }
  if (!given[0] || !given[1])
    return makeError("starts and ends are required");
  llvm::Expected<SliceBounds> bounds = getSliceBounds(
      type->getShape(), known[0], known[1],
      given[2] ? std::optional<ArrayRef<int64_t>>(known[2]) : std::nullopt,
      given[3] ? std::optional<ArrayRef<int64_t>>(known[3]) : std::nullopt);
  if (!bounds)
    return bounds.takeError();
  for (auto [dim, step] : llvm::enumerate(bounds->step)) {
    if (step != 1)
      return makeError("slice step " + llvm::Twine(step) + " on dim " +
                       llvm::Twine(dim) + ": nn.slice takes unit steps");
    if (bounds->limit[dim] <= bounds->start[dim])
      return makeError("the slice of dim " + llvm::Twine(dim) +
                       " is empty: nn holds no empty tensors");
  }
  importer.setOutput(node, 0,
                     slice(importer, input, bounds->start, bounds->limit));
  return llvm::Error::success();
}

static llvm::Error convertSplit(GraphImporter &importer,
                                const onnx::NodeProto &node) {
  Value input;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, input);
  if (!type)
    return type.takeError();
  llvm::Expected<int64_t> axis =
      normalizeAxis(getIntAttr(node, "axis", 0), type->getRank(), "axis");
  if (!axis)
    return axis.takeError();
  int64_t extent = type->getDimSize(*axis);
  SmallVector<int64_t> sizes;
  if (importer.getInput(node, 1)) {
    llvm::Expected<HostTensor> split =
        importer.getConstant(node, 1, "the split sizes");
    if (!split)
      return split.takeError();
    sizes = split->getInts();
  } else {
    int64_t parts = node.output_size();
    if (extent % parts != 0)
      return makeError("dim " + llvm::Twine(*axis) + " of size " +
                       llvm::Twine(extent) + " does not split evenly into " +
                       llvm::Twine(parts));
    sizes.assign(parts, extent / parts);
  }
  if (static_cast<int>(sizes.size()) != node.output_size())
    return makeError("the split has " + llvm::Twine(sizes.size()) +
                     " sizes for " + llvm::Twine(node.output_size()) +
                     " outputs");
  int64_t offset = 0;
  for (auto [index, size] : llvm::enumerate(sizes)) {
    if (size <= 0 || offset + size > extent)
      return makeError("the split sizes do not cover dim " +
                       llvm::Twine(*axis) + " of size " + llvm::Twine(extent));
    importer.setOutput(node, index,
                       sliceDim(importer, input, *axis, offset, offset + size));
    offset += size;
  }
  if (offset != extent)
    return makeError("the split sizes sum to " + llvm::Twine(offset) +
                     ", not dim " + llvm::Twine(*axis) + "'s " +
                     llvm::Twine(extent));
  return llvm::Error::success();
}

/// Gather: computed indices into the rows of a matrix are an nn.embedding;
/// known indices are slices of the data, concatenated.
static llvm::Error convertGather(GraphImporter &importer,
                                 const onnx::NodeProto &node) {
  Value data;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, data);
  if (!type)
    return type.takeError();
  llvm::Expected<int64_t> axis =
      normalizeAxis(getIntAttr(node, "axis", 0), type->getRank(), "axis");
  if (!axis)
    return axis.takeError();
  const GraphValue *indices = importer.getInput(node, 1);
  if (!indices)
    return makeError("input #1 is missing");
  if (!indices->constant) {
    if (*axis != 0 || type->getRank() != 2)
      return makeError(
          "a gather of computed indices along dim " + llvm::Twine(*axis) +
          " of a rank-" + llvm::Twine(type->getRank()) +
          " tensor: Tessera gathers computed indices from the rows of a "
          "matrix (an embedding table) only");
    if (llvm::Error error = requireFloat(data, node))
      return error;
    llvm::Expected<Value> ids = importer.getValue(node, 1);
    if (!ids)
      return ids.takeError();
    if (!isa<IntegerType>(getElementTypeOrSelf(ids->getType())) ||
        getElementTypeOrSelf(ids->getType()).isInteger(1))
      return makeError("the indices are not integers");
    importer.setOutput(node, 0,
                       nn::EmbeddingOp::create(importer.getBuilder(),
                                               importer.getLoc(), data, *ids));
    return llvm::Error::success();
  }
  SmallVector<int64_t> known = indices->constant->getInts();
  int64_t extent = type->getDimSize(*axis);
  // Runs of consecutive indices, each one slice.
  SmallVector<std::pair<int64_t, int64_t>> runs;
  for (int64_t index : known) {
    if (index < -extent || index >= extent)
      return makeError("index " + llvm::Twine(index) +
                       " is out of range for a dim of " + llvm::Twine(extent));
    if (index < 0)
      index += extent;
    if (!runs.empty() && runs.back().second == index)
      ++runs.back().second;
    else
      runs.push_back({index, index + 1});
  }
  SmallVector<Value> pieces;
  for (auto [begin, end] : runs)
    pieces.push_back(sliceDim(importer, data, *axis, begin, end));
  if (pieces.empty())
    return makeError("a gather of no indices: nn holds no empty tensors");
  Value gathered = concat(importer, pieces, *axis);
  SmallVector<int64_t> shape(type->getShape().take_front(*axis));
  shape.append(indices->constant->shape.begin(),
               indices->constant->shape.end());
  shape.append(type->getShape().begin() + *axis + 1, type->getShape().end());
  importer.setOutput(node, 0, importer.reshape(gathered, shape));
  return llvm::Error::success();
}

static llvm::Error convertExpand(GraphImporter &importer,
                                 const onnx::NodeProto &node) {
  Value input;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, input);
  if (!type)
    return type.takeError();
  llvm::Expected<HostTensor> shape = importer.getConstant(node, 1, "the shape");
  if (!shape)
    return shape.takeError();
  std::optional<SmallVector<int64_t>> target =
      getBroadcastShape(type->getShape(), shape->getInts());
  if (!target)
    return makeError("the input does not broadcast to the shape");
  if (auto size = getCheckedSize(*target, kMaxElements, "the result"); !size)
    return size.takeError();
  importer.setOutput(node, 0, importer.broadcastTo(input, *target));
  return llvm::Error::success();
}

static llvm::Error convertTile(GraphImporter &importer,
                               const onnx::NodeProto &node) {
  Value input;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, input);
  if (!type)
    return type.takeError();
  llvm::Expected<HostTensor> repeats =
      importer.getConstant(node, 1, "the repeats");
  if (!repeats)
    return repeats.takeError();
  SmallVector<int64_t> counts = repeats->getInts();
  if (static_cast<int64_t>(counts.size()) != type->getRank())
    return makeError("repeats has " + llvm::Twine(counts.size()) +
                     " values for rank " + llvm::Twine(type->getRank()));
  SmallVector<int64_t> tiled;
  for (auto [dim, count] : llvm::zip(type->getShape(), counts)) {
    if (count < 1 || count > 4096)
      return makeError("a repeat count of " + llvm::Twine(count) +
                       " (Tessera tiles 1 to 4096 copies)");
    tiled.push_back(dim * count);
  }
  if (auto size = getCheckedSize(tiled, kMaxElements, "the result"); !size)
    return size.takeError();
  Value result = input;
  for (auto [dim, count] : llvm::enumerate(counts)) {
    SmallVector<Value> copies(count, result);
    result = concat(importer, copies, dim);
  }
  importer.setOutput(node, 0, result);
  return llvm::Error::success();
}

static llvm::Error convertShape(GraphImporter &importer,
                                const onnx::NodeProto &node) {
  llvm::Expected<SmallVector<int64_t>> shape = importer.getShape(node, 0);
  if (!shape)
    return shape.takeError();
  int64_t rank = shape->size();
  auto clamp = [&](int64_t value) {
    return std::clamp<int64_t>(value < 0 ? value + rank : value, 0, rank);
  };
  int64_t start = clamp(getIntAttr(node, "start", 0)),
          end = clamp(getIntAttr(node, "end", rank));
  HostTensor result;
  result.elementType = onnx::TensorProto::INT64;
  for (int64_t dim = start; dim < end; ++dim)
    result.values.push_back(static_cast<double>((*shape)[dim]));
  result.shape = {static_cast<int64_t>(result.values.size())};
  importer.setOutput(node, 0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error convertSize(GraphImporter &importer,
                               const onnx::NodeProto &node) {
  llvm::Expected<SmallVector<int64_t>> shape = importer.getShape(node, 0);
  if (!shape)
    return shape.takeError();
  HostTensor result;
  result.elementType = onnx::TensorProto::INT64;
  result.values = {static_cast<double>(std::accumulate(
      shape->begin(), shape->end(), int64_t(1), std::multiplies<int64_t>()))};
  importer.setOutput(node, 0, std::move(result));
  return llvm::Error::success();
}

static llvm::Error convertConstantOfShape(GraphImporter &importer,
                                          const onnx::NodeProto &node) {
  llvm::Expected<HostTensor> shape = importer.getConstant(node, 0, "the shape");
  if (!shape)
    return shape.takeError();
  HostTensor result;
  result.values = {0};
  if (const onnx::AttributeProto *value = getAttr(node, "value")) {
    llvm::Expected<HostTensor> fill =
        readTensor(value->t(), importer.getModelPath());
    if (!fill)
      return fill.takeError();
    if (fill->values.size() != 1)
      return makeError("the value has " + llvm::Twine(fill->values.size()) +
                       " elements, not 1");
    result = std::move(*fill);
  }
  result.shape = shape->getInts();
  llvm::Expected<int64_t> size =
      getCheckedSize(result.shape, kMaxFoldedElements, "the result");
  if (!size)
    return size.takeError();
  result.values.assign(*size, result.values.front());
  importer.setOutput(node, 0, std::move(result));
  return llvm::Error::success();
}

/// Trilu of a computed value: the kept triangle selected by a known mask.
static llvm::Error convertTrilu(GraphImporter &importer,
                                const onnx::NodeProto &node) {
  Value input;
  llvm::Expected<RankedTensorType> type = getType(importer, node, 0, input);
  if (!type)
    return type.takeError();
  if (type->getRank() < 2)
    return makeError("the input has rank " + llvm::Twine(type->getRank()) +
                     ", Trilu needs 2 or more");
  int64_t k = 0;
  if (importer.getInput(node, 1)) {
    llvm::Expected<HostTensor> known = importer.getConstant(node, 1, "k");
    if (!known)
      return known.takeError();
    k = known->getInts().front();
  }
  bool upper = getIntAttr(node, "upper", 1);
  int64_t rows = type->getDimSize(type->getRank() - 2),
          columns = type->getDimSize(type->getRank() - 1);
  HostTensor mask;
  mask.elementType = onnx::TensorProto::BOOL;
  mask.shape = {rows, columns};
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t column = 0; column < columns; ++column)
      mask.values.push_back(upper ? column - row >= k : column - row <= k);
  Value keep =
      importer.broadcastTo(importer.materialize(mask), type->getShape());
  importer.setOutput(node, 0,
                     nn::SelectOp::create(importer.getBuilder(),
                                          importer.getLoc(), keep, input,
                                          importer.getSplat(input, 0)));
  return llvm::Error::success();
}

void onnx_import::addShapeConverters(ConverterTable &table) {
  table["Reshape"] = convertReshape;
  table["Flatten"] = convertReshape;
  table["Squeeze"] = convertReshape;
  table["Unsqueeze"] = convertReshape;
  table["Transpose"] = convertTranspose;
  table["Concat"] = convertConcat;
  table["Slice"] = convertSlice;
  table["Split"] = convertSplit;
  table["Gather"] = convertGather;
  table["Expand"] = convertExpand;
  table["Tile"] = convertTile;
  table["Shape"] = convertShape;
  table["Size"] = convertSize;
  table["ConstantOfShape"] = convertConstantOfShape;
  table["Trilu"] = convertTrilu;
}
