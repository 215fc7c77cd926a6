//===- DistDialect.cpp - dist dialect registration and attribute checks ---===//

#include "dialects/Dist/IR/DistDialect.h"

#include "dialects/Dist/IR/DistOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace tessera::dist;

#include "dialects/Dist/IR/DistDialect.cpp.inc"

void DistDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/Dist/IR/DistOps.cpp.inc"
      >();
}

/// Checks a `dist.sharding` attribute on a function argument or result.
static LogicalResult verifyFunctionSharding(Operation *op, NamedAttribute attr,
                                            StringRef what, unsigned index,
                                            Type type) {
  if (attr.getName() == DistDialect::kSourceIndexAttrName ||
      attr.getName() == DistDialect::kIndexBoundAttrName ||
      attr.getName() == DistDialect::kMicrobatchesMajorAttrName) {
    auto source = dyn_cast<IntegerAttr>(attr.getValue());
    if (!source || source.getInt() < 0)
      return op->emitError("expects '")
             << attr.getName().getValue() << "' of " << what << " #" << index
             << " to be an index of 0 or more, got " << attr.getValue();
    return success();
  }
  if (attr.getName() == DistDialect::kGlobalShapeAttrName ||
      attr.getName() == DistDialect::kUnpaddedShapeAttrName) {
    auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!shape ||
        llvm::any_of(shape.asArrayRef(), [](int64_t size) { return size < 0; }))
      return op->emitError("expects '")
             << attr.getName().getValue() << "' of " << what << " #" << index
             << " to be an array of sizes, got " << attr.getValue();
    return success();
  }
  if (attr.getName() == DistDialect::kMembersAttrName) {
    auto members = dyn_cast<ArrayAttr>(attr.getValue());
    for (Attribute member :
         members ? members.getValue() : ArrayRef<Attribute>()) {
      auto dict = dyn_cast<DictionaryAttr>(member);
      auto name = dict ? dict.getAs<StringAttr>("name") : StringAttr();
      auto shape =
          dict ? dict.getAs<DenseI64ArrayAttr>("shape") : DenseI64ArrayAttr();
      auto source = dict ? dict.getAs<IntegerAttr>("source") : IntegerAttr();
      Attribute dim = dict ? dict.get("dim") : Attribute();
      if (!name || !shape || !source || source.getInt() < 0 ||
          (dim &&
           (!isa<IntegerAttr>(dim) || cast<IntegerAttr>(dim).getInt() < 0 ||
            cast<IntegerAttr>(dim).getInt() >=
                static_cast<int64_t>(shape.size()))) ||
          llvm::any_of(shape.asArrayRef(),
                       [](int64_t size) { return size < 0; })) {
        members = {};
        break;
      }
    }
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!members || members.empty())
      return op->emitError("expects '")
             << DistDialect::kMembersAttrName << "' of " << what << " #"
             << index << " to be a list of {name, shape, source[, dim]}, got "
             << attr.getValue();
    // 1-d, or a row per device of the axes that split a dim of each
    // member (partitioned, a device's piece).
    if (!tensor || tensor.getRank() < 1 || tensor.getRank() > 2)
      return op->emitError() << "expects " << what << " #" << index << " with '"
                             << DistDialect::kMembersAttrName
                             << "' to be a 1-d or 2-d tensor, got " << type;
    return success();
  }
  if (attr.getName() != DistDialect::kShardingAttrName)
    return op->emitError("unknown dist attribute '")
           << attr.getName().getValue() << "' on " << what << " #" << index;
  auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
  if (!sharding)
    return op->emitError("expects '")
           << DistDialect::kShardingAttrName << "' of " << what << " #" << index
           << " to be a #dist.sharding, got " << attr.getValue();
  return verifyShardingAt(sharding, op, type, [&]() {
    return op->emitError() << "invalid sharding of " << what << " #" << index
                           << ": ";
  });
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError("'") << attr.getName().getValue()
                              << "' is only allowed on function arguments";
  return verifyFunctionSharding(op, attr, "argument", argIndex,
                                function.getArgumentTypes()[argIndex]);
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError("'") << attr.getName().getValue()
                              << "' is only allowed on function results";
  return verifyFunctionSharding(op, attr, "result", resultIndex,
                                function.getResultTypes()[resultIndex]);
}

