//===- Elementwise.cpp - ONNX's elementwise ops and constants as nn -------===//
//
// Arithmetic with numpy broadcasting (nn.broadcast made explicit), the
// activations nn has or composes exactly (Max and Min of integers and Clip
// by computed bounds as selects),
// comparisons and logic, casts, softmaxes, and the nodes that only name a
// value (Constant, Identity, inference Dropout).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "dialects/NN/IR/NNOps.h"

#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace tessera;
using namespace tessera::onnx_import;

template <typename Op> static ConvertFn convertUnary() {
  return
      [](GraphImporter &importer, const onnx::NodeProto &node) -> llvm::Error {
        llvm::Expected<Value> input = importer.getFloatValue(node, 0);
        if (!input)
          return input.takeError();
        importer.setOutput(node, 0,
                           Op::create(importer.getBuilder(), importer.getLoc(),
                                      input->getType(), *input));
        return llvm::Error::success();
      };
}

template <typename Op> static ConvertFn convertBinary() {
  return
      [](GraphImporter &importer, const onnx::NodeProto &node) -> llvm::Error {
        auto operands = importer.getBroadcastValues(node, {0, 1});
        if (!operands)
          return operands.takeError();
        if (llvm::Error error = requireFloat((*operands)[0], node))
          return error;
        Value lhs = (*operands)[0], rhs = (*operands)[1];
        importer.setOutput(node, 0,
                           Op::create(importer.getBuilder(), importer.getLoc(),
                                      lhs.getType(), lhs, rhs));
        return llvm::Error::success();
      };
}

static Value compare(GraphImporter &importer, nn::ComparePredicate predicate,
                     Value lhs, Value rhs) {
  return nn::CompareOp::create(importer.getBuilder(), importer.getLoc(),
                               predicate, lhs, rhs);
}

static Value select(GraphImporter &importer, Value condition, Value onTrue,
                    Value onFalse) {
  return nn::SelectOp::create(importer.getBuilder(), importer.getLoc(),
                              condition, onTrue, onFalse);
}

static ConvertFn convertCompare(nn::ComparePredicate predicate) {
  return [predicate](GraphImporter &importer,
                     const onnx::NodeProto &node) -> llvm::Error {
    auto operands = importer.getBroadcastValues(node, {0, 1});
    if (!operands)
      return operands.takeError();
    importer.setOutput(
        node, 0, compare(importer, predicate, (*operands)[0], (*operands)[1]));
    return llvm::Error::success();
  };
}

/// Max and Min of any number of inputs, pairwise: the first where the
/// comparison holds (gt for Max, lt for Min).
/// Max or Min of any number of inputs: nn.max or nn.min of floats (NaN
/// wins, as numpy's maximum), selects of integers.
template <typename Op>
static ConvertFn convertExtremum(nn::ComparePredicate predicate) {
  return [predicate](GraphImporter &importer,
                     const onnx::NodeProto &node) -> llvm::Error {
    SmallVector<int> indices;
    for (int i = 0; i < node.input_size(); ++i)
      indices.push_back(i);
    auto operands = importer.getBroadcastValues(node, indices);
    if (!operands)
      return operands.takeError();
    Value result = operands->front();
    bool isFloat = isa<FloatType>(getElementTypeOrSelf(result.getType()));
    for (Value operand : llvm::drop_begin(*operands))
      result = isFloat ? Op::create(importer.getBuilder(), importer.getLoc(),
                                    result, operand)
                       : select(importer,
                                compare(importer, predicate, result, operand),
                                result, operand);
    importer.setOutput(node, 0, result);
    return llvm::Error::success();
  };
}

/// A Clip bound known at import as one value, or nothing.
static std::optional<double> getScalarBound(GraphImporter &importer,
                                            const onnx::NodeProto &node,
                                            int index) {
  const GraphValue *bound = importer.getInput(node, index);
  if (!bound || !bound->constant || bound->constant->values.size() != 1)
    return std::nullopt;
  return bound->constant->values.front();
}

