//===- LinearChecks.cpp - The checks of nn.dot ----------------------------===//

#include "Checks.h"

#include <algorithm>
#include <initializer_list>

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

static std::vector<int64_t>
concatDims(std::initializer_list<const std::vector<int64_t> *> groups) {
  std::vector<int64_t> result;
  for (const std::vector<int64_t> *group : groups)
    result.insert(result.end(), group->begin(), group->end());
  return result;
}

/// The dims of a rank-`rank` operand that are neither batching nor
/// contracting, in order.
static std::vector<int64_t> getFreeDims(int64_t rank,
                                        const std::vector<int64_t> &batch,
                                        const std::vector<int64_t> &contract) {
  std::vector<int64_t> free;
  for (int64_t dim = 0; dim < rank; ++dim)
    if (std::find(batch.begin(), batch.end(), dim) == batch.end() &&
        std::find(contract.begin(), contract.end(), dim) == contract.end())
      free.push_back(dim);
  return free;
}

std::optional<DotDims> tessera::runtime::checkDotDims(KernelCall &c) {
  if (!c.expectArity(2, 1) || !c.expectF32(c.in(0), "lhs") ||
      !c.expectF32(c.in(1), "rhs") || !c.expectF32(c.out(0), "result"))
    return std::nullopt;
  const Tensor &lhs = c.in(0), &rhs = c.in(1);
  const std::vector<int64_t> *lhsBatch = c.getList("lhs_batching_dims");
  const std::vector<int64_t> *rhsBatch = c.getList("rhs_batching_dims");
  const std::vector<int64_t> *lhsContract = c.getList("lhs_contracting_dims");
  const std::vector<int64_t> *rhsContract = c.getList("rhs_contracting_dims");
  if (!lhsBatch || !rhsBatch || !lhsContract || !rhsContract)
    return std::nullopt;
  if (lhsBatch->size() != rhsBatch->size()) {
    c.fail("has ", lhsBatch->size(), " lhs batching dims but ",
           rhsBatch->size(), " rhs batching dims");
    return std::nullopt;
  }
  if (lhsContract->size() != rhsContract->size()) {
    c.fail("has ", lhsContract->size(), " lhs contracting dims but ",
           rhsContract->size(), " rhs contracting dims");
    return std::nullopt;
  }
  if (!c.expectDims(concatDims({lhsBatch, lhsContract}), lhs.getRank(),
                    "lhs dim") ||
      !c.expectDims(concatDims({rhsBatch, rhsContract}), rhs.getRank(),
                    "rhs dim"))
    return std::nullopt;
  auto expectPaired = [&](const std::vector<int64_t> &lhsDims,
                          const std::vector<int64_t> &rhsDims,
                          const char *kind) {
    for (size_t i = 0; i < lhsDims.size(); ++i) {
      int64_t lhsSize = lhs.shape[lhsDims[i]], rhsSize = rhs.shape[rhsDims[i]];
      if (lhsSize != rhsSize)
        return c.fail("lhs ", kind, " dim ", lhsDims[i], " has size ", lhsSize,
                      " but rhs dim ", rhsDims[i], " has size ", rhsSize);
    }
    return true;
  };
  if (!expectPaired(*lhsBatch, *rhsBatch, "batching") ||
      !expectPaired(*lhsContract, *rhsContract, "contracting"))
    return std::nullopt;

  DotDims dims{*lhsBatch,
               *rhsBatch,
               *lhsContract,
               *rhsContract,
               getFreeDims(lhs.getRank(), *lhsBatch, *lhsContract),
               getFreeDims(rhs.getRank(), *rhsBatch, *rhsContract)};
  std::vector<int64_t> resultShape;
  for (int64_t dim : dims.lhsBatch)
    resultShape.push_back(lhs.shape[dim]);
  for (int64_t dim : dims.lhsFree)
    resultShape.push_back(lhs.shape[dim]);
  for (int64_t dim : dims.rhsFree)
    resultShape.push_back(rhs.shape[dim]);
  if (!c.expectShape(c.out(0), resultShape, "result"))
    return std::nullopt;
  return dims;
}

bool tessera::runtime::checkDot(KernelCall &c) {
  return checkDotDims(c).has_value();
}
