//===- VectorMathTest.cpp - The CPU's vectorised element math -------------===//
//
// SLEEF's functions against libm on dense sweeps of floats: within 2 ulp of
// the double-precision result rounded to float, and the same result for an
// element wherever it lies in its buffer.
//
//===----------------------------------------------------------------------===//

#include "cpu/VectorMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

using namespace tessera::runtime::cpu;

namespace {

/// How many floats lie between `a` and `b` (both finite or both the same).
int64_t ulpDistance(float a, float b) {
  if (a == b || (std::isnan(a) && std::isnan(b)))
    return 0;
  if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b))
    return std::numeric_limits<int64_t>::max();
  auto ordered = [](float f) {
    int32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits < 0 ? int64_t(INT32_MIN) - bits : int64_t(bits);
  };
  return std::llabs(ordered(a) - ordered(b));
}

/// `count` floats evenly from `lo` to `hi`.
std::vector<float> sweep(double lo, double hi, int64_t count) {
  std::vector<float> x(count);
  for (int64_t i = 0; i < count; ++i)
    x[i] = static_cast<float>(lo + (hi - lo) * i / (count - 1));
  return x;
}

void expectWithinUlps(void (*fn)(const float *, float *, int64_t),
                      const std::function<double(double)> &reference,
                      const std::vector<float> &x, int64_t ulps) {
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), x.size());
  int64_t worst = 0;
  float at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float want = static_cast<float>(reference(x[i]));
    int64_t distance = ulpDistance(y[i], want);
    if (distance > worst) {
      worst = distance;
      at = x[i];
    }
  }
  EXPECT_LE(worst, ulps) << "at x = " << at;
}

} // namespace

TEST(VectorMathTest, ExpLogTanhErfAreWithinTwoUlpsOfLibm) {
  constexpr int64_t kCount = 1 << 20;
  expectWithinUlps(
      vectorExp, [](double v) { return std::exp(v); }, sweep(-87, 88, kCount),
      2);
  expectWithinUlps(
      vectorLog, [](double v) { return std::log(v); },
      sweep(1e-30, 1e30, kCount), 2);
  expectWithinUlps(
      vectorLog, [](double v) { return std::log(v); }, sweep(1e-3, 10, kCount),
      2);
  expectWithinUlps(
      vectorTanh, [](double v) { return std::tanh(v); }, sweep(-12, 12, kCount),
      2);
  expectWithinUlps(
      vectorErf, [](double v) { return std::erf(v); }, sweep(-6, 6, kCount), 2);
}

/// Every float from `lo` to `hi` (both positive), and their negatives.
std::vector<float> everyFloat(float lo, float hi) {
  std::vector<float> x;
  for (float v = lo; v <= hi; v = std::nextafter(v, hi + 1)) {
    x.push_back(v);
    x.push_back(-v);
  }
  return x;
}

TEST(VectorMathTest, TanhIsWithinOneUlpOnBothPaths) {
  // Tessera's own tanh switches from a polynomial to the exp form at
  // |x| = 0.625: every float around the switch, then small values down to
  // subnormals, then a sweep past where tanh rounds to 1.
  std::vector<void (*)(const float *, float *, int64_t)> paths = {vectorTanh};
#ifdef __SSE2__
  paths.push_back(sse2::vectorTanh);
#endif
  auto reference = [](double v) { return std::tanh(v); };
  for (auto path : paths) {
    expectWithinUlps(path, reference, everyFloat(0.62f, 0.63f), 1);
    expectWithinUlps(path, reference, everyFloat(0.0f, 1e-40f), 0);
    expectWithinUlps(path, reference, sweep(1e-40, 1e-3, 1 << 18), 1);
    expectWithinUlps(path, reference, sweep(-100, 100, 1 << 20), 1);
  }
}

TEST(VectorMathTest, ActivationsMatchTheirFormulas) {
  constexpr int64_t kCount = 1 << 18;
  std::vector<float> x = sweep(-20, 20, kCount);
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  expectWithinUlps(vectorSigmoid, sigmoid, x, 4);
  expectWithinUlps(
      vectorSilu, [&](double v) { return v * sigmoid(v); }, x, 4);
  // GELU's tanh form loses relative precision where it nears zero (large
  // negative x): compared in absolute terms.
  std::vector<float> y(x.size());
  vectorGelu(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    double want =
        0.5 * v *
        (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    ASSERT_NEAR(y[i], want, 4e-7 * std::max(1.0, std::fabs(want)))
        << "at x = " << v;
  }
}

TEST(VectorMathTest, AnElementsResultDoesNotDependOnItsPlace) {
  // The same values at every offset and length: the last partial group
  // takes the vector path too.
  std::vector<float> x = sweep(-3, 3, 37);
  std::vector<float> whole(x.size());
  vectorTanh(x.data(), whole.data(), x.size());
  for (size_t offset = 1; offset < 8; ++offset) {
    std::vector<float> part(x.size() - offset);
    vectorTanh(x.data() + offset, part.data(), part.size());
    for (size_t i = 0; i < part.size(); ++i)
      ASSERT_EQ(part[i], whole[i + offset]) << "offset " << offset;
  }
  // In place.
  std::vector<float> inPlace = x;
  vectorTanh(inPlace.data(), inPlace.data(), inPlace.size());
  EXPECT_EQ(inPlace, whole);
}

TEST(VectorMathTest, SpecialValues) {
  std::vector<float> x = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(x.size());
  vectorExp(x.data(), y.data(), x.size());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_TRUE(std::isnan(y[4]));
  vectorTanh(x.data(), y.data(), x.size());
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_TRUE(std::isnan(y[4]));
  vectorLog(x.data(), y.data(), 1);
  EXPECT_EQ(y[0], -std::numeric_limits<float>::infinity());
}