static llvm::Error convertClip(GraphImporter &importer,
                               const onnx::NodeProto &node) {
  // Float input, bounds absent or known: one nn.clamp.
  std::optional<double> lo = getScalarBound(importer, node, 1),
                        hi = getScalarBound(importer, node, 2);
  const GraphValue *input = importer.getInput(node, 0);
  bool floatInput =
      input && input->value &&
      isa<FloatType>(getElementTypeOrSelf(input->value.getType()));
  if (floatInput && (lo || !importer.getInput(node, 1)) &&
      (hi || !importer.getInput(node, 2)) && (!lo || !hi || *lo <= *hi)) {
    auto bound = [&](std::optional<double> value, double otherwise) {
      return importer.getBuilder().getF32FloatAttr(
          static_cast<float>(value.value_or(otherwise)));
    };
    double infinity = std::numeric_limits<double>::infinity();
    importer.setOutput(node, 0,
                       nn::ClampOp::create(importer.getBuilder(),
                                           importer.getLoc(), input->value,
                                           bound(lo, -infinity),
                                           bound(hi, infinity)));
    return llvm::Error::success();
  }
  SmallVector<int> indices = {0};
  for (int bound : {1, 2})
    if (importer.getInput(node, bound))
      indices.push_back(bound);
  auto operands = importer.getBroadcastValues(node, indices);
  if (!operands)
    return operands.takeError();
  Value result = (*operands)[0];
  for (auto [index, bound] :
       llvm::zip(llvm::drop_begin(indices), llvm::drop_begin(*operands))) {
    nn::ComparePredicate outside =
        index == 1 ? nn::ComparePredicate::lt : nn::ComparePredicate::gt;
    result = select(importer, compare(importer, outside, result, bound), bound,
                    result);
  }
  importer.setOutput(node, 0, result);
  return llvm::Error::success();
}

static llvm::Error convertReciprocal(GraphImporter &importer,
                                     const onnx::NodeProto &node) {
  llvm::Expected<Value> input = importer.getFloatValue(node, 0);
  if (!input)
    return input.takeError();
  importer.setOutput(node, 0,
                     nn::DivOp::create(importer.getBuilder(), importer.getLoc(),
                                       input->getType(),
                                       importer.getSplat(*input, 1), *input));
  return llvm::Error::success();
}

/// x^y as nn.pow, the exponent in the base's float type.
static llvm::Error convertPowOp(GraphImporter &importer,
                                const onnx::NodeProto &node) {
  llvm::Expected<Value> base = importer.getFloatValue(node, 0);
  if (!base)
    return base.takeError();
  auto operands = importer.getBroadcastValues(node, {0, 1});
  if (!operands)
    return operands.takeError();
  OpBuilder &builder = importer.getBuilder();
  Location loc = importer.getLoc();
  Type element = getElementTypeOrSelf(base->getType());
  SmallVector<Value> floats;
  for (Value operand : *operands) {
    auto type = cast<RankedTensorType>(operand.getType());
    floats.push_back(
        type.getElementType() == element
            ? operand
            : nn::CastOp::create(builder, loc, type.clone(element), operand));
  }
  importer.setOutput(node, 0,
                     nn::PowOp::create(builder, loc, floats[0], floats[1]));
  return llvm::Error::success();
}

