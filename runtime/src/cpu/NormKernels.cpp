//===- NormKernels.cpp - The CPU's norm kernels ---------------------------===//
//
// Layer norm and RMS norm and their fused gradients, row by row.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <cmath>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

/// Checks a norm's input and a per-feature parameter of its last dim.
static bool expectNorm(KernelCall &c, size_t numInputs) {
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
  return true;
}

/// A row's mean (0 for RMS norm) and 1 / sqrt(variance + epsilon) (the
/// mean square for RMS norm). Two passes: the one-pass E[x²] - E[x]²
/// cancels badly in f32 data.
TESSERA_CLONES static void getRowStatistics(const float *x, int64_t features,
                                            bool rms, double epsilon,
                                            double &mean, double &rstd) {
  mean = rms ? 0.0 : sumInLanes(features, [&](int64_t j) {
                       return double(x[j]);
                     }) / features;
  double variance = sumInLanes(
      features, [&](int64_t j) { return (x[j] - mean) * (x[j] - mean); });
  rstd = 1.0 / std::sqrt(variance / features + epsilon);
}

void runLayerNorm(KernelCall &c) {
  if (!expectNorm(c, 3))
    return;
  std::optional<double> epsilon = c.getFloat("epsilon");
  if (!epsilon)
    return;
  const Tensor &input = c.in(0);
  int64_t features = input.shape.back();
  if (features == 0)
    return;
  if (c.isCheckOnly())
    return;
  const float *gamma = c.in(1).as<float>(), *beta = c.in(2).as<float>();
  forEachRow(input, features, [&](int64_t row) {
    const float *x = input.as<float>() + row * features;
    float *y = c.out(0).as<float>() + row * features;
    double mean, rstd;
    getRowStatistics(x, features, /*rms=*/false, *epsilon, mean, rstd);
    for (int64_t j = 0; j < features; ++j)
      y[j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
  });
}

void runRmsNorm(KernelCall &c) {
  if (!expectNorm(c, 2))
    return;
  std::optional<double> epsilon = c.getFloat("epsilon");
  if (!epsilon)
    return;
  const Tensor &input = c.in(0);
  int64_t features = input.shape.back();
  if (features == 0)
    return;
  if (c.isCheckOnly())
    return;
  const float *gamma = c.in(1).as<float>();
  forEachRow(input, features, [&](int64_t row) {
    const float *x = input.as<float>() + row * features;
    float *y = c.out(0).as<float>() + row * features;
    double mean, rstd;
    getRowStatistics(x, features, /*rms=*/true, *epsilon, mean, rstd);
    for (int64_t j = 0; j < features; ++j)
      y[j] = x[j] * rstd * gamma[j];
  });
}

/// One row of nn.layer_norm_grad or nn.rms_norm_grad: the forward's
/// statistics again, then dx and x̂ (see the ops' descriptions).
TESSERA_CLONES static void getNormGradRow(const float *x, const float *dy,
                                          const float *gamma, float *dx,
                                          float *xhat, int64_t features,
                                          bool rms, double epsilon) {
  double mean, rstd;
  getRowStatistics(x, features, rms, epsilon, mean, rstd);
  // g = dy · gamma; the row means of g and g · x̂.
  auto g = [&](int64_t j) { return static_cast<double>(dy[j]) * gamma[j]; };
  double meanG = rms ? 0.0 : sumInLanes(features, g) / features;
  double meanGX =
      sumInLanes(features,
                 [&](int64_t j) { return g(j) * (x[j] - mean) * rstd; }) /
      features;
  for (int64_t j = 0; j < features; ++j) {
    double normalized = (x[j] - mean) * rstd;
    dx[j] = rstd * (g(j) - meanG - normalized * meanGX);
    xhat[j] = normalized;
  }
}

/// nn.layer_norm_grad and nn.rms_norm_grad, row by row.
static void runNormGrad(KernelCall &c, bool rms) {
  if (!c.expectArity(3, 2) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.in(1), "gamma") ||
      !c.expectF32(c.in(2), "result gradient") ||
      !c.expectShape(c.in(2), c.in(0).shape, "result gradient"))
    return;
  const Tensor &input = c.in(0);
  if (input.getRank() == 0) {
    c.fail("expects an input of rank at least 1");
    return;
  }
  int64_t features = input.shape.back();
  if (!c.expectShape(c.in(1), {features}, "gamma") ||
      !c.expectF32(c.out(0), "input gradient") ||
      !c.expectShape(c.out(0), input.shape, "input gradient") ||
      !c.expectF32(c.out(1), "normalized input") ||
      !c.expectShape(c.out(1), input.shape, "normalized input"))
    return;
  std::optional<double> epsilon = c.getFloat("epsilon");
  if (!epsilon || c.isCheckOnly() || features == 0)
    return;
  const float *gamma = c.in(1).as<float>();
  forEachRow(input, features, [&](int64_t row) {
    const float *x = input.as<float>() + row * features;
    const float *dy = c.in(2).as<float>() + row * features;
    float *dx = c.out(0).as<float>() + row * features;
    float *xhat = c.out(1).as<float>() + row * features;
    getNormGradRow(x, dy, gamma, dx, xhat, features, rms, *epsilon);
  });
}

void runLayerNormGrad(KernelCall &c) { runNormGrad(c, /*rms=*/false); }
void runRmsNormGrad(KernelCall &c) { runNormGrad(c, /*rms=*/true); }

} // namespace tessera::runtime::cpu
