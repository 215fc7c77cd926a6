//===- NNDialect.cpp - nn dialect registration and attributes -------------===//

#include "dialects/NN/IR/NNDialect.h"

#include "dialects/NN/IR/NNOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace tessera::nn;

#include "dialects/NN/IR/NNDialect.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/NN/IR/NNOps.cpp.inc"
      >();
}

Operation *NNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

LogicalResult NNDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  if (attr.getName() != kParamAttrName && attr.getName() != kStateAttrName &&
      attr.getName() != kGradOfAttrName && attr.getName() != kVersionOfAttrName)
    return op->emitError("unknown nn attribute '")
           << attr.getName().getValue() << "' on argument #" << argIndex;
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError("expects '")
           << attr.getName().getValue() << "' of argument #" << argIndex
           << " to be a non-empty string, got " << attr.getValue();
  return success();
}

LogicalResult NNDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  if (attr.getName() == kUpdatesAttrName) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!index || !function || index.getInt() < 0 ||
        index.getInt() >= function.getNumArguments())
      return op->emitError("expects '")
             << kUpdatesAttrName << "' of result #" << resultIndex
             << " to be the index of an argument, got " << attr.getValue();
    return success();
  }
  if (attr.getName() != kGradOfAttrName && attr.getName() != kMetricAttrName)
    return op->emitError("unknown nn attribute '")
           << attr.getName().getValue() << "' on result #" << resultIndex;
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError("expects '")
           << attr.getName().getValue() << "' of result #" << resultIndex
           << " to be a non-empty string, got " << attr.getValue();
  return success();
}
