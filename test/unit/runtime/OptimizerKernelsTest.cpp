//===- OptimizerKernelsTest.cpp - the CPU's optimizer kernels ---------------===//

#include "KernelsTestSupport.h"
#include "tessera/runtime/LrSchedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

TEST(KernelsTest, SgdStepsAgainstTheGradient) {
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {0.5f, 1});
  OwnedTensor result(DType::F32, {2});
  KernelAttrs attrs;
  attrs.floats["lr"] = 0.1;
  attrs.floats["weight_decay"] = 0.5;
  ASSERT_EQ(run("nn.sgd", attrs, {&param, &grad}, {&result}), "");
  // p - 0.1 * (g + 0.5 p).
  expectNear(read<float>(result), {1 - 0.1f * 1.0f, -2 - 0.1f * 0.0f});
}

TEST(KernelsTest, AdamWTakesOneStep) {
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {0.5f, -1});
  OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
  OwnedTensor step = i64({}, {3});
  OwnedTensor newParam(DType::F32, {2}), newM(DType::F32, {2}),
      newV(DType::F32, {2});
  KernelAttrs attrs;
  double lr = 1e-2, beta1 = 0.8, beta2 = 0.9, epsilon = 1e-6, decay = 0.1;
  attrs.floats = {{"lr", lr},
                  {"beta1", beta1},
                  {"beta2", beta2},
                  {"epsilon", epsilon},
                  {"weight_decay", decay}};
  attrs.floats["min_lr"] = 0;
  attrs.floats["max_grad_norm"] = 0;
  attrs.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  ASSERT_EQ(run("nn.adamw", attrs, {&param, &grad, &m, &v, &step},
                {&newParam, &newM, &newV}),
            "");
  std::vector<float> p = read<float>(param), g = read<float>(grad),
                     m0 = read<float>(m), v0 = read<float>(v);
  for (size_t i = 0; i < 2; ++i) {
    double mi = beta1 * m0[i] + (1 - beta1) * g[i];
    double vi = beta2 * v0[i] + (1 - beta2) * g[i] * g[i];
    double mHat = mi / (1 - std::pow(beta1, 3));
    double vHat = vi / (1 - std::pow(beta2, 3));
    double pi = p[i] - lr * (mHat / (std::sqrt(vHat) + epsilon) + decay * p[i]);
    EXPECT_NEAR(read<float>(newM)[i], mi, 1e-6);
    EXPECT_NEAR(read<float>(newV)[i], vi, 1e-6);
    EXPECT_NEAR(read<float>(newParam)[i], pi, 1e-6);
  }

  OwnedTensor zero = i32({}, {0});
  EXPECT_EQ(run("nn.adamw", attrs, {&param, &grad, &m, &v, &zero},
                {&newParam, &newM, &newV}),
            "nn.adamw: expects a step of at least 1 (steps count from 1), got "
            "0");
}

TEST(KernelsTest, LearningRateSchedulesFollowTheStep) {
  using S = LrSchedule;
  // Warmup: linear from lr / warmup at step 1 to lr at the warmup's end.
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 1), 0.1);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 10), 1.0);
  // Cosine: halfway through the decay, halfway between lr and min_lr.
  EXPECT_NEAR(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 60), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 110), 0.1);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Cosine, 1.0, 0.1, 10, 110, 500), 0.1);
  EXPECT_NEAR(getScheduledLr(S::Linear, 1.0, 0.0, 0, 100, 25), 0.75, 1e-12);
  EXPECT_DOUBLE_EQ(getScheduledLr(S::Constant, 1.0, 0.0, 0, 0, 1000), 1.0);
  // Clipping scales by max / (norm + 1e-6), never up.
  EXPECT_FLOAT_EQ(getClipScale(4.0f, 1.0f), 1.0f / (4.0f + 1e-6f));
  EXPECT_FLOAT_EQ(getClipScale(0.5f, 1.0f), 1.0f);
}

TEST(KernelsTest, AdamWClipsAndSchedulesAsTheUnclippedStepWouldAtItsRate) {
  // A step at 1/4 of the peak rate (warmup of 4, step 1) with a gradient of
  // norm 5 clipped to 1 is the plain step with lr / 4 and the gradient / 5.
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {3, 4});
  OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
  OwnedTensor step = i64({}, {1}), norm = f32({}, {5});
  OwnedTensor scaled = f32({2}, {3 * (1 / (5 + 1e-6f)), 4 * (1 / (5 + 1e-6f))});
  KernelAttrs plain;
  plain.floats = {{"lr", 0.25},        {"beta1", 0.9},        {"beta2", 0.99},
                  {"epsilon", 1e-8},   {"weight_decay", 0.1}, {"min_lr", 0},
                  {"max_grad_norm", 0}};
  plain.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  KernelAttrs clipped = plain;
  clipped.floats["lr"] = 1.0;
  clipped.floats["max_grad_norm"] = 1.0;
  clipped.ints = {{"schedule", 2}, {"warmup_steps", 4}, {"decay_steps", 8}};
  OwnedTensor p1(DType::F32, {2}), m1(DType::F32, {2}), v1(DType::F32, {2});
  OwnedTensor p2(DType::F32, {2}), m2(DType::F32, {2}), v2(DType::F32, {2});
  ASSERT_EQ(
      run("nn.adamw", plain, {&param, &scaled, &m, &v, &step}, {&p1, &m1, &v1}),
      "");
  ASSERT_EQ(run("nn.adamw", clipped, {&param, &grad, &m, &v, &step, &norm},
                {&p2, &m2, &v2}),
            "");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FLOAT_EQ(read<float>(p2)[i], read<float>(p1)[i]);
    EXPECT_FLOAT_EQ(read<float>(m2)[i], read<float>(m1)[i]);
  }
  clipped.ints["schedule"] = 7;
  EXPECT_EQ(run("nn.adamw", clipped, {&param, &grad, &m, &v, &step, &norm},
                {&p2, &m2, &v2}),
            "nn.adamw: unknown learning-rate schedule 7");
}