/// x^y: products, roots and quotients for the constant exponents that are
/// (exact, and cheaper than powf), nn.pow otherwise.
static llvm::Error convertPow(GraphImporter &importer,
                              const onnx::NodeProto &node) {
  const GraphValue *exponentInput = importer.getInput(node, 1);
  if (!exponentInput || !exponentInput->constant)
    return convertPowOp(importer, node);
  llvm::Expected<HostTensor> exponent =
      importer.getConstant(node, 1, "the exponent");
  if (!exponent)
    return exponent.takeError();
  llvm::Expected<SmallVector<int64_t>> exponentShape =
      importer.getShape(node, 1);
  llvm::Expected<SmallVector<int64_t>> baseShape = importer.getShape(node, 0);
  if (!exponentShape || !baseShape)
    return makeError("input is missing");
  auto shape = getBroadcastShape(*baseShape, *exponentShape);
  if (!shape || !llvm::all_equal(exponent->values))
    return convertPowOp(importer, node);
  llvm::Expected<Value> base = importer.getFloatValue(node, 0);
  if (!base)
    return base.takeError();
  Value x = importer.broadcastTo(*base, *shape);
  OpBuilder &builder = importer.getBuilder();
  Location loc = importer.getLoc();
  Type type = x.getType();
  auto mul = [&](Value a, Value b) {
    return nn::MulOp::create(builder, loc, type, a, b);
  };
  auto reciprocal = [&](Value a) -> Value {
    return nn::DivOp::create(builder, loc, type, importer.getSplat(x, 1), a);
  };
  double y = exponent->values.empty() ? 1 : exponent->values.front();
  Value result;
  if (y == 0)
    result = importer.getSplat(x, 1);
  else if (y == 1)
    result = x;
  else if (y == 2)
    result = mul(x, x);
  else if (y == 3)
    result = mul(mul(x, x), x);
  else if (y == 0.5)
    result = nn::SqrtOp::create(builder, loc, type, x);
  else if (y == -0.5)
    result = nn::RsqrtOp::create(builder, loc, type, x);
  else if (y == -1)
    result = reciprocal(x);
  else if (y == -2)
    result = reciprocal(mul(x, x));
  else
    return convertPowOp(importer, node);
  importer.setOutput(node, 0, result);
  return llvm::Error::success();
}

static llvm::Error convertWhere(GraphImporter &importer,
                                const onnx::NodeProto &node) {
  auto operands = importer.getBroadcastValues(node, {0, 1, 2});
  if (!operands)
    return operands.takeError();
  importer.setOutput(
      node, 0,
      select(importer, (*operands)[0], (*operands)[1], (*operands)[2]));
  return llvm::Error::success();
}

static llvm::Error convertCast(GraphImporter &importer,
                               const onnx::NodeProto &node) {
  int64_t to = getIntAttr(node, "to", onnx::TensorProto::UNDEFINED);
  Type element = getElementType(importer.getContext(), to);
  if (!element)
    return makeError("cast to " + getElementTypeName(to) +
                     ", which Tessera does not hold");
  llvm::Expected<Value> input = importer.getValue(node, 0);
  if (!input)
    return input.takeError();
  auto type = cast<RankedTensorType>(input->getType());
  if (type.getElementType() == element) {
    importer.setOutput(node, 0, *input);
    return llvm::Error::success();
  }
  importer.setOutput(node, 0,
                     nn::CastOp::create(importer.getBuilder(),
                                        importer.getLoc(), type.clone(element),
                                        *input));
  return llvm::Error::success();
}

template <typename Op> static ConvertFn convertSoftmax() {
  return
      [](GraphImporter &importer, const onnx::NodeProto &node) -> llvm::Error {
        llvm::Expected<Value> input = importer.getFloatValue(node, 0);
        if (!input)
          return input.takeError();
        auto type = cast<RankedTensorType>(input->getType());
        llvm::Expected<int64_t> axis =
            normalizeAxis(getIntAttr(node, "axis", -1), type.getRank(), "axis");
        if (!axis)
          return axis.takeError();
        importer.setOutput(node, 0,
                           Op::create(importer.getBuilder(), importer.getLoc(),
                                      *input, *axis));
        return llvm::Error::success();
      };
}

