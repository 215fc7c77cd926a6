//===- ShapeKernels.cpp - The CPU's shape kernels -------------------------===//
//
// Reshape, transpose, slice and concat on any element type.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <cstring>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

void runReshape(KernelCall &c) {
  copyBytes(c.out(0).data, c.in(0).data, c.in(0).getBytes());
}

void runTranspose(KernelCall &c) {
  permuteElements(c.in(0), *c.getList("permutation"), c.out(0).data);
}

void runSlice(KernelCall &c) {
  const Tensor &input = c.in(0);
  const std::vector<int64_t> &start = *c.getList("start");
  std::vector<int64_t> strides = getStrides(input.shape);
  int64_t base = 0;
  for (int64_t dim = 0; dim < input.getRank(); ++dim)
    base += start[dim] * strides[dim];
  gatherElements(input.data, getDTypeBytes(input.dtype), c.out(0).shape,
                 strides, base, c.out(0).data);
}

void runConcat(KernelCall &c) {
  int64_t dim = *c.getInt("dim");
  const Tensor &first = c.in(0);
  // Each input contributes one contiguous run per index of the dims before
  // `dim`; the runs interleave in the result.
  int64_t outer = splitAround(first.shape, dim).outer;
  auto *dst = c.out(0).as<uint8_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t index = 0; index < c.getNumInputs(); ++index) {
      const Tensor &input = c.in(index);
      size_t runBytes = input.getBytes() / std::max<int64_t>(outer, 1);
      // A padding written in place (Buffer.overwrites): the first input's
      // bytes are already there.
      const uint8_t *src = input.as<const uint8_t>() + o * runBytes;
      if (src != dst)
        std::memcpy(dst, src, runBytes);
      dst += runBytes;
    }
  }
}

} // namespace tessera::runtime::cpu