TEST(KernelsTest, AdamWUnscalesALossScaledGradientAndSkipsAnOverflow) {
  // Gradients and their norm 1024 times the true ones: the update is the
  // plain one's, clipped by the true norm.
  OwnedTensor param = f32({2}, {1, -2}), grad = f32({2}, {0.3f, 0.4f});
  OwnedTensor scaledGrad = f32({2}, {0.3f * 1024, 0.4f * 1024});
  OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
  OwnedTensor step = i64({}, {2}), norm = f32({}, {0.5f});
  OwnedTensor scaledNorm = f32({}, {0.5f * 1024}), scale = f32({}, {1024});
  KernelAttrs attrs;
  attrs.floats = {{"lr", 0.1},
                  {"beta1", 0.9},
                  {"beta2", 0.99},
                  {"epsilon", 1e-8},
                  {"weight_decay", 0.0},
                  {"min_lr", 0},
                  {"max_grad_norm", 0.25}};
  attrs.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  OwnedTensor p1(DType::F32, {2}), m1(DType::F32, {2}), v1(DType::F32, {2});
  OwnedTensor p2(DType::F32, {2}), m2(DType::F32, {2}), v2(DType::F32, {2});
  ASSERT_EQ(run("nn.adamw", attrs, {&param, &grad, &m, &v, &step, &norm},
                {&p1, &m1, &v1}),
            "");
  ASSERT_EQ(run("nn.adamw", attrs,
                {&param, &scaledGrad, &m, &v, &step, &scaledNorm, &scale},
                {&p2, &m2, &v2}),
            "");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FLOAT_EQ(read<float>(p2)[i], read<float>(p1)[i]);
    EXPECT_FLOAT_EQ(read<float>(v2)[i], read<float>(v1)[i]);
  }
  // An overflow (an inf or NaN norm) leaves everything as it was.
  for (float bad : {std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    OwnedTensor overflow = f32({}, {bad});
    ASSERT_EQ(run("nn.adamw", attrs,
                  {&param, &scaledGrad, &m, &v, &step, &overflow, &scale},
                  {&p2, &m2, &v2}),
              "");
    EXPECT_EQ(read<float>(p2), read<float>(param));
    EXPECT_EQ(read<float>(m2), read<float>(m));
    EXPECT_EQ(read<float>(v2), read<float>(v));
  }
}

TEST(KernelsTest, SumSquaresSumsInDoubleWhateverTheThreads) {
  std::vector<float> values(100000);
  double want = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(0.001f * i);
    want += double(values[i]) * values[i];
  }
  OwnedTensor x = f32({100, 1000}, values), sum(DType::F32, {});
  ASSERT_EQ(run("nn.sum_squares", {}, {&x}, {&sum}), "");
  EXPECT_FLOAT_EQ(read<float>(sum)[0], static_cast<float>(want));
  OwnedTensor half(DType::BF16, {2});
  half.view.as<uint16_t>()[0] = floatToHalf(DType::BF16, 3);
  half.view.as<uint16_t>()[1] = floatToHalf(DType::BF16, -4);
  ASSERT_EQ(run("nn.sum_squares", {}, {&half}, {&sum}), "");
  EXPECT_EQ(read<float>(sum)[0], 25.0f);
  OwnedTensor ints = i64({2}, {1, 2});
  EXPECT_EQ(run("nn.sum_squares", {}, {&ints}, {&sum}),
            "nn.sum_squares: expects a float input, got i64");
}

TEST(KernelsTest, AdamWReadsA16BitGradientAsItsF32Value) {
  // A mixed-precision update: f32 master weight and moments, a bf16 or f16
  // gradient, in place (the outputs are the inputs' buffers), as a
  // plan's update writes over the old parameter and state.
  for (DType dtype : {DType::BF16, DType::F16}) {
    OwnedTensor param = f32({2}, {1, -2}), wide = f32({2}, {0.5f, -1});
    OwnedTensor grad(dtype, {2});
    for (int i = 0; i < 2; ++i)
      grad.view.as<uint16_t>()[i] =
          floatToHalf(dtype, read<float>(wide)[static_cast<size_t>(i)]);
    OwnedTensor m = f32({2}, {0.1f, 0.2f}), v = f32({2}, {0.01f, 0.02f});
    OwnedTensor step = i64({}, {3});
    OwnedTensor p2(param), m2(m), v2(v);
    OwnedTensor newParam(DType::F32, {2}), newM(DType::F32, {2}),
        newV(DType::F32, {2});
    KernelAttrs attrs;
    attrs.floats = {{"lr", 1e-2},
                    {"beta1", 0.8},
                    {"beta2", 0.9},
                    {"epsilon", 1e-6},
                    {"weight_decay", 0.1}};
    attrs.floats["min_lr"] = 0;
    attrs.floats["max_grad_norm"] = 0;
    attrs.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
    ASSERT_EQ(run("nn.adamw", attrs, {&param, &wide, &m, &v, &step},
                  {&newParam, &newM, &newV}),
              "");
    ASSERT_EQ(
        run("nn.adamw", attrs, {&p2, &grad, &m2, &v2, &step}, {&p2, &m2, &v2}),
        "");
    EXPECT_EQ(read<float>(p2), read<float>(newParam));
    EXPECT_EQ(read<float>(m2), read<float>(newM));
    EXPECT_EQ(read<float>(v2), read<float>(newV));
  }
}

} // namespace
