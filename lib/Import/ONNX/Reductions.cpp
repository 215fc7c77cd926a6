//===- Reductions.cpp - ONNX's reductions and normalizations as nn --------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "dialects/NN/IR/NNOps.h"

#include <numeric>

using namespace mlir;
using namespace tessera;
using namespace tessera::onnx_import;

/// ReduceSum (axes an input from opset 13), ReduceMean and ReduceMax (axes
/// an attribute through opset 17); keepdims reshapes the result back.
template <typename Op> static ConvertFn convertReduce() {
  return [](GraphImporter &importer,
            const onnx::NodeProto &node) -> llvm::Error {
    llvm::Expected<Value> input = importer.getFloatValue(node, 0);
    if (!input)
      return input.takeError();
    std::optional<HostTensor> axesInput;
    if (importer.getInput(node, 1)) {
      llvm::Expected<HostTensor> axes =
          importer.getConstant(node, 1, "the axes");
      if (!axes)
        return axes.takeError();
      axesInput = std::move(*axes);
    }
    auto type = cast<RankedTensorType>(input->getType());
    llvm::Expected<SmallVector<int64_t>> dims =
        getReduceDims(node, axesInput ? &*axesInput : nullptr, type.getRank());
    if (!dims)
      return dims.takeError();
    if (dims->empty()) {
      importer.setOutput(node, 0, *input);
      return llvm::Error::success();
    }
    SmallVector<int64_t> reduced, kept;
    for (int64_t dim = 0; dim < type.getRank(); ++dim) {
      bool isReduced = llvm::is_contained(*dims, dim);
      kept.push_back(isReduced ? 1 : type.getDimSize(dim));
      if (!isReduced)
        reduced.push_back(type.getDimSize(dim));
    }
    OpBuilder &builder = importer.getBuilder();
    Value result = Op::create(builder, importer.getLoc(), type.clone(reduced),
                              *input, builder.getDenseI64ArrayAttr(*dims));
    if (getIntAttr(node, "keepdims", 1))
      result = importer.reshape(result, kept);
    importer.setOutput(node, 0, result);
    return llvm::Error::success();
  };
}

/// LayerNormalization (opset 17) as nn.layer_norm: the input flattened to
/// [outer, normalized] when it normalizes more than its last dim; its mean
/// and inverse standard deviation outputs, where used, computed beside it.
static llvm::Error convertLayerNorm(GraphImporter &importer,
                                    const onnx::NodeProto &node) {
  llvm::Expected<Value> input = importer.getFloatValue(node, 0);
  if (!input)
    return input.takeError();
  auto type = cast<RankedTensorType>(input->getType());
  int64_t rank = type.getRank();
  llvm::Expected<int64_t> axis =
      normalizeAxis(getIntAttr(node, "axis", -1), rank, "axis");
  if (!axis)
    return axis.takeError();
  ArrayRef<int64_t> shape = type.getShape();
  ArrayRef<int64_t> normalized = shape.drop_front(*axis);
  auto product = [](ArrayRef<int64_t> dims) {
    return std::accumulate(dims.begin(), dims.end(), int64_t(1),
                           std::multiplies<int64_t>());
  };
  int64_t outer = product(shape.take_front(*axis)), inner = product(normalized);
  Type element = type.getElementType();
  auto getAffine = [&](int index, double otherwise) -> llvm::Expected<Value> {
    if (!importer.getInput(node, index))
      return importer.getSplat(RankedTensorType::get({inner}, element),
                               otherwise);
    llvm::Expected<Value> value = importer.getValue(node, index);
    if (!value)
      return value.takeError();
    auto given = cast<RankedTensorType>(value->getType());
    if (!getBroadcastShape(given.getShape(), normalized) ||
        given.getRank() > static_cast<int64_t>(normalized.size()))
      return makeError("scale and bias must broadcast to the normalized "
                       "dims");
    return importer.reshape(importer.broadcastTo(*value, normalized), {inner});
  };
  llvm::Expected<Value> gamma = getAffine(1, 1);
  if (!gamma)
    return gamma.takeError();
  llvm::Expected<Value> beta = getAffine(2, 0);
  if (!beta)
    return beta.takeError();
  OpBuilder &builder = importer.getBuilder();
  Location loc = importer.getLoc();
  float epsilon = getFloatAttr(node, "epsilon", 1e-5f);
  // nn.layer_norm normalizes the last dim: the residual stream keeps its
  // [batch, seq, hidden] (which sequence parallelism reads).
  SmallVector<int64_t> flatShape = {outer, inner};
  Value flat = *axis == rank - 1 ? *input : importer.reshape(*input, flatShape);
  Value normalizedValue = nn::LayerNormOp::create(
      builder, loc, flat, *gamma, *beta, builder.getF32FloatAttr(epsilon));
  importer.setOutput(node, 0, importer.reshape(normalizedValue, shape));
  bool statistics = false;
  for (int output = 1; output < node.output_size(); ++output)
    statistics |= !node.output(output).empty();
  if (!statistics)
    return llvm::Error::success();
  // mean and 1 / sqrt(var + epsilon) over the normalized dims, kept as 1s.
  auto rowType = RankedTensorType::get({outer}, element);
  auto reduceRows = [&](Value value) -> Value {
    return nn::ReduceMeanOp::create(builder, loc, rowType, value,
                                    builder.getDenseI64ArrayAttr({1}));
  };
  auto flatType = RankedTensorType::get(flatShape, element);
  flat = importer.reshape(*input, flatShape);
  Value mean = reduceRows(flat);
  Value centered = nn::SubOp::create(
      builder, loc, flatType, flat,
      importer.broadcastTo(importer.reshape(mean, {outer, 1}), flatShape));
  Value variance =
      reduceRows(nn::MulOp::create(builder, loc, flatType, centered, centered));
  Value inverse = nn::RsqrtOp::create(
      builder, loc, rowType,
      nn::AddOp::create(builder, loc, rowType, variance,
                        importer.getSplat(variance, epsilon)));
  SmallVector<int64_t> kept(shape.take_front(*axis));
  kept.append(rank - *axis, 1);
  // Their type is stash_type's: f32 by default.
  Type stash =
      getElementType(importer.getContext(),
                     getIntAttr(node, "stash_type", onnx::TensorProto::FLOAT));
  Value statisticValues[] = {mean, inverse};
  for (auto [index, value] : llvm::enumerate(statisticValues)) {
    Value result = importer.reshape(value, kept);
    if (stash && stash != element)
      result = nn::CastOp::create(builder, loc,
                                  RankedTensorType::get(kept, stash), result);
    importer.setOutput(node, index + 1, result);
  }
  return llvm::Error::success();
}

void onnx_import::addReductionConverters(ConverterTable &table) {
  table["ReduceSum"] = convertReduce<nn::ReduceSumOp>();
  table["ReduceMean"] = convertReduce<nn::ReduceMeanOp>();
  table["ReduceMax"] = convertReduce<nn::ReduceMaxOp>();
  table["LayerNormalization"] = convertLayerNorm;
}
