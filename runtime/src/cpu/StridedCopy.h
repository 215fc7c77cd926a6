//===- StridedCopy.h - The CPU kernels' strided copies ----------*- C++ -*-===//
//
// Views of row-major buffers: a shape with strides (0 repeats, permuted
// strides transpose) and a base offset, walked or copied out in row-major
// order.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_STRIDEDCOPY_H
#define TESSERA_RUNTIME_CPU_STRIDEDCOPY_H

#include "tessera/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::runtime::cpu {

/// Row-major strides, in elements.
inline std::vector<int64_t> getStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t dim = static_cast<int64_t>(shape.size()) - 2; dim >= 0; --dim)
    strides[dim] = strides[dim + 1] * shape[dim + 1];
  return strides;
}

/// Visits the indices of `shape` in row-major order, keeping the offset of
/// the current one in a buffer where dim d advances by `strides[d]`. A zero
/// stride repeats data (broadcast), permuted strides read a transposed buffer
/// and a base offset starts a slice, so one loop serves every view that the
/// shape ops, the reductions and the dot's operand layout need.
class StridedWalk {
public:
  StridedWalk(const std::vector<int64_t> &shape, std::vector<int64_t> strides,
              int64_t base = 0)
      : shape(shape), strides(std::move(strides)), index(shape.size(), 0),
        offset(base) {}

  int64_t getOffset() const { return offset; }

  /// Moves to the index `linear` places after the first in row-major order.
  void seek(int64_t linear) {
    for (int64_t dim = static_cast<int64_t>(shape.size()) - 1; dim >= 0;
         --dim) {
      offset += (linear % shape[dim] - index[dim]) * strides[dim];
      index[dim] = linear % shape[dim];
      linear /= shape[dim];
    }
  }

  void next() {
    for (int64_t dim = static_cast<int64_t>(shape.size()) - 1; dim >= 0;
         --dim) {
      offset += strides[dim];
      if (++index[dim] < shape[dim])
        return;
      offset -= strides[dim] * shape[dim];
      index[dim] = 0;
    }
  }

private:
  const std::vector<int64_t> &shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> index;
  int64_t offset;
};

/// Writes the view of `src` with `shape`, `strides` and `base` (in elements)
/// to `dst` in row-major order.
void gatherElements(const void *src, size_t elementBytes,
                    const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &strides, int64_t base,
                    void *dst);

/// Copies `src` permuted into `dst`: result dim i is source dim `perm[i]`.
void permuteElements(const Tensor &src, const std::vector<int64_t> &perm,
                     void *dst);

/// Copies whole buffers; an output that aliases its input needs no copy.
void copyBytes(void *dst, const void *src, size_t bytes);

/// A shape seen around one dim: element (o, j, i) of the [outer, size, inner]
/// split lies at `(o * size + j) * inner + i`.
struct DimSplit {
  int64_t outer, size, inner;
};

inline DimSplit splitAround(const std::vector<int64_t> &shape, int64_t dim) {
  return {
      getNumElements(std::vector<int64_t>(shape.begin(), shape.begin() + dim)),
      shape[dim],
      getNumElements(
          std::vector<int64_t>(shape.begin() + dim + 1, shape.end()))};
}

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_STRIDEDCOPY_H
