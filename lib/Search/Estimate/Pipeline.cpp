//===- Pipeline.cpp - A plan's pipeline transfers and bubble --------------===//
//
// The activations and gradients sent between stages, and the idle time of
// the schedule's bubble over the work it idles beside.
//
//===----------------------------------------------------------------------===//

#include "Terms.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

void planner::estimatePipeline(const PlanShares &plan, PlanEstimate &estimate) {
  const MachineModel &machine = plan.machine;
  const PlanChoice &choice = plan.choice;
  const PrecisionBytes &bytes = plan.bytes;
  int64_t replicas = plan.replicas;
  double t = plan.tp, sbh = plan.sbh;
  StepBreakdown &breakdown = estimate.breakdown;
  // PP: activations forward and gradients backward at each stage boundary,
  // between devices dp x tp apart.
  if (choice.pp > 1) {
    double message = sbh * bytes.activation / (choice.sequenceParallel ? t : 1);
    double p2p = getPointToPointSeconds(machine, message,
                                        {choice.pp, replicas * choice.tp});
    estimate.ppCommSeconds = 2 * p2p * (choice.microbatches + choice.pp - 1);
    estimate.bubbleFraction = getBubbleFraction(
        choice.schedule, choice.pp, choice.microbatches, choice.virtualStages);
  }
  breakdown.ppExposed = estimate.ppCommSeconds;
  breakdown.bubble =
      estimate.bubbleFraction *
      (estimate.computeSeconds + breakdown.launch + breakdown.tpExposed +
       breakdown.epExposed + breakdown.cpExposed);
}
