//===- Folding.cpp - ONNX nodes evaluated at import -----------------------===//

#include "Folding.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace tessera;
using namespace tessera::onnx_import;

using Outputs = llvm::Expected<SmallVector<HostTensor>>;
using Inputs = ArrayRef<const HostTensor *>;

static bool isIntegerType(int32_t type) {
  return type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32 ||
         type == onnx::TensorProto::BOOL;
}

/// Rounds a value to what an element of `type` holds.
static double toElement(int32_t type, double value) {
  if (type == onnx::TensorProto::BOOL)
    return value != 0;
  // A float that no integer holds (NaN, out of range) is 0, as the cast
  // of ONNX's reference leaves it undefined.
  if (isIntegerType(type))
    return std::isfinite(value) && std::fabs(value) < 9.2e18 ? std::trunc(value)
                                                             : 0;
  if (type == onnx::TensorProto::FLOAT)
    return static_cast<float>(value);
  return value;
}

static HostTensor makeTensor(int32_t type, ArrayRef<int64_t> shape,
                             std::vector<double> values) {
  HostTensor tensor;
  tensor.elementType = type;
  tensor.shape.assign(shape.begin(), shape.end());
  tensor.values = std::move(values);
  return tensor;
}

static llvm::Error expectInput(Inputs inputs, size_t index) {
  if (index < inputs.size() && inputs[index])
    return llvm::Error::success();
  return makeError("input #" + llvm::Twine(index) + " is missing");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static FoldFn unary(std::function<double(double)> apply) {
  return [apply](const onnx::NodeProto &, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 0))
      return std::move(error);
    HostTensor result = *inputs[0];
    for (double &value : result.values)
      value = toElement(result.elementType, apply(value));
    return SmallVector<HostTensor>{std::move(result)};
  };
}

/// Folds an n-ary elementwise op with numpy broadcasting; `boolResult` for
/// comparisons.
static FoldFn nary(std::function<double(ArrayRef<double>, int32_t)> apply,
                   bool boolResult = false) {
  return
      [apply, boolResult](const onnx::NodeProto &, Inputs inputs) -> Outputs {
        SmallVector<int64_t> shape;
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (llvm::Error error = expectInput(inputs, i))
            return std::move(error);
          auto joined = getBroadcastShape(shape, inputs[i]->shape);
          if (!joined)
            return makeError("the inputs' shapes do not broadcast");
          shape = *joined;
        }
        if (auto size = getCheckedSize(shape, kMaxFoldedElements, "the result");
            !size)
          return size.takeError();
        SmallVector<HostTensor> operands;
        for (const HostTensor *input : inputs)
          operands.push_back(broadcastHost(*input, shape));
        // Where's element type is its values', not its condition's.
        int32_t type = operands.size() == 3 ? operands[1].elementType
                                            : operands[0].elementType;
        int32_t resultType = boolResult ? onnx::TensorProto::BOOL : type;
        HostTensor result = makeTensor(resultType, shape, {});
        int64_t size = result.getSize();
        result.values.resize(size);
        SmallVector<double> args(operands.size());
        for (int64_t i = 0; i < size; ++i) {
          for (auto [arg, operand] : llvm::zip(args, operands))
            arg = operand.values[i];
          result.values[i] = toElement(resultType, apply(args, type));
        }
        return SmallVector<HostTensor>{std::move(result)};
      };
}

