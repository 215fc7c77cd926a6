//===- MemoryPlan.h - Static arena layout of buffer lifetimes ----*- C++
//-*-===//

#ifndef TESSERA_ANALYSIS_MEMORYPLAN_H
#define TESSERA_ANALYSIS_MEMORYPLAN_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>

namespace tessera {

/// What a buffer holds, for the memory breakdown of a plan.
enum class MemoryCategory {
  /// Parameters as stored (a shard under ZeRO-3) and their updated values.
  Parameter,
  /// Gradients of parameters, partial sums included, until the update.
  Gradient,
  /// Optimizer state: moments and the step counter.
  OptimizerState,
  /// Inputs and everything the model computes from them.
  Activation,
  /// Results of collectives that are none of the above: gathered
  /// parameters (ZeRO-3), resharded activations.
  Communication,
};
constexpr int64_t kNumMemoryCategories = 5;

llvm::StringRef getMemoryCategoryName(MemoryCategory category);

/// Bytes per category.
struct MemoryBreakdown {
  std::array<int64_t, kNumMemoryCategories> bytes = {};

  int64_t &operator[](MemoryCategory category) {
    return bytes[static_cast<int>(category)];
  }
  int64_t operator[](MemoryCategory category) const {
    return bytes[static_cast<int>(category)];
  }
  int64_t getTotal() const;
};

/// A buffer that lives from the step that defines it to the step of its last
/// use, both inclusive.
struct BufferLifetime {
  int64_t bytes;
  int64_t firstStep;
  int64_t lastStep;
  MemoryCategory category = MemoryCategory::Activation;
};

struct MemoryPlan {
  /// Offset of each buffer in the arena, in input order.
  llvm::SmallVector<int64_t> offsetsBytes;
  /// The arena size: the peak of simultaneously live bytes as laid out.
  int64_t arenaBytes = 0;
  /// The largest sum of sizes of buffers live at one step: a lower bound on
  /// any layout's arena.
  int64_t liveBytesBound = 0;
  /// The live bytes of the first step where they peak, by category (they
  /// sum to liveBytesBound).
  MemoryBreakdown peakBreakdown;
  /// The step of that peak.
  int64_t peakStep = 0;
  /// Each category's own peak of live bytes over the steps.
  MemoryBreakdown categoryPeaks;
};

/// Lays buffers out in one arena: each takes the lowest `alignment`-aligned
/// offset that no buffer live at the same time occupies, placed in order of
/// definition (first fit) or largest first (greedy by size), whichever
/// arena is smaller. Buffers whose lifetimes do not overlap share memory.
MemoryPlan planMemory(llvm::ArrayRef<BufferLifetime> buffers,
                      int64_t alignment = 64);

/// Bytes per parameter of each part of the model state: 2, 2 and 12 for
/// mixed-precision Adam (bf16 weights and gradients; f32 master weights, m
/// and v).
struct ModelStateBytesPerParameter {
  double parameter;
  double gradient;
  double optimizerState;
  /// The ZeRO stage from which the parameters are split: 3, or 1 where they
  /// are 16-bit casts of f32 master weights, which stage 1 splits with the
  /// optimizer state (stages 1 and 2 then gather the casts whole once per
  /// step, into communication buffers).
  int64_t parameterSplitStage = 3;
};

/// The model state one device holds, in bytes.
struct ModelStateMemory {
  double parameterBytes = 0;
  double gradientBytes = 0;
  double optimizerStateBytes = 0;

  double getTotal() const {
    return parameterBytes + gradientBytes + optimizerStateBytes;
  }
};

/// The model state of `parameters` parameters on one device under ZeRO
/// `stage` over `dataParallel` devices: stage 1 splits the optimizer state,
/// 2 also the gradients, 3 also the parameters (Rajbhandari et al., 2020:
/// (2 + 2 + K) P falls to 2P + 2P + KP/N, 2P + (2 + K)P/N, (2 + 2 + K)P/N).
/// The plans Tessera compiles split the same parts (--tessera-zero); their
/// exported memory breakdown is the measured counterpart.
ModelStateMemory getZeroModelState(double parameters,
                                   const ModelStateBytesPerParameter &bytes,
                                   int64_t stage, int64_t dataParallel);

} // namespace tessera

#endif // TESSERA_ANALYSIS_MEMORYPLAN_H
