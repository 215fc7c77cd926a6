//===- Pipelines.h - The pass pipelines the CLI runs -------------*- C++
//-*-===//

#ifndef TESSERA_PIPELINES_PIPELINES_H
#define TESSERA_PIPELINES_PIPELINES_H

#include "tessera/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <optional>
#include <string>

namespace tessera {

/// Sets the axis sizes of the module's one mesh from "dp=2,tp=4". The spec
/// must name exactly the mesh's axes; the error says what differs.
mlir::LogicalResult applyMeshSpec(mlir::ModuleOp module, llvm::StringRef spec,
                                  std::string &error);

/// Gives the module's mesh the pipeline axis "pp" of size `stages` as its
/// most major axis, making a mesh @mesh ["pp"=stages] when there is none
/// (an axis "pp" already there keeps its place). Emits an error and fails
/// when the module has several meshes.
mlir::LogicalResult addPipelineAxis(mlir::ModuleOp module, int64_t stages);

/// Propagation then partition: the per-device program. With `machine` (a
/// machine file or preset), propagation resolves conflicts by their time on
/// it; with `pipeline`, --tessera-microbatch comes first and
/// --tessera-pipeline after the partition; with `schedule`,
/// --tessera-schedule then overlaps its communication.
void buildShardingPipeline(
    mlir::OpPassManager &pm, llvm::StringRef machine = {},
    const std::optional<SchedulePassOptions> &schedule = std::nullopt,
    const std::optional<PipelinePassOptions> &pipeline = std::nullopt);

/// Sharding, then export of the plan to `output` (binary, or text).
void buildCompilePipeline(
    mlir::OpPassManager &pm, llvm::StringRef output, bool text = false,
    llvm::StringRef machine = {},
    const std::optional<SchedulePassOptions> &schedule = std::nullopt,
    const std::optional<PipelinePassOptions> &pipeline = std::nullopt);

/// The single-device program's plan: shardings stripped, then export.
void buildSingleDevicePipeline(mlir::OpPassManager &pm, llvm::StringRef output);

/// The single-device loss-and-gradients program's plan: shardings stripped,
/// autodiff, then export.
void buildGradientPipeline(mlir::OpPassManager &pm, llvm::StringRef output);

} // namespace tessera

#endif // TESSERA_PIPELINES_PIPELINES_H
