//===- Communication.cpp - A plan's collectives and their exposure --------===//
//
// Tensor and expert parallelism's collectives (from the partitioned
// program, or Megatron-LM's count), context parallelism's ring, and the
// data-parallel reductions and gathers as the overlap schedule places
// them; each priced by the machine model and counted where the compute
// does not hide it.
//
//===----------------------------------------------------------------------===//

#include "Terms.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

/// TP: two all-reduces of the layer's activations forward, two backward
/// (all-gather + reduce-scatter pairs with sequence parallelism: the same
/// time), two more when recomputing the forward; and the vocabulary's
/// (see below).
/// From the partitioned program: its forward's collectives (at the
/// model's batch, split into microbatches), backward mirroring forward,
/// recomputation repeating it; a stage runs its share of them.
/// Expert parallelism's all_to_all over "ep", tokens to experts and back,
/// likewise (its own term).
static void estimateTensorCommunication(const PlanShares &plan,
                                        PlanEstimate &estimate) {
  const ModelShape &model = plan.model;
  const MachineModel &machine = plan.machine;
  const PlanChoice &choice = plan.choice;
  const PartitionedLayout *partitioned = plan.partitioned;
  const PrecisionBytes &bytes = plan.bytes;
  int64_t layersPerStage = plan.layersPerStage;
  double s = plan.seq, microbatch = plan.microbatch, sbh = plan.sbh;
  StepBreakdown &breakdown = estimate.breakdown;
  double passes = choice.recompute == Recompute::Full ? 3 : 2;
  if (partitioned) {
    double m = choice.microbatches;
    double seconds = 0, exchanges = 0;
    for (const CollectiveUse &use : partitioned->forward)
      (use.kind == CollectiveKind::AllToAll && choice.ep > 1 &&
               use.group.size == choice.ep && use.group.stride == choice.tp
           ? exchanges
           : seconds) += use.count * m *
                         getCollectiveSeconds(
                             machine, use.kind,
                             use.bytes / m * (bytes.activation / 4), use.group);
    estimate.tpCommSeconds = passes * seconds / choice.pp;
    estimate.epCommSeconds = passes * exchanges / choice.pp;
  } else {
    if (choice.tp > 1) {
      double perLayerCount = choice.recompute == Recompute::Full ? 6 : 4;
      double oneAllReduce =
          getCollectiveSeconds(machine, CollectiveKind::AllReduce,
                               sbh * bytes.activation, {choice.tp, 1});
      // The vocabulary's: the lookups' sum (first stage), the head's input
      // gradient, and per token the cross-entropy's max, sum of
      // exponentials and label logit, and its gradient's max and sum (last
      // stage).
      double tokenAllReduce =
          getCollectiveSeconds(machine, CollectiveKind::AllReduce,
                               s * microbatch * 4, {choice.tp, 1});
      double vocabCount = choice.pp == 1 ? 2 : 1;
      estimate.tpCommSeconds = (perLayerCount * layersPerStage + vocabCount) *
                                   oneAllReduce * choice.microbatches +
                               5 * tokenAllReduce * choice.microbatches;
    }
    // Each MoE layer's dispatched tokens [b, E, C, h] exchanged into the
    // experts and back, among the "ep" devices tp apart.
    if (choice.ep > 1) {
      double dispatched = sbh * model.expertSlotsPerToken * bytes.activation;
      double layers = static_cast<double>(model.moeLayers) / choice.pp;
      estimate.epCommSeconds =
          passes * 2 * layers * choice.microbatches *
          getCollectiveSeconds(machine, CollectiveKind::AllToAll, dispatched,
                               {choice.ep, choice.tp});
    }
  }
  // TP's collectives sit between the ops that make and read them: exposed.
  breakdown.tpExposed = estimate.tpCommSeconds;
  breakdown.epExposed = estimate.epCommSeconds;
}

