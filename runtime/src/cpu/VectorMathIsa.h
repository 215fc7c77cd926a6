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
    map(x, y, n, [](V v) { return Isa::tanh(v); });
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
                      Isa::add(Isa::set(1.0f), Isa::tanh(inner)));
    });
  }
};

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_VECTORMATHISA_H
