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

#include "PlannerInternal.h"

#include "tessera/Analysis/MemoryPlan.h"

#include "llvm/ADT/MapVector.h"

#include <cmath>

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

/// What a microbatch keeps of a half-layer (or the LM head, or a stage's
/// ends) for its backward, in elements of s b h: what F makes and B or W
/// reads (`kept`), the part of that W reads (`read`), and what B makes for
/// W (`made`); the last two matter only under ZB-H1, which runs the weight
/// gradients apart.
struct KeptActivations {
  double kept = 0, read = 0, made = 0;
};

/// What a stage keeps at its ends, in s b h: its output until the send is
/// waited for (but the last stage), the input gradient it sends likewise
/// (but the first), and, under ZB-H1, the gradient it receives, which W
/// reads (but the last). Under ZB-H1 W reads the input gradient too, but
/// where ZeRO reduce-scatters each microbatch's gradients (from stage 2).
struct StageEnds {
  double output = 0, inputGradient = 0, receivedGradient = 0;
  bool weightReadsInputGradient = true;
};

/// The transients of a stage's units, in s b h: each runs next to every
/// copy its rank keeps (the loop form holds them for the whole schedule),
/// one at a time.
struct UnitTransients {
  /// A layer's backward: B, or W where it runs whole (ZB-H1's first stage,
  /// whose B has no input gradient to make), and ZB-H1's B without the
  /// weight gradients.
  double backward = 0, inputBackward = 0;
  /// The first stage's embedding gradients, the last's LM head backward.
  double embedding = 0, head = 0;
};