static llvm::Error convertConstant(GraphImporter &importer,
                                   const onnx::NodeProto &node) {
  if (node.attribute_size() != 1)
    return makeError("expected one attribute, got " +
                     llvm::Twine(node.attribute_size()));
  const onnx::AttributeProto &attr = node.attribute(0);
  HostTensor tensor;
  if (attr.name() == "value") {
    llvm::Expected<HostTensor> read =
        readTensor(attr.t(), importer.getModelPath());
    if (!read)
      return read.takeError();
    tensor = std::move(*read);
  } else if (attr.name() == "value_float") {
    tensor.values = {attr.f()};
  } else if (attr.name() == "value_floats") {
    tensor.values.assign(attr.floats().begin(), attr.floats().end());
    tensor.shape = {attr.floats_size()};
  } else if (attr.name() == "value_int" || attr.name() == "value_ints") {
    tensor.elementType = onnx::TensorProto::INT64;
    if (attr.name() == "value_int") {
      tensor.values = {static_cast<double>(attr.i())};
    } else {
      for (int64_t value : attr.ints())
        tensor.values.push_back(static_cast<double>(value));
      tensor.shape = {attr.ints_size()};
    }
  } else {
    return makeError("a constant given by '" + attr.name() +
                     "' (Tessera takes value, value_float(s), value_int(s))");
  }
  if (!getElementType(importer.getContext(), tensor.elementType))
    return makeError("a constant of element type " +
                     getElementTypeName(tensor.elementType) +
                     ", which Tessera does not hold");
  importer.setOutput(node, 0, std::move(tensor));
  return llvm::Error::success();
}

/// Training-mode Dropout at `ratio` above 0: nn.dropout, drawn for the
/// graph's step counter. Its mask output, which PyTorch's export names
/// whether read or not, cannot be read (the kernels draw the mask).
static llvm::Error convertDropout(GraphImporter &importer,
                                  const onnx::NodeProto &node, double ratio) {
  if (!(ratio > 0 && ratio < 1))
    return makeError(
        llvm::formatv("Dropout's ratio must be in [0, 1), got {0}", ratio)
            .str());
  if (node.output_size() > 1 && importer.isRead(node.output(1)))
    return makeError("the mask output of a training-mode Dropout is not "
                     "supported: Tessera draws the mask in its kernels and "
                     "does not keep it");
  llvm::Expected<Value> input = importer.getFloatValue(node, 0);
  if (!input)
    return input.takeError();
  OpBuilder &builder = importer.getBuilder();
  importer.setOutput(node, 0,
                     nn::DropoutOp::create(
                         builder, importer.getLoc(), *input, importer.getStep(),
                         /*piece=*/Value(),
                         builder.getF32FloatAttr(static_cast<float>(ratio)),
                         builder.getI64IntegerAttr(importer.takeSeed()),
                         /*global_shape=*/nullptr));
  return llvm::Error::success();
}

/// Identity, and Dropout: at inference (or at ratio 0) it passes its input
/// through; in training mode it drops (convertDropout).
static llvm::Error convertPassThrough(GraphImporter &importer,
                                      const onnx::NodeProto &node) {
  if (node.op_type() == "Dropout") {
    auto isKnown = [&](int index, double value) {
      const GraphValue *input = importer.getInput(node, index);
      return input && input->constant && !input->constant->values.empty() &&
             llvm::all_of(input->constant->values,
                          [&](double each) { return each == value; });
    };
    bool training = importer.getInput(node, 2) && !isKnown(2, 0);
    if (training) {
      if (!isKnown(2, 1))
        return makeError("Dropout's training_mode must be a constant");
      // ONNX's default ratio is 0.5.
      double ratio = 0.5;
      if (const GraphValue *input = importer.getInput(node, 1)) {
        if (!input->constant || input->constant->values.size() != 1)
          return makeError("Dropout's ratio must be a constant scalar");
        ratio = input->constant->values.front();
      }
      if (ratio != 0)
        return convertDropout(importer, node, ratio);
    }
  }
  const GraphValue *input = importer.getInput(node, 0);
  if (!input)
    return makeError("input #0 is missing");
  GraphValue copy = *input;
  importer.define(node.output(0), std::move(copy));
  // At inference Dropout keeps every element: its mask is all true.
  if (node.op_type() == "Dropout" && node.output_size() > 1 &&
      !node.output(1).empty()) {
    llvm::Expected<SmallVector<int64_t>> shape = importer.getShape(node, 0);
    if (!shape)
      return shape.takeError();
    HostTensor mask;
    mask.elementType = onnx::TensorProto::BOOL;
    mask.shape = std::move(*shape);
    mask.values.assign(mask.getSize(), 1);
    importer.setOutput(node, 1, std::move(mask));
  }
  return llvm::Error::success();
}

