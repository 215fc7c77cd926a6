//===- PlanSpace.cpp - The plans the search considers, and its pins -------===//
//
// The meshes the search may lay a model out on, under the user's pins.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

SmallVector<int64_t> planner::getDivisors(int64_t n) {
  SmallVector<int64_t> small, large;
  for (int64_t d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d)
        large.push_back(n / d);
    }
  small.append(large.rbegin(), large.rend());
  return small;
}

llvm::Error tessera::checkDeviceCount(const MachineModel &machine,
                                      int64_t devices) {
  int64_t most = machine.getMaxDevices();
  if (devices < 1 || (most && devices > most))
    return llvm::createStringError(
        llvm::formatv("--devices must be between 1 and {0} for machine '{1}', "
                      "got {2}",
                      most, machine.name, devices)
            .str());
  return llvm::Error::success();
}

SmallVector<PlanMesh> tessera::getPlanMeshes(const ModelShape &model,
                                             int64_t devices,
                                             const SearchPins &pins) {
  auto pinned = [](std::optional<int64_t> pin, int64_t value) {
    return !pin || *pin == value;
  };
  SmallVector<PlanMesh> meshes;
  for (int64_t tp : getDivisors(devices)) {
    if (model.heads % tp != 0 || !pinned(pins.tp, tp))
      continue;
    for (int64_t pp : getDivisors(devices / tp)) {
      if (pp > model.layers || !pinned(pins.pp, pp))
        continue;
      // The data-parallel devices, split into dp x ep where the model has
      // experts (ep dividing them), or dp x cp where its attention is
      // fused (cp dividing the sequence). TODO(issue 23): pipelines of
      // experts over "ep" compile and train exactly, but a MoE model's
      // stage parameters are priced as an even split of them
      // (getDeviceParameters knows only GPT's layout): 11.1 MB charged
      // where a compiled pp=2 x ep=2 stage held 12.6 MB.
      int64_t replicas = devices / tp / pp;
      for (int64_t ep : getDivisors(replicas))
        for (int64_t cp : getDivisors(replicas / ep)) {
          int64_t dp = replicas / ep / cp, batchSplit = dp * ep;
          if ((ep > 1 &&
               (model.experts == 0 || model.experts % ep != 0 || pp > 1)) ||
              (cp > 1 && (!model.fusedAttention || model.attentionDropout ||
                          model.experts > 0 || model.seq % cp != 0)) ||
              !pinned(pins.ep, ep) || !pinned(pins.cp, cp) ||
              model.batch % batchSplit != 0 || !pinned(pins.dp, dp) ||
              (pins.microbatches &&
               (*pins.microbatches < 1 ||
                model.batch / batchSplit % *pins.microbatches != 0)))
            continue;
          meshes.push_back({dp, tp, pp, ep, cp});
        }
    }
  }
  return meshes;
}

llvm::Error tessera::checkSearchPins(const ModelShape &model, int64_t devices,
                                     const SearchPins &pins) {
  if (pins.virtualStages &&
      (*pins.virtualStages < 2 || *pins.virtualStages > model.layers ||
       (pins.schedule && *pins.schedule != PipelineSchedule::Interleaved)))
    return llvm::createStringError(llvm::formatv(
        "--virtual {0} needs --schedule interleaved and 2 to {1} (the "
        "layers) stages per rank",
        *pins.virtualStages, model.layers));
  if (pins.ilpShapes < 0)
    return llvm::createStringError(
        llvm::formatv("--ilp-shapes must be at least 0 (0: every shape), got "
                      "{0}",
                      pins.ilpShapes));
  // The schedules without a flush, pinned where no plan can take them.
  if (pins.schedule == PipelineSchedule::PipeDream &&
      ((pins.microbatches && *pins.microbatches != 1) ||
       (pins.zero && *pins.zero != 0) || (pins.pp && *pins.pp < 2) ||
       model.tiedEmbedding))
    return llvm::createStringError(
        model.tiedEmbedding
            ? "--schedule pipedream updates each stage's weights at its own "
              "pace: the model ties its token embedding to its LM head, "
              "which the first and the last stage both read (use 2bw)"
            : "--schedule pipedream runs pipelines of at least 2 stages, "
              "one microbatch a step and no ZeRO");
  if (!getPlanMeshes(model, devices, pins).empty())
    return llvm::Error::success();
  std::string pinned;
  for (auto [name, pin] : {std::pair{"dp", pins.dp},
                           {"tp", pins.tp},
                           {"pp", pins.pp},
                           {"ep", pins.ep},
                           {"cp", pins.cp},
                           {"microbatches", pins.microbatches}})
    if (pin)
      pinned +=
          llvm::formatv("{0}{1}={2}", pinned.empty() ? "" : ", ", name, *pin)
              .str();
  std::string experts =
      model.experts
          ? llvm::formatv(", ep the experts ({0}) and dp x ep the batch "
                          "(ep > 1 with one microbatch and no pipeline)",
                          model.experts)
                .str()
          : "";
  std::string context =
      pins.cp && *pins.cp > 1
          ? llvm::formatv(", cp the sequence ({0}; fused attention without "
                          "dropout, no experts)",
                          model.seq)
                .str()
          : "";
  return llvm::createStringError(llvm::formatv(
      "no dp x tp x pp mesh of {0} devices{1}: dp must divide the batch "
      "({2}), tp the heads ({3}){5}{6}, pp must be at most the layers ({4}), "
      "and the microbatches must divide a dp replica's batch",
      devices, pinned.empty() ? "" : " with " + pinned, model.batch,
      model.heads, model.layers, experts, context));
}
