//===- KernelSupport.h - What the CPU's kernel families share ---*- C++ -*-===//
//
// The CPU kernels, one per op of the table (Ops.def), declared for the
// registry (Kernels.cpp), and the helpers that more than one kernel family
// uses: row loops over the kernel threads, lane sums, index reads and the
// places of pieces and random draws.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_KERNELSUPPORT_H
#define TESSERA_RUNTIME_CPU_KERNELSUPPORT_H

#include "../ops/Checks.h"
#include "ArrayMath.h"
#include "StridedCopy.h"
#include "ThreadPool.h"

#include "tessera/runtime/Random.h"
#include "tessera/runtime/Threads.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace tessera::runtime::cpu {

using detail::concat;
using detail::CountText;
using detail::KernelCall;
using detail::ListText;

/// The kernels of the table's ops: an elementwise math op runs runArrayMath
/// (its math from ArrayMath.h), any other op run<Id>.
void runArrayMath(KernelCall &c);
#define TESSERA_OP(Id, Name) void run##Id(KernelCall &c);
#define TESSERA_MAP_OP(Id, Name, Arity)
#include "tessera/runtime/Ops.def"

/// The fewest elements a kernel gives a thread: below that, waking one
/// costs more than it saves.
constexpr int64_t kElementsPerThread = 1 << 15;

/// Calls fn(row) for each row of `features` elements of `tensor`, the rows
/// split over the kernel threads.
template <typename Fn>
void forEachRow(const Tensor &tensor, int64_t features, Fn fn) {
  parallelFor(tensor.getNumElements() / features,
              std::max<int64_t>(kElementsPerThread / features, 1),
              [&](int64_t begin, int64_t end) {
                for (int64_t row = begin; row < end; ++row)
                  fn(row);
              });
}

/// The sum of f(j) for j < n in double, as eight interleaved partial sums
/// added in a fixed order: they vectorise, and a row's sum does not depend
/// on where the row lies.
template <typename F> TESSERA_CLONES double sumInLanes(int64_t n, F f) {
  constexpr int64_t kLanes = 8;
  double partial[kLanes] = {};
  int64_t whole = n - n % kLanes;
  for (int64_t j = 0; j < whole; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k)
      partial[k] += f(j + k);
  for (int64_t j = whole; j < n; ++j)
    partial[j - whole] += f(j);
  return ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
         ((partial[2] + partial[6]) + (partial[3] + partial[7]));
}

/// Element `i` of an i32 or i64 index tensor.
inline int64_t readIndex(const Tensor &tensor, int64_t i) {
  return tensor.dtype == DType::I32 ? tensor.as<int32_t>()[i]
                                    : tensor.as<int64_t>()[i];
}

/// The first position of a piece of `size` along a split dim: the piece
/// index in input `input` (nn.OffsetOpInterface's, which checkPieceIndex
/// accepted), if the kernel has it, times the size; 0 for a whole dim.
int64_t readPieceOffset(KernelCall &c, int64_t input, int64_t size);

/// The key and place of a random op's draw of `shape` (nn.random_uniform,
/// nn.dropout, nn.attention's dropout), which checkRandomDraw accepted: the
/// seed, the step at input `stepInput`, then the piece index if the op is
/// on a piece, whose `global_shape` places it. Fails the call (a data
/// error) when the piece lies outside the global shape.
bool getRandomDraw(KernelCall &c, size_t stepInput,
                   const std::vector<int64_t> &shape, uint64_t &seed,
                   uint64_t &step, random::PiecePlace &place);

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_KERNELSUPPORT_H
