//===- MeshFunctions.cpp - The functions a sharding pass works on ---------===//

#include "tessera/Transforms/Passes.h"

#include "tessera/Analysis/Sharding.h"

using namespace mlir;
using namespace tessera;

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
