//===- MemoryPlan.cpp - Static arena layout of buffer lifetimes -----------===//

#include "tessera/Analysis/MemoryPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>

using namespace tessera;

/// The lowest aligned offset at which `bytes` fit between `placed` (sorted
/// by offset).
static int64_t findGap(llvm::ArrayRef<int64_t> placed,
                       llvm::ArrayRef<int64_t> offsets,
                       llvm::ArrayRef<BufferLifetime> buffers, int64_t bytes,
                       int64_t alignment) {
  int64_t offset = 0;
  for (int64_t other : placed) {
    int64_t start = offsets[other];
    if (offset + bytes <= start)
      break;
    int64_t end = start + buffers[other].bytes;
    offset = std::max(offset, (end + alignment - 1) / alignment * alignment);
  }
  return offset;
}

/// First fit in the order buffers are made, as an allocator would: returns
/// the arena's size.
static int64_t placeInOrder(llvm::ArrayRef<BufferLifetime> buffers,
                            int64_t alignment,
                            llvm::MutableArrayRef<int64_t> offsets) {
  llvm::SmallVector<int64_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](int64_t a, int64_t b) {
    return buffers[a].firstStep < buffers[b].firstStep;
  });
  int64_t arenaBytes = 0;
  // The placed buffers still live, sorted by offset.
  llvm::SmallVector<int64_t> live;
  for (int64_t id : order) {
    const BufferLifetime &buffer = buffers[id];
    llvm::erase_if(live, [&](int64_t other) {
      return buffers[other].lastStep < buffer.firstStep;
    });
    offsets[id] = findGap(live, offsets, buffers, buffer.bytes, alignment);
    arenaBytes = std::max(arenaBytes, offsets[id] + buffer.bytes);
    live.insert(llvm::upper_bound(live, offsets[id],
                                  [&](int64_t value, int64_t other) {
                                    return value < offsets[other];
                                  }),
                id);
  }
  return arenaBytes;
}

/// Greedy by size (TensorFlow Lite's arena planner; Pisarchyk and Lee,
/// "Efficient Memory Management for Deep Neural Net Inference", 2020): the
/// largest buffers first, each at the lowest offset free over its whole
/// lifetime, so that small buffers fill the gaps between large ones.
static int64_t placeBySize(llvm::ArrayRef<BufferLifetime> buffers,
                           int64_t alignment,
                           llvm::MutableArrayRef<int64_t> offsets) {
  llvm::SmallVector<int64_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](int64_t a, int64_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  int64_t arenaBytes = 0;
  llvm::SmallVector<int64_t> placed, overlapping;
  for (int64_t id : order) {
    const BufferLifetime &buffer = buffers[id];
    overlapping.clear();
    for (int64_t other : placed)
      if (buffers[other].lastStep >= buffer.firstStep &&
          buffer.lastStep >= buffers[other].firstStep)
        overlapping.push_back(other);
    llvm::sort(overlapping,
               [&](int64_t a, int64_t b) { return offsets[a] < offsets[b]; });
    offsets[id] =
        findGap(overlapping, offsets, buffers, buffer.bytes, alignment);
    arenaBytes = std::max(arenaBytes, offsets[id] + buffer.bytes);
    placed.push_back(id);
  }
  return arenaBytes;
}

MemoryPlan tessera::planMemory(llvm::ArrayRef<BufferLifetime> buffers,
                               int64_t alignment) {
  // Both layouts, and the smaller arena of the two: neither packs every
  // program best.
  MemoryPlan plan;
  plan.offsetsBytes.assign(buffers.size(), 0);
  llvm::SmallVector<int64_t> bySize(buffers.size(), 0);
  plan.arenaBytes = placeInOrder(buffers, alignment, plan.offsetsBytes);
  if (int64_t arenaBytes = placeBySize(buffers, alignment, bySize);
      arenaBytes < plan.arenaBytes) {
    plan.arenaBytes = arenaBytes;
    plan.offsetsBytes = std::move(bySize);
  }

  // The bound and the breakdowns: sweep the steps where lifetimes start and
  // end, frees before allocations at one step.
  struct Event {
    int64_t step, delta;
    MemoryCategory category;
  };
  llvm::SmallVector<Event> events;
  for (const BufferLifetime &buffer : buffers) {
    events.push_back({buffer.firstStep, buffer.bytes, buffer.category});
    events.push_back({buffer.lastStep + 1, -buffer.bytes, buffer.category});
  }
  llvm::sort(events, [](const Event &a, const Event &b) {
    return a.step != b.step ? a.step < b.step : a.delta < b.delta;
  });
  MemoryBreakdown liveBytes;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event &event = events[i];
    liveBytes[event.category] += event.delta;
    plan.categoryPeaks[event.category] =
        std::max(plan.categoryPeaks[event.category], liveBytes[event.category]);
    // A step's total counts once all its events are in.
    if (i + 1 < events.size() && events[i + 1].step == event.step)
      continue;
    if (liveBytes.getTotal() > plan.liveBytesBound) {
      plan.liveBytesBound = liveBytes.getTotal();
      plan.peakBreakdown = liveBytes;
      plan.peakStep = event.step;
    }
  }
  return plan;
}

llvm::StringRef tessera::getMemoryCategoryName(MemoryCategory category) {
  switch (category) {
  case MemoryCategory::Parameter:
    return "parameters";
  case MemoryCategory::Gradient:
    return "gradients";
  case MemoryCategory::OptimizerState:
    return "optimizer state";
  case MemoryCategory::Activation:
    return "activations";
  case MemoryCategory::Communication:
    return "communication";
  }
  return "unknown";
}

int64_t MemoryBreakdown::getTotal() const {
  int64_t total = 0;
  for (int64_t value : bytes)
    total += value;
  return total;
}

ModelStateMemory
tessera::getZeroModelState(double parameters,
                           const ModelStateBytesPerParameter &bytes,
                           int64_t stage, int64_t dataParallel) {
  double split = static_cast<double>(dataParallel);
  ModelStateMemory memory;
  memory.parameterBytes = parameters * bytes.parameter /
                          (stage >= bytes.parameterSplitStage ? split : 1);
  memory.gradientBytes = parameters * bytes.gradient / (stage >= 2 ? split : 1);
  memory.optimizerStateBytes =
      parameters * bytes.optimizerState / (stage >= 1 ? split : 1);
  return memory;
}