/// A collective started on a stream: its result is read by one dist.wait.
static LogicalResult verifyStream(Operation *op, Attribute value) {
  auto stream = dyn_cast<IntegerAttr>(value);
  if (!stream || stream.getInt() < 1)
    return op->emitError("expects '")
           << DistDialect::kStreamAttrName
           << "' to be a stream number of 1 or more (0 is the compute "
              "stream), got "
           << value;
  if (!isa<CollectiveOpInterface, SendOp>(op))
    return op->emitError("'") << DistDialect::kStreamAttrName
                              << "' is only allowed on collectives and sends";
  Value result = op->getResult(0);
  // A pipeline unit's send is waited for by its schedule.
  auto function = op->getParentOfType<FunctionOpInterface>();
  if (isa<SendOp>(op) && result.use_empty() && function &&
      function->hasAttr(DistDialect::kScheduleAttrName))
    return success();
  if (!result.hasOneUse() || !isa<WaitOp>(*result.getUsers().begin()))
    return op->emitError("a collective started on a stream must have one "
                         "use, the dist.wait that completes it");
  return success();
}

/// A pipeline stage or pipeline rank: an integer of 0 or more.
static LogicalResult verifyStageIndex(Operation *op, NamedAttribute attr) {
  auto index = dyn_cast<IntegerAttr>(attr.getValue());
  if (!index || index.getInt() < 0)
    return op->emitError("expects '")
           << attr.getName().getValue() << "' to be an integer of 0 or more, "
           << "got " << attr.getValue();
  return success();
}

LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == kStreamAttrName)
    return verifyStream(op, attr.getValue());
  if (attr.getName() == kStageAttrName)
    return verifyStageIndex(op, attr);
  if (attr.getName() == kUnitAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError("expects '")
             << kUnitAttrName << "' to be a string, got " << attr.getValue();
    return success();
  }
  if (attr.getName() == kPartitionedAttrName) {
    if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError("'")
             << kPartitionedAttrName << "' is a unit attribute of functions";
    return success();
  }
  if (attr.getName() == kPipelineRankAttrName) {
    if (!isa<FunctionOpInterface>(op))
      return op->emitError("'")
             << kPipelineRankAttrName << "' is only allowed on functions";
    return verifyStageIndex(op, attr);
  }
  if (attr.getName() == kScheduleAttrName) {
    auto schedule = dyn_cast<DictionaryAttr>(attr.getValue());
    auto has = [&](StringRef key, auto kind) {
      return schedule && isa_and_nonnull<decltype(kind)>(schedule.get(key));
    };
    if (!isa<FunctionOpInterface>(op) || !has("microbatches", IntegerAttr()) ||
        !has("units", ArrayAttr()) ||
        !has("unit_stages", DenseI64ArrayAttr()) ||
        !has("entries", DenseI64ArrayAttr()) ||
        !has("send_waits", DenseI64ArrayAttr()))
      return op->emitError("expects '")
             << kScheduleAttrName
             << "' on a function, a dictionary of microbatches, units, "
                "unit_stages, entries and send_waits";
    return success();
  }
  if (attr.getName() != kShardingAttrName)
    return op->emitError("unknown dist attribute '")
           << attr.getName().getValue() << "'";
  // One sharding per result, as an array (a single sharding may stand alone
  // for a single result).
  SmallVector<ShardingAttr> shardings;
  if (auto single = dyn_cast<ShardingAttr>(attr.getValue())) {
    shardings.push_back(single);
  } else if (auto array = dyn_cast<ArrayAttr>(attr.getValue())) {
    for (Attribute element : array) {
      auto sharding = dyn_cast<ShardingAttr>(element);
      if (!sharding)
        return op->emitError("expects '")
               << kShardingAttrName << "' to hold #dist.sharding, got "
               << element;
      shardings.push_back(sharding);
    }
  } else {
    return op->emitError("expects '")
           << kShardingAttrName
           << "' to be a #dist.sharding or an array of them, got "
           << attr.getValue();
  }
  if (shardings.size() != op->getNumResults())
    return op->emitError("expects one sharding per result (")
           << op->getNumResults() << "), got " << shardings.size();
  for (auto entry : llvm::enumerate(shardings)) {
    // Named, not bound: the lambda captures it (C++17).
    size_t index = entry.index();
    if (failed(verifyShardingAt(
            entry.value(), op, op->getResult(index).getType(), [&]() {
              return op->emitError()
                     << "invalid sharding of result #" << index << ": ";
            })))
      return failure();
  }
  return success();
}
