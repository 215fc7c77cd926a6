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
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return;
  if (c.in(0).getNumElements() != c.out(0).getNumElements()) {
    c.fail("cannot reshape ", c.in(0).getNumElements(), " elements into ",
           c.out(0).getNumElements());
    return;
  }
  if (c.isCheckOnly())
    return;
  copyBytes(c.out(0).data, c.in(0).data, c.in(0).getBytes());
}

void runTranspose(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *perm = c.getList("permutation");
  if (!perm)
    return;
  if (static_cast<int64_t>(perm->size()) != input.getRank()) {
    c.fail("expects a permutation of ", input.getRank(), " dims, got ",
           ListText{*perm});
    return;
  }
  if (!c.expectDims(*perm, input.getRank(), "permutation entry"))
    return;
  std::vector<int64_t> resultShape;
  for (int64_t dim : *perm)
    resultShape.push_back(input.shape[dim]);
  if (!c.expectShape(c.out(0), resultShape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  permuteElements(input, *perm, c.out(0).data);
}

void runSlice(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *start = c.getList("start");
  const std::vector<int64_t> *limit = c.getList("limit");
  if (!start || !limit)
    return;
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(start->size()) != rank ||
      static_cast<int64_t>(limit->size()) != rank) {
    c.fail("expects start and limit of rank ", rank, ", got ", start->size(),
           " and ", limit->size());
    return;
  }
  std::vector<int64_t> strides = getStrides(input.shape);
  std::vector<int64_t> resultShape;
  int64_t base = 0;
  for (int64_t dim = 0; dim < rank; ++dim) {
    int64_t size = input.shape[dim], from = (*start)[dim], to = (*limit)[dim];
    if (from < 0 || from > to || to > size) {
      c.fail("dim ", dim, " of size ", size, " cannot be sliced [", from, ", ",
             to, ")");
      return;
    }
    resultShape.push_back(to - from);
    base += from * strides[dim];
  }
  if (!c.expectShape(c.out(0), resultShape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  gatherElements(input.data, getDTypeBytes(input.dtype), resultShape, strides,
                 base, c.out(0).data);
}

void runConcat(KernelCall &c) {
  if (!c.expectVariadicArity(1, 1))
    return;
  std::optional<int64_t> dim = c.getInt("dim");
  if (!dim)
    return;
  const Tensor &first = c.in(0);
  if (*dim < 0 || *dim >= first.getRank()) {
    c.fail("dim ", *dim, " is out of range for rank ", first.getRank());
    return;
  }
  std::vector<int64_t> resultShape = first.shape;
  for (size_t index = 1; index < c.getNumInputs(); ++index) {
    const Tensor &input = c.in(index);
    if (input.dtype != first.dtype) {
      c.fail("input #", index, " has element type ", getDTypeName(input.dtype),
             ", expected ", getDTypeName(first.dtype));
      return;
    }
    std::vector<int64_t> expected = first.shape;
    expected[*dim] = input.getRank() == first.getRank() ? input.shape[*dim] : 0;
    if (input.shape != expected) {
      c.fail("input #", index, " has shape ", ListText{input.shape},
             ", which does not match ", ListText{first.shape}, " outside dim ",
             *dim);
      return;
    }
    resultShape[*dim] += input.shape[*dim];
  }
  if (!c.expectDType(c.out(0), first.dtype, "result") ||
      !c.expectShape(c.out(0), resultShape, "result"))
    return;

  if (c.isCheckOnly())
    return;
  // Each input contributes one contiguous run per index of the dims before
  // `dim`; the runs interleave in the result.
  int64_t outer = splitAround(first.shape, *dim).outer;
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
