//===- IndexingKernels.cpp - The CPU's indexing kernels -------------------===//
//
// Embeddings and their gradient, gather, scatter_add, top_k, one_hot and
// the mixture of experts' dispatch.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

/// nn.embedding. An index outside the table gives a zero row: with a
/// vocab-split table each rank looks up the indices in its own rows, placed
/// by its piece index, and the partial results are summed.
void runEmbedding(KernelCall &c) {
  const Tensor &table = c.in(0), &indices = c.in(1);
  int64_t vocab = table.shape[0], hidden = table.shape[1];
  int64_t offset = readPieceOffset(c, 2, vocab);
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = indices.getNumElements(); i < e; ++i) {
    int64_t index = readIndex(indices, i) - offset;
    float *row = result + i * hidden;
    if (index < 0 || index >= vocab)
      std::fill(row, row + hidden, 0.0f);
    else
      std::copy_n(table.as<float>() + index * hidden, hidden, row);
  }
}

/// nn.embedding_grad: row gradients summed into the table at their indices;
/// an index outside the table adds nothing.
void runEmbeddingGrad(KernelCall &c) {
  const Tensor &grad = c.in(0), &indices = c.in(1);
  Tensor &table = c.out(0);
  int64_t vocab = table.shape[0], hidden = table.shape[1];
  int64_t offset = readPieceOffset(c, 2, vocab);
  float *rows = table.as<float>();
  std::fill(rows, rows + vocab * hidden, 0.0f);
  for (int64_t i = 0, e = indices.getNumElements(); i < e; ++i) {
    int64_t index = readIndex(indices, i) - offset;
    if (index < 0 || index >= vocab)
      continue;
    const float *from = grad.as<float>() + i * hidden;
    float *to = rows + index * hidden;
    for (int64_t h = 0; h < hidden; ++h)
      to[h] += from[h];
  }
}

/// nn.one_hot: 1 at each label, 0 elsewhere (a label outside the depth
/// gives a zero row); with a piece index, a piece of the classes.
void runOneHot(KernelCall &c) {
  const Tensor &labels = c.in(0);
  Tensor &result = c.out(0);
  int64_t depth = result.shape.back();
  int64_t offset = readPieceOffset(c, 1, depth);
  float *out = result.as<float>();
  std::fill(out, out + result.getNumElements(), 0.0f);
  for (int64_t i = 0, e = labels.getNumElements(); i < e; ++i) {
    int64_t label = readIndex(labels, i) - offset;
    if (label >= 0 && label < depth)
      out[i * depth + label] = 1.0f;
  }
}

/// nn.moe_dispatch: each group's choices [tokens, k] take their experts'
/// slots in GShard's order (first choices in token order, then second
/// ones, ...) while slots last.
void runMoeDispatch(KernelCall &c) {
  const Tensor &indices = c.in(0);
  Tensor &mask = c.out(0);
  int64_t experts = mask.shape[mask.getRank() - 2];
  int64_t capacity = mask.shape.back();
  int64_t k = indices.shape.back();
  int64_t tokens = indices.shape[indices.getRank() - 2];
  int64_t groups = indices.getNumElements() / std::max<int64_t>(tokens * k, 1);
  float *out = mask.as<float>();
  std::fill(out, out + mask.getNumElements(), 0.0f);
  std::vector<int64_t> taken(experts);
  for (int64_t group = 0; group < groups; ++group) {
    std::fill(taken.begin(), taken.end(), 0);
    for (int64_t choice = 0; choice < k; ++choice)
      for (int64_t token = 0; token < tokens; ++token) {
        int64_t row = group * tokens + token;
        int64_t expert = readIndex(indices, row * k + choice);
        if (expert < 0 || expert >= experts || taken[expert] >= capacity)
          continue;
        out[(row * experts + expert) * capacity + taken[expert]++] = 1.0f;
      }
  }
}

/// The flat offsets of indices element `i` in the picked tensor (itself)
/// and in the whole tensor, or nothing (recorded) when its index is out of
/// range.
static std::optional<int64_t> getWholeOffset(KernelCall &c,
                                             const AxisLayout &layout,
                                             const Tensor &indices, int64_t i) {
  int64_t index = readIndex(indices, i);
  if (index < 0 || index >= layout.whole) {
    c.failOnData("index ", index, " at position ", i, " is outside [0, ",
                 layout.whole, ")");
    return std::nullopt;
  }
  int64_t inner = i % layout.inner, row = i / layout.inner / layout.picked;
  return (row * layout.whole + index) * layout.inner + inner;
}

void runGather(KernelCall &c) {
  std::optional<AxisLayout> layout =
      checkIndexedAxis(c, c.in(0), c.in(1), c.out(0));
  const float *input = c.in(0).as<float>();
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = c.out(0).getNumElements(); i < e; ++i) {
    std::optional<int64_t> from = getWholeOffset(c, *layout, c.in(1), i);
    if (!from)
      return;
    result[i] = input[*from];
  }
}

void runScatterAdd(KernelCall &c) {
  std::optional<AxisLayout> layout =
      checkIndexedAxis(c, c.out(0), c.in(1), c.in(0));
  const float *source = c.in(0).as<float>();
  float *result = c.out(0).as<float>();
  std::fill(result, result + c.out(0).getNumElements(), 0.0f);
  for (int64_t i = 0, e = c.in(0).getNumElements(); i < e; ++i) {
    std::optional<int64_t> to = getWholeOffset(c, *layout, c.in(1), i);
    if (!to)
      return;
    result[*to] += source[i];
  }
}

/// nn.top_k along the last dim: descending, NaN first, ties by index.
void runTopK(KernelCall &c) {
  const Tensor &input = c.in(0);
  std::optional<int64_t> k = c.getInt("k");
  int64_t size = input.shape.back(), rows = input.getNumElements() / size;
  std::vector<int64_t> order(size);
  for (int64_t row = 0; row < rows; ++row) {
    const float *x = input.as<float>() + row * size;
    for (int64_t i = 0; i < size; ++i)
      order[i] = i;
    std::partial_sort(order.begin(), order.begin() + *k, order.end(),
                      [x](int64_t a, int64_t b) {
                        bool nanA = x[a] != x[a], nanB = x[b] != x[b];
                        if (nanA != nanB)
                          return nanA;
                        if (!nanA && x[a] != x[b])
                          return x[a] > x[b];
                        return a < b;
                      });
    for (int64_t j = 0; j < *k; ++j) {
      c.out(0).as<float>()[row * *k + j] = x[order[j]];
      c.out(1).as<int64_t>()[row * *k + j] = order[j];
    }
  }
}

} // namespace tessera::runtime::cpu
