//===- OptimizerKernels.cpp - The CPU's optimizer kernels -----------------===//
//
// SGD and AdamW updates (the learning-rate schedule read from
// LrSchedule.h) and the sum of squares of gradient clipping.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "tessera/runtime/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

void runSgd(KernelCall &c) {
  std::optional<double> lr = c.getFloat("lr");
  std::optional<double> weightDecay = c.getFloat("weight_decay");
  const float *param = c.in(0).as<float>(), *grad = c.in(1).as<float>();
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = c.in(0).getNumElements(); i < e; ++i)
    result[i] = param[i] - *lr * (grad[i] + *weightDecay * param[i]);
}

namespace {
/// The constants of one nn.adamw step, in f32 as the update computes.
struct AdamWStep {
  float lr, beta1, beta2, epsilon, weightDecay;
  /// The reciprocals of the step's bias corrections, 1 / (1 - beta^step).
  float inverseCorrection1, inverseCorrection2;
  /// What unscaling and clipping multiply the gradient by (1: neither).
  float clipScale;
};
} // namespace

/// Elements per tile of nn.adamw: its seven arrays of them stay in L1.
constexpr int64_t kAdamWTile = 256;

/// nn.adamw on a tile of at most kAdamWTile elements, in f32 as PyTorch's
/// AdamW: a double division and square root per element made the update
/// bound by arithmetic, at twice the time of its memory traffic. The tile
/// is copied in and out, so that the outputs may be the inputs (the update
/// is written in place) and the loop still vectorises.
TESSERA_CLONES static void updateAdamW(const float *param, const float *grad,
                                       const float *m, const float *v,
                                       float *newParam, float *newM,
                                       float *newV, int64_t n,
                                       const AdamWStep &s) {
  float p[kAdamWTile], g[kAdamWTile], mt[kAdamWTile], vt[kAdamWTile];
  std::copy_n(param, n, p);
  std::copy_n(grad, n, g);
  std::copy_n(m, n, mt);
  std::copy_n(v, n, vt);
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    float mi = s.beta1 * mt[i] + (1.0f - s.beta1) * gi;
    float vi = s.beta2 * vt[i] + (1.0f - s.beta2) * gi * gi;
    float update = mi * s.inverseCorrection1 /
                   (std::sqrt(vi * s.inverseCorrection2) + s.epsilon);
    float pi = p[i];
    mt[i] = mi;
    vt[i] = vi;
    p[i] = pi - s.lr * (update + s.weightDecay * pi);
  }
  std::copy_n(p, n, newParam);
  std::copy_n(mt, n, newM);
  std::copy_n(vt, n, newV);
}

void runAdamW(KernelCall &c) {
  // A clipped update reads the step's global gradient norm too, and a
  // loss-scaled one the scale after it.
  size_t inputs = std::clamp<size_t>(c.getNumInputs(), 5, 7);
  bool clipped = inputs >= 6, scaled = inputs == 7;
  std::optional<double> lr = c.getFloat("lr");
  std::optional<double> beta1 = c.getFloat("beta1");
  std::optional<double> beta2 = c.getFloat("beta2");
  std::optional<double> epsilon = c.getFloat("epsilon");
  std::optional<double> weightDecay = c.getFloat("weight_decay");
  std::optional<double> maxGradNorm = c.getFloat("max_grad_norm");
  // A mixed-precision update reads a 16-bit gradient, widened.
  DType gradType = c.in(1).dtype;
  bool narrowGrad = gradType == DType::BF16 || gradType == DType::F16;
  int64_t step = readIndex(c.in(4), 0);
  if (step < 1) {
    // Step 0 would divide by a zero bias correction.
    c.failOnData("expects a step of at least 1 (steps count from 1), got ",
                 step);
    return;
  }
  const float *param = c.in(0).as<float>();
  const float *m = c.in(2).as<float>(), *v = c.in(3).as<float>();
  float *newParam = c.out(0).as<float>(), *newM = c.out(1).as<float>(),
        *newV = c.out(2).as<float>();
  int64_t e = c.in(0).getNumElements();
  // An overflow skips the step: the state stays as it is.
  float norm = clipped ? c.in(5).as<float>()[0] : 0.0f;
  if (!isFiniteNorm(norm)) {
    for (auto [from, to] : {std::pair{param, newParam}, {m, newM}, {v, newV}})
      if (from != to)
        std::copy_n(from, e, to);
    return;
  }
  AdamWStep s = {
      static_cast<float>(
          getScheduledLr(static_cast<LrSchedule>(*c.getInt("schedule")), *lr,
                         *c.getFloat("min_lr"), *c.getInt("warmup_steps"),
                         *c.getInt("decay_steps"), step)),
      static_cast<float>(*beta1),
      static_cast<float>(*beta2),
      static_cast<float>(*epsilon),
      static_cast<float>(*weightDecay),
      static_cast<float>(1 / (1 - std::pow(*beta1, static_cast<double>(step)))),
      static_cast<float>(1 / (1 - std::pow(*beta2, static_cast<double>(step)))),
      clipped ? getGradientFactor(norm, static_cast<float>(*maxGradNorm),
                                  scaled ? c.in(6).as<float>()[0] : 1.0f)
              : 1.0f};
  int64_t tiles = (e + kAdamWTile - 1) / kAdamWTile;
  cpu::parallelFor(tiles, kElementsPerThread / kAdamWTile,
                   [&](int64_t begin, int64_t end) {
                     float wide[kAdamWTile];
                     for (int64_t i = begin * kAdamWTile;
                          i < std::min(e, end * kAdamWTile); i += kAdamWTile) {
                       int64_t n = std::min(kAdamWTile, e - i);
                       const float *grad = c.in(1).as<float>() + i;
                       if (narrowGrad) {
                         const uint16_t *bits = c.in(1).as<uint16_t>() + i;
                         for (int64_t j = 0; j < n; ++j)
                           wide[j] = halfToFloat(gradType, bits[j]);
                         grad = wide;
                       }
                       // Unscaled and clipped, as PyTorch scales the
                       // gradient in place before the step.
                       if (s.clipScale != 1.0f) {
                         for (int64_t j = 0; j < n; ++j)
                           wide[j] = grad[j] * s.clipScale;
                         grad = wide;
                       }
                       updateAdamW(param + i, grad, m + i, v + i, newParam + i,
                                   newM + i, newV + i, n, s);
                     }
                   });
}

/// nn.sum_squares: in double, over fixed blocks summed in order, so that
/// the sum does not depend on the threads.
void runSumSquares(KernelCall &c) {
  DType dtype = c.in(0).dtype;
  constexpr int64_t kBlock = 4096;
  int64_t n = c.in(0).getNumElements();
  std::vector<double> blocks((n + kBlock - 1) / kBlock, 0.0);
  cpu::parallelFor(blocks.size(), kElementsPerThread / kBlock,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t b = begin; b < end; ++b) {
                       double sum = 0;
                       for (int64_t i = b * kBlock, e = std::min(n, i + kBlock);
                            i < e; ++i) {
                         double x = dtype == DType::F32
                                        ? c.in(0).as<float>()[i]
                                        : halfToFloat(
                                              dtype, c.in(0).as<uint16_t>()[i]);
                         sum += x * x;
                       }
                       blocks[b] = sum;
                     }
                   });
  c.out(0).as<float>()[0] =
      static_cast<float>(std::accumulate(blocks.begin(), blocks.end(), 0.0));
}

} // namespace tessera::runtime::cpu
