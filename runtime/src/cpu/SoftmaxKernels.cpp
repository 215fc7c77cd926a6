//===- SoftmaxKernels.cpp - The CPU's softmax and cross-entropy kernels ---===//
//
// Softmax and log-softmax along a dim, and the cross-entropy loss.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "VectorMath.h"

#include <cmath>
#include <limits>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

//===----------------------------------------------------------------------===//
// Neural-network layers
//===----------------------------------------------------------------------===//

/// Softmax or log-softmax along `dim`; a softmax scales its input first
/// (rounded to f32, as nn.mul would) and, when causal, gives no weight to
/// the keys after each row's query (as nn.causal_mask's -infinity would).
static void runSoftmaxAlong(KernelCall &c, bool log) {
  std::optional<int64_t> dim = c.getInt("dim");
  std::optional<double> scaleAttr = log ? 1.0 : c.getFloat("scale");
  bool causal = !log && *c.getInt("causal") != 0;
  const Tensor &input = c.in(0);
  int64_t rank = input.getRank();
  if (input.getNumElements() == 0)
    return;
  // Named, not bound: a lambda below captures them (C++17).
  DimSplit split = splitAround(input.shape, *dim);
  int64_t outer = split.outer, size = split.size, inner = split.inner;
  auto scale = static_cast<float>(*scaleAttr);
  int64_t queries = causal ? input.shape[rank - 2] : 1;
  if (inner == 1) {
    // Rows in a row: the exps vectorised, summed in double. A causal row
    // has the keys up to its query; the rest are 0.
    forEachRow(input, size, [&](int64_t o) {
      const float *x = input.as<float>() + o * size;
      float *y = c.out(0).as<float>() + o * size;
      int64_t seen = causal ? std::min(size, o % queries + 1) : size;
      const float *v = x; // The scaled row.
      if (scale != 1.0f) {
        for (int64_t j = 0; j < seen; ++j)
          y[j] = x[j] * scale;
        v = y;
      }
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < seen; ++j)
        max = std::max(max, v[j]);
      if (log) {
        for (int64_t j = 0; j < size; ++j)
          y[j] = x[j] - max;
        cpu::vectorExp(y, y, size);
        double sum = sumInLanes(size, [&](int64_t j) { return double(y[j]); });
        float logSum = static_cast<float>(std::log(sum));
        for (int64_t j = 0; j < size; ++j)
          y[j] = (x[j] - max) - logSum;
        return;
      }
      for (int64_t j = 0; j < seen; ++j)
        y[j] = v[j] - max;
      cpu::vectorExp(y, y, seen);
      double sum = sumInLanes(seen, [&](int64_t j) { return double(y[j]); });
      float reciprocal = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < seen; ++j)
        y[j] *= reciprocal;
      std::fill(y + seen, y + size, 0.0f);
    });
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float *x = input.as<float>() + o * size * inner + i;
      float *y = c.out(0).as<float>() + o * size * inner + i;
      auto at = [&](int64_t j) { return double(x[j * inner] * scale); };
      // Subtracting the maximum keeps exp from overflowing.
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < size; ++j)
        max = std::max(max, at(j));
      double sum = 0;
      for (int64_t j = 0; j < size; ++j)
        sum += std::exp(at(j) - max);
      double logSum = std::log(sum);
      for (int64_t j = 0; j < size; ++j) {
        double shifted = at(j) - max;
        y[j * inner] = log ? shifted - logSum : std::exp(shifted - logSum);
      }
    }
  }
}

void runSoftmax(KernelCall &c) { runSoftmaxAlong(c, /*log=*/false); }
void runLogSoftmax(KernelCall &c) { runSoftmaxAlong(c, /*log=*/true); }

void runCrossEntropy(KernelCall &c) {
  const Tensor &logits = c.in(0), &labels = c.in(1);
  int64_t vocab = logits.shape.back();
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = labels.getNumElements(); i < e; ++i)
    if (int64_t label = readIndex(labels, i); label < 0 || label >= vocab) {
      c.failOnData("label ", label, " at position ", i, " is outside [0, ",
                   vocab, ")");
      return;
    }
  if (vocab == 0)
    return;
  forEachRow(logits, vocab, [&](int64_t i) {
    thread_local std::vector<float> exps;
    exps.resize(vocab);
    const float *x = logits.as<float>() + i * vocab;
    float max = *std::max_element(x, x + vocab);
    for (int64_t j = 0; j < vocab; ++j)
      exps[j] = x[j] - max;
    cpu::vectorExp(exps.data(), exps.data(), vocab);
    double sum = sumInLanes(vocab, [&](int64_t j) { return double(exps[j]); });
    result[i] =
        static_cast<float>(max + std::log(sum) - x[readIndex(labels, i)]);
  });
}

} // namespace tessera::runtime::cpu
