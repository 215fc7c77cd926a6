//===- CostModel.cpp - Time of compute and communication on a machine -----===//

#include "tessera/Analysis/CostModel.h"

#include <algorithm>
#include <cmath>

using namespace tessera;

double tessera::getGemmEfficiency(double flops, double halfEfficiencyFlops) {
  if (flops <= 0)
    return 1.0;
  return flops / (flops + halfEfficiencyFlops);
}

llvm::Expected<double> tessera::getComputeSeconds(const MachineModel &machine,
                                                  llvm::StringRef dtype,
                                                  double flops, double bytes) {
  llvm::Expected<double> peak = machine.getPeakFlops(dtype);
  if (!peak)
    return peak.takeError();
  // Launch and tiling overheads are a contraction's (more FLOPs than bytes
  // moved); an elementwise op or a reduction streams its bytes.
  double efficiency =
      flops > bytes ? getGemmEfficiency(flops, machine.gemmHalfEfficiencyFlops)
                    : 1.0;
  double computeSeconds = flops > 0 ? flops / (*peak * efficiency) : 0.0;
  double memorySeconds = bytes / machine.memoryBandwidthBytesPerSecond;
  return std::max(computeSeconds, memorySeconds);
}

double tessera::getGemmEfficiency(const MachineModel &machine,
                                  const GemmShape &shape) {
  const Efficiency &efficiency = machine.efficiency;
  if (efficiency.computeUnits <= 0)
    return efficiency.gemm *
           getGemmEfficiency(shape.getFlops(), machine.gemmHalfEfficiencyFlops);
  double rows = std::ceil(shape.m / efficiency.tileM);
  double columns = std::ceil(shape.n / efficiency.tileN);
  double padded = rows * efficiency.tileM * columns * efficiency.tileN;
  double tiles = rows * columns * std::ceil(shape.batch);
  double waves = std::ceil(tiles / efficiency.computeUnits);
  return efficiency.gemm * shape.m * shape.n / padded *
         (tiles / (waves * efficiency.computeUnits));
}

llvm::Expected<double> tessera::getGemmSeconds(const MachineModel &machine,
                                               llvm::StringRef dtype,
                                               const GemmShape &shape,
                                               double bytes) {
  llvm::Expected<double> peak = machine.getPeakFlops(dtype);
  if (!peak)
    return peak.takeError();
  double flops = shape.getFlops();
  if (flops <= 0)
    return getMemoryBoundSeconds(machine, bytes);
  return std::max(flops / (*peak * getGemmEfficiency(machine, shape)),
                  getMemoryBoundSeconds(machine, bytes));
}

double tessera::getMemoryBoundSeconds(const MachineModel &machine,
                                      double bytes) {
  return bytes /
         (machine.memoryBandwidthBytesPerSecond * machine.efficiency.memory);
}

llvm::Expected<double>
tessera::getFusedAttentionSeconds(const MachineModel &machine,
                                  llvm::StringRef dtype, double flops,
                                  double bytes) {
  llvm::Expected<double> peak = machine.getPeakFlops(dtype);
  if (!peak)
    return peak.takeError();
  return std::max(flops / (*peak * machine.efficiency.attention),
                  getMemoryBoundSeconds(machine, bytes));
}

double tessera::getOptimizerSeconds(const MachineModel &machine,
                                    double parameters,
                                    double bytesPerParameter) {
  return getMemoryBoundSeconds(machine, parameters * bytesPerParameter);
}

double tessera::getRingSeconds(CollectiveKind kind, int64_t devices,
                               double bytes, double bandwidthBytesPerSecond,
                               double latencySeconds) {
  if (devices <= 1)
    return 0.0;
  double n = devices;
  double steps = n - 1;
  double share = (n - 1) / n;
  if (kind == CollectiveKind::AllReduce) {
    steps *= 2;
    share *= 2;
  }
  return steps * latencySeconds + share * bytes / bandwidthBytesPerSecond;
}

