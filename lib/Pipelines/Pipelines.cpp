//===- Pipelines.cpp - The pass pipelines the CLI runs --------------------===//

#include "tessera/Pipelines/Pipelines.h"

#include "dialects/Dist/IR/DistOps.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;

LogicalResult tessera::applyMeshSpec(ModuleOp module, StringRef spec,
                                     std::string &error) {
  auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
  if (meshes.size() != 1) {
    error = "--mesh needs a model with exactly one dist.mesh, found " +
            std::to_string(meshes.size()) +
            (meshes.empty() ? " (annotate the model, or let compile --auto "
                              "choose the plan)"
                            : "");
    return failure();
  }
  dist::MeshOp mesh = meshes.front();
  llvm::StringMap<int64_t> sizes;
  SmallVector<StringRef> entries;
  spec.split(entries, ',', -1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    auto [name, value] = entry.split('=');
    int64_t size;
    if (name.trim().empty() || value.trim().getAsInteger(10, size) ||
        size < 1) {
      error = "--mesh expects axis=size entries like dp=2,tp=4, got '" +
              entry.str() + "'";
      return failure();
    }
    sizes[name.trim()] = size;
  }
  SmallVector<int64_t> shape;
  for (Attribute name : mesh.getAxisNames()) {
    StringRef axis = cast<StringAttr>(name).getValue();
    auto it = sizes.find(axis);
    if (it == sizes.end()) {
      error = "--mesh does not give axis \"" + axis.str() + "\" of mesh @" +
              mesh.getSymName().str();
      return failure();
    }
    shape.push_back(it->second);
    sizes.erase(it);
  }
  if (!sizes.empty()) {
    error = "--mesh gives axis \"" + sizes.begin()->first().str() +
            "\", which mesh @" + mesh.getSymName().str() + " does not have";
    return failure();
  }
  mesh.setShape(shape);
  return success();
}

void tessera::buildShardingPipeline(
    OpPassManager &pm, StringRef machine,
    const std::optional<SchedulePassOptions> &schedule) {
  PropagatePassOptions options;
  options.machine = machine.str();
  pm.addPass(createPropagatePass(options));
  pm.addPass(createPartitionPass());
  if (schedule)
    pm.addPass(createSchedulePass(*schedule));
}

void tessera::buildCompilePipeline(
    OpPassManager &pm, StringRef output, bool text, StringRef machine,
    const std::optional<SchedulePassOptions> &schedule) {
  buildShardingPipeline(pm, machine, schedule);
  ExportPassOptions options;
  options.output = output.str();
  options.text = text;
  pm.addPass(createExportPass(options));
}

void tessera::buildSingleDevicePipeline(OpPassManager &pm, StringRef output) {
  pm.addPass(createStripShardingPass());
  ExportPassOptions options;
  options.output = output.str();
  pm.addPass(createExportPass(options));
}

void tessera::buildGradientPipeline(OpPassManager &pm, StringRef output) {
  pm.addPass(createStripShardingPass());
  pm.addPass(createAutodiffPass());
  ExportPassOptions options;
  options.output = output.str();
  pm.addPass(createExportPass(options));
}
