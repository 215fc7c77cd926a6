//===- Terms.h - The terms of a plan's estimate ------------------*- C++
//-*-===//
//
// estimatePlan sums its terms, one file each: the model state
// (ModelState.cpp), the activations (Activations.cpp), the compute
// (Compute.cpp), the communication (Communication.cpp) and the pipeline
// (Pipeline.cpp). Each reads the plan's per-device shares (PlanShares) and
// fills its fields of the estimate. Their formulas keep Megatron-LM's
// notation: s, b, h, a and t for the sequence, the microbatch, the hidden
// size, the heads and the tensor-parallel degree.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_SEARCH_ESTIMATE_TERMS_H
#define TESSERA_LIB_SEARCH_ESTIMATE_TERMS_H

#include "../PlannerInternal.h"

#include <optional>

namespace tessera::planner {

/// What every term of a plan's estimate reads: the model, the machine and
/// the plan, and the plan's shares of the model on one device.
struct PlanShares {
  PlanShares(const ModelShape &model, const MachineModel &machine,
             const PlanChoice &choice, const PartitionedLayout *partitioned);

  const ModelShape &model;
  const MachineModel &machine;
  const PlanChoice &choice;
  /// The partitioned program's figures, whose scales apply (none: the
  /// formulas' Megatron layout).
  const PartitionedLayout *partitioned;
  PrecisionBytes bytes;
  /// The dense layers' replicas (dp x ep x cp: expert parallelism splits
  /// the batch with dp), and all the plan's devices.
  int64_t replicas;
  double devices;
  double seq, hidden, heads, tp;
  /// A device's share of the vocabulary: Megatron-LM splits the token
  /// embedding, the LM head and the logits on it over TP.
  double vocab;
  /// Sequences per microbatch of a replica, and a microbatch's s b h.
  double microbatch, sbh;
  /// The layers of the largest stage.
  int64_t layersPerStage;
  /// The devices' peak FLOPs in the plan's precision.
  double peak;
  /// The parameters of a device of the largest stage, the experts' among
  /// them, and the rest.
  double localParams, expertParams, denseParams;
};

/// The weights, gradients and optimizer state of a device (paramBytes,
/// gradBytes, optimizerBytes).
void estimateModelState(const PlanShares &plan, PlanEstimate &estimate);

/// The activation bytes of the device that holds the most; `layout`, if
/// given, saves recomputing the plan's getPipelineActivationLayout.
double getActivationBytes(const PlanShares &plan,
                          const PipelineActivationLayout *layout);

/// The slowest stage's compute over the step (the breakdown's compute,
/// recomputation and launches; computeSeconds, stageImbalance and the
/// step's FLOPs); returns the backward's share of it, which the
/// data-parallel reductions overlap.
double estimateCompute(const PlanShares &plan,
                       std::optional<double> stageImbalance,
                       PlanEstimate &estimate);

/// TP's, EP's, CP's and DP's collectives, in full and as exposed.
void estimateCommunication(const PlanShares &plan, double backwardSeconds,
                           PlanEstimate &estimate);

/// The pipeline's transfers and its bubble (after the other terms: the
/// bubble idles beside the compute and the exposed collectives).
void estimatePipeline(const PlanShares &plan, PlanEstimate &estimate);

} // namespace tessera::planner

#endif // TESSERA_LIB_SEARCH_ESTIMATE_TERMS_H