double tessera::getTreeAllReduceSeconds(int64_t devices, double bytes,
                                        double bandwidthBytesPerSecond,
                                        double latencySeconds) {
  if (devices <= 1)
    return 0.0;
  // Up and down a binary tree; pipelining makes the payload cross each link
  // about twice.
  double depth = std::ceil(std::log2(static_cast<double>(devices)));
  return 2 * depth * latencySeconds + 2 * bytes / bandwidthBytesPerSecond;
}

/// One collective on one link class, all-reduce taking the better of ring
/// and tree.
static double onLinks(CollectiveKind kind, int64_t devices, double bytes,
                      double bandwidth, double latency) {
  double ring = getRingSeconds(kind, devices, bytes, bandwidth, latency);
  if (kind != CollectiveKind::AllReduce)
    return ring;
  return std::min(ring,
                  getTreeAllReduceSeconds(devices, bytes, bandwidth, latency));
}

static double onSwitchedLevels(const MachineModel &machine, CollectiveKind kind,
                               double bytes, DeviceGroup group) {
  // The group spans size * stride consecutive device ids; blocks of each
  // level are aligned because devices are numbered row-major.
  const InterconnectLevel &innerLevel = machine.levels.front();
  int64_t span = group.size * group.stride;
  const InterconnectLevel *outerLevel = &machine.levels.back();
  for (const InterconnectLevel &level : machine.levels)
    if (span <= level.devices) {
      outerLevel = &level;
      break;
    }
  // Inside one innermost block, or one member per innermost block: the
  // whole group talks over one link class.
  if (outerLevel == &innerLevel || group.stride >= innerLevel.devices)
    return onLinks(kind, group.size, bytes, outerLevel->bandwidthBytesPerSecond,
                   outerLevel->latencySeconds);
  // Hierarchical: `inner` members share an innermost block, across `outer`
  // blocks.
  int64_t inner = std::max<int64_t>(
      1, std::min(group.size, innerLevel.devices / group.stride));
  int64_t outer = group.size / inner;
  double innerBw = innerLevel.bandwidthBytesPerSecond;
  double outerBw = outerLevel->bandwidthBytesPerSecond;
  double innerLat = innerLevel.latencySeconds;
  double outerLat = outerLevel->latencySeconds;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return getRingSeconds(CollectiveKind::ReduceScatter, inner, bytes, innerBw,
                          innerLat) +
           onLinks(CollectiveKind::AllReduce, outer, bytes / inner, outerBw,
                   outerLat) +
           getRingSeconds(CollectiveKind::AllGather, inner, bytes, innerBw,
                          innerLat);
  case CollectiveKind::ReduceScatter:
    return getRingSeconds(kind, inner, bytes, innerBw, innerLat) +
           getRingSeconds(kind, outer, bytes / inner, outerBw, outerLat);
  case CollectiveKind::AllGather:
    return getRingSeconds(kind, outer, bytes / inner, outerBw, outerLat) +
           getRingSeconds(kind, inner, bytes, innerBw, innerLat);
  case CollectiveKind::AllToAll:
    // Most of an all-to-all's traffic leaves the block.
    return getRingSeconds(kind, group.size, bytes, outerBw, outerLat);
  }
  return 0.0;
}

/// An all-to-all of `bytes` per device around a ring of bidirectional links
/// (`bandwidth` a device's two directions together). It is bound by the
/// ring's bisection: across any cut, each half sends the other a quarter
/// of the group's bytes, size · bytes / 4 each way over the two cut links,
/// against the (size - 1)/size of a buffer per device that an all-gather
/// moves and a switch's full bisection carries (equal at size 2; at 8 over
/// twice as long).
static double allToAllOnRing(int64_t size, double bytes, double bandwidth,
                             double latency) {
  if (size <= 1)
    return 0.0;
  return (size - 1) * latency + size / 4.0 * bytes / bandwidth;
}

