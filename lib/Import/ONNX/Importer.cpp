//===- Importer.cpp - An ONNX model as one nn function --------------------===//
//
// Reads the file with libonnx's protobuf classes, runs its checker and shape
// inference, then walks the graph's nodes in order (ONNX keeps them
// topologically sorted): a node whose inputs are all known at import is
// folded on the host, any other becomes nn ops. The topic files translate
// the ops; this one holds the graph's values, its arguments and results.
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/Importer.h"

#include "Folding.h"
#include "FusedProjections.h"
#include "GraphImporter.h"

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <map>

namespace onnx::checker {
/// The checker with a context that names the model's directory, where it
/// finds external data: libonnx 1.12 exports it, but its header declares
/// only the forms that check external data against the working directory
/// or read the whole file again.
void check_model(const ModelProto &model, CheckerContext &context);
} // namespace onnx::checker

using namespace mlir;
using namespace tessera;
using namespace tessera::onnx_import;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *onnx_import::getAttr(const onnx::NodeProto &node,
                                                 llvm::StringRef name) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t onnx_import::getIntAttr(const onnx::NodeProto &node,
                                llvm::StringRef name, int64_t otherwise) {
  const onnx::AttributeProto *attr = getAttr(node, name);
  return attr ? attr->i() : otherwise;
}

float onnx_import::getFloatAttr(const onnx::NodeProto &node,
                                llvm::StringRef name, float otherwise) {
  const onnx::AttributeProto *attr = getAttr(node, name);
  return attr ? attr->f() : otherwise;
}

