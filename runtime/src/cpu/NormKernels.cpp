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
  std::optional<double> epsilon = c.getFloat("epsilon");
  const Tensor &input = c.in(0);
  int64_t features = input.shape.back();
  if (features == 0)
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
  std::optional<double> epsilon = c.getFloat("epsilon");
  const Tensor &input = c.in(0);
  int64_t features = input.shape.back();
  if (features == 0)
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
  const Tensor &input = c.in(0);
  int64_t features = input.shape.back();
  std::optional<double> epsilon = c.getFloat("epsilon");
  if (features == 0)
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
