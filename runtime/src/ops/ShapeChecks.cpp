//===- ShapeChecks.cpp - The checks of the reductions and shape ops -------===//

#include "Checks.h"

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

bool tessera::runtime::checkReduce(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result"))
    return false;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *dims = c.getList("dims");
  if (!dims || !c.expectDims(*dims, input.getRank(), "dim"))
    return false;
  std::vector<bool> reduced(input.getRank(), false);
  for (int64_t dim : *dims)
    reduced[dim] = true;
  std::vector<int64_t> resultShape;
  for (int64_t dim = 0; dim < input.getRank(); ++dim)
    if (!reduced[dim])
      resultShape.push_back(input.shape[dim]);
  return c.expectShape(c.out(0), resultShape, "result");
}

bool tessera::runtime::checkReduceSum(KernelCall &c) { return checkReduce(c); }
bool tessera::runtime::checkReduceMax(KernelCall &c) { return checkReduce(c); }
bool tessera::runtime::checkReduceMean(KernelCall &c) { return checkReduce(c); }

bool tessera::runtime::checkReshape(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return false;
  if (c.in(0).getNumElements() != c.out(0).getNumElements())
    return c.fail("cannot reshape ", c.in(0).getNumElements(),
                  " elements into ", c.out(0).getNumElements());
  return true;
}

bool tessera::runtime::checkTranspose(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return false;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *perm = c.getList("permutation");
  if (!perm)
    return false;
  if (static_cast<int64_t>(perm->size()) != input.getRank())
    return c.fail("expects a permutation of ", input.getRank(), " dims, got ",
                  ListText{*perm});
  if (!c.expectDims(*perm, input.getRank(), "permutation entry"))
    return false;
  std::vector<int64_t> resultShape;
  for (int64_t dim : *perm)
    resultShape.push_back(input.shape[dim]);
  return c.expectShape(c.out(0), resultShape, "result");
}

bool tessera::runtime::checkSlice(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return false;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *start = c.getList("start");
  const std::vector<int64_t> *limit = c.getList("limit");
  if (!start || !limit)
    return false;
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(start->size()) != rank ||
      static_cast<int64_t>(limit->size()) != rank)
    return c.fail("expects start and limit of rank ", rank, ", got ",
                  start->size(), " and ", limit->size());
  std::vector<int64_t> resultShape;
  for (int64_t dim = 0; dim < rank; ++dim) {
    int64_t size = input.shape[dim], from = (*start)[dim], to = (*limit)[dim];
    if (from < 0 || from > to || to > size)
      return c.fail("dim ", dim, " of size ", size, " cannot be sliced [",
                    from, ", ", to, ")");
    resultShape.push_back(to - from);
  }
  return c.expectShape(c.out(0), resultShape, "result");
}

bool tessera::runtime::checkConcat(KernelCall &c) {
  if (!c.expectVariadicArity(1, 1))
    return false;
  std::optional<int64_t> dim = c.getInt("dim");
  if (!dim)
    return false;
  const Tensor &first = c.in(0);
  if (*dim < 0 || *dim >= first.getRank())
    return c.fail("dim ", *dim, " is out of range for rank ", first.getRank());
  std::vector<int64_t> resultShape = first.shape;
  for (size_t index = 1; index < c.getNumInputs(); ++index) {
    const Tensor &input = c.in(index);
    if (input.dtype != first.dtype)
      return c.fail("input #", index, " has element type ",
                    getDTypeName(input.dtype), ", expected ",
                    getDTypeName(first.dtype));
    std::vector<int64_t> expected = first.shape;
    expected[*dim] = input.getRank() == first.getRank() ? input.shape[*dim] : 0;
    if (input.shape != expected)
      return c.fail("input #", index, " has shape ", ListText{input.shape},
                    ", which does not match ", ListText{first.shape},
                    " outside dim ", *dim);
    resultShape[*dim] += input.shape[*dim];
  }
  return c.expectDType(c.out(0), first.dtype, "result") &&
         c.expectShape(c.out(0), resultShape, "result");
}
