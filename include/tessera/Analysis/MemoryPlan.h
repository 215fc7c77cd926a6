//===- MemoryPlan.h - Static arena layout of buffer lifetimes ----*- C++ -*-===//

#ifndef TESSERA_ANALYSIS_MEMORYPLAN_H
#define TESSERA_ANALYSIS_MEMORYPLAN_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace tessera {

/// A buffer that lives from the step that defines it to the step of its last
/// use, both inclusive.
struct BufferLifetime {
  int64_t bytes;
  int64_t firstStep;
  int64_t lastStep;
};

struct MemoryPlan {
  /// Offset of each buffer in the arena, in input order.
  llvm::SmallVector<int64_t> offsetsBytes;
  /// The arena size: the peak of simultaneously live bytes as laid out.
  int64_t arenaBytes = 0;
  /// The largest sum of sizes of buffers live at one step: a lower bound on
  /// any layout's arena.
  int64_t liveBytesBound = 0;
};

/// Lays buffers out in one arena: in order of definition, each takes the
/// lowest `alignment`-aligned offset that no buffer live at the same time
/// occupies (first fit). Buffers whose lifetimes do not overlap share memory.
MemoryPlan planMemory(llvm::ArrayRef<BufferLifetime> buffers,
                      int64_t alignment = 64);

} // namespace tessera

#endif // TESSERA_ANALYSIS_MEMORYPLAN_H
