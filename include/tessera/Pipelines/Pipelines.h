//===- Pipelines.h - The registered pass pipelines --------------*- C++ -*-===//

#ifndef TESSERA_PIPELINES_PIPELINES_H
#define TESSERA_PIPELINES_PIPELINES_H

#include "tessera/Pipelines/CompileOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace tessera {

/// Why `options` do not make a pipeline (an option another one needs is
/// missing), or "" when they do.
std::string checkCompileOptions(const CompileOptions &options);

/// The mesh sized as `options` give it (mesh, pp), when they change it: the
/// global program that compile --emit nn writes, and the one verify's
/// reference starts from.
void buildMeshPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// The per-device program: the mesh sized, the train step, ZeRO,
/// propagation, partition, then the pipeline and overlap schedules, as
/// `options` ask. Needs options that checkCompileOptions accepts.
void buildShardingPipeline(mlir::OpPassManager &pm,
                           const CompileOptions &options);

/// Propagates and partitions an annotated `module` in place: the sharding
/// pipeline under default options, as the plan search prices a layout
/// (LayoutProgram::partition).
mlir::LogicalResult partitionAnnotated(mlir::ModuleOp module);

/// The sharding pipeline, then export of the plan (--tessera-compile-pipeline).
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options);

/// The single-device program's plan, the reference of verify: the train step
/// `options` ask for, shardings stripped, export to `options.output`.
void buildSingleDevicePipeline(mlir::OpPassManager &pm,
                               const CompileOptions &options);

/// The single-device loss-and-gradients program's plan (gradcheck):
/// shardings stripped, autodiff, export to `output`.
void buildGradientPipeline(mlir::OpPassManager &pm, llvm::StringRef output);

/// The tessera-opt command line that replays `options` on `model`: the
/// compile pipeline, or without `exportPlan` the sharding pipeline writing
/// the per-device program to `options.output`.
std::string getReplayCommand(llvm::StringRef model,
                             const CompileOptions &options,
                             bool exportPlan = true);

/// Registers --tessera-compile-pipeline and --tessera-sharding-pipeline.
void registerTesseraPipelines();

} // namespace tessera

#endif // TESSERA_PIPELINES_PIPELINES_H
