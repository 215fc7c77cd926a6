//===- Estimate.cpp - A plan's step time and memory -----------------------===//
//
// The estimate follows Megatron-LM's analysis of GPT training (Narayanan et
// al. 2021; activation memory from Korthikanti et al. 2022) on top of the
// machine and cost models: model state per ZeRO stage, activations per
// recomputation mode, compute op by op from the graph (priceOps), TP
// collectives, the DP gradient reduction as the overlap schedule places it,
// pipeline point-to-point and bubbles, summed term by term (StepBreakdown).
//
//===----------------------------------------------------------------------===//

#include "Terms.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

PrecisionBytes planner::getPrecisionBytes(Precision precision) {
  switch (precision) {
  case Precision::Mixed:
    // bf16 weights and gradients; f32 master weights, m and v (2+2+12).
    return {2, 2, 2, 12, "bf16", 4 + 2 + 8 + 12 + 2};
  case Precision::BF16:
    return {2, 2, 2, 4, "bf16", 2 + 2 + 4 + 6};
  case Precision::FP32:
    return {4, 4, 4, 8, "fp32", 4 + 4 + 8 + 12};
  }
  return {2, 2, 2, 12, "bf16", 4 + 2 + 8 + 12 + 2};
}

double StepBreakdown::getComputeSeconds() const {
  double seconds = 0;
  for (const auto &entry : compute)
    seconds += entry.second;
  return seconds;
}

double StepBreakdown::getTotalSeconds() const {
  return getComputeSeconds() + recompute + launch + tpExposed + epExposed +
         cpExposed + ppExposed + dpExposed + bubble + optimizer + fixed;
}

PlanShares::PlanShares(const ModelShape &model, const MachineModel &machine,
                       const PlanChoice &choice,
                       const PartitionedLayout *partitioned)
    : model(model), machine(machine), choice(choice), partitioned(partitioned),
      bytes(getPrecisionBytes(choice.precision)) {
  replicas = choice.getDataParallel();
  devices = replicas * choice.tp * choice.pp;
  seq = model.seq;
  hidden = model.hidden;
  heads = model.heads;
  tp = choice.tp;
  vocab = model.vocab / tp;
  microbatch =
      static_cast<double>(model.batch) / replicas / choice.microbatches;
  layersPerStage = (model.layers + choice.pp - 1) / choice.pp;
  sbh = seq * microbatch * hidden;
  // A machine gives a peak for every dtype (the slowest it lists for one it
  // does not list). One that lists none (no machine file is one) has no
  // utilization to report: its peak is left 0.
  llvm::Expected<double> dtypePeak = machine.getPeakFlops(bytes.dtype);
  peak = 0;
  if (dtypePeak)
    peak = *dtypePeak;
  else
    llvm::consumeError(dtypePeak.takeError());
  // Model state: parameters split over TP and PP (the experts' over EP
  // too), then ZeRO over the data-parallel axes: the dense parameters'
  // over dp x ep, the experts' over dp.
  double scale = partitioned ? partitioned->parameterScale : 1;
  expertParams = model.expertParameters / (tp * choice.pp) / choice.ep * scale;
  localParams =
      getDeviceParameters(model, choice.pp, StageCutShape::get(choice)) *
          scale -
      expertParams * (choice.ep - 1);
  denseParams = localParams - expertParams;
}

PlanEstimate tessera::estimatePlan(const ModelShape &model,
                                   const MachineModel &machine,
                                   const PlanChoice &choice,
                                   std::optional<double> stageImbalance,
                                   const PartitionedLayout *partitioned,
                                   const PipelineActivationLayout *layout) {
  PlanEstimate estimate;
  estimate.choice = choice;
  PlanShares plan(model, machine, choice, partitioned);
  estimateModelState(plan, estimate);
  estimate.activationBytes = getActivationBytes(plan, layout);
  estimate.peakMemoryBytes = estimate.paramBytes + estimate.gradBytes +
                             estimate.optimizerBytes + estimate.activationBytes;
  estimate.fits = estimate.peakMemoryBytes <= machine.memoryBytes;
  double backwardSeconds = estimateCompute(plan, stageImbalance, estimate);
  estimateCommunication(plan, backwardSeconds, estimate);
  estimatePipeline(plan, estimate);
  // The update of the device's parameters (its ZeRO shard from stage 1).
  StepBreakdown &breakdown = estimate.breakdown;
  double updated = choice.zero >= 1 ? plan.denseParams / plan.replicas +
                                          plan.expertParams / choice.dp
                                    : plan.localParams;
  breakdown.optimizer =
      getOptimizerSeconds(machine, updated, plan.bytes.optimizerUpdate);
  breakdown.fixed = machine.efficiency.stepSeconds;
  estimate.stepTimeSeconds = breakdown.getTotalSeconds();
  double devices = plan.devices;
  estimate.tflopsPerDevice =
      estimate.hardwareFlopsPerStep / estimate.stepTimeSeconds / devices / 1e12;
  estimate.mfu = estimate.modelFlopsPerStep /
                 (estimate.stepTimeSeconds * devices * plan.peak);
  estimate.hfu = estimate.hardwareFlopsPerStep /
                 (estimate.stepTimeSeconds * devices * plan.peak);
  return estimate;
}