/// CP: ring attention among the "cp" devices tp apart, per layer and
/// microbatch. The forward passes a device's piece of the keys and values
/// on cp - 1 times (again when recomputing), the backward passes them with
/// their gradients' sums and sends those home. Each transfer runs under a
/// block that does not read it: the attention hides up to (cp - 1)/cp of
/// its time. A device holds its kv heads' share of TP, at least one (with
/// fewer kv heads than TP ranks each is replicated).
static void estimateContextCommunication(const PlanShares &plan,
                                         PlanEstimate &estimate) {
  const ModelShape &model = plan.model;
  const MachineModel &machine = plan.machine;
  const PlanChoice &choice = plan.choice;
  const PrecisionBytes &bytes = plan.bytes;
  double h = plan.hidden, a = plan.heads, t = plan.tp, sbh = plan.sbh;
  StepBreakdown &breakdown = estimate.breakdown;
  if (choice.cp > 1) {
    double c = choice.cp, headDim = h / a;
    double kvHeads = std::max(1.0, std::ceil(model.keyHidden / headDim / t));
    double keyValue = 2 * sbh * kvHeads * headDim / h * bytes.activation;
    double forwards = choice.recompute == Recompute::Full ? 2 : 1;
    estimate.cpCommSeconds =
        ((c - 1) * (forwards + 2) + 1) *
        getPointToPointSeconds(machine, keyValue, {choice.cp, choice.tp}) *
        model.layers / choice.pp * choice.microbatches;
    double attention = 0;
    for (const auto &[name, seconds] : breakdown.compute)
      if (name == "attention")
        attention += seconds;
    breakdown.cpExposed =
        std::max(0.0, estimate.cpCommSeconds - attention * (c - 1) / c);
  }
}