static double onTorus(const Torus &torus, CollectiveKind kind, double bytes,
                      DeviceGroup group) {
  // Does the group run along a sequence of whole torus dimensions?
  llvm::SmallVector<int64_t> dims;
  int64_t stride = 1;
  for (int64_t d = torus.dims.size() - 1; d >= 0 && stride <= group.stride;
       --d) {
    if (stride == group.stride) {
      int64_t product = 1;
      for (int64_t e = d; e >= 0 && product < group.size; --e) {
        product *= torus.dims[e];
        dims.push_back(torus.dims[e]);
      }
      if (product != group.size)
        dims.clear();
      break;
    }
    stride *= torus.dims[d];
  }
  // Bidirectional rings: a device sends on two links at once.
  double bandwidth = 2 * torus.linkBandwidthBytesPerSecond;
  if (dims.empty())
    return kind == CollectiveKind::AllToAll
               ? allToAllOnRing(group.size, bytes, bandwidth,
                                torus.hopLatencySeconds * group.stride)
               : onLinks(kind, group.size, bytes, bandwidth,
                         torus.hopLatencySeconds * group.stride);
  double seconds = 0, share = bytes;
  for (int64_t size : dims) {
    // An all-to-all routes dimension by dimension, the whole buffer in each.
    if (kind == CollectiveKind::AllToAll) {
      seconds +=
          allToAllOnRing(size, bytes, bandwidth, torus.hopLatencySeconds);
      continue;
    }
    seconds += onLinks(kind, size, share, bandwidth, torus.hopLatencySeconds);
    // After a dimension's reduce-scatter (or before its gather) the next
    // dimension works on that dimension's share.
    share /= size;
  }
  return seconds;
}

double tessera::getCollectiveSeconds(const MachineModel &machine,
                                     CollectiveKind kind, double bytes,
                                     DeviceGroup group) {
  if (group.size <= 1)
    return 0.0;
  double call = machine.efficiency.collectiveSeconds;
  if (machine.torus)
    return call + onTorus(*machine.torus, kind, bytes, group);
  return call + onSwitchedLevels(machine, kind, bytes, group);
}

double tessera::getPointToPointSeconds(const MachineModel &machine,
                                       double bytes, DeviceGroup group) {
  if (group.size <= 1)
    return 0.0;
  double call = machine.efficiency.collectiveSeconds;
  if (machine.torus)
    return call + machine.torus->hopLatencySeconds +
           bytes / machine.torus->linkBandwidthBytesPerSecond;
  const InterconnectLevel *level = &machine.levels.back();
  for (const InterconnectLevel &inner : machine.levels)
    if (group.size * group.stride <= inner.devices) {
      level = &inner;
      break;
    }
  return call + level->latencySeconds + bytes / level->bandwidthBytesPerSecond;
}

double tessera::getBubbleFraction(PipelineSchedule schedule, int64_t stages,
                                  int64_t microbatches, int64_t virtualStages) {
  double idle = static_cast<double>(stages - 1) / microbatches;
  if (schedule == PipelineSchedule::Interleaved)
    idle /= std::max<int64_t>(virtualStages, 1);
  // ZB-H1 with F = B = W: each rank idles only the p - 1 units before its
  // first B, a third of 1F1B's wait; with fewer microbatches than stages the
  // last rank's first B comes p - m units later still.
  if (schedule == PipelineSchedule::ZeroBubbleH1)
    idle = (stages - 1.0 + std::max<int64_t>(stages - microbatches, 0)) /
           (3.0 * microbatches);
  // Without a flush, only a run's first step fills the pipeline.
  if (isSteady(schedule))
    idle = 0;
  return idle;
}

