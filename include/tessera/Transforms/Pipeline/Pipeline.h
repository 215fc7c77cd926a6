//===- Pipeline.h - Names shared by the pipeline passes ----------*- C++
//-*-===//

#ifndef TESSERA_TRANSFORMS_PIPELINE_PIPELINE_H
#define TESSERA_TRANSFORMS_PIPELINE_PIPELINE_H

#include "dialects/Dist/IR/DistDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

namespace tessera {

/// The mesh axis that pipeline stages run along.
inline constexpr llvm::StringLiteral kPipelineAxis = "pp";
/// The mesh axis, in time rather than devices, that --tessera-microbatch
/// splits the batch over and --tessera-pipeline turns into a loop.
inline constexpr llvm::StringLiteral kMicrobatchAxis =
    dist::DistDialect::kMicrobatchAxisName;

/// How many times one step runs each op of `function`: the ops of a
/// pipeline stage's units once per microbatch of its schedule
/// (`dist.schedule`), every other op once.
llvm::DenseMap<mlir::Operation *, int64_t>
getRunsPerStep(mlir::func::FuncOp function);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_PIPELINE_PIPELINE_H
