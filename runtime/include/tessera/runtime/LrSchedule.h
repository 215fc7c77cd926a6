//===- LrSchedule.h - nn.adamw's learning rate by step ----------*- C++ -*-===//
//
// The learning rate of a step, as nn.adamw's `schedule` gives it, and what
// the update multiplies its gradient by (clipping, loss scaling): shared by
// the CPU and CUDA kernels (host and device code) and by tessera-run, which
// logs the rate.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_LRSCHEDULE_H
#define TESSERA_RUNTIME_LRSCHEDULE_H

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif

namespace tessera::runtime {

/// nn.adamw's `schedule` cases (nn::LrSchedule).
enum class LrSchedule : int64_t { Constant = 0, Linear = 1, Cosine = 2 };

/// The learning rate at `step` (counting from 1): `lr · step / warmup` up
/// to the warmup's end, then from `lr` to `minLr` by step `decay` (linear
/// or along half a cosine, as Megatron-LM's), `minLr` after it; a constant
/// schedule keeps `lr` after the warmup.
TESSERA_HOST_DEVICE inline double getScheduledLr(LrSchedule schedule, double lr,
                                                 double minLr, int64_t warmup,
                                                 int64_t decay, int64_t step) {
  if (warmup > 0 && step <= warmup)
    return lr * static_cast<double>(step) / static_cast<double>(warmup);
  if (schedule == LrSchedule::Constant)
    return lr;
  if (step >= decay)
    return minLr;
  double progress =
      static_cast<double>(step - warmup) / static_cast<double>(decay - warmup);
  double left = schedule == LrSchedule::Linear
                    ? 1 - progress
                    : 0.5 * (1 + ::cos(3.14159265358979323846 * progress));
  return minLr + (lr - minLr) * left;
}

/// The factor a gradient is scaled by when the step's global gradient norm
/// is `norm` and the updates clip to `maxNorm` (PyTorch's
/// clip_grad_norm_, with its 1e-6): at most 1.
TESSERA_HOST_DEVICE inline float getClipScale(float norm, float maxNorm) {
  float scale = maxNorm / (norm + 1e-6f);
  return scale < 1.0f ? scale : 1.0f;
}

/// What an update multiplies its gradient by when the step's gradients
/// (and their global norm `norm`) are `lossScale` times the true ones and
/// it clips to `maxNorm` (0: no clipping): 1 / lossScale, clipped by the
/// true norm. Only for a finite norm (isFiniteNorm).
TESSERA_HOST_DEVICE inline float getGradientFactor(float norm, float maxNorm,
                                                   float lossScale) {
  float clip = maxNorm > 0 ? getClipScale(norm / lossScale, maxNorm) : 1.0f;
  return clip / lossScale;
}

/// Whether a gradient norm is finite: an inf or NaN in any gradient (an
/// overflow of a scaled loss) makes it not, and the update skips the step.
TESSERA_HOST_DEVICE inline bool isFiniteNorm(float norm) {
  return norm - norm == 0.0f;
}

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_LRSCHEDULE_H
