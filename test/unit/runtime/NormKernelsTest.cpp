//===- NormKernelsTest.cpp - the CPU's norm kernels -------------------------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

TEST(KernelsTest, LayerNormNormalizesTheLastDim) {
  OwnedTensor input = f32({2, 4}, {1, 2, 3, 4, -10, 0, 10, 40});
  OwnedTensor gamma = f32({4}, {1, 1, 1, 1}), beta = f32({4}, {0, 0, 0, 0});
  OwnedTensor result(DType::F32, {2, 4});
  KernelAttrs attrs;
  attrs.floats["epsilon"] = 0.0;
  ASSERT_EQ(run("nn.layer_norm", attrs, {&input, &gamma, &beta}, {&result}),
            "");
  std::vector<float> y = read<float>(result);
  for (int row = 0; row < 2; ++row) {
    double mean = 0, variance = 0;
    for (int j = 0; j < 4; ++j)
      mean += y[row * 4 + j] / 4.0;
    for (int j = 0; j < 4; ++j)
      variance += (y[row * 4 + j] - mean) * (y[row * 4 + j] - mean) / 4.0;
    EXPECT_NEAR(mean, 0.0, 1e-6);
    EXPECT_NEAR(variance, 1.0, 1e-5);
  }
  // Row 0: mean 2.5, biased variance 1.25.
  EXPECT_NEAR(y[0], -1.5f / std::sqrt(1.25f), 1e-5f);

  OwnedTensor scaled = f32({4}, {2, 2, 2, 2}), shifted = f32({4}, {1, 1, 1, 1});
  ASSERT_EQ(run("nn.layer_norm", attrs, {&input, &scaled, &shifted}, {&result}),
            "");
  EXPECT_NEAR(read<float>(result)[0], 2 * (-1.5f / std::sqrt(1.25f)) + 1,
              1e-5f);
}

TEST(KernelsTest, RmsNormScalesByTheRootMeanSquare) {
  OwnedTensor input = f32({1, 2}, {3, 4});
  OwnedTensor gamma = f32({2}, {1, 2});
  OwnedTensor result(DType::F32, {1, 2});
  KernelAttrs attrs;
  attrs.floats["epsilon"] = 0.0;
  ASSERT_EQ(run("nn.rms_norm", attrs, {&input, &gamma}, {&result}), "");
  // rms = sqrt((9 + 16) / 2).
  float rms = std::sqrt(12.5f);
  expectNear(read<float>(result), {3 / rms, 8 / rms});

  OwnedTensor wrongGamma = f32({3}, {1, 1, 1});
  EXPECT_EQ(run("nn.rms_norm", attrs, {&input, &wrongGamma}, {&result}),
            "nn.rms_norm: expects gamma of shape [2], got [3]");
}

TEST(KernelsTest, NormGradientsMatchFiniteDifferences) {
  // dx_i = sum_j dy_j dy_j/dx_i, against central differences of the
  // forward kernels (in f64 sums of f32 runs; h = 1e-2 on inputs of O(1)),
  // and x̂ against the forward with gamma 1, beta 0.
  for (bool rms : {false, true}) {
    std::string norm = rms ? "nn.rms_norm" : "nn.layer_norm";
    KernelAttrs epsilon;
    epsilon.floats["epsilon"] = rms ? 1.0e-6 : 1.0e-5;
    OwnedTensor x = f32({2, 5}, {0.3f, -1.2f, 2.0f, 0.7f, -0.4f, 1.5f, 1.1f,
                                 -0.9f, 0.0f, 2.4f});
    OwnedTensor gamma = f32({5}, {1.5f, -0.5f, 2.0f, 0.8f, 1.0f});
    OwnedTensor beta = f32({5}, {0.1f, 0.2f, -0.3f, 0.0f, 0.5f});
    OwnedTensor ones = f32({5}, {1, 1, 1, 1, 1}),
                zeros = f32({5}, {0, 0, 0, 0, 0});
    OwnedTensor dy = f32({2, 5}, {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.0f, 0.3f,
                                  -0.2f, 0.9f, -1.1f});
    auto forward = [&](const OwnedTensor &input, const OwnedTensor &g,
                       const OwnedTensor &b) {
      OwnedTensor y(DType::F32, {2, 5});
      std::string error = rms ? run(norm, epsilon, {&input, &g}, {&y})
                              : run(norm, epsilon, {&input, &g, &b}, {&y});
      EXPECT_EQ(error, "");
      return read<float>(y);
    };
    OwnedTensor dx(DType::F32, {2, 5}), xhat(DType::F32, {2, 5});
    ASSERT_EQ(run(norm + "_grad", epsilon, {&x, &gamma, &dy}, {&dx, &xhat}),
              "");
    std::vector<float> got = read<float>(dx);
    for (int i = 0; i < 10; ++i) {
      OwnedTensor up = x, down = x;
      up.view.as<float>()[i] += 1e-2f;
      down.view.as<float>()[i] -= 1e-2f;
      std::vector<float> yUp = forward(up, gamma, beta),
                         yDown = forward(down, gamma, beta);
      double want = 0;
      for (int j = 0; j < 10; ++j)
        want += read<float>(dy)[j] * (yUp[j] - yDown[j]) / 2e-2;
      EXPECT_NEAR(got[i], want, 2e-3) << norm << " dx[" << i << "]";
    }
    expectNear(read<float>(xhat), forward(x, ones, zeros));
  }
  OwnedTensor x(DType::F32, {2, 5}), dy(DType::F32, {2, 4}),
      gamma(DType::F32, {5}), dx(DType::F32, {2, 5}), xhat(DType::F32, {2, 5});
  EXPECT_EQ(run("nn.layer_norm_grad", {}, {&x, &gamma, &dy}, {&dx, &xhat}),
            "nn.layer_norm_grad: expects result gradient of shape [2, 5], "
            "got [2, 4]");
}

} // namespace
