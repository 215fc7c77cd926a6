//===- PlanReport.cpp - What tessera plan shows of a search ---------------===//

#include "tessera/Search/PlanReport.h"

#include "llvm/Support/FormatVariadic.h"

using namespace tessera;

std::string tessera::getZeroName(const PlanChoice &choice) {
  return std::to_string(choice.zero) +
         (choice.zero >= 3 && !choice.reshardAfterForward ? "k" : "");
}

std::string tessera::formatPipeline(const PlanChoice &choice) {
  std::string text;
  if (choice.pp > 1)
    text = llvm::formatv(" pp={0} schedule={1}", choice.pp,
                         getEnumName(kPipelineScheduleNames, choice.schedule));
  if (choice.virtualStages > 1)
    text += " virtual=" + std::to_string(choice.virtualStages);
  if (choice.microbatches > 1)
    text += " microbatches=" + std::to_string(choice.microbatches);
  return text;
}

llvm::json::Object tessera::toJson(const PlanEstimate &plan) {
  const PlanChoice &c = plan.choice;
  return llvm::json::Object{
      {"dp", c.dp},
      {"tp", c.tp},
      {"pp", c.pp},
      {"microbatches", c.microbatches},
      {"zero", c.zero},
      {"reshard_after_forward", c.reshardAfterForward},
      {"schedule", getEnumName(kPipelineScheduleNames, c.schedule)},
      {"virtual_stages", c.virtualStages},
      {"recompute", getEnumName(kRecomputeNames, c.recompute)},
      {"sequence_parallel", c.sequenceParallel},
      {"layout", getEnumName(kTensorLayoutNames, c.layout)},
      {"layout_memory_share", c.layoutMemoryShare},
      {"step_time_s", plan.stepTimeSeconds},
      {"peak_memory_bytes", plan.peakMemoryBytes},
      {"param_bytes", plan.paramBytes},
      {"grad_bytes", plan.gradBytes},
      {"optimizer_bytes", plan.optimizerBytes},
      {"activation_bytes", plan.activationBytes},
      {"model_flops_per_step", plan.modelFlopsPerStep},
      {"hardware_flops_per_step", plan.hardwareFlopsPerStep},
      {"tflops_per_device", plan.tflopsPerDevice},
      {"mfu", plan.mfu},
      {"compute_s", plan.computeSeconds},
      {"tp_comm_s", plan.tpCommSeconds},
      {"dp_comm_s", plan.dpCommSeconds},
      {"pp_comm_s", plan.ppCommSeconds},
      {"bubble_fraction", plan.bubbleFraction}};
}

std::optional<WinReason>
tessera::getWinReason(llvm::ArrayRef<PlanEstimate> plans) {
  if (plans.empty())
    return std::nullopt;
  const PlanEstimate &best = plans.front();
  for (const PlanEstimate &other : plans) {
    const PlanChoice &a = best.choice, &b = other.choice;
    if (a.dp == b.dp && a.tp == b.tp && a.pp == b.pp)
      continue;
    struct Part {
      const char *name;
      double winner, rival;
    } parts[] = {
        {"compute", best.computeSeconds, other.computeSeconds},
        {"tensor-parallel communication", best.tpCommSeconds,
         other.tpCommSeconds},
        {"data-parallel communication", best.dpCommSeconds,
         other.dpCommSeconds},
        {"pipeline communication", best.ppCommSeconds, other.ppCommSeconds},
        {"pipeline bubble", best.bubbleFraction * best.computeSeconds,
         other.bubbleFraction * other.computeSeconds}};
    const Part *largest =
        llvm::max_element(parts, [](const Part &x, const Part &y) {
          return x.rival - x.winner < y.rival - y.winner;
        });
    return WinReason{a,
                     b,
                     other.stepTimeSeconds / best.stepTimeSeconds - 1,
                     largest->name,
                     largest->winner,
                     largest->rival};
  }
  return std::nullopt;
}