static void addElementwiseFolders(FolderTable &table) {
  table["Identity"] = unary([](double x) { return x; });
  table["Neg"] = unary([](double x) { return -x; });
  table["Abs"] = unary([](double x) { return std::fabs(x); });
  table["Sqrt"] = unary([](double x) { return std::sqrt(x); });
  table["Exp"] = unary([](double x) { return std::exp(x); });
  table["Log"] = unary([](double x) { return std::log(x); });
  table["Sin"] = unary([](double x) { return std::sin(x); });
  table["Cos"] = unary([](double x) { return std::cos(x); });
  table["Tanh"] = unary([](double x) { return std::tanh(x); });
  table["Erf"] = unary([](double x) { return std::erf(x); });
  table["Floor"] = unary([](double x) { return std::floor(x); });
  table["Ceil"] = unary([](double x) { return std::ceil(x); });
  table["Reciprocal"] = unary([](double x) { return 1 / x; });
  table["Relu"] = unary([](double x) { return std::max(x, 0.0); });
  table["Sigmoid"] = unary([](double x) { return 1 / (1 + std::exp(-x)); });
  table["Not"] = unary([](double x) { return x == 0 ? 1.0 : 0.0; });
  table["Add"] = nary([](ArrayRef<double> a, int32_t) { return a[0] + a[1]; });
  table["Sub"] = nary([](ArrayRef<double> a, int32_t) { return a[0] - a[1]; });
  table["Mul"] = nary([](ArrayRef<double> a, int32_t) { return a[0] * a[1]; });
  table["Div"] = nary([](ArrayRef<double> a, int32_t type) {
    return isIntegerType(type) ? std::trunc(a[0] / a[1]) : a[0] / a[1];
  });
  table["Pow"] =
      nary([](ArrayRef<double> a, int32_t) { return std::pow(a[0], a[1]); });
  table["Max"] = nary([](ArrayRef<double> a, int32_t) {
    return *std::max_element(a.begin(), a.end());
  });
  table["Min"] = nary([](ArrayRef<double> a, int32_t) {
    return *std::min_element(a.begin(), a.end());
  });
  table["Equal"] = nary(
      [](ArrayRef<double> a, int32_t) { return double(a[0] == a[1]); }, true);
  table["Less"] = nary(
      [](ArrayRef<double> a, int32_t) { return double(a[0] < a[1]); }, true);
  table["Greater"] = nary(
      [](ArrayRef<double> a, int32_t) { return double(a[0] > a[1]); }, true);
  table["LessOrEqual"] = nary(
      [](ArrayRef<double> a, int32_t) { return double(a[0] <= a[1]); }, true);
  table["GreaterOrEqual"] = nary(
      [](ArrayRef<double> a, int32_t) { return double(a[0] >= a[1]); }, true);
  table["Xor"] =
      nary([](ArrayRef<double> a,
              int32_t) { return double((a[0] != 0) != (a[1] != 0)); },
           true);
  table["And"] = nary(
      [](ArrayRef<double> a, int32_t) { return double(a[0] && a[1]); }, true);
  table["Or"] = nary(
      [](ArrayRef<double> a, int32_t) { return double(a[0] || a[1]); }, true);
  table["Where"] =
      nary([](ArrayRef<double> a, int32_t) { return a[0] != 0 ? a[1] : a[2]; });
  table["Cast"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 0))
      return std::move(error);
    HostTensor result = *inputs[0];
    result.elementType =
        static_cast<int32_t>(getIntAttr(node, "to", result.elementType));
    for (double &value : result.values)
      value = toElement(result.elementType, value);
    return SmallVector<HostTensor>{std::move(result)};
  };
}

//===----------------------------------------------------------------------===//
// Shapes and indexing
//===----------------------------------------------------------------------===//