std::optional<SmallVector<int64_t>>
onnx_import::getIntsAttr(const onnx::NodeProto &node, llvm::StringRef name) {
  const onnx::AttributeProto *attr = getAttr(node, name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

llvm::Expected<int64_t> onnx_import::normalizeAxis(int64_t axis, int64_t rank,
                                                   llvm::StringRef what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return makeError(what + " " + llvm::Twine(axis) +
                     " is out of range for rank " + llvm::Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

static std::string formatType(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// Fails unless `value` holds floats: nn computes on floats only.
llvm::Error onnx_import::requireFloat(Value value,
                                      const onnx::NodeProto &node) {
  Type element = getElementTypeOrSelf(value.getType());
  if (isa<FloatType>(element))
    return llvm::Error::success();
  return makeError(node.op_type() + " of " + formatType(element) +
                   " values computed from the model's inputs: nn computes " +
                   "this on floats only");
}

llvm::Expected<int64_t> onnx_import::normalizeFlattenAxis(int64_t axis,
                                                          int64_t rank) {
  if (axis < -rank || axis > rank)
    return makeError("axis " + llvm::Twine(axis) +
                     " is out of range for rank " + llvm::Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

const GraphValue *GraphImporter::lookup(llvm::StringRef name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

const GraphValue *GraphImporter::getInput(const onnx::NodeProto &node,
                                          int index) const {
  if (index >= node.input_size() || node.input(index).empty())
    return nullptr;
  return lookup(node.input(index));
}

std::optional<Value> GraphImporter::getNamedValue(llvm::StringRef name) {
  auto it = values.find(name);
  if (it == values.end())
    return std::nullopt;
  if (!it->second.value)
    it->second.value = materialize(*it->second.constant);
  return it->second.value;
}

static llvm::Error missingInput(const onnx::NodeProto &node, int index) {
  return makeError("input #" + llvm::Twine(index) + " is missing");
}

llvm::Expected<Value> GraphImporter::getValue(const onnx::NodeProto &node,
                                              int index) {
  std::optional<Value> value = index < node.input_size()
                                   ? getNamedValue(node.input(index))
                                   : std::nullopt;
  if (!value)
    return missingInput(node, index);
  return *value;
}

llvm::Expected<Value> GraphImporter::getFloatValue(const onnx::NodeProto &node,
                                                   int index) {
  llvm::Expected<Value> value = getValue(node, index);
  if (!value)
    return value.takeError();
  if (llvm::Error error = requireFloat(*value, node))
    return std::move(error);
  return *value;
}

llvm::Expected<HostTensor>
GraphImporter::getConstant(const onnx::NodeProto &node, int index,
                           llvm::StringRef what) {
  const GraphValue *input = getInput(node, index);
  if (!input)
    return missingInput(node, index);
  if (!input->constant)
    return makeError(what + " ('" + node.input(index) +
                     "') must be known at import (a constant, an initializer "
                     "of integers, or computed from shapes), but it is "
                     "computed from the model's inputs");
  return *input->constant;
}

llvm::Expected<SmallVector<int64_t>>
GraphImporter::getShape(const onnx::NodeProto &node, int index) {
  const GraphValue *input = getInput(node, index);
  if (!input)
    return missingInput(node, index);
  if (input->constant)
    return input->constant->shape;
  return SmallVector<int64_t>(
      cast<RankedTensorType>(input->value.getType()).getShape());
}

/// ONNX's element type of an nn element type.
static int32_t getONNXElementType(Type type) {
  if (type.isF32())
    return onnx::TensorProto::FLOAT;
  if (type.isF64())
    return onnx::TensorProto::DOUBLE;
  if (type.isF16())
    return onnx::TensorProto::FLOAT16;
  if (type.isBF16())
    return onnx::TensorProto::BFLOAT16;
  if (type.isInteger(64))
    return onnx::TensorProto::INT64;
  if (type.isInteger(32))
    return onnx::TensorProto::INT32;
  return onnx::TensorProto::BOOL;
}

llvm::Expected<int32_t> GraphImporter::getONNXType(const onnx::NodeProto &node,
                                                   int index) {
  const GraphValue *input = getInput(node, index);
  if (!input)
    return missingInput(node, index);
  if (input->constant)
    return input->constant->elementType;
  return getONNXElementType(getElementTypeOrSelf(input->value.getType()));
}

void GraphImporter::setOutput(const onnx::NodeProto &node, int index,
                              Value value) {
  if (index < node.output_size() && !node.output(index).empty())
    values[node.output(index)] = GraphValue{value, std::nullopt};
}

void GraphImporter::setOutput(const onnx::NodeProto &node, int index,
                              HostTensor value) {
  if (index < node.output_size() && !node.output(index).empty())
    values[node.output(index)] = GraphValue{nullptr, std::move(value)};
}

Value GraphImporter::materialize(const HostTensor &tensor) {
  Type element = getElementType(getContext(), tensor.elementType);
  auto type = RankedTensorType::get(tensor.shape, element);
  // Elements as the attribute stores them (no attribute per element: a
  // folded mask or table has millions).
  auto make = [&](auto convert) {
    using Element = decltype(convert(0.0));
    if (llvm::all_equal(tensor.values))
      return DenseElementsAttr::get(
          type, convert(tensor.values.empty() ? 0 : tensor.values.front()));
    SmallVector<Element> elements;
    elements.reserve(tensor.values.size());
    for (double value : tensor.values)
      elements.push_back(convert(value));
    return DenseElementsAttr::get(type, llvm::ArrayRef(elements));
  };
  DenseElementsAttr attr;
  if (element.isF32())
    attr = make([](double value) { return static_cast<float>(value); });
  else if (element.isF64())
    attr = make([](double value) { return value; });
  else if (auto floatType = dyn_cast<FloatType>(element))
    attr = make([&](double value) {
      bool lost;
      APFloat converted(value);
      converted.convert(floatType.getFloatSemantics(),
                        APFloat::rmNearestTiesToEven, &lost);
      return converted;
    });
  else if (element.isInteger(1))
    attr = make([](double value) { return value != 0; });
  else if (element.isInteger(32))
    attr = make([](double value) { return static_cast<int32_t>(value); });
  else
    attr = make([](double value) { return static_cast<int64_t>(value); });
  return nn::ConstantOp::create(builder, loc, attr);
}

Value GraphImporter::broadcastTo(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  int64_t offset = static_cast<int64_t>(shape.size()) - type.getRank();
  SmallVector<int64_t> dims;
  for (int64_t dim = 0; dim < type.getRank(); ++dim)
    dims.push_back(offset + dim);
  return nn::BroadcastOp::create(
      builder, loc, RankedTensorType::get(shape, type.getElementType()), value,
      builder.getDenseI64ArrayAttr(dims));
}

llvm::Expected<SmallVector<Value>>
GraphImporter::getBroadcastValues(const onnx::NodeProto &node,
                                  ArrayRef<int> indices) {
  SmallVector<int64_t> shape;
  for (int index : indices) {
    llvm::Expected<SmallVector<int64_t>> each = getShape(node, index);
    if (!each)
      return each.takeError();
    std::optional<SmallVector<int64_t>> joined =
        getBroadcastShape(shape, *each);
    if (!joined)
      return makeError("input #" + llvm::Twine(index) + " of shape [" +
                       llvm::join(llvm::map_range(*each,
                                                  [](int64_t dim) {
                                                    return std::to_string(dim);
                                                  }),
                                  ", ") +
                       "] does not broadcast with the others");
    shape = std::move(*joined);
  }
  if (auto size = getCheckedSize(shape, kMaxElements, "the result"); !size)
    return size.takeError();
  SmallVector<Value> operands;
  for (int index : indices) {
    const GraphValue *input = getInput(node, index);
    // A constant of one value is made in the broadcast shape directly.
    if (input->constant && !input->value &&
        llvm::all_equal(input->constant->values)) {
      HostTensor splat = *input->constant;
      splat.shape = shape;
      splat.values.assign(1, splat.values.empty() ? 0 : splat.values[0]);
      operands.push_back(materialize(splat));
      continue;
    }
    llvm::Expected<Value> value = getValue(node, index);
    if (!value)
      return value.takeError();
    operands.push_back(broadcastTo(*value, shape));
  }
  return operands;
}

Value GraphImporter::getSplat(RankedTensorType type, double value) {
  HostTensor splat;
  splat.elementType = getONNXElementType(type.getElementType());
  splat.shape.assign(type.getShape().begin(), type.getShape().end());
  splat.values = {value};
  return materialize(splat);
}

Value GraphImporter::getStep() {
  if (!stepIndex) {
    auto type = RankedTensorType::get({}, builder.getI64Type());
    argumentBlock->addArgument(type, builder.getUnknownLoc());
    argumentTypes->push_back(type);
    stepIndex = argumentBlock->getNumArguments() - 1;
  }
  return argumentBlock->getArgument(*stepIndex);
}

Value GraphImporter::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return nn::ReshapeOp::create(
      builder, loc, RankedTensorType::get(shape, type.getElementType()), value);
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

llvm::Error onnx_import::parseInputShape(llvm::StringRef text,
                                         ImportOptions &options) {
  auto [name, dims] = text.rsplit('=');
  if (name.empty() || dims.empty() || name == text)
    return makeError("--input-shape '" + text +
                     "' is not NAME=DIMS (such as input_ids=4x128)");
  SmallVector<int64_t> shape;
  SmallVector<llvm::StringRef> parts;
  dims.split(parts, 'x');
  for (llvm::StringRef part : parts) {
    int64_t dim;
    if (part.getAsInteger(10, dim) || dim <= 0)
      return makeError("--input-shape '" + text + "': '" + part +
                       "' is not a positive dim");
    shape.push_back(dim);
  }
  options.inputShapes[name] = shape;
  return llvm::Error::success();
}

llvm::Error onnx_import::parseBoundInput(llvm::StringRef text,
                                         ImportOptions &options) {
  auto [name, path] = text.split('=');
  if (name.empty() || path.empty())
    return makeError("--bind '" + text +
                     "' is not NAME=FILE (a TensorProto file, such as "
                     "axes=input_1.pb)");
  options.boundInputs[name] = path.str();
  return llvm::Error::success();
}

/// The value of a bound input: its TensorProto file, which must match the
/// input's element type and (where the graph gives them) dims.
static llvm::Expected<HostTensor>
readBoundInput(const onnx::ValueInfoProto &input, llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return makeError("--bind " + input.name() + ": cannot read '" + path +
                     "': " + buffer.getError().message());
  onnx::TensorProto tensor;
  if ((*buffer)->getBufferSize() > static_cast<size_t>(INT32_MAX) ||
      !tensor.ParseFromArray((*buffer)->getBufferStart(),
                             static_cast<int>((*buffer)->getBufferSize())))
    return makeError("--bind " + input.name() + ": '" + path +
                     "' is not a TensorProto");
  const onnx::TypeProto::Tensor &type = input.type().tensor_type();
  if (tensor.data_type() != type.elem_type())
    return makeError("--bind " + input.name() + ": '" + path + "' holds " +
                     getElementTypeName(tensor.data_type()) +
                     ", the input is " + getElementTypeName(type.elem_type()));
  bool dimsMatch =
      !type.has_shape() || type.shape().dim_size() == tensor.dims_size();
  for (int i = 0; dimsMatch && type.has_shape() && i < tensor.dims_size(); ++i)
    dimsMatch = !type.shape().dim(i).has_dim_value() ||
                type.shape().dim(i).dim_value() == tensor.dims(i);
  if (!dimsMatch)
    return makeError("--bind " + input.name() + ": '" + path +
                     "' does not have the input's shape");
  return readTensor(tensor, path);
}

static std::string formatDims(const onnx::TensorShapeProto &shape) {
  SmallVector<std::string> dims;
  for (const onnx::TensorShapeProto::Dimension &dim : shape.dim())
    dims.push_back(dim.has_dim_value()   ? std::to_string(dim.dim_value())
                   : dim.has_dim_param() ? dim.dim_param()
                                         : std::string("?"));
  return "[" + llvm::join(dims, ", ") + "]";
}

/// The static type of a graph input or output's TypeProto.
static llvm::Expected<RankedTensorType>
getTensorType(MLIRContext *context, const onnx::ValueInfoProto &info,
              llvm::StringRef what) {
  if (!info.type().has_tensor_type())
    return makeError(what + " '" + info.name() + "' is not a tensor");
  const onnx::TypeProto::Tensor &tensor = info.type().tensor_type();
  Type element = getElementType(context, tensor.elem_type());
  if (!element)
    return makeError(what + " '" + info.name() + "' has element type " +
                     getElementTypeName(tensor.elem_type()) +
                     ", which Tessera does not hold");
  if (!tensor.has_shape())
    return makeError(what + " '" + info.name() + "' has no shape");
  SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto::Dimension &dim : tensor.shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() <= 0)
      return makeError(
          what + " '" + info.name() + "' has dynamic dims " +
          formatDims(tensor.shape()) +
          ": give its static shape with --input-shape " + info.name() + "=" +
          llvm::join(llvm::map_range(tensor.shape().dim(),
                                     [](const auto &dim) {
                                       return dim.has_dim_value()
                                                  ? std::to_string(
                                                        dim.dim_value())
                                                  : std::string("N");
                                     }),
                     "x"));
    shape.push_back(dim.dim_value());
  }
  std::string named = (what + " '" + info.name() + "'").str();
  if (auto size = getCheckedSize(shape, kMaxElements, named); !size)
    return size.takeError();
  return RankedTensorType::get(shape, element);
}

/// The opset of the default domain, which must be 13 to 17.
static llvm::Expected<int64_t> getOpset(const onnx::ModelProto &model) {
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx") {
      if (opset.version() < 13 || opset.version() > 17)
        return makeError("the model imports opset " +
                         llvm::Twine(opset.version()) +
                         " of the default domain; Tessera imports opsets 13 "
                         "to 17 (re-export it with opset_version=17)");
      return opset.version();
    }
  return makeError("the model imports no opset of the default domain");
}

static const ConverterTable &getConverters() {
  static const ConverterTable table = [] {
    ConverterTable table;
    addElementwiseConverters(table);
    addLinearConverters(table);
    addShapeConverters(table);
    addReductionConverters(table);
    return table;
  }();
  return table;
}

static bool isDefaultDomain(const onnx::NodeProto &node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

/// Whether a node's outputs are known at import, `known` holding the values
/// that are: its translation makes constants (Shape, Size), or it is
/// evaluated at import (Folding.cpp) on known inputs.
static bool isKnownAtImport(const onnx::NodeProto &node,
                            const llvm::StringSet<> &known) {
  if (!isDefaultDomain(node))
    return false;
  const std::string &op = node.op_type();
  if (op == "Constant" || op == "Shape" || op == "Size")
    return true;
  bool inputsKnown = node.input_size() > 0;
  for (const std::string &input : node.input())
    inputsKnown &= input.empty() || known.contains(input);
  return inputsKnown &&
         (op == "ConstantOfShape" || op == "Dropout" || getFolders().count(op));
}

/// The graph's values before any nn op is made: which are known at import,
/// and which float initializers are parameters.
struct GraphAnalysis {
  llvm::StringSet<> known, parameters;
};

/// Whether a node's output depends differentiably on its input `index`:
/// not on a comparison's, a mask's or an index's, nor on the operands that
/// give shapes, axes or counts.
static bool isDifferentiableInput(const onnx::NodeProto &node, int index) {
  static const llvm::StringSet<> noGradient = {"Equal",
                                               "Less",
                                               "Greater",
                                               "LessOrEqual",
                                               "GreaterOrEqual",
                                               "And",
                                               "Or",
                                               "Xor",
                                               "Not",
                                               "Shape",
                                               "Size",
                                               "Range",
                                               "ConstantOfShape"};
  static const llvm::StringSet<> firstOnly = {
      "Reshape",   "Expand",    "Tile",   "Slice",   "Split", "Squeeze",
      "Unsqueeze", "ReduceSum", "Gather", "Dropout", "Trilu", "Pow"};
  const std::string &op = node.op_type();
  if (noGradient.contains(op))
    return false;
  if (firstOnly.contains(op))
    return index == 0;
  if (op == "Where")
    return index > 0;
  if (op == "Cast")
    return isFloatType(getIntAttr(node, "to", 0));
  return true;
}

/// A float initializer with a dim is a parameter (a trained argument) when
/// an output depends on it differentiably, but where the graph needs its
/// values at import: an op that only folds (Range, Floor: Folding.cpp)
/// reads it, directly or through other ops, or a Sin or Cos reads values
/// computed from initializers alone (a table of angles). Exporters write
/// buffers as initializers: rotary inverse frequencies, which such ops
/// read, and masks, which only comparisons read, are then constants, as are
/// scalars. Each demotion may let more nodes fold: to a fixed point.
static GraphAnalysis analyzeGraph(const onnx::GraphProto &graph,
                                  const ImportOptions &options) {
  const ConverterTable &converters = getConverters();
  GraphAnalysis analysis;
  llvm::StringMap<const onnx::NodeProto *> producers;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &output : node.output())
      producers[output] = &node;
  llvm::StringSet<> trained;
  for (const onnx::ValueInfoProto &output : graph.output())
    trained.insert(output.name());
  for (const onnx::NodeProto &node : llvm::reverse(graph.node()))
    if (llvm::any_of(node.output(), [&](const std::string &output) {
          return trained.contains(output);
        }))
      for (auto [index, input] : llvm::enumerate(node.input()))
        if (isDifferentiableInput(node, index))
          trained.insert(input);
  for (const onnx::TensorProto &tensor : graph.initializer())
    if (isFloatType(tensor.data_type()) && tensor.dims_size() > 0 &&
        trained.contains(tensor.name()))
      analysis.parameters.insert(tensor.name());
  while (true) {
    analysis.known.clear();
    for (const auto &bound : options.boundInputs)
      analysis.known.insert(bound.getKey());
    for (const onnx::TensorProto &tensor : graph.initializer())
      if (!analysis.parameters.contains(tensor.name()))
        analysis.known.insert(tensor.name());
    // The values computed from graph inputs (in the nodes' topological
    // order): the rest are known at import or computed from parameters.
    llvm::StringSet<> fromInputs;
    for (const onnx::ValueInfoProto &input : graph.input())
      if (!analysis.known.contains(input.name()) &&
          !analysis.parameters.contains(input.name()))
        fromInputs.insert(input.name());
    auto readsInputs = [&](const onnx::NodeProto &node) {
      return llvm::any_of(node.input(), [&](const std::string &input) {
        return fromInputs.contains(input);
      });
    };
    auto needsValues = [&](const onnx::NodeProto &node) {
      const std::string &op = node.op_type();
      return !converters.count(op) ||
             ((op == "Sin" || op == "Cos") && !readsInputs(node));
    };
    SmallVector<std::string> blocked;
    for (const onnx::NodeProto &node : graph.node()) {
      if (isKnownAtImport(node, analysis.known)) {
        for (const std::string &output : node.output())
          analysis.known.insert(output);
        continue;
      }
      if (readsInputs(node))
        for (const std::string &output : node.output())
          fromInputs.insert(output);
      if (isDefaultDomain(node) && needsValues(node)) {
        for (const std::string &input : node.input())
          if (!input.empty() && !analysis.known.contains(input))
            blocked.push_back(input);
      }
    }
    // The parameters the blocked values are computed from.
    llvm::StringSet<> visited, demoted;
    while (!blocked.empty()) {
      std::string value = blocked.pop_back_val();
      if (!visited.insert(value).second)
        continue;
      if (analysis.parameters.contains(value))
        demoted.insert(value);
      else if (const onnx::NodeProto *producer = producers.lookup(value))
        for (const std::string &input : producer->input())
          if (!input.empty() && !analysis.known.contains(input))
            blocked.push_back(input);
    }
    if (demoted.empty())
      return analysis;
    for (const auto &name : demoted)
      analysis.parameters.erase(name.getKey());
  }
}

/// Every node the importer has no translation for, in one message. Some
/// ops are evaluated only at import (Folding.cpp): they are supported where
/// their inputs are known then.
static llvm::Error checkSupported(const onnx::GraphProto &graph, int64_t opset,
                                  const GraphAnalysis &analysis) {
  const ConverterTable &converters = getConverters();
  const FolderTable &folders = getFolders();
  // Per unsupported op type: its nodes, the first named.
  std::map<std::string, std::pair<int64_t, std::string>> unsupported;
  for (const onnx::NodeProto &node : graph.node()) {
    const std::string &op = node.op_type();
    bool defaultDomain = isDefaultDomain(node);
    if (isKnownAtImport(node, analysis.known) ||
        (defaultDomain && converters.count(op)))
      continue;
    std::string type =
        "'" + (defaultDomain ? op : node.domain() + "." + op) + "'";
    if (defaultDomain && folders.count(op))
      type += " on values computed from the model's inputs";
    auto &[count, first] = unsupported[type];
    if (count++ == 0)
      first = node.name();
  }
  if (unsupported.empty())
    return llvm::Error::success();
  SmallVector<std::string> lines;
  for (const auto &[type, use] : unsupported)
    lines.push_back(type + " (" +
                    (use.first == 1
                         ? "node '" + use.second + "'"
                         : std::to_string(use.first) + " nodes, the first '" +
                               use.second + "'") +
                    ")");
  return makeError("the model uses " + llvm::Twine(unsupported.size()) +
                   " op type(s) that Tessera does not import at opset " +
                   llvm::Twine(opset) + ": " + llvm::join(lines, ", "));
}

static std::string getFunctionName(const onnx::GraphProto &graph) {
  std::string name;
  for (char c : graph.name())
    name.push_back(llvm::isAlnum(c) ? c : '_');
  if (name.empty() || llvm::isDigit(name.front()))
    name = "main";
  return name;
}

/// libonnx 1.12's LayerNormalization inference writes its statistics'
/// shapes at dims [axis, rank) without checking the axis against the
/// input's rank, and crashes on one outside it (a fuzzer's find). Where a
/// LayerNormalization has statistics outputs, shapes are first inferred
/// without them, and each axis is checked.
static llvm::Error
checkLayerNormAxes(onnx::ModelProto &model,
                   const onnx::ShapeInferenceOptions &inference) {
  onnx::GraphProto *graph = model.mutable_graph();
  // Each such node and its statistics outputs, set aside.
  SmallVector<std::pair<onnx::NodeProto *, SmallVector<std::string>>> norms;
  for (onnx::NodeProto &node : *graph->mutable_node()) {
    if (node.op_type() != "LayerNormalization" || node.output_size() < 2 ||
        !isDefaultDomain(node))
      continue;
    norms.emplace_back(&node,
                       SmallVector<std::string>(node.output().begin() + 1,
                                                node.output().end()));
    node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
  }
  if (norms.empty())
    return llvm::Error::success();
  std::string failure;
  try {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), inference);
  } catch (const std::exception &e) {
    failure = e.what();
  }
  llvm::StringMap<int> ranks;
  for (const auto *infos :
       {&graph->input(), &graph->value_info(), &graph->output()})
    for (const onnx::ValueInfoProto &info : *infos)
      if (info.type().tensor_type().has_shape())
        ranks[info.name()] = info.type().tensor_type().shape().dim_size();
  for (auto &[norm, statistics] : norms)
    for (const std::string &output : statistics)
      norm->add_output(output);
  if (!failure.empty())
    return makeError("the model fails ONNX shape inference: " +
                     llvm::Twine(failure));
  for (auto &[norm, statistics] : norms) {
    auto rank = ranks.find(norm->input(0));
    int64_t axis = getIntAttr(*norm, "axis", -1);
    if (rank != ranks.end() && (axis < -rank->second || axis >= rank->second))
      return makeError("node '" + norm->name() +
                       "' (LayerNormalization): axis " + llvm::Twine(axis) +
                       " is outside its input's " + llvm::Twine(rank->second) +
                       " dims");
  }
  return llvm::Error::success();
}

/// The libonnx calls, which report by exceptions: the checker and shape
/// inference, with the static input shapes given.
static llvm::Error checkAndInferShapes(onnx::ModelProto &model,
                                       llvm::StringRef directory,
                                       const ImportOptions &options) {
  try {
    onnx::checker::CheckerContext context;
    context.set_model_dir(directory.empty() ? std::string()
                                            : directory.str() + "/");
    onnx::checker::check_model(model, context);
  } catch (const std::exception &e) {
    return makeError("the model fails the ONNX checker: " +
                     llvm::Twine(e.what()));
  }
  onnx::GraphProto *graph = model.mutable_graph();
  for (const auto &entry : options.inputShapes) {
    onnx::ValueInfoProto *input = nullptr;
    for (onnx::ValueInfoProto &each : *graph->mutable_input())
      if (each.name() == entry.getKey())
        input = &each;
    if (!input)
      return makeError("--input-shape names '" + entry.getKey() +
                       "', which is not an input of the graph");
    onnx::TensorShapeProto *shape =
        input->mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() &&
        shape->dim_size() != static_cast<int>(entry.getValue().size()))
      return makeError("--input-shape gives '" + entry.getKey() + "' " +
                       llvm::Twine(entry.getValue().size()) +
                       " dims, the graph " + llvm::Twine(shape->dim_size()) +
                       ": " + formatDims(*shape));
    shape->clear_dim();
    for (int64_t dim : entry.getValue())
      shape->add_dim()->set_dim_value(dim);
  }
  onnx::ShapeInferenceOptions inference(/*check_type_val=*/true,
                                        /*strict_mode_val=*/1,
                                        /*data_prop_val=*/true);
  if (llvm::Error error = checkLayerNormAxes(model, inference))
    return error;
  try {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), inference);
  } catch (const std::exception &e) {
    return makeError("the model fails ONNX shape inference: " +
                     llvm::Twine(e.what()));
  }
  return llvm::Error::success();
}

