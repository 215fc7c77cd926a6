//===- Activations.cpp - What a plan keeps for its backward ---------------===//
//
// The activations of the device that holds the most: per layer and
// microbatch as the compiler's train step keeps them (Korthikanti et al.
// 2022's tensors, by recomputation mode and sequence parallelism), with
// the backward's transient peak; in a pipeline, each stage's microbatches
// in flight under the schedule the compiler builds.
//
//===----------------------------------------------------------------------===//

#include "Terms.h"

#include <algorithm>

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

namespace {
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
} // namespace

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

double planner::getActivationBytes(const PlanShares &plan,
                                   const PipelineActivationLayout *layout) {
  const ModelShape &model = plan.model;
  const PlanChoice &choice = plan.choice;
  const PartitionedLayout *partitioned = plan.partitioned;
  const PrecisionBytes &bytes = plan.bytes;
  int64_t replicas = plan.replicas;
  double s = plan.seq, h = plan.hidden, a = plan.heads, t = plan.tp,
         vocab = plan.vocab, microbatch = plan.microbatch, sbh = plan.sbh;
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
  double activationBytes = 0;
  if (choice.pp == 1) {
    activationBytes = (perLayer * structure * model.layers +
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
    activationBytes = getPipelinedActivations(
                          layout ? *layout : own,
                          choice.schedule == PipelineSchedule::ZeroBubbleH1,
                          halves, head, ends, transients) *
                      structure * sbh * bytes.activation;
  }
  if (partitioned)
    activationBytes *= partitioned->activationScale;
  return activationBytes;
}
