//===- Compute.cpp - A plan's compute, op by op ---------------------------===//
//
// The slowest pipeline stage's compute over the step: each of the model's
// ops priced at its per-device shape by its roofline (priceOps), the
// backward from the forward, what recomputation runs again and the
// kernels' launches; or, for a shape without its ops, GPT's GEMMs at a
// typical efficiency and the rest memory-bound.
//
//===----------------------------------------------------------------------===//

#include "Terms.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

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

double planner::estimateCompute(const PlanShares &plan,
                                std::optional<double> stageImbalance,
                                PlanEstimate &estimate) {
  const ModelShape &model = plan.model;
  const MachineModel &machine = plan.machine;
  const PlanChoice &choice = plan.choice;
  const PartitionedLayout *partitioned = plan.partitioned;
  const PrecisionBytes &bytes = plan.bytes;
  double devices = plan.devices;
  double s = plan.seq, h = plan.hidden, t = plan.tp,
         microbatch = plan.microbatch, sbh = plan.sbh, peak = plan.peak;
  // FLOPs: a step is forward plus backward (twice the forward).
  estimate.modelFlopsPerStep = 3 * model.forwardFlops;
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
  return backwardSeconds;
}
