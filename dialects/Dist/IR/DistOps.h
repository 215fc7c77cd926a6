//===- DistOps.h - dist dialect operations ----------------------*- C++ -*-===//

#ifndef TESSERA_DIST_DISTOPS_H
#define TESSERA_DIST_DISTOPS_H

#include "dialects/Dist/IR/DistAttrs.h"
#include "dialects/Interfaces/GradientOpInterface.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessera::dist {
class MeshOp;

/// The most devices a mesh (and a plan) has, and the most pipeline stages
/// a pipelined plan has: sizes multiply below it without overflow.
constexpr int64_t kMaxDevices = int64_t(1) << 20;

/// The most microbatches a step runs: the size of a mesh's microbatch axis,
/// which is time and counts no devices (Megatron-LM's 1T GPT runs 512 on
/// 3072 GPUs). With kMaxDevices, any product of a mesh's axis sizes stays
/// below 2^40.
constexpr int64_t kMaxMicrobatches = int64_t(1) << 20;

/// The `dist.unit` names that mark a pipeline stage's post ops (the first
/// op of each part): its updates of the run's step, and in a pipeline
/// without a flush those that finish an earlier step (the export's
/// Program.deferred_begin).
inline constexpr llvm::StringLiteral kUpdateUnitName = "update";
inline constexpr llvm::StringLiteral kDeferredUpdateUnitName =
    "deferred-update";
} // namespace tessera::dist

#include "dialects/Dist/IR/DistOpInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Dist/IR/DistOps.h.inc"

namespace tessera::dist {

/// Checks `sharding` against `mesh` and the tensor type it annotates: the
/// mesh is the sharding's, every axis exists, the rank matches. Emits through
/// `emitError` on failure.
llvm::LogicalResult
verifyShardingForType(ShardingAttr sharding, MeshOp mesh, mlir::Type type,
                      llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// Looks up the mesh a sharding names from `from`, then verifies as above.
llvm::LogicalResult
verifyShardingAt(ShardingAttr sharding, mlir::Operation *from, mlir::Type type,
                 llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

} // namespace tessera::dist

#endif // TESSERA_DIST_DISTOPS_H