/// Whether ONNX's shape inference disagrees with the shape the translation
/// made (a bug of the importer, caught here rather than at run time).
static std::optional<std::string>
checkInferredShape(const onnx::ValueInfoProto *info, ArrayRef<int64_t> shape) {
  if (!info || !info->type().tensor_type().has_shape())
    return std::nullopt;
  const onnx::TensorShapeProto &inferred = info->type().tensor_type().shape();
  if (inferred.dim_size() != static_cast<int>(shape.size()))
    return formatDims(inferred);
  for (auto [dim, size] : llvm::zip(inferred.dim(), shape))
    if (dim.has_dim_value() && dim.dim_value() != size)
      return formatDims(inferred);
  return std::nullopt;
}

/// Folds `node` (its inputs all known and a folder for its op) or
/// translates it, then checks each output's shape against ONNX's shape
/// inference (`inferred`).
static llvm::Error
importNode(GraphImporter &importer, const onnx::NodeProto &node,
           const llvm::StringMap<const onnx::ValueInfoProto *> &inferred) {
  for (const std::string &input : node.input())
    if (!input.empty() && !importer.isDefined(input))
      return makeError("input '" + input + "' is not defined");
  SmallVector<const HostTensor *> constants;
  bool known = node.input_size() > 0;
  for (int i = 0; i < node.input_size() && known; ++i) {
    const GraphValue *input = importer.getInput(node, i);
    if (!input) {
      constants.push_back(nullptr);
      continue;
    }
    known = input->constant.has_value();
    constants.push_back(known ? &*input->constant : nullptr);
  }
  const FolderTable &folders = getFolders();
  auto folder = folders.find(node.op_type());
  if (known && folder != folders.end()) {
    llvm::Expected<SmallVector<HostTensor>> outputs =
        folder->second(node, constants);
    if (!outputs)
      return outputs.takeError();
    for (auto [index, output] : llvm::enumerate(*outputs))
      importer.setOutput(node, index, std::move(output));
  } else {
    auto converter = getConverters().find(node.op_type());
    if (converter == getConverters().end())
      return makeError("internal error: an input is not known at import, and "
                       "the op has no translation");
    if (llvm::Error error = converter->second(importer, node))
      return error;
  }
  for (const std::string &output : node.output()) {
    // An output nothing reads need not be made (training Dropout's mask).
    if (output.empty() || !importer.isRead(output))
      continue;
    const GraphValue *made = importer.lookup(output);
    if (!made)
      return makeError("output '" + output + "' is not supported");
    SmallVector<int64_t> shape =
        made->constant
            ? made->constant->shape
            : SmallVector<int64_t>(
                  cast<RankedTensorType>(made->value.getType()).getShape());
    if (std::optional<std::string> expected =
            checkInferredShape(inferred.lookup(output), shape))
      return makeError(
          "internal error: output '" + output + "' was made as [" +
          llvm::join(llvm::map_range(
                         shape, [](int64_t d) { return std::to_string(d); }),
                     ", ") +
          "], ONNX infers " + *expected);
  }
  return llvm::Error::success();
}

