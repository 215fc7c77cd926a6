//===- VectorMathIsa.h - VectorMath's kernels over a vector ISA -*- C++ -*-===//
//
// The array functions of VectorMath.h written once over an instruction set:
// `Isa` gives the vector type V of kLanes floats, its loads, stores and
// arithmetic, and SLEEF's 1.0-ulp functions for it. VectorMath.cpp
// instantiates them for SSE2 (4 lanes) and VectorMathAvx2.cpp, compiled
// with -mavx2 (and no FMA, so that no product and sum are contracted), for
// AVX2 (8 lanes); a process uses one of the two for every element.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_VECTORMATHISA_H
#define TESSERA_RUNTIME_CPU_VECTORMATHISA_H

#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace tessera::runtime::cpu {

template <typename Isa> struct VectorKernels {
  using V = typename Isa::V;

  /// Applies `fn` to x[0, n) into y: whole groups in place, the last
  /// partial one through a zero-padded group, so that every element takes
  /// the same path wherever it lies.
  template <typename Fn>
  static void map(const float *x, float *y, int64_t n, Fn fn) {
    constexpr int64_t lanes = Isa::kLanes;
    int64_t whole = n - n % lanes;
    for (int64_t i = 0; i < whole; i += lanes)
      Isa::store(y + i, fn(Isa::load(x + i)));
    if (whole == n)
      return;
    alignas(32) float group[lanes] = {};
    std::memcpy(group, x + whole, (n - whole) * sizeof(float));
    Isa::store(group, fn(Isa::load(group)));
    std::memcpy(y + whole, group, (n - whole) * sizeof(float));
  }

  /// tanh, within 1 ulp of the correctly rounded result on every float
  /// (checked on each one in [0, 12); past 9.02 it rounds to 1), at half
  /// the time of SLEEF's 1-ulp tanh, which GELU's forward and backward pass
  /// spent half their time in. Below |x| = 0.625, Cephes' odd polynomial
  /// x + x z P(z) with z = x²; above, 1 - 2 / (exp(2|x|) + 1), where the
  /// subtraction loses no precision. Then the sign of x.
  static V tanhOf(V x) {
    V a = Isa::abs(x);
    V e = Isa::exp(Isa::add(a, a));
    V large = Isa::sub(Isa::set(1.0f),
                       Isa::div(Isa::set(2.0f), Isa::add(e, Isa::set(1.0f))));
    V z = Isa::mul(a, a);
    V p = Isa::set(-5.70498872745e-3f);
    for (float c : {2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f,
                    -3.33332819422e-1f})
      p = Isa::add(Isa::mul(p, z), Isa::set(c));
    V small = Isa::add(Isa::mul(Isa::mul(p, z), a), a);
    // NaN compares false and takes the exp form, which keeps it NaN.
    return Isa::withSignOf(
        Isa::select(Isa::lessThan(a, Isa::set(0.625f)), small, large), x);
  }

  /// 1 + exp(-x).
  static V onePlusExpNeg(V x) {
    return Isa::add(Isa::set(1.0f), Isa::exp(Isa::sub(Isa::set(0.0f), x)));
  }

  static void exp(const float *x, float *y, int64_t n) {
    map(x, y, n, [](V v) { return Isa::exp(v); });
  }
  static void log(const float *x, float *y, int64_t n) {
    map(x, y, n, [](V v) { return Isa::log(v); });
  }
  static void tanh(const float *x, float *y, int64_t n) {
    map(x, y, n, tanhOf);
  }
  static void erf(const float *x, float *y, int64_t n) {
    map(x, y, n, [](V v) { return Isa::erf(v); });
  }
  static void sigmoid(const float *x, float *y, int64_t n) {
    map(x, y, n,
        [](V v) { return Isa::div(Isa::set(1.0f), onePlusExpNeg(v)); });
  }
  static void silu(const float *x, float *y, int64_t n) {
    map(x, y, n, [](V v) { return Isa::div(v, onePlusExpNeg(v)); });
  }
  static void gelu(const float *x, float *y, int64_t n) {
    map(x, y, n, [](V v) {
      V cube = Isa::mul(Isa::mul(v, v), v);
      V inner = Isa::mul(Isa::set(0.7978845608028654f),
                         Isa::add(v, Isa::mul(Isa::set(0.044715f), cube)));
      return Isa::mul(Isa::mul(Isa::set(0.5f), v),
                      Isa::add(Isa::set(1.0f), tanhOf(inner)));
    });
  }
};

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_VECTORMATHISA_H
