//===- Linear.cpp - ONNX's MatMul and Gemm as nn.dot ----------------------===//
//
// MatMul follows numpy: a vector operand gains a dim that the result then
// drops, a matrix right operand contracts the left one's last dim (its
// leading dims stay free, as a projection reads a [b, s, h] activation),
// and otherwise the leading dims are broadcast to one batch and become
// nn.dot's batching dims. Gemm is alpha A'B' + beta C on matrices.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::onnx_import;

static Value dot(GraphImporter &importer, Value lhs, Value rhs,
                 ArrayRef<int64_t> batching, int64_t lhsContracting,
                 int64_t rhsContracting) {
  OpBuilder &builder = importer.getBuilder();
  return nn::DotOp::create(builder, importer.getLoc(), lhs, rhs,
                           builder.getDenseI64ArrayAttr(batching),
                           builder.getDenseI64ArrayAttr(batching),
                           builder.getDenseI64ArrayAttr({lhsContracting}),
                           builder.getDenseI64ArrayAttr({rhsContracting}));
}

static llvm::Error convertMatMul(GraphImporter &importer,
                                 const onnx::NodeProto &node) {
  llvm::Expected<Value> lhsValue = importer.getFloatValue(node, 0);
  if (!lhsValue)
    return lhsValue.takeError();
  llvm::Expected<Value> rhsValue = importer.getValue(node, 1);
  if (!rhsValue)
    return rhsValue.takeError();
  Value lhs = *lhsValue, rhs = *rhsValue;
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  if (lhsType.getRank() == 0 || rhsType.getRank() == 0)
    return makeError("MatMul of a scalar");
  if (lhsType.getElementType() != rhsType.getElementType())
    return makeError("the operands' element types differ");
  SmallVector<int64_t> lhsShape(lhsType.getShape()),
      rhsShape(rhsType.getShape());
  bool lhsVector = lhsShape.size() == 1, rhsVector = rhsShape.size() == 1;
  if (lhsVector)
    lhsShape.insert(lhsShape.begin(), 1);
  if (rhsVector)
    rhsShape.push_back(1);
  int64_t k = lhsShape.back();
  if (rhsShape[rhsShape.size() - 2] != k)
    return makeError("the operands' contracted dims differ: " + llvm::Twine(k) +
                     " and " + llvm::Twine(rhsShape[rhsShape.size() - 2]));
  lhs = importer.reshape(lhs, lhsShape);
  rhs = importer.reshape(rhs, rhsShape);
  SmallVector<int64_t> resultShape;
  Value result;
  if (rhsShape.size() == 2) {
    result = dot(importer, lhs, rhs, {}, lhsShape.size() - 1, 0);
    resultShape.assign(lhsShape.begin(), lhsShape.end() - 1);
  } else {
    ArrayRef<int64_t> lhsBatch = ArrayRef<int64_t>(lhsShape).drop_back(2);
    ArrayRef<int64_t> rhsBatch = ArrayRef<int64_t>(rhsShape).drop_back(2);
    std::optional<SmallVector<int64_t>> batch =
        getBroadcastShape(lhsBatch, rhsBatch);
    if (!batch)
      return makeError("the operands' batch dims do not broadcast");
    SmallVector<int64_t> lhsFull = *batch, rhsFull = *batch;
    lhsFull.append(lhsShape.end() - 2, lhsShape.end());
    rhsFull.append(rhsShape.end() - 2, rhsShape.end());
    lhs = importer.broadcastTo(lhs, lhsFull);
    rhs = importer.broadcastTo(rhs, rhsFull);
    SmallVector<int64_t> batching;
    for (size_t dim = 0; dim < batch->size(); ++dim)
      batching.push_back(dim);
    int64_t rank = batch->size();
    result = dot(importer, lhs, rhs, batching, rank + 1, rank);
    resultShape = *batch;
    resultShape.push_back(lhsShape[lhsShape.size() - 2]);
  }
  resultShape.push_back(rhsShape.back());
  // The dims the vectors gained.
  if (rhsVector)
    resultShape.pop_back();
  if (lhsVector)
    resultShape.erase(resultShape.end() - (rhsVector ? 1 : 2));
  importer.setOutput(node, 0, importer.reshape(result, resultShape));
  return llvm::Error::success();
}

static llvm::Error convertGemm(GraphImporter &importer,
                               const onnx::NodeProto &node) {
  llvm::Expected<Value> a = importer.getFloatValue(node, 0);
  if (!a)
    return a.takeError();
  llvm::Expected<Value> b = importer.getValue(node, 1);
  if (!b)
    return b.takeError();
  auto aType = cast<RankedTensorType>(a->getType());
  auto bType = cast<RankedTensorType>(b->getType());
  if (aType.getRank() != 2 || bType.getRank() != 2)
    return makeError("Gemm of operands of rank " +
                     llvm::Twine(aType.getRank()) + " and " +
                     llvm::Twine(bType.getRank()) + " (expected matrices)");
  bool transA = getIntAttr(node, "transA", 0),
       transB = getIntAttr(node, "transB", 0);
  int64_t k = aType.getDimSize(transA ? 0 : 1),
          bk = bType.getDimSize(transB ? 1 : 0);
  if (k != bk)
    return makeError("the operands' contracted dims differ: " + llvm::Twine(k) +
                     " and " + llvm::Twine(bk));
  if (aType.getElementType() != bType.getElementType())
    return makeError("the operands' element types differ");
  OpBuilder &builder = importer.getBuilder();
  Location loc = importer.getLoc();
  Value product = dot(importer, *a, *b, {}, transA ? 0 : 1, transB ? 1 : 0);
  Type type = product.getType();
  float alpha = getFloatAttr(node, "alpha", 1),
        beta = getFloatAttr(node, "beta", 1);
  if (alpha != 1)
    product = nn::MulOp::create(builder, loc, type, product,
                                importer.getSplat(product, alpha));
  if (importer.getInput(node, 2) && beta != 0) {
    llvm::Expected<Value> c = importer.getValue(node, 2);
    if (!c)
      return c.takeError();
    auto shape = cast<RankedTensorType>(type).getShape();
    if (!getBroadcastShape(cast<RankedTensorType>(c->getType()).getShape(),
                           shape))
      return makeError("C does not broadcast to the product");
    Value bias = importer.broadcastTo(*c, shape);
    if (beta != 1)
      bias = nn::MulOp::create(builder, loc, type, bias,
                               importer.getSplat(bias, beta));
    product = nn::AddOp::create(builder, loc, type, product, bias);
  }
  importer.setOutput(node, 0, product);
  return llvm::Error::success();
}

void onnx_import::addLinearConverters(ConverterTable &table) {
  table["MatMul"] = convertMatMul;
  table["Gemm"] = convertGemm;
}
