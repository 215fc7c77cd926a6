//===- LayerChecks.cpp - The checks of softmax, the loss and the norms ----===//

#include "Checks.h"

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

/// Softmax or log-softmax along `dim`; a causal softmax's scores are
/// [..., query, key] along the last dim.
static bool checkSoftmaxAlong(KernelCall &c, bool log) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return false;
  std::optional<int64_t> dim = c.getInt("dim");
  std::optional<double> scale = log ? 1.0 : c.getFloat("scale");
  std::optional<int64_t> causal = log ? 0 : c.getInt("causal");
  if (!dim || !scale || !causal)
    return false;
  int64_t rank = c.in(0).getRank();
  if (*dim < 0 || *dim >= rank)
    return c.fail("dim ", *dim, " is out of range for rank ", rank);
  if (*causal != 0 && (rank < 2 || *dim != rank - 1))
    return c.fail("a causal softmax expects scores [..., query, key] and dim ",
                  rank - 1, ", got rank ", rank, " and dim ", *dim);
  return true;
}

bool tessera::runtime::checkSoftmax(KernelCall &c) {
  return checkSoftmaxAlong(c, /*log=*/false);
}

bool tessera::runtime::checkLogSoftmax(KernelCall &c) {
  return checkSoftmaxAlong(c, /*log=*/true);
}

bool tessera::runtime::checkCrossEntropy(KernelCall &c) {
  if (!c.expectArity(2, 1) || !c.expectF32(c.in(0), "logits") ||
      !c.expectIndex(c.in(1), "labels") || !c.expectF32(c.out(0), "result"))
    return false;
  const Tensor &logits = c.in(0), &labels = c.in(1);
  if (logits.getRank() == 0)
    return c.fail("expects logits of rank at least 1");
  std::vector<int64_t> positions(logits.shape.begin(), logits.shape.end() - 1);
  return c.expectShape(labels, positions, "labels") &&
         c.expectShape(c.out(0), positions, "result");
}

/// Checks a norm's input, a per-feature parameter of its last dim for each
/// input after it, and its epsilon.
static bool checkNorm(KernelCall &c, size_t numInputs) {
  if (!c.expectArity(numInputs, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return false;
  if (c.in(0).getRank() == 0)
    return c.fail("expects an input of rank at least 1");
  std::vector<int64_t> paramShape = {c.in(0).shape.back()};
  const char *names[] = {"gamma", "beta"};
  for (size_t index = 1; index < numInputs; ++index)
    if (!c.expectF32(c.in(index), names[index - 1]) ||
        !c.expectShape(c.in(index), paramShape, names[index - 1]))
      return false;
  return c.getFloat("epsilon").has_value();
}

bool tessera::runtime::checkLayerNorm(KernelCall &c) { return checkNorm(c, 3); }
bool tessera::runtime::checkRmsNorm(KernelCall &c) { return checkNorm(c, 2); }

/// nn.layer_norm_grad and nn.rms_norm_grad: the input, gamma and the
/// result's gradient in; the input's gradient and the normalized input out.
static bool checkNormGrad(KernelCall &c) {
  if (!c.expectArity(3, 2) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.in(1), "gamma") ||
      !c.expectF32(c.in(2), "result gradient") ||
      !c.expectShape(c.in(2), c.in(0).shape, "result gradient"))
    return false;
  const Tensor &input = c.in(0);
  if (input.getRank() == 0)
    return c.fail("expects an input of rank at least 1");
  int64_t features = input.shape.back();
  return c.expectShape(c.in(1), {features}, "gamma") &&
         c.expectF32(c.out(0), "input gradient") &&
         c.expectShape(c.out(0), input.shape, "input gradient") &&
         c.expectF32(c.out(1), "normalized input") &&
         c.expectShape(c.out(1), input.shape, "normalized input") &&
         c.getFloat("epsilon").has_value();
}

bool tessera::runtime::checkLayerNormGrad(KernelCall &c) {
  return checkNormGrad(c);
}
bool tessera::runtime::checkRmsNormGrad(KernelCall &c) {
  return checkNormGrad(c);
}
