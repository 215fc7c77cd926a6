//===- MeshFunctions.cpp - The functions a sharding pass works on ---------===//

#include "tessera/Transforms/Passes.h"

#include "tessera/Analysis/Sharding.h"

using namespace mlir;
using namespace tessera;

TensorSharding tessera::getPropagatedSharding(func::FuncOp function,
                                              Value value) {
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  Attribute attr;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    attr = function.getArgAttr(arg.getArgNumber(), attrName);
  } else if (auto constraint =
                 value.getDefiningOp<dist::ShardingConstraintOp>()) {
    attr = constraint.getSharding();
  } else if (auto perResult = dyn_cast_or_null<ArrayAttr>(
                 value.getDefiningOp()->getAttr(attrName))) {
    attr = perResult[cast<OpResult>(value).getResultNumber()];
  }
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  if (auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr))
    return TensorSharding::fromAttr(sharding).getClosed();
  return TensorSharding::getReplicated(rank);
}

LogicalResult tessera::forEachMeshFunction(
    ModuleOp module,
    llvm::function_ref<LogicalResult(func::FuncOp, dist::MeshOp)> fn) {
  WalkResult result = module.walk([&](func::FuncOp function) {
    if (function.isExternal())
      return WalkResult::advance();
    FailureOr<dist::MeshOp> mesh = getFunctionMesh(function);
    if (failed(mesh) || (*mesh && failed(fn(function, *mesh))))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}