llvm::Expected<SmallVector<int64_t>>
onnx_import::getReshapeShape(ArrayRef<int64_t> input, ArrayRef<int64_t> shape,
                             bool allowZero) {
  SmallVector<int64_t> result;
  int64_t inferred = -1, known = 1;
  int64_t size = std::accumulate(input.begin(), input.end(), int64_t(1),
                                 std::multiplies<int64_t>());
  for (auto [index, given] : llvm::enumerate(shape)) {
    int64_t dim = given;
    if (dim == 0 && !allowZero) {
      if (index >= input.size())
        return makeError("shape dim #" + llvm::Twine(index) +
                         " is 0 (copy the input's) past the input's rank");
      dim = input[index];
    }
    if (dim == -1) {
      if (inferred >= 0)
        return makeError("the shape has more than one -1");
      inferred = index;
      result.push_back(1);
      continue;
    }
    if (dim < 0)
      return makeError("shape dim " + llvm::Twine(dim) + " is negative");
    if (__builtin_mul_overflow(known, dim, &known))
      return makeError("the shape has more than 2^63 elements");
    result.push_back(dim);
  }
  if (inferred >= 0) {
    if (known == 0 || size % known != 0)
      return makeError("cannot infer the -1 dim: " + llvm::Twine(size) +
                       " elements do not divide by " + llvm::Twine(known));
    result[inferred] = size / known;
    known = size;
  }
  if (known != size)
    return makeError("cannot reshape " + llvm::Twine(size) + " elements to " +
                     llvm::Twine(known));
  return result;
}

llvm::Expected<SliceBounds>
onnx_import::getSliceBounds(ArrayRef<int64_t> inputShape,
                            ArrayRef<int64_t> starts, ArrayRef<int64_t> ends,
                            std::optional<ArrayRef<int64_t>> axes,
                            std::optional<ArrayRef<int64_t>> steps) {
  int64_t rank = inputShape.size();
  SliceBounds bounds;
  bounds.start.assign(rank, 0);
  bounds.limit.assign(inputShape.begin(), inputShape.end());
  bounds.step.assign(rank, 1);
  if (starts.size() != ends.size() || (axes && axes->size() != starts.size()) ||
      (steps && steps->size() != starts.size()))
    return makeError("starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes ? (*axes)[i] : static_cast<int64_t>(i);
    llvm::Expected<int64_t> dim = normalizeAxis(axis, rank, "slice axis");
    if (!dim)
      return dim.takeError();
    int64_t size = inputShape[*dim];
    int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0)
      return makeError("a slice step is 0");
    auto clamp = [&](int64_t value, int64_t low, int64_t high) {
      if (value < 0)
        value = value <= std::numeric_limits<int64_t>::min() + size
                    ? low
                    : value + size;
      return std::clamp(value, low, high);
    };
    if (step > 0) {
      bounds.start[*dim] = clamp(starts[i], 0, size);
      bounds.limit[*dim] = clamp(ends[i], 0, size);
    } else {
      bounds.start[*dim] = clamp(starts[i], 0, size - 1);
      bounds.limit[*dim] = clamp(ends[i], -1, size - 1);
    }
    bounds.step[*dim] = step;
  }
  return bounds;
}

static int64_t getSliceSize(const SliceBounds &bounds, size_t dim) {
  int64_t span = bounds.limit[dim] - bounds.start[dim];
  int64_t step = bounds.step[dim];
  if ((step > 0 && span <= 0) || (step < 0 && span >= 0))
    return 0;
  return (std::abs(span) + std::abs(step) - 1) / std::abs(step);
}