/// The mean over every position of the cross-entropy of `logits` against
/// `labels`.
static Value buildMeanCrossEntropy(OpBuilder &builder, Location loc,
                                   Value logits, Value labels) {
  auto logitsType = cast<RankedTensorType>(logits.getType());
  Value losses = nn::CrossEntropyOp::create(builder, loc, logits, labels);
  SmallVector<int64_t> dims;
  for (int64_t dim = 0; dim + 1 < logitsType.getRank(); ++dim)
    dims.push_back(dim);
  auto scalar = RankedTensorType::get({}, logitsType.getElementType());
  return nn::ReduceMeanOp::create(builder, loc, scalar, losses,
                                  builder.getDenseI64ArrayAttr(dims));
}

llvm::Expected<OwningOpRef<ModuleOp>>
onnx_import::importFile(MLIRContext &context, llvm::StringRef path,
                        const ImportOptions &options, WeightSink weights) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return makeError("cannot read '" + path +
                     "': " + buffer.getError().message());
  return importModel(context, (*buffer)->getBuffer(), path, options, weights);
}

llvm::Expected<OwningOpRef<ModuleOp>>
onnx_import::importModel(MLIRContext &context, llvm::StringRef bytes,
                         llvm::StringRef path, const ImportOptions &options,
                         WeightSink weights) {
  auto fail = [&](llvm::Error error) -> llvm::Error {
    return makeError("'" + path + "': " + llvm::toString(std::move(error)));
  };
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return fail(makeError(
        "not an ONNX model (its protobuf does not parse, or it is over 2 GB "
        "without external data)"));
  llvm::Expected<int64_t> opset = getOpset(model);
  if (!opset)
    return fail(opset.takeError());
  // Before the checker, which would stat a location outside the directory.
  if (llvm::Error error = checkExternalData(model, path))
    return fail(std::move(error));
  std::string directory = llvm::sys::path::parent_path(path).str();
  if (llvm::Error error = checkAndInferShapes(model, directory, options))
    return fail(std::move(error));
  const onnx::GraphProto &graph = model.graph();
  GraphAnalysis analysis = analyzeGraph(graph, options);
  if (llvm::Error error = checkSupported(graph, *opset, analysis))
    return fail(std::move(error));

  context.loadDialect<nn::NNDialect, func::FuncDialect>();
  OpBuilder builder(&context);
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  auto function = func::FuncOp::create(builder, fileLoc, getFunctionName(graph),
                                       builder.getFunctionType({}, {}));
  Block *body = function.addEntryBlock();
  builder.setInsertionPointToStart(body);
  GraphImporter importer(builder, path.str());

  // Initializers: parameters (see analyzeGraph), or known at import. An
  // initializer no node reads is left out.
  llvm::StringSet<> used;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &input : node.input())
      used.insert(input);
  for (const onnx::ValueInfoProto &output : graph.output())
    used.insert(output.name());
  llvm::StringMap<const onnx::TensorProto *> initializers;
  // Each parameter's argument number and initializer.
  SmallVector<std::pair<unsigned, const onnx::TensorProto *>> parameters;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers[tensor.name()] = &tensor;

  // Data arguments, in the graph's order.
  SmallVector<Type> argumentTypes;
  for (const auto &bound : options.boundInputs)
    if (llvm::none_of(graph.input(), [&](const onnx::ValueInfoProto &input) {
          return input.name() == bound.getKey();
        }))
      return fail(makeError("--bind names '" + bound.getKey() +
                            "', which is not an input of the graph"));
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    auto bound = options.boundInputs.find(input.name());
    if (bound != options.boundInputs.end()) {
      llvm::Expected<HostTensor> value =
          readBoundInput(input, bound->getValue());
      if (!value)
        return fail(value.takeError());
      importer.define(input.name(), GraphValue{nullptr, std::move(*value)});
      continue;
    }
    llvm::Expected<RankedTensorType> type =
        getTensorType(&context, input, "input");
    if (!type)
      return fail(type.takeError());
    Value arg = body->addArgument(
        *type, NameLoc::get(builder.getStringAttr(input.name()), fileLoc));
    argumentTypes.push_back(*type);
    importer.define(input.name(), GraphValue{arg, std::nullopt});
  }
  // With a loss: the labels, after the data.
  Value labels;
  if (options.loss == Loss::CrossEntropy) {
    if (graph.output_size() != 1)
      return fail(makeError(
          "--loss cross-entropy needs a graph of one output (the logits), "
          "this one has " +
          llvm::Twine(graph.output_size())));
    llvm::Expected<RankedTensorType> logits =
        getTensorType(&context, graph.output(0), "output");
    if (!logits)
      return fail(logits.takeError());
    if (logits->getRank() < 2 || !isa<FloatType>(logits->getElementType()))
      return fail(makeError("--loss cross-entropy needs float logits of "
                            "rank 2 or more, the output is " +
                            formatType(*logits)));
    auto type = RankedTensorType::get(logits->getShape().drop_back(),
                                      builder.getI64Type());
    labels = body->addArgument(
        type, NameLoc::get(builder.getStringAttr("labels"), fileLoc));
    argumentTypes.push_back(type);
  }
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    if (!used.contains(tensor.name()))
      continue;
    Type element = getElementType(&context, tensor.data_type());
    if (!element)
      return fail(makeError("initializer '" + tensor.name() +
                            "' has element type " +
                            getElementTypeName(tensor.data_type()) +
                            ", which Tessera does not hold"));
    SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
    if (llvm::Error error = checkElementCount(tensor))
      return fail(std::move(error));
    if (!analysis.parameters.contains(tensor.name())) {
      llvm::Expected<HostTensor> host = readTensor(tensor, path);
      if (!host)
        return fail(host.takeError());
      importer.define(tensor.name(), GraphValue{nullptr, std::move(*host)});
      continue;
    }
    auto type = RankedTensorType::get(shape, element);
    Value arg = body->addArgument(
        type, NameLoc::get(builder.getStringAttr(tensor.name()), fileLoc));
    parameters.push_back({body->getNumArguments() - 1, &tensor});
    argumentTypes.push_back(type);
    importer.define(tensor.name(), GraphValue{arg, std::nullopt});
  }

  importer.setArguments(body, &argumentTypes);

  // What shape inference says of each value, to check the translation.
  llvm::StringMap<const onnx::ValueInfoProto *> inferred;
  for (const onnx::ValueInfoProto &info : graph.value_info())
    inferred[info.name()] = &info;
  for (const onnx::ValueInfoProto &info : graph.output())
    inferred[info.name()] = &info;

  // Each value's last reader: a folded value (a mask, a table, as doubles)
  // is dropped after it.
  llvm::StringMap<int> lastReader;
  for (auto [index, node] : llvm::enumerate(graph.node()))
    for (const std::string &input : node.input())
      lastReader[input] = index;
  for (const onnx::ValueInfoProto &output : graph.output())
    lastReader[output.name()] = graph.node_size();
  for (const auto &reader : lastReader)
    importer.setRead(reader.getKey());

  for (int nodeIndex = 0; nodeIndex < graph.node_size(); ++nodeIndex) {
    const onnx::NodeProto &node = graph.node(nodeIndex);
    std::string name = node.name().empty() ? node.op_type() : node.name();
    importer.setLoc(NameLoc::get(builder.getStringAttr(name), fileLoc));
    if (llvm::Error error = importNode(importer, node, inferred))
      return fail(makeError("node '" + name + "' (" + node.op_type() +
                            "): " + llvm::toString(std::move(error))));
    for (const std::string &input : node.input())
      if (!input.empty() && lastReader.lookup(input) == nodeIndex)
        importer.release(input);
  }

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    importer.setLoc(
        NameLoc::get(builder.getStringAttr(output.name()), fileLoc));
    std::optional<Value> value = importer.getNamedValue(output.name());
    if (!value)
      return fail(makeError("output '" + output.name() + "' is not defined"));
    results.push_back(*value);
    resultTypes.push_back(value->getType());
  }
  if (labels) {
    results = {buildMeanCrossEntropy(
        builder, NameLoc::get(builder.getStringAttr("loss"), fileLoc),
        results.front(), labels)};
    resultTypes = {results.front().getType()};
  }
  func::ReturnOp::create(builder, fileLoc, results);
  function.setType(builder.getFunctionType(argumentTypes, resultTypes));
  for (const auto &[index, tensor] : parameters)
    function.setArgAttr(index, nn::kParamAttrName,
                        builder.getStringAttr(tensor->name()));
  if (std::optional<unsigned> step = importer.getStepIndex())
    function.setArgAttr(*step, nn::kStateAttrName,
                        builder.getStringAttr("step"));
  splitFusedProjections(function);
  if (failed(verify(*module)))
    return fail(makeError("internal error: the imported program does not "
                          "verify (see the diagnostics above)"));

  // The weights, one at a time, in the parameters' shapes (which
  // splitFusedProjections may give another dim).
  if (weights)
    for (const auto &[index, tensor] : parameters) {
      auto type = cast<RankedTensorType>(function.getArgument(index).getType());
      llvm::Expected<TensorBytes> bytes = readTensorBytes(*tensor, path);
      if (!bytes)
        return fail(bytes.takeError());
      if (llvm::Error error =
              weights(Weight{tensor->name(), type.getElementType(),
                             type.getShape(), bytes->bytes}))
        return fail(std::move(error));
    }
  return module;
}
