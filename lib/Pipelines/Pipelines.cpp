//===- Pipelines.cpp - The pass pipelines the CLI runs --------------------===//

#include "tessera/Pipelines/Pipelines.h"

#include "dialects/Dist/IR/DistOps.h"
#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

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

LogicalResult tessera::addPipelineAxis(ModuleOp module, int64_t stages) {
  auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
  if (meshes.size() > 1)
    return module.emitError("pipelining needs one dist.mesh, found ")
           << meshes.size();
  // A model without a mesh may not have loaded the dialect yet.
  module.getContext()->loadDialect<dist::DistDialect>();
  OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
  if (meshes.empty()) {
    dist::MeshOp::create(builder, module.getLoc(), "mesh",
                         builder.getStrArrayAttr({kPipelineAxis}),
                         builder.getDenseI64ArrayAttr({stages}));
    return success();
  }
  dist::MeshOp mesh = meshes.front();
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
  return success();
}

void tessera::buildShardingPipeline(
    OpPassManager &pm, StringRef machine,
    const std::optional<SchedulePassOptions> &schedule,
    const std::optional<PipelinePassOptions> &pipeline) {
  if (pipeline && pipeline->microbatches > 1) {
    MicrobatchPassOptions microbatch;
    microbatch.microbatches = pipeline->microbatches;
    pm.addPass(createMicrobatchPass(microbatch));
  }
  PropagatePassOptions options;
  options.machine = machine.str();
  pm.addPass(createPropagatePass(options));
  pm.addPass(createPartitionPass());
  if (pipeline)
    pm.addPass(createPipelinePass(*pipeline));
  if (schedule)
    pm.addPass(createSchedulePass(*schedule));
}

void tessera::buildCompilePipeline(
    OpPassManager &pm, StringRef output, bool text, StringRef machine,
    const std::optional<SchedulePassOptions> &schedule,
    const std::optional<PipelinePassOptions> &pipeline) {
  buildShardingPipeline(pm, machine, schedule, pipeline);
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