/// The activation elements (in s b h) of the rank that holds the most:
/// each of its stages' microbatches in flight under the schedule the
/// compiler builds, on the stage cut the pipeline pass makes (`layout`),
/// times what each keeps, and the largest transient of its units. The
/// export gives every value as many copies as its lifetimes overlap, for
/// the whole schedule, so a rank's stages add up.
static double getPipelinedActivations(const PipelineActivationLayout &layout,
                                      bool weightApart,
                                      const KeptActivations halves[2],
                                      const KeptActivations &head,
                                      const StageEnds &ends,
                                      const UnitTransients &transients) {
  int64_t stages = layout.halves.size();
  auto getKept = [&](int64_t stage) {
    KeptActivations kept;
    for (int half = 0; half < 2; ++half) {
      kept.kept += layout.halves[stage][half] * halves[half].kept;
      kept.read += layout.halves[stage][half] * halves[half].read;
      kept.made += layout.halves[stage][half] * halves[half].made;
    }
    if (stage + 1 == stages) {
      kept.kept += head.kept;
      kept.read += head.read;
      kept.made += head.made;
    } else {
      kept.made += ends.receivedGradient;
    }
    return kept;
  };
  double most = 0;
  for (const auto &rank : layout.ranks) {
    double held = 0, transient = 0;
    for (auto [stage, inFlight] : rank) {
      KeptActivations k = getKept(stage);
      // ZB-H1's first stage makes no input gradient: W runs its whole
      // backward.
      bool split = weightApart && stage > 0;
      // Under ZB-H1 the input gradient sent is one of what B makes for W
      // (the first half's residual gradient).
      double sent = stage > 0 ? ends.inputGradient : 0;
      held += split ? inFlight.forwardToBackward * (k.kept - k.read) +
                          inFlight.forwardToWeight * k.read +
                          inFlight.backwardToWeight * (k.made - sent)
              : weightApart ? inFlight.forwardToWeight * k.kept
                            : inFlight.forwardToBackward * k.kept;
      held +=
          inFlight.forwardSent * ends.output +
          (split && ends.weightReadsInputGradient ? inFlight.backwardSentOrRead
                                                  : inFlight.backwardSent) *
              sent;
      transient = std::max(transient, split ? transients.inputBackward
                                            : transients.backward);
      if (stage == 0)
        transient = std::max(transient, transients.embedding);
      if (stage + 1 == stages)
        transient = std::max(transient, transients.head);
    }
    most = std::max(most, held + transient);
  }
  return most;
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

namespace {
/// One device's compute over a step of the whole model (see priceOps).
struct OpTimes {
  /// Forward and backward by op class, in the order first met.
  llvm::MapVector<StringRef, double> byClass;
  double backward = 0, recompute = 0, kernels = 0;
  /// The FLOPs recomputation adds to the step (all devices').
  double recomputedFlops = 0;
};
} // namespace

/// Prices `model`'s ops (OpCost) on one device of `choice`: each at its
/// per-device, per-microbatch shape (the batch split over dp and the
/// microbatches, Megatron-LM's TP split, sequence parallelism splitting the
/// residual stream's ops too), in the plan's precision, by its roofline,
/// times the microbatches; the backward from the forward; what
/// recomputation runs again.
static OpTimes priceOps(const ModelShape &model, const MachineModel &machine,
                        const PlanChoice &choice, const PrecisionBytes &bytes) {
  OpTimes times;
  // Data and experts split the tokens alike: an expert's GEMM over its
  // tokens runs on E / ep experts and the tokens of dp.
  double t = choice.tp, rows = choice.getDataParallel() * choice.microbatches;
  double elementScale = bytes.activation / model.elementBytes;
  auto gemm = [&](const GemmShape &shape, double moved) {
    llvm::Expected<double> seconds =
        getGemmSeconds(machine, bytes.dtype, shape, moved);
    if (!seconds) {
      // A machine without the plan's dtype: its first peak.
      llvm::consumeError(seconds.takeError());
      return shape.getFlops() / machine.peakFlopsPerSecond.begin()->second;
    }
    return *seconds;
  };
  for (const OpCost &op : model.opCosts) {
    double batchSplit = op.perBatch ? rows : 1;
    double split = op.tensorSplit || choice.sequenceParallel ? t : 1;
    double moved = op.bytes * elementScale / batchSplit / split;
    double forward = 0, backward = 0;
    StringRef name = op.name;
    switch (op.kind) {
    case OpClass::Gemm: {
      GemmShape shape = op.gemm;
      double &rowsDim = shape.batch > 1 ? shape.batch : shape.m;
      rowsDim /= batchSplit;
      // TP splits the projections; sequence parallelism would run a whole
      // one on a slice of the sequence.
      if (op.tensorSplit || choice.sequenceParallel) {
        moved = op.bytes * elementScale / batchSplit / t;
        double &tpDim = !op.tensorSplit     ? rowsDim
                        : shape.batch > 1   ? shape.batch
                        : shape.n > shape.k ? shape.n
                                            : shape.k;
        tpDim /= t;
      }
      forward = gemm(shape, moved);
      // The input's gradient (dY W^T) and the weight's (X^T dY).
      backward = gemm({shape.batch, shape.m, shape.k, shape.n}, moved) +
                 gemm({shape.batch, shape.k, shape.n, shape.m}, moved);
      name = "gemm";
      break;
    }
    case OpClass::FusedAttention: {
      double flops = op.flops / batchSplit / t;
      auto attention = [&](double flops, double moved) {
        llvm::Expected<double> seconds =
            getFusedAttentionSeconds(machine, bytes.dtype, flops, moved);
        return seconds ? *seconds
                       : (llvm::consumeError(seconds.takeError()),
                          getMemoryBoundSeconds(machine, moved));
      };
      // FlashAttention's backward: five products of the forward's two.
      forward = attention(flops, moved);
      backward = attention(2.5 * flops, 2 * moved);
      name = "attention";
      break;
    }
    case OpClass::MemoryBound:
      // The backward reads the output's gradient and the input, and
      // writes the input's gradient: about twice the forward's bytes.
      forward = getMemoryBoundSeconds(machine, moved);
      backward = 2 * forward;
      break;
    }
    double runs = op.count * choice.microbatches;
    times.byClass[name] += runs * (forward + backward);
    times.backward += runs * backward;
    // A GEMM's backward is two kernels.
    times.kernels += runs * (op.kind == OpClass::Gemm ? 3 : 2);
    bool recomputed =
        choice.recompute == Recompute::Full
            ? op.inBlock
            : choice.recompute == Recompute::Selective && op.scores;
    if (recomputed) {
      times.recompute += runs * forward;
      times.kernels += runs;
      times.recomputedFlops += op.count * op.flops;
    }
  }
  return times;
}

PlanEstimate tessera::estimatePlan(const ModelShape &model,
                                   const MachineModel &machine,
                                   const PlanChoice &choice,
                                   std::optional<double> stageImbalance,
                                   const PartitionedLayout *partitioned,
                                   const PipelineActivationLayout *layout) {
  PlanEstimate estimate;
  estimate.choice = choice;
  PrecisionBytes bytes = getPrecisionBytes(choice.precision);
  // The dense layers' replicas: dp x ep (expert parallelism splits the
  // batch with dp; without experts ep is 1).
  int64_t replicas = choice.getDataParallel();
  double devices = replicas * choice.tp * choice.pp;
  double s = model.seq, h = model.hidden, a = model.heads, t = choice.tp;
  // A device's share of the vocabulary: Megatron-LM splits the token
  // embedding, the LM head and the logits on it over TP.
  double vocab = model.vocab / t;
  double microbatch =
      static_cast<double>(model.batch) / replicas / choice.microbatches;
  int64_t layersPerStage = (model.layers + choice.pp - 1) / choice.pp;

  // Model state: parameters split over TP and PP (the experts' over EP
  // too), then ZeRO over the data-parallel axes: the dense parameters'
  // over dp x ep, the experts' over dp.
  double scale = partitioned ? partitioned->parameterScale : 1;
  double expertParams =
      model.expertParameters / (t * choice.pp) / choice.ep * scale;
  double localParams =
      getDeviceParameters(model, choice.pp, StageCutShape::get(choice)) *
          scale -
      expertParams * (choice.ep - 1);
  double denseParams = localParams - expertParams;
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

  // Activations of one layer and microbatch, in elements of s b h, as the
  // compiler's train step keeps them for the backward (a GPT block without
  // dropout; Korthikanti et al. 2022 count the same tensors, in bytes, with
  // dropout masks): the two layer-norm inputs and the two projections'
  // inputs whole, twelve s b h split over TP (q, k, v, the attention output,
  // the MLP's 4h input and output), and the softmax's a s s b split over TP.
  // With sequence parallelism the layer norms' inputs are split too and the
  // gathered projection inputs are not kept (14/t); selective recomputation
  // drops the softmax, full keeps only the layer's input. Fused attention
  // keeps no softmax (its backward recomputes the scores tile by tile) but
  // its result in the [b, heads, s, d] layout its gradient reads, beside
  // the transpose the output projection reads (1/t).
  double sbh = s * microbatch * h;
  // Dropout of the unfused probabilities keeps them dropped too.
  double attention = model.fusedAttention
                         ? 0
                         : (model.attentionDropout ? 2 : 1) * a * s / h / t;
  double fusedKept = model.fusedAttention ? 1 / t : 0;
  double kept = (choice.sequenceParallel ? 14 / t : 4 + 12 / t) + fusedKept;
  double layerNone = kept + attention;
  // A block of another structure than GPT's (measured on its train step,
  // see ModelShape::keptPerLayer) keeps that much more or less.
  double structure = 1;
  if (model.keptPerLayer > 0)
    structure = model.keptPerLayer / (16 + fusedKept * t + attention * t);
  double perLayer = choice.recompute == Recompute::None        ? layerNone
                    : choice.recompute == Recompute::Selective ? kept
                    : choice.sequenceParallel                  ? 1 / t
                                                               : 1;
  // A device's logits.
  double sbv = s * microbatch * vocab;
  // The backward's peak, beyond what the layers keep, in s b h: the larger
  // of the LM head's (the logits, their log-probabilities and gradients:
  // 3 s b v, the cross-entropy's gradient being one fused kernel, and the
  // head's input and its gradient) and the first layer's MLP's (its 4h
  // gradients, the GELU's gradient being one fused kernel, and, recomputing
  // it whole, the layer again with its scores; on one device, a tied
  // embedding's head term of the gradient, [V, h], which data parallelism
  // reduces). Measured on compiled steps with elementwise fusion
  // (bench/search/activations.py: h 256-512, s 64-512, V/h 1-8, TP 1-4,
  // with and without SP and recomputation).
  bool sp = choice.sequenceParallel;
  double headTransient = 3 * vocab / h + 2 / (sp ? t : 1);
  double headGradient = model.tiedEmbedding && replicas == 1 && choice.pp == 1
                            ? vocab / (s * microbatch)
                            : 0;
  double dropped = model.outputDropout && !sp ? 1 : 0;
  double mlpTransient =
      choice.recompute == Recompute::Full
          ? (sp ? 22 / t : 20 / t + 4 + headGradient + dropped) + attention +
                fusedKept
          : (sp ? 7 / t : 6 / t + 1 + headGradient + dropped);
  if (choice.pp == 1) {
    estimate.activationBytes = (perLayer * structure * model.layers +
                                std::max(headTransient, mlpTransient)) *
                               sbh * bytes.activation;
  } else {
    // Per half-layer (the attention block, the MLP), in s b h, as the
    // compiled stages keep them (bench/pipeline/activations.py): F makes
    // for B the norm's input, the projections' TP-split inputs and outputs
    // (q, k, v and the softmax; the 4h input of the GELU) and, but with
    // sequence parallelism, whose projections read a gathered copy, the
    // norm's output. W reads of these the projections' inputs (the norm's
    // output, the attention output; the GELU's output) and what B makes
    // for it: the projections' output gradients (q, k, v; the GELU's
    // input), the norm's normalised input and its output's gradient, and
    // the residual gradient (with TP or SP the reduced gradient is a
    // collective's: the attention's sums q, k and v's terms and reduces
    // them once). Recomputing layers
    // whole, F keeps only the layer's input, and B makes for W what F
    // would have kept.
    bool full = choice.recompute == Recompute::Full;
    double whole = sp ? 1 / t : 1, norm = sp ? 0 : whole;
    double softmax = choice.recompute == Recompute::None ? attention : 0;
    KeptActivations halves[2] = {
        {whole + norm + 4 / t + softmax + fusedKept, norm + 1 / t,
         (sp || t > 1 ? 2 : 3) * whole + 3 / t},
        {whole + norm + 8 / t, norm + 4 / t, (t > 1 ? 2 : 3) * whole + 4 / t}};
    if (full)
      halves[0] = {whole, 0, halves[0].read + halves[0].made},
      halves[1] = {0, 0, halves[1].read + halves[1].made};
    // The LM head: the final norm's input and output and the logits; its
    // backward makes for W the logits' gradient, the norm's normalised
    // input, its output's gradient (with TP a collective's: the head's
    // input gradient is summed over the vocabulary's pieces) and the
    // residual gradient. The ends' values are the residual stream's; with
    // SP, W reads a collective's copy of the received gradient.
    double logits = sbv / sbh;
    KeptActivations head = {2 * whole + logits, whole,
                            (t > 1 ? 2 : 3) * whole + logits};
    // With one microbatch nothing sums the LM head's term of a tied
    // embedding's gradient ([V, h]) over microbatches: it lives from B to
    // the update, and under ZB-H1 the head's weight gradient runs in B,
    // which then keeps no logits' gradient for W.
    if (choice.microbatches == 1 && model.tiedEmbedding) {
      head.kept += vocab / (s * microbatch);
      head.made -= logits;
    }
    StageEnds ends = {whole, whole, norm, choice.zero < 2};
    // The units' transients, measured as the stages' activation peaks less
    // what their ranks keep (h 256, s 128-512, V/h 2-16, TP 1-2, with and
    // without SP and recomputation; the fused GELU and head terms refitted
    // on PlannerTest's pipelines, h 256, V/h 4, TP 1-2): a layer's
    // backward, at the MLP's (the GELU's gradient, one fused kernel: the
    // 4h/t gradient it reads and the one it makes) or the attention's (the
    // scores' gradients: three softmaxes, four recomputing them), next to
    // the gradient it receives; recomputing whole, the unpipelined
    // backward's (see mlpTransient), less 5/t + 3 without its weight
    // gradients. The embeddings' gradients (the token embedding's [V, h]).
    double scores = (choice.recompute == Recompute::None ? 3 : 4) * attention;
    UnitTransients transients;
    transients.backward =
        full ? (sp ? 22 / t : 20 / t + 4) + attention + fusedKept
             : std::max(8 / t, scores + 1 / t) + whole;
    transients.inputBackward =
        full ? 15 / t + 1 + attention + fusedKept
             : std::max(8 / t + (sp ? whole : 0), scores + 1 / t);
    transients.embedding = vocab / (s * microbatch) + whole;
    // The head's: the logits' gradient (one fused kernel from the logits)
    // and the softmax, and, where B runs the head's weight gradient (see
    // above), the logits' gradient it then does not hold for W.
    transients.head =
        (choice.microbatches == 1 && model.tiedEmbedding ? 3 : 2) * logits;
    PipelineActivationLayout own;
    if (!layout)
      own = getPipelineActivationLayout(model, choice);
    estimate.activationBytes =
        getPipelinedActivations(layout ? *layout : own,
                                choice.schedule ==
                                    PipelineSchedule::ZeroBubbleH1,
                                halves, head, ends, transients) *
        structure * sbh * bytes.activation;
  }
  if (partitioned)
    estimate.activationBytes *= partitioned->activationScale;
  estimate.peakMemoryBytes = estimate.paramBytes + estimate.gradBytes +
                             estimate.optimizerBytes + estimate.activationBytes;
  estimate.fits = estimate.peakMemoryBytes <= machine.memoryBytes;

  // FLOPs: a step is forward plus backward (twice the forward).
  estimate.modelFlopsPerStep = 3 * model.forwardFlops;
  double peak = machine.getPeakFlops(bytes.dtype)
                    ? *machine.getPeakFlops(bytes.dtype)
                    : machine.peakFlopsPerSecond.begin()->second;
  StepBreakdown &breakdown = estimate.breakdown;
  // Compute on one device, the whole model's over the step, then the
  // slowest stage's share: the layers are cut by dynamic programming, the LM
  // head (and its loss) weighing on the last stage.
  estimate.stageImbalance =
      stageImbalance
          ? *stageImbalance
          : getStageImbalance(model, choice.pp, StageCutShape::get(choice));
  double stage = estimate.stageImbalance / choice.pp *
                 (partitioned ? partitioned->computeScale : 1);
  double backwardSeconds = 0;
  if (!model.opCosts.empty()) {
    OpTimes times = priceOps(model, machine, choice, bytes);
    // A causal ring in natural order is not load-balanced: each step
    // waits for the device whose block is whole, and the last device's
    // blocks are all whole but its own half one, (cp - 1/2) blocks where
    // the average is cp/2. Stored in zigzag order (--tessera-zigzag-context,
    // where the sequence is whole chunks of 2 cp) every step costs every
    // device half a block.
    bool zigzag = model.seq % (2 * choice.cp) == 0;
    double ringImbalance = choice.cp > 1 && model.causalAttention && !zigzag
                               ? (2.0 * choice.cp - 1) / choice.cp
                               : 1;
    for (auto &[name, seconds] : times.byClass)
      breakdown.compute.emplace_back(
          name, seconds * stage * (name == "attention" ? ringImbalance : 1));
    breakdown.recompute = times.recompute * stage;
    breakdown.launch = times.kernels * machine.efficiency.kernelLaunchSeconds *
                       estimate.stageImbalance / choice.pp;
    backwardSeconds = times.backward * stage;
    estimate.hardwareFlopsPerStep =
        estimate.modelFlopsPerStep + times.recomputedFlops;
  } else {
    // A shape without its ops: GEMMs at the efficiency of the typical one (a
    // microbatch through an MLP projection); the rest of a layer (norms,
    // softmax, GELU, residuals) memory-bound, about the layer's stored
    // activations read and written, forward and backward.
    double attentionShare = s / (6 * h + s);
    estimate.hardwareFlopsPerStep =
        estimate.modelFlopsPerStep *
        getRecomputeFactor(choice.recompute, attentionShare);
    double gemm = 2 * microbatch * s * h * (4 * h / t);
    double gemmSeconds =
        estimate.hardwareFlopsPerStep * choice.pp / devices /
        (peak *
         getGemmEfficiency(machine, {1, gemm / (8 * h * h / t), 4 * h / t, h}));
    double elementwiseBytes = 3 * 2 * (34 / t) * sbh * (bytes.activation / 2) *
                              model.layers * choice.microbatches;
    breakdown.compute = {
        {"gemm", gemmSeconds * stage},
        {"elementwise",
         getMemoryBoundSeconds(machine, elementwiseBytes) * stage}};
    backwardSeconds = breakdown.getComputeSeconds() * 2 / 3;
  }
  estimate.computeSeconds = breakdown.getComputeSeconds() + breakdown.recompute;

  // TP: two all-reduces of the layer's activations forward, two backward
  // (all-gather + reduce-scatter pairs with sequence parallelism: the same
  // time), two more when recomputing the forward; and the vocabulary's
  // (see below).
  // From the partitioned program: its forward's collectives (at the
  // model's batch, split into microbatches), backward mirroring forward,
  // recomputation repeating it; a stage runs its share of them.
  // Expert parallelism's all_to_all over "ep", tokens to experts and back,
  // likewise (its own term).
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
  // CP: ring attention among the "cp" devices tp apart, per layer and
  // microbatch. The forward passes a device's piece of the keys and values
  // on cp - 1 times (again when recomputing), the backward passes them with
  // their gradients' sums and sends those home. Each transfer runs under a
  // block that does not read it: the attention hides up to (cp - 1)/cp of
  // its time. A device holds its kv heads' share of TP, at least one (with
  // fewer kv heads than TP ranks each is replicated).
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
  // DP, as the compiler builds it: without ZeRO one all-reduce of the
  // gradients accumulated over the microbatches; stage 1 accumulates whole
  // gradients too and reduce-scatters them once; from stage 2 each
  // microbatch's gradient is reduce-scattered as it is made (the shards
  // accumulate). The parameters are gathered once per step after the update
  // (stages 1 and 2); stage 3 gathers them for each microbatch's forward and
  // again for its backward, as FSDP does, or, keeping the forward's copy, once
  // per step. The overlap schedule (getExposedReductionSeconds) starts a
  // reduction once its gradient is made, in buckets: without ZeRO only with one
  // microbatch (with more the sums are made at the step's end); from stage
  // 2 each microbatch's during its own backward. Stage 1 reduce-scatters at
  // the update, where nothing is left to overlap, and stages 1 and 2
  // gather the parameters after it (Megatron-LM's distributed optimizer
  // gathers them during the next step's forward); stage 3's gathers run a
  // unit ahead of the compute that reads them. Without the schedule every
  // collective is exposed whole.
  // With experts the dense parameters' gradients reduce over dp x ep and
  // the experts' over dp (their devices ep x tp apart).
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
  // The update of the device's parameters (its ZeRO shard from stage 1).
  double updated = choice.zero >= 1
                       ? denseParams / replicas + expertParams / choice.dp
                       : localParams;
  breakdown.optimizer =
      getOptimizerSeconds(machine, updated, bytes.optimizerUpdate);
  breakdown.fixed = machine.efficiency.stepSeconds;
  estimate.stepTimeSeconds = breakdown.getTotalSeconds();
  estimate.tflopsPerDevice =
      estimate.hardwareFlopsPerStep / estimate.stepTimeSeconds / devices / 1e12;
  estimate.mfu =
      estimate.modelFlopsPerStep / (estimate.stepTimeSeconds * devices * peak);
  estimate.hfu = estimate.hardwareFlopsPerStep /
                 (estimate.stepTimeSeconds * devices * peak);
  return estimate;
}