double tessera::getRecomputeFactor(Recompute recompute, double attentionShare) {
  // A step is forward (1/3) plus backward (2/3) of the model FLOPs.
  switch (recompute) {
  case Recompute::None:
    return 1.0;
  case Recompute::Selective:
    return 1.0 + attentionShare / 3.0;
  case Recompute::Full:
    return 4.0 / 3.0;
  }
  return 1.0;
}

double tessera::getExposedReductionSeconds(double windowSeconds,
                                           double commSeconds,
                                           int64_t buckets) {
  if (buckets <= 1)
    return commSeconds;
  double b = buckets;
  // Bucket i is made at W i / b and reduced after bucket i - 1: the last
  // ends at max over i of (W i / b + (b - i + 1) C / b), at i = 1 or b.
  return std::max(commSeconds / b, commSeconds - windowSeconds * (b - 1) / b);
}

double tessera::getAmdahlSpeedup(double serial, double n) {
  return 1 / (serial + (1 - serial) / n);
}

double tessera::getGustafsonSpeedup(double serial, double n) {
  return n - serial * (n - 1);
}

double
tessera::fitSerialFraction(llvm::ArrayRef<std::pair<double, double>> points,
                           bool gustafson) {
  auto error = [&](double serial) {
    double sum = 0;
    for (auto [n, speedup] : points) {
      double law = gustafson ? getGustafsonSpeedup(serial, n)
                             : getAmdahlSpeedup(serial, n);
      sum += (law - speedup) * (law - speedup);
    }
    return sum;
  };
  // A grid, then a finer one around its best point, three times.
  double best = 0, low = 0, high = 1;
  for (int round = 0; round < 3; ++round) {
    double width = (high - low) / 1000;
    for (int i = 0; i <= 1000; ++i)
      if (error(low + i * width) < error(best))
        best = low + i * width;
    low = std::max(0.0, best - width);
    high = std::min(1.0, best + width);
  }
  return best;
}

ReshardCost
tessera::getReshardCost(const MachineModel *machine, const MeshShape &mesh,
                        llvm::ArrayRef<int64_t> shape, double elementBytes,
                        const TensorSharding &from, const TensorSharding &to) {
  llvm::SmallVector<AxisList> dims = from.getDimAxes();
  auto localBytes = [&] {
    double bytes = elementBytes;
    for (auto [size, axes] : llvm::zip(shape, dims))
      bytes *= static_cast<double>(size) / mesh.getGroupSize(axes);
    return bytes;
  };
  ReshardCost cost;
  auto add = [&](CollectiveKind kind, llvm::ArrayRef<mlir::StringAttr> axes,
                 double bytes) {
    DeviceGroup group = mesh.getDeviceGroup(axes);
    if (machine)
      cost.seconds += getCollectiveSeconds(*machine, kind, bytes, group);
    cost.bytes += bytes;
    double share = static_cast<double>(group.size - 1) / group.size;
    cost.sentBytes +=
        (kind == CollectiveKind::AllReduce ? 2 * share : share) * bytes;
  };
  using Kind = ReshardStep::Kind;
  for (const ReshardStep &step : planReshard(from, to)) {
    switch (step.kind) {
    case Kind::AllReduce:
      add(CollectiveKind::AllReduce, step.axes, localBytes());
      break;
    case Kind::ReduceScatter:
      add(CollectiveKind::ReduceScatter, step.axes, localBytes());
      llvm::append_range(dims[step.dim], step.axes);
      break;
    case Kind::AllToAll:
      add(CollectiveKind::AllToAll, step.axes, localBytes());
      dims[step.concatDim].resize(dims[step.concatDim].size() -
                                  step.axes.size());
      llvm::append_range(dims[step.dim], step.axes);
      break;
    case Kind::AllGather:
      dims[step.dim].resize(dims[step.dim].size() - step.axes.size());
      add(CollectiveKind::AllGather, step.axes, localBytes());
      break;
    case Kind::AllSlice:
      llvm::append_range(dims[step.dim], step.axes);
      break;
    }
  }
  return cost;
}
