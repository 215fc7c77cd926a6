//===- MemoryPlan.cpp - Static arena layout of buffer lifetimes -----------===//

#include "tessera/Analysis/MemoryPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>

using namespace tessera;

MemoryPlan tessera::planMemory(llvm::ArrayRef<BufferLifetime> buffers,
                               int64_t alignment) {
  MemoryPlan plan;
  plan.offsetsBytes.assign(buffers.size(), 0);
  llvm::SmallVector<int64_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](int64_t a, int64_t b) {
    return buffers[a].firstStep < buffers[b].firstStep;
  });

  // The placed buffers still live, sorted by offset.
  llvm::SmallVector<int64_t> live;
  for (int64_t id : order) {
    const BufferLifetime &buffer = buffers[id];
    llvm::erase_if(live, [&](int64_t other) {
      return buffers[other].lastStep < buffer.firstStep;
    });
    int64_t offset = 0;
    for (int64_t other : live) {
      int64_t start = plan.offsetsBytes[other];
      if (offset + buffer.bytes <= start)
        break;
      int64_t end = start + buffers[other].bytes;
      offset = std::max(offset, (end + alignment - 1) / alignment * alignment);
    }
    plan.offsetsBytes[id] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + buffer.bytes);
    live.insert(llvm::upper_bound(live, offset,
                                  [&](int64_t value, int64_t other) {
                                    return value < plan.offsetsBytes[other];
                                  }),
                id);
  }

  // The bound: sweep the steps where lifetimes start and end.
  llvm::SmallVector<std::pair<int64_t, int64_t>> events;
  for (const BufferLifetime &buffer : buffers) {
    events.push_back({buffer.firstStep, buffer.bytes});
    events.push_back({buffer.lastStep + 1, -buffer.bytes});
  }
  llvm::sort(events, [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  int64_t current = 0;
  for (const auto &[step, delta] : events) {
    current += delta;
    plan.liveBytesBound = std::max(plan.liveBytesBound, current);
  }
  return plan;
}
