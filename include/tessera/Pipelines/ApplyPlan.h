//===- ApplyPlan.h - A searched plan as compile options ---------*- C++ -*-===//

#ifndef TESSERA_PIPELINES_APPLYPLAN_H
#define TESSERA_PIPELINES_APPLYPLAN_H

#include "tessera/Pipelines/CompileOptions.h"
#include "tessera/Search/Planner.h"
#include "tessera/Search/ShardingSolver.h"

#include "llvm/Support/Error.h"

namespace tessera {

/// Sets the options that build `choice` (on a model annotated for its
/// dp x tp): ZeRO stage and regather, pipeline stages, microbatches,
/// schedule, recomputation. A reshard-after-forward group size in `options` is
/// kept: the search prices only true and false.
void applyPlanChoice(const PlanChoice &choice, CompileOptions &options);

/// The pins --auto searches under for a compile of `options`: a pipeline
/// only for a train step, ZeRO only for AdamW's state; `zero`,
/// `reshardAfterForward` and `recompute` pin what the user gave.
SearchPins getAutoPins(const CompileOptions &options,
                       std::optional<int64_t> zero,
                       std::optional<bool> reshardAfterForward,
                       std::optional<Recompute> recompute = std::nullopt);

struct AutoPlan {
  PlanEstimate estimate;
  /// The plans the search priced.
  int64_t considered = 0;
  /// For a model the plan search does not read as a GPT: the mesh shape
  /// whose per-op shardings (searchMeshShardings) won, and why the GPT
  /// search did not apply.
  std::optional<MeshShardingPlan> sharding;
  std::string notGpt;
};

/// The sharding solver's options for a compile of `options`: a train
/// step's gradients and optimizer state (AdamW's weights, gradients and two
/// moments; with mixed precision, f32 master weights and state beside
/// 16-bit weights and gradients; SGD's weights and gradients), or the
/// forward alone.
ShardingSolverOptions getAutoShardOptions(mlir::ModuleOp module,
                                          const CompileOptions &options);

/// Why the train step of `module` cannot run in microbatches (the first
/// error of splitting it in two on one device: an op that reads the whole
/// batch), or none where it can. searchMeshShardings's callers search one
/// microbatch then.
std::optional<std::string> getMicrobatchFailure(mlir::ModuleOp module);

/// The pins of searchMeshShardings for `pins`: one microbatch where the
/// model cannot run in more (getMicrobatchFailure), and an error where more
/// are pinned.
llvm::Expected<MeshShardingPins> getMeshShardingPins(mlir::ModuleOp module,
                                                     const SearchPins &pins);

/// --auto: searches the plans of `devices` devices on `machine` under
/// `pins`, annotates `module` with the layout of the fastest that this
/// compiler builds (annotateLayout: the ILP's or Megatron's) and
/// sets `options` to build it. A model that is not GPT-shaped gets the
/// fastest dp x tp mesh of per-op shardings instead (searchMeshShardings,
/// under the dp and tp pins; ZeRO only where pinned). Fails when no plan
/// fits in device memory.
llvm::Expected<AutoPlan> applyAutoPlan(mlir::ModuleOp module,
                                       const MachineModel &machine,
                                       int64_t devices, const SearchPins &pins,
                                       CompileOptions &options);

} // namespace tessera

#endif // TESSERA_PIPELINES_APPLYPLAN_H
