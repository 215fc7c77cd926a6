//===- IndexingChecks.cpp - The checks of the indexing ops ----------------===//
//
// Embeddings and their gradient, one_hot, the experts' dispatch, gather,
// scatter_add and top_k.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

bool tessera::runtime::checkEmbedding(KernelCall &c) {
  if (!(c.getNumInputs() == 3 ? c.expectArity(3, 1) : c.expectArity(2, 1)) ||
      !c.expectF32(c.in(0), "table") || !c.expectIndex(c.in(1), "indices") ||
      !c.expectF32(c.out(0), "result"))
    return false;
  const Tensor &table = c.in(0), &indices = c.in(1);
  if (table.getRank() != 2)
    return c.fail("expects a table of rank 2 ([vocab, hidden]), got shape ",
                  ListText{table.shape});
  std::vector<int64_t> resultShape = indices.shape;
  resultShape.push_back(table.shape[1]);
  return checkPieceIndex(c, 2) &&
         c.expectShape(c.out(0), resultShape, "result");
}

bool tessera::runtime::checkEmbeddingGrad(KernelCall &c) {
  if (!(c.getNumInputs() == 3 ? c.expectArity(3, 1) : c.expectArity(2, 1)) ||
      !c.expectF32(c.in(0), "gradient") || !c.expectIndex(c.in(1), "indices") ||
      !c.expectF32(c.out(0), "result"))
    return false;
  const Tensor &grad = c.in(0), &indices = c.in(1), &table = c.out(0);
  if (table.getRank() != 2 || grad.getRank() != indices.getRank() + 1)
    return c.fail("expects a [vocab, hidden] result and a gradient of shape "
                  "indices ++ [hidden]");
  std::vector<int64_t> rowShape = indices.shape;
  rowShape.push_back(table.shape[1]);
  return checkPieceIndex(c, 2) && c.expectShape(grad, rowShape, "gradient");
}

bool tessera::runtime::checkOneHot(KernelCall &c) {
  if (!(c.getNumInputs() == 2 ? c.expectArity(2, 1) : c.expectArity(1, 1)) ||
      !c.expectIndex(c.in(0), "labels") || !c.expectF32(c.out(0), "result"))
    return false;
  const Tensor &labels = c.in(0), &result = c.out(0);
  if (result.getRank() != labels.getRank() + 1)
    return c.fail("expects a result of rank ", labels.getRank() + 1);
  std::vector<int64_t> shape = labels.shape;
  shape.push_back(result.shape.back());
  return checkPieceIndex(c, 1) && c.expectShape(result, shape, "result");
}

bool tessera::runtime::checkMoeDispatch(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectIndex(c.in(0), "indices") ||
      !c.expectF32(c.out(0), "result"))
    return false;
  const Tensor &indices = c.in(0), &mask = c.out(0);
  if (indices.getRank() < 2 || mask.getRank() != indices.getRank() + 1)
    return c.fail("expects indices [..., tokens, k] and a result [..., "
                  "tokens, experts, capacity]");
  std::vector<int64_t> shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.push_back(mask.shape[mask.getRank() - 2]);
  shape.push_back(mask.shape.back());
  return c.expectShape(mask, shape, "result");
}

std::optional<AxisLayout>
tessera::runtime::checkIndexedAxis(KernelCall &c, const Tensor &whole,
                                   const Tensor &indices,
                                   const Tensor &picked) {
  std::optional<int64_t> axis = c.getInt("axis");
  if (!axis || !c.expectF32(whole, "values") ||
      !c.expectIndex(indices, "indices") || !c.expectF32(picked, "values"))
    return std::nullopt;
  if (*axis < 0 || *axis >= whole.getRank()) {
    c.fail("expects axis in [0, ", whole.getRank(), "), got ", *axis);
    return std::nullopt;
  }
  std::vector<int64_t> shape = whole.shape;
  if (indices.getRank() == whole.getRank())
    shape[*axis] = indices.shape[*axis];
  if (!c.expectShape(indices, shape, "indices") ||
      !c.expectShape(picked, shape, "values"))
    return std::nullopt;
  AxisLayout layout;
  for (int64_t dim = 0; dim < *axis; ++dim)
    layout.outer *= whole.shape[dim];
  for (int64_t dim = *axis + 1; dim < whole.getRank(); ++dim)
    layout.inner *= whole.shape[dim];
  layout.whole = whole.shape[*axis];
  layout.picked = shape[*axis];
  return layout;
}

bool tessera::runtime::checkGather(KernelCall &c) {
  return c.expectArity(2, 1) &&
         checkIndexedAxis(c, c.in(0), c.in(1), c.out(0)).has_value();
}

bool tessera::runtime::checkScatterAdd(KernelCall &c) {
  return c.expectArity(2, 1) &&
         checkIndexedAxis(c, c.out(0), c.in(1), c.in(0)).has_value();
}

bool tessera::runtime::checkTopK(KernelCall &c) {
  if (!c.expectArity(1, 2) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "values") ||
      !c.expectDType(c.out(1), DType::I64, "indices"))
    return false;
  const Tensor &input = c.in(0);
  std::optional<int64_t> k = c.getInt("k");
  if (!k)
    return false;
  if (input.getRank() == 0 || *k < 1 || *k > input.shape.back())
    return c.fail("expects k in [1, ", input.getRank() ? input.shape.back() : 0,
                  "], got ", *k);
  std::vector<int64_t> shape = input.shape;
  shape.back() = *k;
  return c.expectShape(c.out(0), shape, "values") &&
         c.expectShape(c.out(1), shape, "indices");
}
