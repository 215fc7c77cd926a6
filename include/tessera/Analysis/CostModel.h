//===- CostModel.h - Time of compute and communication on a machine -*- C++
//-*-===//
//
// The formulas the plan search ranks plans with: roofline compute with an
// efficiency curve for small GEMMs, alpha-beta collectives (ring and tree)
// over the interconnect levels or torus dimensions a device group spans,
// pipeline bubbles and activation recomputation. Each has a unit test.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_COSTMODEL_H
#define TESSERA_ANALYSIS_COSTMODEL_H

#include "tessera/Analysis/MachineModel.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Support/EnumNames.h"

namespace tessera {

/// The fraction of peak a GEMM of `flops` reaches: flops / (flops + half),
/// so a GEMM of `halfEfficiencyFlops` runs at half of peak and large ones
/// approach it (launch and tile-quantization overheads dominate small
/// GEMMs).
double getGemmEfficiency(double flops, double halfEfficiencyFlops = 2e9);

/// Roofline time of an op: the longer of its FLOPs at the dtype's peak (times
/// the GEMM efficiency where it computes more FLOPs than it moves bytes, as
/// a contraction does) and its bytes at the memory bandwidth.
llvm::Expected<double> getComputeSeconds(const MachineModel &machine,
                                         llvm::StringRef dtype, double flops,
                                         double bytes);

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll };

/// Alpha-beta time of the ring algorithm on one link class: `bytes` is the
/// full buffer (the all-gather's output, the reduce-scatter's input).
double getRingSeconds(CollectiveKind kind, int64_t devices, double bytes,
                      double bandwidthBytesPerSecond, double latencySeconds);

/// Alpha-beta time of a pipelined binary-tree all-reduce.
double getTreeAllReduceSeconds(int64_t devices, double bytes,
                               double bandwidthBytesPerSecond,
                               double latencySeconds);

/// The time of a collective of `bytes` (the full buffer) within `group`:
///
/// - switched levels: the innermost level whose blocks hold the whole group
///   when it fits one; otherwise hierarchically, the part of the group
///   inside an innermost block on its links and the rest across blocks (an
///   all-reduce is reduce-scatter inside, all-reduce across on the
///   remaining share, all-gather inside); all-reduce takes the faster of
///   ring and tree at each level;
/// - a torus: rings along the torus dimensions the group spans (two links
///   per device, one each way), one dimension after the other on the
///   shrinking share; a group that is no run of dimensions pays `stride`
///   hops of latency per ring step.
double getCollectiveSeconds(const MachineModel &machine, CollectiveKind kind,
                            double bytes, DeviceGroup group);

/// What one reshard costs: its collectives' time, the bytes each moves
/// (the full buffer, as getCollectiveSeconds takes it) and the bytes each
/// device sends in the ring algorithm (nccl-tests' bus bandwidth factors:
/// an all-reduce 2(n-1)/n of its buffer, the others (n-1)/n).
struct ReshardCost {
  double seconds = 0;
  double bytes = 0;
  double sentBytes = 0;

  ReshardCost &operator+=(const ReshardCost &other) {
    seconds += other.seconds;
    bytes += other.bytes;
    sentBytes += other.sentBytes;
    return *this;
  }
};

/// The cost of the collectives planReshard plans from `from` to `to` on a
/// tensor of `shape` with elements of `elementBytes`, as the partitioner
/// inserts them: each over the device group its axes form, on the buffer it
/// moves (an all-reduce's or all-to-all's local piece, a reduce-scatter's
/// input, an all-gather's output); slices are free. Without a machine the
/// seconds are 0.
ReshardCost getReshardCost(const MachineModel *machine, const MeshShape &mesh,
                           llvm::ArrayRef<int64_t> shape, double elementBytes,
                           const TensorSharding &from,
                           const TensorSharding &to);
inline ReshardCost
getReshardCost(const MachineModel &machine, const MeshShape &mesh,
               llvm::ArrayRef<int64_t> shape, double elementBytes,
               const TensorSharding &from, const TensorSharding &to) {
  return getReshardCost(&machine, mesh, shape, elementBytes, from, to);
}

enum class PipelineSchedule { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };
inline constexpr EnumName<PipelineSchedule> kPipelineScheduleNames[] = {
    {"gpipe", PipelineSchedule::GPipe, "all forwards, then all backwards"},
    {"1f1b", PipelineSchedule::OneFOneB,
     "one forward, one backward (PipeDream-Flush)"},
    {"interleaved", PipelineSchedule::Interleaved,
     "1F1B over several stages per rank (Megatron-LM)"},
    {"zb-h1", PipelineSchedule::ZeroBubbleH1,
     "1F1B with weight gradients deferred into the cool-down"}};

/// The idle fraction of a pipeline: (p-1)/m for GPipe and 1F1B, (p-1)/(v m)
/// interleaved with v chunks per device, (p-1)/(3m) for ZB-H1: the zero
/// bubble paper's (p-1)(T_F + T_B - T_W) against 1F1B's
/// (p-1)(T_F + T_B + T_W), with the backward's input- and weight-gradient
/// halves each as long as the forward ((p - 1 + p - m)/(3m) with fewer
/// microbatches m than stages p, as test/unit/Analysis/PipelineScheduleTest
/// simulates the schedule the compiler builds).
double getBubbleFraction(PipelineSchedule schedule, int64_t stages,
                         int64_t microbatches, int64_t virtualStages = 1);

enum class Recompute { None, Selective, Full };
inline constexpr EnumName<Recompute> kRecomputeNames[] = {
    {"none", Recompute::None, "keep every activation"},
    {"selective", Recompute::Selective, "recompute attention's activations"},
    {"full", Recompute::Full, "recompute each layer from its input"}};

/// Hardware FLOPs of a training step over its model FLOPs (forward = 1/3 of
/// a step): full recomputation runs the forward twice (4/3); selective
/// recomputes only attention's scores and softmax, `attentionShare` of the
/// forward FLOPs.
double getRecomputeFactor(Recompute recompute, double attentionShare = 0.05);

/// A step whose communication overlaps `overlapFraction` of itself with
/// compute: compute plus the communication left exposed.
double getOverlappedSeconds(double computeSeconds, double commSeconds,
                            double overlapFraction);

} // namespace tessera

// Their options read the names of the tables above.
TESSERA_ENUM_OPTION_PARSER(tessera::PipelineSchedule);
TESSERA_ENUM_OPTION_PARSER(tessera::Recompute);

#endif // TESSERA_ANALYSIS_COSTMODEL_H
