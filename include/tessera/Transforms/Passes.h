//===- Passes.h - Tessera's compiler passes ---------------------*- C++ -*-===//

#ifndef TESSERA_TRANSFORMS_PASSES_H
#define TESSERA_TRANSFORMS_PASSES_H

#include "dialects/Dist/IR/DistDialect.h"
#include "dialects/Dist/IR/DistOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Transforms/PassOptions.h"
#include "llvm/ADT/StringMap.h"

namespace tessera {

/// The axis sizes of a mesh spec, "dp=2,tp=4" (--mesh); fails naming the
/// entry that is not axis=size with a size of at least 1.
llvm::Expected<llvm::StringMap<int64_t>> parseMeshSizes(llvm::StringRef spec);

/// The machine a pass's `machine=` option names (a file, or a preset under
/// machines/); none when `name` is empty. Emits an error at `op` and fails
/// when it cannot be loaded.
mlir::FailureOr<std::optional<MachineModel>>
loadOptionalMachine(mlir::Operation *op, llvm::StringRef name);

/// Runs `fn` on each function with a body whose shardings name a mesh
/// (getFunctionMesh), skipping those that name none; fails at the first
/// that fails, or that names several meshes.
mlir::LogicalResult forEachMeshFunction(
    mlir::ModuleOp module,
    llvm::function_ref<mlir::LogicalResult(mlir::func::FuncOp, dist::MeshOp)>
        fn);

/// The propagated sharding of `value` in `function` (its argument's
/// attribute, its sharding constraint's, or its op's per-result one),
/// closed; replicated where there is none.
TensorSharding getPropagatedSharding(mlir::func::FuncOp function,
                                     mlir::Value value);

/// What --tessera-fuse-elementwise does to one block: from `first` on (the
/// whole block when null), so that the ops before it stay as they are (the
/// planner fuses a train step's backward to measure it as compiled, and
/// matches its forward op by op against the model).
void fuseElementwise(mlir::Block &block, mlir::Operation *first = nullptr);

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "tessera/Transforms/Passes.h.inc"

} // namespace tessera

#endif // TESSERA_TRANSFORMS_PASSES_H
