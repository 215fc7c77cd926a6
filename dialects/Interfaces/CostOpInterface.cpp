//===- CostOpInterface.cpp - FLOP and byte counts of ops ------------------===//

#include "dialects/Interfaces/CostOpInterface.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

int64_t tessera::getNumElements(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.getNumElements();
  return 1;
}

int64_t tessera::getElementBytes(Type type) {
  Type elementType = getElementTypeOrSelf(type);
  if (elementType.isIntOrFloat())
    return llvm::divideCeil(elementType.getIntOrFloatBitWidth(), 8);
  if (isa<IndexType>(elementType))
    return 8;
  return 0;
}

int64_t tessera::getTensorBytes(Type type) {
  return getNumElements(type) * getElementBytes(type);
}

int64_t tessera::getDefaultBytesAccessed(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getOperandTypes())
    bytes += getTensorBytes(type);
  for (Type type : op->getResultTypes())
    bytes += getTensorBytes(type);
  return bytes;
}

#include "dialects/Interfaces/CostOpInterface.cpp.inc"
