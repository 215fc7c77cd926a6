//===- OptimizerChecks.cpp - The checks of the optimizer updates ----------===//
//
// SGD and AdamW updates and the sum of squares of gradient clipping.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "tessera/runtime/LrSchedule.h"

#include <algorithm>

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

bool tessera::runtime::checkSgd(KernelCall &c) {
  return c.expectArity(2, 1) && c.expectF32(c.in(0), "param") &&
         c.expectF32(c.in(1), "grad") && c.expectF32(c.out(0), "result") &&
         c.expectShape(c.in(1), c.in(0).shape, "grad") &&
         c.expectShape(c.out(0), c.in(0).shape, "result") &&
         c.getFloat("lr") && c.getFloat("weight_decay");
}

/// nn.adamw's learning-rate schedule: its attributes and a known kind (the
/// rate of a step is getScheduledLr's).
static bool checkLrSchedule(KernelCall &c) {
  std::optional<double> lr = c.getFloat("lr"), minLr = c.getFloat("min_lr");
  std::optional<int64_t> schedule = c.getInt("schedule"),
                         warmup = c.getInt("warmup_steps"),
                         decay = c.getInt("decay_steps");
  if (!lr || !minLr || !schedule || !warmup || !decay)
    return false;
  if (*schedule < 0 || *schedule > static_cast<int64_t>(LrSchedule::Cosine))
    return c.fail("unknown learning-rate schedule ", *schedule);
  return true;
}

bool tessera::runtime::checkAdamW(KernelCall &c) {
  // A clipped update reads the step's global gradient norm too, and a
  // loss-scaled one the scale after it.
  size_t inputs = std::clamp<size_t>(c.getNumInputs(), 5, 7);
  bool clipped = inputs >= 6, scaled = inputs == 7;
  if (!c.expectArity(inputs, 3))
    return false;
  const std::vector<int64_t> &shape = c.in(0).shape;
  const char *inputNames[] = {"param", "grad", "m", "v"};
  // A mixed-precision update reads a 16-bit gradient, widened.
  DType gradType = c.in(1).dtype;
  bool narrowGrad = gradType == DType::BF16 || gradType == DType::F16;
  for (size_t index = 0; index < 4; ++index)
    if ((!(index == 1 && narrowGrad) &&
         !c.expectF32(c.in(index), inputNames[index])) ||
        !c.expectShape(c.in(index), shape, inputNames[index]))
      return false;
  const char *outputNames[] = {"new_param", "new_m", "new_v"};
  for (size_t index = 0; index < 3; ++index)
    if (!c.expectF32(c.out(index), outputNames[index]) ||
        !c.expectShape(c.out(index), shape, outputNames[index]))
      return false;
  if (!c.expectIndex(c.in(4), "step") || !c.expectShape(c.in(4), {}, "step"))
    return false;
  if (clipped && (!c.expectF32(c.in(5), "grad_norm") ||
                  !c.expectShape(c.in(5), {}, "grad_norm")))
    return false;
  if (scaled && (!c.expectF32(c.in(6), "loss_scale") ||
                 !c.expectShape(c.in(6), {}, "loss_scale")))
    return false;
  return checkLrSchedule(c) && c.getFloat("beta1") && c.getFloat("beta2") &&
         c.getFloat("epsilon") && c.getFloat("weight_decay") &&
         c.getFloat("max_grad_norm");
}

bool tessera::runtime::checkSumSquares(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), {}, "result"))
    return false;
  DType dtype = c.in(0).dtype;
  if (dtype != DType::F32 && !isHalf(dtype))
    return c.fail("expects a float input, got ", getDTypeName(dtype));
  return true;
}
