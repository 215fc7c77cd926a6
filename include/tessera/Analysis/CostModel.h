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

/// A GEMM as the cost model prices it: `batch` independent [m, k] x [k, n]
/// products.
struct GemmShape {
  double batch = 1, m = 1, n = 1, k = 1;
  double getFlops() const { return 2 * batch * m * n * k; }
};

/// The fraction of the dtype's dense peak a GEMM of `shape` reaches on
/// `machine`: the largest GEMMs' (Efficiency::gemm), times the share of
/// its padded output tiles that holds output and the share of its last
/// wave of tiles over the compute units that has work (tile and wave
/// quantization: a [4096, 4096] GEMM of 128 x 128 tiles fills 1024 tiles,
/// 9.5 waves of an A100's 108 units, 95% of them); a machine without
/// compute units (a CPU) by size alone, flops / (flops +
/// gemmHalfEfficiencyFlops). Kernel launches are priced on their own.
double getGemmEfficiency(const MachineModel &machine, const GemmShape &shape);

/// The roofline time of a GEMM: its FLOPs at getGemmEfficiency of the
/// dtype's peak, or its `bytes` at memory bandwidth, the longer.
llvm::Expected<double> getGemmSeconds(const MachineModel &machine,
                                      llvm::StringRef dtype,
                                      const GemmShape &shape, double bytes);

/// A memory-bound kernel's time: its bytes at the bandwidth such kernels
/// reach (Efficiency::memory).
double getMemoryBoundSeconds(const MachineModel &machine, double bytes);

/// Fused attention (one kernel over the scores' tiles): its FLOPs at
/// Efficiency::attention of the dtype's peak, or its bytes, the longer.
llvm::Expected<double> getFusedAttentionSeconds(const MachineModel &machine,
                                                llvm::StringRef dtype,
                                                double flops, double bytes);

/// The optimizer's update of `parameters` elements: memory-bound, reading
/// and writing `bytesPerParameter` of weights, gradient and state each
/// (AdamW in mixed precision: the f32 master weight, the bf16 gradient and
/// two moments read, the master and moments written, the bf16 copy
/// written: 28 bytes).
double getOptimizerSeconds(const MachineModel &machine, double parameters,
                           double bytesPerParameter);

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
///
/// Each call also pays Efficiency::collectiveSeconds.
double getCollectiveSeconds(const MachineModel &machine, CollectiveKind kind,
                            double bytes, DeviceGroup group);

/// A point-to-point send of `bytes` between neighbours of `group` (the
/// pipeline's stages, `stride` devices apart): on the links of the
/// innermost level whose blocks hold the whole group (the slowest
/// neighbours set a pipeline's pace), or one torus hop; plus the
/// collective call's fixed cost.
double getPointToPointSeconds(const MachineModel &machine, double bytes,
                              DeviceGroup group);

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

enum class PipelineSchedule {
  GPipe,
  OneFOneB,
  Interleaved,
  ZeroBubbleH1,
  TwoBW,
  PipeDream
};
inline constexpr EnumName<PipelineSchedule> kPipelineScheduleNames[] = {
    {"gpipe", PipelineSchedule::GPipe, "all forwards, then all backwards"},
    {"1f1b", PipelineSchedule::OneFOneB,
     "one forward, one backward (PipeDream-Flush)"},
    {"interleaved", PipelineSchedule::Interleaved,
     "1F1B over several stages per rank (Megatron-LM)"},
    {"zb-h1", PipelineSchedule::ZeroBubbleH1,
     "1F1B with weight gradients deferred into the cool-down"},
    {"2bw", PipelineSchedule::TwoBW,
     "1F1B without a flush: a step's last backwards run in the next step, "
     "with two weight versions (PipeDream-2BW; implies --weight-stash)"},
    {"pipedream", PipelineSchedule::PipeDream,
     "1F1B without a flush over steps of one microbatch, each stage "
     "updating after each backward and stashing a weight version per "
     "step in flight (PipeDream)"}};

/// Whether `schedule` runs without a flush between steps (PipeDream,
/// PipeDream-2BW): a run also finishes steps before its own.
inline bool isSteady(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::TwoBW ||
         schedule == PipelineSchedule::PipeDream;
}

/// The idle fraction of a pipeline: (p-1)/m for GPipe and 1F1B, (p-1)/(v m)
/// interleaved with v chunks per device, (p-1)/(3m) for ZB-H1: the zero
/// bubble paper's (p-1)(T_F + T_B - T_W) against 1F1B's
/// (p-1)(T_F + T_B + T_W), with the backward's input- and weight-gradient
/// halves each as long as the forward ((p - 1 + p - m)/(3m) with fewer
/// microbatches m than stages p, as test/unit/Analysis/PipelineScheduleTest
/// simulates the schedule the compiler builds). PipeDream and 2BW fill the
/// pipeline once per run, not per step: 0.
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

/// What a gradient reduction of `commSeconds` leaves exposed after a
/// backward of `windowSeconds` that makes the gradients in `buckets` equal
/// buckets, each reduced once made and one at a time: the last bucket's
/// reduction at least, and what the reductions take beyond the window,
/// max(C / b, C - W (b - 1) / b). One bucket (or none: reductions not
/// overlapped) is exposed whole.
double getExposedReductionSeconds(double windowSeconds, double commSeconds,
                                  int64_t buckets);

/// Amdahl's law: the speedup of n times the devices on the same work, when
/// a fraction `serial` of it does not parallelize: 1 / (s + (1 - s) / n).
double getAmdahlSpeedup(double serial, double n);

/// Gustafson's law: the scaled speedup of n times the devices on n times
/// the work, when a fraction `serial` of the run is serial: n - s (n - 1).
double getGustafsonSpeedup(double serial, double n);

/// The serial fraction in [0, 1] whose law (Amdahl's, or Gustafson's) fits
/// the (n, speedup) `points` best, in least squares.
double fitSerialFraction(llvm::ArrayRef<std::pair<double, double>> points,
                         bool gustafson);

} // namespace tessera

// Their options read the names of the tables above.
TESSERA_ENUM_OPTION_PARSER(tessera::PipelineSchedule);
TESSERA_ENUM_OPTION_PARSER(tessera::Recompute);

#endif // TESSERA_ANALYSIS_COSTMODEL_H