llvm::Expected<SmallVector<int64_t>>
onnx_import::getReduceDims(const onnx::NodeProto &node,
                           const HostTensor *axesInput, int64_t rank) {
  SmallVector<int64_t> axes;
  if (axesInput)
    axes = axesInput->getInts();
  else if (auto attr = getIntsAttr(node, "axes"))
    axes = *attr;
  if (axes.empty()) {
    if (getIntAttr(node, "noop_with_empty_axes", 0))
      return axes;
    for (int64_t dim = 0; dim < rank; ++dim)
      axes.push_back(dim);
    return axes;
  }
  for (int64_t &axis : axes) {
    llvm::Expected<int64_t> dim = normalizeAxis(axis, rank, "reduced axis");
    if (!dim)
      return dim.takeError();
    axis = *dim;
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return makeError("an axis is reduced twice");
  return axes;
}

llvm::Expected<SmallVector<int64_t>>
onnx_import::getSqueezedShape(ArrayRef<int64_t> shape,
                              std::optional<ArrayRef<int64_t>> axes) {
  int64_t rank = shape.size();
  SmallVector<bool> squeezed(rank, false);
  if (axes) {
    for (int64_t axis : *axes) {
      llvm::Expected<int64_t> dim = normalizeAxis(axis, rank, "squeezed axis");
      if (!dim)
        return dim.takeError();
      if (shape[*dim] != 1)
        return makeError("squeezed dim " + llvm::Twine(*dim) + " has size " +
                         llvm::Twine(shape[*dim]) + ", not 1");
      squeezed[*dim] = true;
    }
  } else {
    for (int64_t dim = 0; dim < rank; ++dim)
      squeezed[dim] = shape[dim] == 1;
  }
  SmallVector<int64_t> result;
  for (int64_t dim = 0; dim < rank; ++dim)
    if (!squeezed[dim])
      result.push_back(shape[dim]);
  return result;
}

llvm::Expected<SmallVector<int64_t>>
onnx_import::getUnsqueezedShape(ArrayRef<int64_t> shape,
                                ArrayRef<int64_t> axes) {
  int64_t rank = shape.size() + axes.size();
  SmallVector<bool> added(rank, false);
  for (int64_t axis : axes) {
    llvm::Expected<int64_t> dim = normalizeAxis(axis, rank, "unsqueezed axis");
    if (!dim)
      return dim.takeError();
    if (added[*dim])
      return makeError("an axis is unsqueezed twice");
    added[*dim] = true;
  }
  SmallVector<int64_t> result;
  size_t next = 0;
  for (int64_t dim = 0; dim < rank; ++dim)
    result.push_back(added[dim] ? 1 : shape[next++]);
  return result;
}

/// The elements of `input` at the coordinates `map` gives for each result
/// element (a coordinate of the result to a flat index of the input).
static llvm::Expected<HostTensor>
gatherElements(const HostTensor &input, ArrayRef<int64_t> shape,
               llvm::function_ref<int64_t(ArrayRef<int64_t> coordinates)> map) {
  llvm::Expected<int64_t> size =
      getCheckedSize(shape, kMaxFoldedElements, "the result");
  if (!size)
    return size.takeError();
  HostTensor result = makeTensor(input.elementType, shape, {});
  result.values.resize(*size);
  SmallVector<int64_t> strides = getStrides(shape), coordinates(shape.size());
  for (int64_t index = 0; index < *size; ++index) {
    for (size_t dim = 0; dim < shape.size(); ++dim)
      coordinates[dim] = index / strides[dim] % shape[dim];
    result.values[index] = input.values[map(coordinates)];
  }
  return result;
}

/// One folded output, or the error that made none.
static Outputs single(llvm::Expected<HostTensor> result) {
  if (!result)
    return result.takeError();
  return SmallVector<HostTensor>{std::move(*result)};
}

static int64_t flatIndex(ArrayRef<int64_t> coordinates,
                         ArrayRef<int64_t> strides) {
  int64_t index = 0;
  for (auto [coordinate, stride] : llvm::zip(coordinates, strides))
    index += coordinate * stride;
  return index;
}

static void addShapeFolders(FolderTable &table) {
  table["Reshape"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 1))
      return std::move(error);
    auto shape = getReshapeShape(inputs[0]->shape, inputs[1]->getInts(),
                                 getIntAttr(node, "allowzero", 0));
    if (!shape)
      return shape.takeError();
    HostTensor result = *inputs[0];
    result.shape = *shape;
    return SmallVector<HostTensor>{std::move(result)};
  };
  table["Flatten"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    int64_t rank = inputs[0]->shape.size();
    auto axis = normalizeFlattenAxis(getIntAttr(node, "axis", 1), rank);
    if (!axis)
      return axis.takeError();
    HostTensor result = *inputs[0];
    int64_t outer = 1;
    for (int64_t dim = 0; dim < *axis; ++dim)
      outer *= result.shape[dim];
    result.shape = {outer, result.getSize() / std::max<int64_t>(outer, 1)};
    return SmallVector<HostTensor>{std::move(result)};
  };
  table["Squeeze"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    std::optional<SmallVector<int64_t>> axes;
    if (inputs.size() > 1 && inputs[1])
      axes = inputs[1]->getInts();
    auto shape = getSqueezedShape(inputs[0]->shape,
                                  axes ? std::optional<ArrayRef<int64_t>>(*axes)
                                       : std::nullopt);
    if (!shape)
      return shape.takeError();
    HostTensor result = *inputs[0];
    result.shape = *shape;
    return SmallVector<HostTensor>{std::move(result)};
  };
  table["Unsqueeze"] = [](const onnx::NodeProto &node,
                          Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 1))
      return std::move(error);
    auto shape = getUnsqueezedShape(inputs[0]->shape, inputs[1]->getInts());
    if (!shape)
      return shape.takeError();
    HostTensor result = *inputs[0];
    result.shape = *shape;
    return SmallVector<HostTensor>{std::move(result)};
  };
  table["Concat"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    int64_t rank = inputs[0]->shape.size();
    auto axis = normalizeAxis(getIntAttr(node, "axis", 0), rank, "axis");
    if (!axis)
      return axis.takeError();
    SmallVector<int64_t> shape = inputs[0]->shape;
    shape[*axis] = 0;
    for (const HostTensor *input : inputs) {
      if (static_cast<int64_t>(input->shape.size()) != rank)
        return makeError("the inputs differ in rank");
      shape[*axis] += input->shape[*axis];
    }
    // Per result coordinate along the axis: its input and offset there.
    SmallVector<std::pair<int64_t, int64_t>> sources;
    for (auto [index, input] : llvm::enumerate(inputs))
      for (int64_t i = 0; i < input->shape[*axis]; ++i)
        sources.push_back({index, i});
    if (auto size = getCheckedSize(shape, kMaxFoldedElements, "the result");
        !size)
      return size.takeError();
    HostTensor result = makeTensor(inputs[0]->elementType, shape, {});
    result.values.reserve(result.getSize());
    SmallVector<int64_t> strides = getStrides(shape), coordinates(rank);
    for (int64_t index = 0, size = result.getSize(); index < size; ++index) {
      for (int64_t dim = 0; dim < rank; ++dim)
        coordinates[dim] = index / strides[dim] % shape[dim];
      auto [source, offset] = sources[coordinates[*axis]];
      coordinates[*axis] = offset;
      result.values.push_back(inputs[source]->values[flatIndex(
          coordinates, getStrides(inputs[source]->shape))]);
    }
    return SmallVector<HostTensor>{std::move(result)};
  };
  table["Gather"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 1))
      return std::move(error);
    const HostTensor &data = *inputs[0];
    int64_t rank = data.shape.size();
    auto axis = normalizeAxis(getIntAttr(node, "axis", 0), rank, "axis");
    if (!axis)
      return axis.takeError();
    SmallVector<int64_t> indices = inputs[1]->getInts();
    int64_t extent = data.shape[*axis];
    for (int64_t &index : indices) {
      if (index < -extent || index >= extent)
        return makeError("index " + llvm::Twine(index) +
                         " is out of range for a dim of " +
                         llvm::Twine(extent));
      if (index < 0)
        index += extent;
    }
    SmallVector<int64_t> shape(data.shape.begin(), data.shape.begin() + *axis);
    shape.append(inputs[1]->shape.begin(), inputs[1]->shape.end());
    shape.append(data.shape.begin() + *axis + 1, data.shape.end());
    SmallVector<int64_t> strides = getStrides(data.shape);
    SmallVector<int64_t> indexStrides = getStrides(inputs[1]->shape);
    int64_t indexRank = inputs[1]->shape.size();
    return single(gatherElements(data, shape, [&](ArrayRef<int64_t> at) {
      int64_t flat = 0;
      for (int64_t dim = 0; dim < *axis; ++dim)
        flat += at[dim] * strides[dim];
      int64_t which = flatIndex(at.slice(*axis, indexRank), indexStrides);
      flat += indices[which] * strides[*axis];
      for (int64_t dim = *axis + 1; dim < rank; ++dim)
        flat += at[dim + indexRank - 1] * strides[dim];
      return flat;
    }));
  };
  table["Slice"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 2))
      return std::move(error);
    SmallVector<int64_t> axes, steps;
    if (inputs.size() > 3 && inputs[3])
      axes = inputs[3]->getInts();
    if (inputs.size() > 4 && inputs[4])
      steps = inputs[4]->getInts();
    const HostTensor &data = *inputs[0];
    auto bounds = getSliceBounds(
        data.shape, inputs[1]->getInts(), inputs[2]->getInts(),
        inputs.size() > 3 && inputs[3] ? std::optional<ArrayRef<int64_t>>(axes)
                                       : std::nullopt,
        inputs.size() > 4 && inputs[4] ? std::optional<ArrayRef<int64_t>>(steps)
                                       : std::nullopt);
    if (!bounds)
      return bounds.takeError();
    SmallVector<int64_t> shape;
    for (size_t dim = 0; dim < data.shape.size(); ++dim)
      shape.push_back(getSliceSize(*bounds, dim));
    SmallVector<int64_t> strides = getStrides(data.shape);
    return single(gatherElements(data, shape, [&](ArrayRef<int64_t> at) {
      int64_t flat = 0;
      for (size_t dim = 0; dim < at.size(); ++dim)
        flat +=
            (bounds->start[dim] + at[dim] * bounds->step[dim]) * strides[dim];
      return flat;
    }));
  };
  table["Transpose"] = [](const onnx::NodeProto &node,
                          Inputs inputs) -> Outputs {
    const HostTensor &data = *inputs[0];
    int64_t rank = data.shape.size();
    SmallVector<int64_t> permutation(rank);
    std::iota(permutation.rbegin(), permutation.rend(), 0);
    if (auto perm = getIntsAttr(node, "perm"))
      permutation = *perm;
    SmallVector<int64_t> shape;
    for (int64_t dim : permutation) {
      if (dim < 0 || dim >= rank)
        return makeError("perm names dim " + llvm::Twine(dim));
      shape.push_back(data.shape[dim]);
    }
    SmallVector<int64_t> strides = getStrides(data.shape);
    return single(gatherElements(data, shape, [&](ArrayRef<int64_t> at) {
      int64_t flat = 0;
      for (int64_t dim = 0; dim < rank; ++dim)
        flat += at[dim] * strides[permutation[dim]];
      return flat;
    }));
  };
  table["Expand"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 1))
      return std::move(error);
    auto shape = getBroadcastShape(inputs[0]->shape, inputs[1]->getInts());
    if (!shape)
      return makeError("the input does not broadcast to the shape");
    if (auto size = getCheckedSize(*shape, kMaxFoldedElements, "the result");
        !size)
      return size.takeError();
    return SmallVector<HostTensor>{broadcastHost(*inputs[0], *shape)};
  };
  table["Tile"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 1))
      return std::move(error);
    const HostTensor &data = *inputs[0];
    SmallVector<int64_t> repeats = inputs[1]->getInts();
    if (repeats.size() != data.shape.size())
      return makeError("repeats has " + llvm::Twine(repeats.size()) +
                       " values for rank " + llvm::Twine(data.shape.size()));
    SmallVector<int64_t> shape;
    for (auto [dim, repeat] : llvm::zip(data.shape, repeats)) {
      int64_t tiled;
      if (repeat < 0 || __builtin_mul_overflow(dim, repeat, &tiled))
        return makeError("a repeat count of " + llvm::Twine(repeat));
      shape.push_back(tiled);
    }
    SmallVector<int64_t> strides = getStrides(data.shape);
    return single(gatherElements(data, shape, [&](ArrayRef<int64_t> at) {
      int64_t flat = 0;
      for (size_t dim = 0; dim < at.size(); ++dim)
        flat += at[dim] % data.shape[dim] * strides[dim];
      return flat;
    }));
  };
  table["Trilu"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    HostTensor result = *inputs[0];
    int64_t rank = result.shape.size();
    if (rank < 2)
      return makeError("the input has rank " + llvm::Twine(rank) +
                       ", Trilu needs 2 or more");
    int64_t k = inputs.size() > 1 && inputs[1] ? inputs[1]->getInts()[0] : 0;
    bool upper = getIntAttr(node, "upper", 1);
    int64_t rows = result.shape[rank - 2], columns = result.shape[rank - 1];
    for (int64_t index = 0, size = result.getSize(); index < size; ++index) {
      int64_t column = index % columns, row = index / columns % rows;
      bool keep = upper ? column - row >= k : column - row <= k;
      if (!keep)
        result.values[index] = 0;
    }
    return SmallVector<HostTensor>{std::move(result)};
  };
  table["Range"] = [](const onnx::NodeProto &, Inputs inputs) -> Outputs {
    if (llvm::Error error = expectInput(inputs, 2))
      return std::move(error);
    double start = inputs[0]->values.at(0), limit = inputs[1]->values.at(0),
           delta = inputs[2]->values.at(0);
    if (delta == 0)
      return makeError("delta is 0");
    double steps = std::ceil((limit - start) / delta);
    if (!(steps <= static_cast<double>(kMaxFoldedElements)))
      return makeError("the range has more than 2^26 elements");
    int64_t count = std::max<int64_t>(0, static_cast<int64_t>(steps));
    std::vector<double> values;
    for (int64_t i = 0; i < count; ++i)
      values.push_back(toElement(inputs[0]->elementType, start + i * delta));
    return SmallVector<HostTensor>{
        makeTensor(inputs[0]->elementType, {count}, std::move(values))};
  };
  table["Split"] = [](const onnx::NodeProto &node, Inputs inputs) -> Outputs {
    const HostTensor &data = *inputs[0];
    int64_t rank = data.shape.size();
    auto axis = normalizeAxis(getIntAttr(node, "axis", 0), rank, "axis");
    if (!axis)
      return axis.takeError();
    SmallVector<int64_t> sizes;
    if (inputs.size() > 1 && inputs[1]) {
      sizes = inputs[1]->getInts();
    } else {
      int64_t parts = node.output_size();
      if (data.shape[*axis] % parts != 0)
        return makeError("dim " + llvm::Twine(*axis) + " of size " +
                         llvm::Twine(data.shape[*axis]) +
                         " does not split evenly into " + llvm::Twine(parts));
      sizes.assign(parts, data.shape[*axis] / parts);
    }
    SmallVector<HostTensor> results;
    SmallVector<int64_t> strides = getStrides(data.shape);
    int64_t offset = 0;
    for (int64_t size : sizes) {
      SmallVector<int64_t> shape = data.shape;
      shape[*axis] = size;
      llvm::Expected<HostTensor> part =
          gatherElements(data, shape, [&](ArrayRef<int64_t> at) {
            int64_t flat = 0;
            for (int64_t dim = 0; dim < rank; ++dim)
              flat += (at[dim] + (dim == *axis ? offset : 0)) * strides[dim];
            return flat;
          });
      if (!part)
        return part.takeError();
      results.push_back(std::move(*part));
      offset += size;
    }
    return results;
  };
}

const FolderTable &onnx_import::getFolders() {
  static const FolderTable table = [] {
    FolderTable table;
    addElementwiseFolders(table);
    addShapeFolders(table);
    return table;
  }();
  return table;
}
