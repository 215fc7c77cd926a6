//===- Pipeline.cpp - Pipeline stages and schedules (--tessera-pipeline) --===//
//
// Cuts a partitioned, microbatched step into one program per pipeline rank:
// classes (pre, body, post), stage cuts, transfers, the microbatch schedule
// and gradient accumulation. See Passes.td. This file holds the pass and the
// order of its phases; PipelineState.h lists the phases and what they share.
//
//===----------------------------------------------------------------------===//

#include "PipelineState.h"

#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_PIPELINEPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-pipeline"

using namespace mlir;
using namespace tessera;
using namespace tessera::pipeline;

/// Runs the phases in order on `state`'s function, and replaces it by the
/// ranks' programs.
static LogicalResult runPhases(PipelineState &state) {
  if (failed(findGradientNorms(state)) || failed(classify(state)))
    return failure();
  findForward(state);
  // ZeRO-3 gathers a stage's parameters in each unit that reads them, per
  // microbatch, as FSDP does: the stage holds them whole only while the
  // unit runs (one gather before the schedule would keep them all).
  if (moveGathersIntoUnits(state)) {
    state.forwardOps.clear();
    findForward(state);
  }
  if (failed(cutStages(state)) || failed(assignBackward(state)))
    return failure();
  if (state.spec.schedule == PipelineSchedule::ZeroBubbleH1)
    splitWeightGradients(state);
  assignRanks(state);
  if (failed(planMessages(state)))
    return failure();
  // Without a flush a run's sends are waited for at its end: the receive
  // of the last one of a step's backward gradients is in the next run.
  if (state.isSteady()) {
    if (failed(checkSteady(state)))
      return failure();
    state.waitAfter.assign(state.messages.size(), -1);
  } else if (failed(simulate(state))) {
    return failure();
  }
  for (int64_t rank = 0; rank < state.spec.ranks; ++rank)
    if (failed(emit(state, rank)))
      return failure();
  state.function.erase();
  return success();
}

namespace {

struct PipelinePass : tessera::impl::PipelinePassBase<PipelinePass> {
  using PipelinePassBase::PipelinePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PipelineSpec spec{stages, microbatches, virtualStages, schedule};
    if (stages < 1 || microbatches < 1 || virtualStages < 1) {
      module.emitError("expects stages, microbatches and virtual of 1 or "
                       "more");
      return signalPassFailure();
    }
    // As many stages as a plan has devices at most: their count must not
    // overflow, nor the tables the schedule makes per stage grow unbounded.
    if (stages > dist::kMaxDevices / virtualStages) {
      module.emitError("expects at most ")
          << dist::kMaxDevices << " pipeline stages (2^20), got " << spec.ranks
          << " ranks x " << spec.virtualStages << " virtual stages";
      return signalPassFailure();
    }
    if (std::string rejection = getScheduleRejection(spec);
        !rejection.empty()) {
      module.emitError(rejection);
      return signalPassFailure();
    }

    SmallVector<func::FuncOp> functions;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal())
        functions.push_back(function);
    if (functions.size() != 1) {
      module.emitError("expects one function to pipeline, got ")
          << functions.size();
      return signalPassFailure();
    }
    func::FuncOp function = functions.front();
    auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
    if (meshes.size() != 1) {
      module.emitError("pipelining needs one dist.mesh, found ")
          << meshes.size();
      return signalPassFailure();
    }
    dist::MeshOp mesh = meshes.front();
    auto checkAxis = [&](StringRef axis, int64_t size, StringRef what) {
      std::optional<int64_t> actual = mesh.getAxisSize(axis);
      if (actual.value_or(1) == size)
        return true;
      mesh.emitError("the mesh axis \"")
          << axis << "\" has size " << actual.value_or(1) << ", but " << what
          << " = " << size;
      return false;
    };
    if (!checkAxis(kPipelineAxis, stages, "stages") ||
        !checkAxis(kMicrobatchAxis, microbatches, "microbatches"))
      return signalPassFailure();

    PipelineState state(function, mesh, spec);
    if (failed(runPhases(state)))
      return signalPassFailure();

    // The microbatch axis is time now, not devices.
    if (std::optional<int64_t> index = mesh.getAxisIndex(kMicrobatchAxis)) {
      SmallVector<Attribute> names(mesh.getAxisNames().getValue());
      SmallVector<int64_t> shape(mesh.getShape());
      names.erase(names.begin() + *index);
      shape.erase(shape.begin() + *index);
      mesh.setAxisNamesAttr(ArrayAttr::get(&getContext(), names));
      mesh.setShape(shape);
    }
  }
};

} // namespace