/// DP, as the compiler builds it: without ZeRO one all-reduce of the
/// gradients accumulated over the microbatches; stage 1 accumulates whole
/// gradients too and reduce-scatters them once; from stage 2 each
/// microbatch's gradient is reduce-scattered as it is made (the shards
/// accumulate). The parameters are gathered once per step after the update
/// (stages 1 and 2); stage 3 gathers them for each microbatch's forward and
/// again for its backward, as FSDP does, or, keeping the forward's copy, once
/// per step. The overlap schedule (getExposedReductionSeconds) starts a
/// reduction once its gradient is made, in buckets: without ZeRO only with one
/// microbatch (with more the sums are made at the step's end); from stage
/// 2 each microbatch's during its own backward. Stage 1 reduce-scatters at
/// the update, where nothing is left to overlap, and stages 1 and 2
/// gather the parameters after it (Megatron-LM's distributed optimizer
/// gathers them during the next step's forward); stage 3's gathers run a
/// unit ahead of the compute that reads them. Without the schedule every
/// collective is exposed whole.
/// With experts the dense parameters' gradients reduce over dp x ep and
/// the experts' over dp (their devices ep x tp apart).
static void estimateDataCommunication(const PlanShares &plan,
                                      double backwardSeconds,
                                      PlanEstimate &estimate) {
  const ModelShape &model = plan.model;
  const MachineModel &machine = plan.machine;
  const PlanChoice &choice = plan.choice;
  const PrecisionBytes &bytes = plan.bytes;
  int64_t replicas = plan.replicas;
  int64_t layersPerStage = plan.layersPerStage;
  double vocab = plan.vocab, localParams = plan.localParams,
         expertParams = plan.expertParams;
  StepBreakdown &breakdown = estimate.breakdown;
  if (replicas > 1) {
    double gradientBytes = localParams * bytes.gradient;
    DeviceGroup group{replicas, choice.tp};
    DeviceGroup expertGroup{choice.dp, choice.ep * choice.tp};
    double expertShare = localParams > 0 ? expertParams / localParams : 0;
    double ring = (replicas - 1.0) / replicas;
    double expertRing = (choice.dp - 1.0) / choice.dp;
    // A tied embedding's second gradient term is reduced on its own (but at
    // ZeRO-1, which sums the terms while they are pending; and in a
    // pipeline of microbatches each end stage reduces its one term, where
    // without them the first stage receives the head's term and reduces
    // both).
    bool bothTerms = choice.pp == 1 || choice.microbatches == 1;
    double tiedBytes = model.tiedEmbedding && bothTerms && choice.zero != 1
                           ? vocab * model.hidden * bytes.gradient
                           : 0;
    auto seconds = [&](CollectiveKind kind, double bytes) {
      return bytes > 0 ? getCollectiveSeconds(machine, kind, bytes, group)
                       : 0.0;
    };
    // Of bytes in proportion to the parameters: the dense share over the
    // replicas, the experts' over dp.
    auto parameterSeconds = [&](CollectiveKind kind, double bytes) {
      double experts = bytes * expertShare;
      return seconds(kind, bytes - experts) +
             (experts > 0 && choice.dp > 1
                  ? getCollectiveSeconds(machine, kind, experts, expertGroup)
                  : 0.0);
    };
    // The ring's share of such bytes a device sends.
    double parameterRing = ring * (1 - expertShare) + expertRing * expertShare;
    // Buckets of the stage's gradients: at most one per parameter, a
    // ZeRO-3 unit (a layer) at least; one where nothing overlaps.
    double m = choice.microbatches;
    double window = backwardSeconds / m;
    int64_t parameters =
        std::max<int64_t>(1, model.parameterTensors / choice.pp);
    int64_t buckets = 1;
    if (choice.overlap)
      buckets = choice.bucketBytes <= 0
                    ? parameters
                    : std::clamp<int64_t>(
                          std::ceil(gradientBytes / choice.bucketBytes),
                          choice.zero >= 3 ? layersPerStage : 1, parameters);
    if (choice.zero == 0) {
      double reduce =
          parameterSeconds(CollectiveKind::AllReduce, gradientBytes) +
          seconds(CollectiveKind::AllReduce, tiedBytes);
      estimate.dpCommSeconds = reduce;
      breakdown.dpExposed = getExposedReductionSeconds(
          window, reduce, choice.microbatches == 1 ? buckets : 1);
      estimate.dpTrafficBytes =
          2 * (parameterRing * gradientBytes + ring * tiedBytes);
    } else {
      double gathers = choice.zero >= 3 && choice.reshardAfterForward
                           ? 2.0 * choice.microbatches
                           : 1;
      int64_t reductions = choice.zero == 1 ? 1 : choice.microbatches;
      // From stage 2 the token embedding's gradient is sharded on the
      // vocabulary over dp, and with one microbatch the lookup's term of it
      // is a vocab-parallel scatter: each device adds its rows from the
      // step's row gradients and ids gathered over dp, where that moves
      // fewer bytes than reduce-scattering the whole table (small
      // vocabularies, few tokens), as the partitioner prices it. (With
      // microbatches the gradient is accumulated flat, which keeps the
      // default layout; a pipeline's first stage is priced with the table
      // reduced.)
      double reducedBytes = gradientBytes, rowBytes = 0;
      if (choice.zero >= 2 && choice.pp == 1 && choice.microbatches == 1) {
        double table = vocab * model.hidden * bytes.gradient;
        double rows = model.batch * model.seq *
                      (model.hidden * bytes.activation + sizeof(int32_t));
        if (rows < table) {
          reducedBytes -= table;
          rowBytes = rows;
        }
      }
      double reduce =
          parameterSeconds(CollectiveKind::ReduceScatter, reducedBytes) +
          seconds(CollectiveKind::ReduceScatter, tiedBytes) +
          seconds(CollectiveKind::AllGather, rowBytes);
      double gather = parameterSeconds(CollectiveKind::AllGather,
                                       localParams * bytes.weight);
      estimate.dpCommSeconds = reductions * reduce + gathers * gather;
      estimate.dpTrafficBytes =
          parameterRing * (reductions * reducedBytes +
                           gathers * localParams * bytes.weight) +
          ring * reductions * (tiedBytes + rowBytes);
      breakdown.dpExposed =
          choice.zero == 1
              ? reductions * reduce
              : (m - 1) * std::max(0.0, reduce - window) +
                    getExposedReductionSeconds(window, reduce, buckets);
      if (choice.zero >= 3) {
        // A forward is about half its backward.
        double forwardWindow = window / 2;
        breakdown.dpExposed += gathers * getExposedReductionSeconds(
                                             forwardWindow, gather, buckets);
      } else {
        breakdown.dpExposed += gather;
      }
    }
  }
}

void planner::estimateCommunication(const PlanShares &plan,
                                    double backwardSeconds,
                                    PlanEstimate &estimate) {
  estimateTensorCommunication(plan, estimate);
  estimateContextCommunication(plan, estimate);
  estimateDataCommunication(plan, backwardSeconds, estimate);
}
