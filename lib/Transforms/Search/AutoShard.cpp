//===- AutoShard.cpp - Per-op shardings by ILP (--tessera-auto-shard) -----===//
//
// Solves each function's shardings on the module's mesh (see
// Search/ShardingSolver) and writes them as annotations. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "tessera/Analysis/MachineModel.h"
#include "tessera/Search/ShardingSolver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

namespace tessera {
#define GEN_PASS_DEF_AUTOSHARDPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-auto-shard"

using namespace mlir;
using namespace tessera;

/// The remarks of explain=true.
static void explainSolution(func::FuncOp function, dist::MeshOp mesh,
                            const ShardingSolution &solution) {
  for (const ShardingChoice &choice : solution.choices)
    if (choice.op && choice.op->getNumResults() != 0)
      choice.op->emitRemark(describeChoice(choice, mesh));
  function.emitRemark() << llvm::formatv(
      "auto-shard over {0}: {1:F3} us per step, {2:F3} MB of collectives, "
      "{3:F2} MB per device; {4} variables, {5} constraints for {6} nodes "
      "({7} distinct{8}); {9}solved in {10:F3} s",
      formatAxes(solution.axes), solution.objectiveSeconds * 1e6,
      solution.reshardBytes / 1e6, solution.memoryBytes / 1e6,
      solution.variables, solution.constraints, solution.nodes,
      solution.distinctNodes,
      solution.sharedBlocks
          ? llvm::formatv(", {0} blocks shared", solution.sharedBlocks).str()
          : std::string(),
      solution.optimal ? "" : "not proven optimal, ", solution.solveSeconds);
}

namespace {
struct AutoShardPass : tessera::impl::AutoShardPassBase<AutoShardPass> {
  using AutoShardPassBase::AutoShardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::Expected<MachineModel> machineModel =
        loadMachineModel(machine, getMachinesDir());
    if (!machineModel) {
      emitError(module.getLoc(), "cannot load machine '")
          << machine << "': " << llvm::toString(machineModel.takeError());
      return signalPassFailure();
    }
    ShardingSolverOptions options;
    options.axes.assign(axes.begin(), axes.end());
    options.training = !inference;
    options.optimizerBytesPerParameterByte = optimizerBytes;
    options.zeroStage = zero;
    if (!zeroAxes.empty())
      options.zeroAxes.assign(zeroAxes.begin(), zeroAxes.end());
    if (memoryLimit > 0)
      options.memoryLimitBytes = memoryLimit;
    options.shareBlocks = shareBlocks;
    options.batchAxes.assign(batchAxes.begin(), batchAxes.end());

    auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
    WalkResult result = module.walk([&](func::FuncOp function) {
      if (function.isExternal())
        return WalkResult::advance();
      FailureOr<dist::MeshOp> mesh = getFunctionMesh(function);
      if (failed(mesh))
        return WalkResult::interrupt();
      if (!*mesh) {
        // An unannotated model shards on the module's one mesh.
        if (meshes.size() != 1) {
          function.emitError("cannot auto-shard: the module has ")
              << meshes.size()
              << " meshes and the function's annotations name none";
          return WalkResult::interrupt();
        }
        mesh = meshes.front();
      }
      llvm::Expected<ShardingSolution> solution =
          solveShardings(function, *mesh, *machineModel, options);
      if (!solution) {
        function.emitError("cannot auto-shard: ")
            << llvm::toString(solution.takeError());
        return WalkResult::interrupt();
      }
      if (explain)
        explainSolution(function, *mesh, *solution);
      applyShardings(function, *mesh, *solution);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
