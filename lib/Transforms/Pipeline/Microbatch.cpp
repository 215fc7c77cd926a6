//===- Microbatch.cpp - Microbatches as a mesh axis (--tessera-microbatch) ===//
//
// Adds the time axis "mb" to the mesh and splits the batch of every data
// argument over it. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_MICROBATCHPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-microbatch"

using namespace mlir;
using namespace tessera;

namespace {

bool isDataArgument(func::FuncOp function, unsigned index) {
  return !function.getArgAttr(index, nn::kParamAttrName) &&
         !function.getArgAttr(index, nn::kStateAttrName);
}

/// Splits dim 0 of each data argument of `function` over `mb` as well.
LogicalResult splitBatches(func::FuncOp function, dist::MeshOp mesh,
                           int64_t microbatches) {
  MLIRContext *context = function.getContext();
  auto meshName = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  StringAttr axis = StringAttr::get(context, kMicrobatchAxis);
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  for (BlockArgument arg : function.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!isDataArgument(function, index) || !type || type.getRank() == 0)
      continue;
    auto sharding =
        function.getArgAttrOfType<dist::ShardingAttr>(index, attrName);
    SmallVector<dist::DimShardingAttr> dims;
    if (sharding) {
      llvm::append_range(dims, sharding.getDims());
    } else {
      for (int64_t dim = 0; dim < type.getRank(); ++dim)
        dims.push_back(dist::DimShardingAttr::get(context, {}, /*isOpen=*/true,
                                                  std::nullopt));
    }
    int64_t split = microbatches;
    for (StringAttr name : dims[0].getAxes())
      split *= mesh.getAxisSize(name.getValue()).value_or(1);
    if (type.getDimSize(0) % split != 0)
      return function.emitError("cannot split the batch of argument #")
             << index << " (dim 0 of size " << type.getDimSize(0) << ") into "
             << microbatches << " microbatches over its "
             << split / microbatches << " shards";
    // The microbatches are the batch's minor split, each rank's one after
    // another in its piece; but where the batch splits over "ep", its
    // major split, so that "ep" stays a microbatch's minor split, which the
    // experts' all_to_all exchanges for experts (the pipeline pass marks
    // such data dist.microbatches_major for the runtime to feed).
    SmallVector<StringAttr> axes(dims[0].getAxes());
    if (llvm::any_of(axes,
                     [](StringAttr name) { return name.getValue() == "ep"; }))
      axes.insert(axes.begin(), axis);
    else
      axes.push_back(axis);
    dims[0] = dist::DimShardingAttr::get(context, axes, /*isOpen=*/false,
                                         dims[0].getPriority());
    function.setArgAttr(
        index, attrName,
        sharding ? dist::ShardingAttr::get(
                       context, meshName, dims, sharding.getReplicatedAxes(),
                       sharding.getUnreducedAxes(), sharding.getFlatAxes())
                 : dist::ShardingAttr::get(meshName, dims));
  }
  return success();
}

struct MicrobatchPass : tessera::impl::MicrobatchPassBase<MicrobatchPass> {
  using MicrobatchPassBase::MicrobatchPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (microbatches < 1) {
      module.emitError("expects 1 or more microbatches, got ")
          << microbatches.getValue();
      return signalPassFailure();
    }
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr(dist::DistDialect::kPartitionedAttrName)) {
        function.emitError("is partitioned: microbatching splits the global "
                           "batch, so --tessera-microbatch runs before "
                           "--tessera-partition");
        return signalPassFailure();
      }
    auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
    if (meshes.size() > 1) {
      module.emitError("microbatching needs one dist.mesh, found ")
          << meshes.size();
      return signalPassFailure();
    }
    dist::MeshOp mesh;
    if (meshes.empty()) {
      OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
      mesh = dist::MeshOp::create(builder, module.getLoc(), "mesh",
                                  builder.getStrArrayAttr({kMicrobatchAxis}),
                                  builder.getDenseI64ArrayAttr({microbatches}));
    } else {
      mesh = meshes.front();
      if (mesh.getAxisIndex(kMicrobatchAxis)) {
        mesh.emitError("mesh @")
            << mesh.getSymName() << " already has the axis \""
            << kMicrobatchAxis << "\" that microbatching adds";
        return signalPassFailure();
      }
      SmallVector<Attribute> names(mesh.getAxisNames().getValue());
      names.push_back(StringAttr::get(&getContext(), kMicrobatchAxis));
      SmallVector<int64_t> shape(mesh.getShape());
      shape.push_back(microbatches);
      mesh.setAxisNamesAttr(ArrayAttr::get(&getContext(), names));
      mesh.setShape(shape);
    }
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal() &&
          failed(splitBatches(function, mesh, microbatches)))
        return signalPassFailure();
  }
};

} // namespace