/// And, Or, Xor and Not of booleans, as selects.
static llvm::Error convertLogical(GraphImporter &importer,
                                  const onnx::NodeProto &node) {
  bool unary = node.op_type() == "Not";
  SmallVector<int> indices =
      unary ? SmallVector<int>{0} : SmallVector<int>{0, 1};
  auto operands = importer.getBroadcastValues(node, indices);
  if (!operands)
    return operands.takeError();
  Value lhs = (*operands)[0];
  if (!cast<RankedTensorType>(lhs.getType()).getElementType().isInteger(1))
    return makeError(node.op_type() + " of non-boolean values");
  Value yes = importer.getSplat(lhs, 1), no = importer.getSplat(lhs, 0);
  Value result;
  if (unary) {
    result = select(importer, lhs, no, yes);
  } else {
    Value rhs = (*operands)[1];
    if (node.op_type() == "And")
      result = select(importer, lhs, rhs, no);
    else if (node.op_type() == "Or")
      result = select(importer, lhs, yes, rhs);
    else
      result = select(importer, lhs, select(importer, rhs, no, yes), rhs);
  }
  importer.setOutput(node, 0, result);
  return llvm::Error::success();
}

void onnx_import::addElementwiseConverters(ConverterTable &table) {
  table["Add"] = convertBinary<nn::AddOp>();
  table["Sub"] = convertBinary<nn::SubOp>();
  table["Mul"] = convertBinary<nn::MulOp>();
  table["Div"] = convertBinary<nn::DivOp>();
  table["Neg"] = convertUnary<nn::NegOp>();
  table["Exp"] = convertUnary<nn::ExpOp>();
  table["Log"] = convertUnary<nn::LogOp>();
  table["Sqrt"] = convertUnary<nn::SqrtOp>();
  table["Tanh"] = convertUnary<nn::TanhOp>();
  table["Sin"] = convertUnary<nn::SinOp>();
  table["Cos"] = convertUnary<nn::CosOp>();
  table["Erf"] = convertUnary<nn::ErfOp>();
  table["Relu"] = convertUnary<nn::ReluOp>();
  table["Reciprocal"] = convertReciprocal;
  table["Sigmoid"] = convertUnary<nn::SigmoidOp>();
  table["Abs"] = convertUnary<nn::AbsOp>();
  table["Clip"] = convertClip;
  table["Pow"] = convertPow;
  table["Max"] = convertExtremum<nn::MaxOp>(nn::ComparePredicate::gt);
  table["Min"] = convertExtremum<nn::MinOp>(nn::ComparePredicate::lt);
  table["Equal"] = convertCompare(nn::ComparePredicate::eq);
  table["Less"] = convertCompare(nn::ComparePredicate::lt);
  table["Greater"] = convertCompare(nn::ComparePredicate::gt);
  table["LessOrEqual"] = convertCompare(nn::ComparePredicate::le);
  table["GreaterOrEqual"] = convertCompare(nn::ComparePredicate::ge);
  table["And"] = convertLogical;
  table["Or"] = convertLogical;
  table["Xor"] = convertLogical;
  table["Not"] = convertLogical;
  table["Where"] = convertWhere;
  table["Cast"] = convertCast;
  table["Softmax"] = convertSoftmax<nn::SoftmaxOp>();
  table["LogSoftmax"] = convertSoftmax<nn::LogSoftmaxOp>();
  table["Constant"] = convertConstant;
  table["Identity"] = convertPassThrough;
  table["Dropout"] = convertPassThrough;
}
