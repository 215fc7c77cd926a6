//===- FactorPropagation.cpp - Settling the axes of a factor --------------===//

#include "tessera/Analysis/FactorPropagation.h"

#include "tessera/Analysis/CostModel.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"

#include <limits>

using namespace mlir;
using namespace tessera;

FactorPropagation::~FactorPropagation() = default;

FactorResolution
FactorPropagation::resolve(ArrayRef<FactorCandidate> candidates) const {
  if (candidates.empty())
    return {};
  // Compatible candidates are prefixes of the longest one; the first longest
  // wins so that the origin reported is the earliest tensor.
  const FactorCandidate *longest = llvm::max_element(
      candidates, [](const FactorCandidate &a, const FactorCandidate &b) {
        return a.axes.size() < b.axes.size();
      });
  if (llvm::all_of(candidates, [&](const FactorCandidate &candidate) {
        return isAxesPrefix(candidate.axes, longest->axes);
      }))
    return {longest->axes, longest->tensor, /*isConflict=*/false};
  FactorResolution resolution = resolveConflict(candidates);
  resolution.isConflict = true;
  return resolution;
}

std::string ConservativeFactorPropagation::getReason() const {
  return "conservative: common prefix";
}

FactorResolution ConservativeFactorPropagation::resolveConflict(
    ArrayRef<FactorCandidate> candidates) const {
  FactorResolution resolution;
  resolution.axes = candidates.front().axes;
  for (const FactorCandidate &candidate : candidates.drop_front()) {
    size_t n = 0;
    while (n < resolution.axes.size() && n < candidate.axes.size() &&
           resolution.axes[n] == candidate.axes[n])
      ++n;
    resolution.axes.resize(n);
  }
  // Every candidate starts with the prefix; the first one is named for it.
  resolution.winner = resolution.axes.empty() ? -1 : candidates.front().tensor;
  return resolution;
}

std::string AggressiveFactorPropagation::getReason() const {
  return "fewest bytes to reshard";
}

double AggressiveFactorPropagation::getReshardCost(
    const FactorCandidate &loser, ArrayRef<StringAttr> /*kept*/) const {
  return static_cast<double>(loser.bytes);
}

FactorResolution AggressiveFactorPropagation::resolveConflict(
    ArrayRef<FactorCandidate> candidates) const {
  FactorResolution resolution;
  double bestCost = std::numeric_limits<double>::infinity();
  for (const FactorCandidate &candidate : candidates) {
    // Only the tensors incompatible with the candidate are resharded: the
    // others just gain or keep a prefix of it.
    double cost = 0;
    for (const FactorCandidate &other : candidates) {
      if (isAxesPrefix(other.axes, candidate.axes) ||
          isAxesPrefix(candidate.axes, other.axes))
        continue;
      cost += getReshardCost(other, candidate.axes);
    }
    if (cost < bestCost ||
        (cost == bestCost && candidate.axes.size() > resolution.axes.size())) {
      bestCost = cost;
      resolution.axes = candidate.axes;
      resolution.winner = candidate.tensor;
    }
  }
  return resolution;
}

std::string MachineFactorPropagation::getReason() const {
  return "fastest to reshard on " + machine.name;
}

double
MachineFactorPropagation::getReshardCost(const FactorCandidate &loser,
                                         ArrayRef<StringAttr> kept) const {
  AxisList gathered;
  for (StringAttr axis : loser.axes)
    if (!llvm::is_contained(kept, axis))
      gathered.push_back(axis);
  return getCollectiveSeconds(machine, CollectiveKind::AllGather,
                              static_cast<double>(loser.bytes),
                              mesh.getDeviceGroup(gathered));
}

SmallVector<AxisClaimLoss>
tessera::resolveAxisClaims(FactorAxes &chosen, ArrayRef<FactorAxes> projected,
                           ArrayRef<int64_t> tensorBytes) {
  auto weight = [&](int64_t factor, StringAttr axis) {
    int64_t bytes = 0;
    for (auto [index, view] : llvm::enumerate(projected))
      if (llvm::is_contained(view[factor], axis))
        bytes += tensorBytes[index];
    return bytes;
  };
  SmallVector<AxisClaimLoss> losses;
  // Settle one shared axis at a time, then look again: truncating a loser
  // can release axes that other factors shared with it.
  for (bool changed = true; changed;) {
    changed = false;
    llvm::MapVector<StringAttr, SmallVector<int64_t>> claims;
    for (auto [factor, axes] : llvm::enumerate(chosen))
      for (StringAttr axis : axes)
        claims[axis].push_back(factor);
    for (auto &[axis, factors] : claims) {
      if (factors.size() < 2)
        continue;
      int64_t keeper = factors.front();
      for (int64_t factor : factors)
        if (weight(factor, axis) > weight(keeper, axis))
          keeper = factor;
      for (int64_t factor : factors) {
        if (factor == keeper)
          continue;
        AxisList &axes = chosen[factor];
        axes.erase(llvm::find(axes, axis), axes.end());
        losses.push_back({axis, keeper, factor});
      }
      changed = true;
      break;
    }
  }
  return losses;
}
