//===- ModelState.cpp - A plan's weights, gradients and optimizer state ---===//
//
// Per device: the parameters of its largest pipeline stage under TP (the
// experts' under EP), sharded by ZeRO over the data-parallel axes, with
// the whole gradients a stage holds before its reduction and the weight
// stashes of the asynchronous schedules.
//
//===----------------------------------------------------------------------===//

#include "Terms.h"

#include "tessera/Analysis/MemoryPlan.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

void planner::estimateModelState(const PlanShares &plan,
                                 PlanEstimate &estimate) {
  const ModelShape &model = plan.model;
  const PlanChoice &choice = plan.choice;
  const PartitionedLayout *partitioned = plan.partitioned;
  const PrecisionBytes &bytes = plan.bytes;
  int64_t replicas = plan.replicas;
  double h = plan.hidden, t = plan.tp, vocab = plan.vocab,
         localParams = plan.localParams, expertParams = plan.expertParams,
         denseParams = plan.denseParams;
  ModelStateBytesPerParameter stateBytes = {bytes.weight, bytes.gradient,
                                            bytes.optimizer};
  ModelStateMemory state =
      getZeroModelState(denseParams, stateBytes, choice.zero, replicas);
  ModelStateMemory expertState =
      getZeroModelState(expertParams, stateBytes, choice.zero, choice.dp);
  state.parameterBytes += expertState.parameterBytes;
  state.gradientBytes += expertState.gradientBytes;
  state.optimizerStateBytes += expertState.optimizerStateBytes;
  estimate.paramBytes = state.parameterBytes;
  // Kept until the backward, the forward's gathers hold every parameter of
  // the device whole at the forward's end, next to the shards.
  if (choice.zero >= 3 && !choice.reshardAfterForward)
    estimate.paramBytes += localParams * bytes.weight;
  estimate.gradBytes = state.gradientBytes;
  // A layout that gathers parameters keeps the gathered copies for the
  // backward and their whole gradients until the step reduces them (a
  // stage's share of them).
  if (partitioned && partitioned->gatheredParameters > 0) {
    double gathered = partitioned->gatheredParameters / choice.pp;
    estimate.paramBytes += gathered * bytes.weight;
    estimate.gradBytes += gathered * bytes.gradient;
  }
  // From stage 2 a unit's gradient is whole until its reduce-scatter: a
  // block's flat buffer (the ZeRO pass packs a block's parameters that TP
  // splits, their TP pieces, apart from those it does not, 6 h).
  // Without a pipeline, at the peak (the first block's) the embeddings'
  // shards, the backward's last, are not made yet; a pipeline's largest
  // stage is its last, whose tied embedding's shard the head made first.
  // A pipeline stage sums a microbatch's shard into the step's after the
  // reduce-scatter: that shard too.
  double unit = choice.tp == 1 ? 12 * h * h + 13 * h
                               : std::max(6 * h, (12 * h * h + 7 * h) / t);
  double unmade = choice.pp == 1 ? (vocab + model.seq) * h / replicas : 0;
  double summed =
      choice.pp > 1 && choice.microbatches > 1 ? unit / replicas : 0;
  if (choice.zero >= 2)
    estimate.gradBytes +=
        bytes.gradient * (std::max(0.0, unit - unmade) + summed);
  // ZeRO-1 accumulates the step's whole gradients: with microbatches a
  // microbatch's are made beside them; in a pipeline of one microbatch the
  // reduce-scatter's shard is. Without ZeRO a pipeline of microbatches
  // sums the LM head's term of a tied embedding's gradient ([V, h]) beside
  // the accumulated one.
  if (choice.zero == 1 && choice.microbatches > 1)
    estimate.gradBytes += localParams * bytes.gradient;
  else if (choice.zero == 1 && choice.pp > 1)
    estimate.gradBytes += localParams * bytes.gradient / replicas;
  if (choice.zero == 0 && choice.pp > 1 && choice.microbatches > 1 &&
      model.tiedEmbedding)
    estimate.gradBytes += vocab * h * bytes.gradient;
  estimate.optimizerBytes = state.optimizerStateBytes;
  // The weight stash, copies of the stage's weights as the optimizer
  // updates them (the f32 masters in mixed precision): 2BW's has a copy
  // per step parity; PipeDream's first stage a version per step in
  // flight, p of them. 2BW's sums over microbatches also have a copy per
  // step parity.
  double stashes = choice.schedule == PipelineSchedule::TwoBW       ? 2
                   : choice.schedule == PipelineSchedule::PipeDream ? choice.pp
                                                                    : 0;
  if (choice.schedule == PipelineSchedule::TwoBW)
    estimate.gradBytes += localParams * bytes.gradient;
  estimate.optimizerBytes +=
      stashes * localParams *
      (choice.precision == Precision::Mixed ? 4.0 : bytes.weight);
}
