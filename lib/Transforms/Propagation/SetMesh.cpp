//===- SetMesh.cpp - Mesh sizes and the pipeline axis (--tessera-set-mesh) ===//

#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

#include "dialects/Dist/IR/DistOps.h"

#include "llvm/ADT/StringMap.h"

namespace tessera {
#define GEN_PASS_DEF_SETMESHPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-set-mesh"

using namespace mlir;
using namespace tessera;

llvm::Expected<llvm::StringMap<int64_t>>
tessera::parseMeshSizes(StringRef spec) {
  llvm::StringMap<int64_t> sizes;
  SmallVector<StringRef> entries;
  spec.split(entries, ',', -1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    auto [name, value] = entry.split('=');
    int64_t size;
    if (name.trim().empty() || value.trim().getAsInteger(10, size) || size < 1)
      return llvm::createStringError(
          "--mesh expects axis=size entries like dp=2,tp=4, got '" +
          entry.str() + "'");
    sizes[name.trim()] = size;
  }
  return sizes;
}

namespace {

/// Gives `mesh` the pipeline axis of size `stages` as its most major axis,
/// or resizes the one it has.
void addPipelineAxis(dist::MeshOp mesh, int64_t stages) {
  Builder builder(mesh.getContext());
  SmallVector<Attribute> names(mesh.getAxisNames().getValue());
  SmallVector<int64_t> shape(mesh.getShape());
  if (std::optional<int64_t> index = mesh.getAxisIndex(kPipelineAxis)) {
    shape[*index] = stages;
  } else {
    names.insert(names.begin(), builder.getStringAttr(kPipelineAxis));
    shape.insert(shape.begin(), stages);
  }
  mesh.setAxisNamesAttr(builder.getArrayAttr(names));
  mesh.setShape(shape);
}

/// Sets the axis sizes of `mesh` from "dp=2,tp=4", which must name exactly
/// its axes; "pp" may be left out when `stages` gives it.
LogicalResult applyShape(dist::MeshOp mesh, StringRef spec, int64_t stages) {
  llvm::Expected<llvm::StringMap<int64_t>> parsed = parseMeshSizes(spec);
  if (!parsed)
    return emitError(mesh.getLoc(), llvm::toString(parsed.takeError()));
  llvm::StringMap<int64_t> &sizes = *parsed;
  if (stages > 1)
    sizes.try_emplace(kPipelineAxis, stages);
  SmallVector<int64_t> shape;
  for (Attribute name : mesh.getAxisNames()) {
    StringRef axis = cast<StringAttr>(name).getValue();
    auto it = sizes.find(axis);
    if (it == sizes.end())
      return emitError(mesh.getLoc(), "--mesh does not give axis \"")
             << axis << "\" of mesh @" << mesh.getSymName();
    shape.push_back(it->second);
    sizes.erase(it);
  }
  if (!sizes.empty())
    return emitError(mesh.getLoc(), "--mesh gives axis \"")
           << sizes.begin()->first() << "\", which mesh @" << mesh.getSymName()
           << " does not have";
  mesh.setShape(shape);
  return success();
}

struct SetMeshPass : tessera::impl::SetMeshPassBase<SetMeshPass> {
  using SetMeshPassBase::SetMeshPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (pipelineStages < 1) {
      emitError(module.getLoc(), "pipeline-stages must be 1 or more, got ")
          << static_cast<int64_t>(pipelineStages);
      return signalPassFailure();
    }
    if (shape.empty() && pipelineStages == 1)
      return;
    auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
    if (meshes.empty() && pipelineStages > 1) {
      OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
      meshes.push_back(
          dist::MeshOp::create(builder, module.getLoc(), "mesh",
                               builder.getStrArrayAttr({kPipelineAxis}),
                               builder.getDenseI64ArrayAttr({pipelineStages})));
    }
    if (meshes.size() != 1) {
      InFlightDiagnostic error =
          emitError(module.getLoc(),
                    "--mesh needs a model with exactly one dist.mesh, "
                    "found ")
          << meshes.size();
      if (meshes.empty())
        error << " (annotate the model, or let compile --auto choose the "
                 "plan)";
      return signalPassFailure();
    }
    dist::MeshOp mesh = meshes.front();
    if (pipelineStages > 1)
      addPipelineAxis(mesh, pipelineStages);
    if (!shape.empty() && failed(applyShape(mesh, shape, pipelineStages)))
      return signalPassFailure();
  }
};

} // namespace
