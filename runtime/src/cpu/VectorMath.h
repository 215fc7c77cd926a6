//===- VectorMath.h - Vectorised element math on the CPU --------*- C++ -*-===//
//
// Transcendental functions over float arrays through SLEEF's 1.0-ulp
// functions, eight lanes at a time where the CPU has AVX2 and FMA and four
// (SSE2) elsewhere, chosen once per process: about three times libm's
// scalar speed for exp and log. tanh is Tessera's own, on SLEEF's exp
// (VectorMathIsa.h), within 1 ulp. Every element, those of a last partial
// group included, takes the same path, so an element's result does not
// depend on where it lies in its buffer (a sharded run's pieces match one
// device's tensor).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_VECTORMATH_H
#define TESSERA_RUNTIME_CPU_VECTORMATH_H

#include <cstdint>

namespace tessera::runtime::cpu {

/// y[i] = f(x[i]) for i < n; `x` and `y` may be the same array.
void vectorExp(const float *x, float *y, int64_t n);
void vectorLog(const float *x, float *y, int64_t n);
void vectorTanh(const float *x, float *y, int64_t n);
void vectorErf(const float *x, float *y, int64_t n);
/// 1 / (1 + exp(-x)).
void vectorSigmoid(const float *x, float *y, int64_t n);
/// x / (1 + exp(-x)).
void vectorSilu(const float *x, float *y, int64_t n);
/// GELU in its tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void vectorGelu(const float *x, float *y, int64_t n);

/// The SSE2 versions (where the compiler targets SSE2), which the functions
/// above call where the CPU lacks AVX2 or FMA.
namespace sse2 {
void vectorExp(const float *x, float *y, int64_t n);
void vectorLog(const float *x, float *y, int64_t n);
void vectorTanh(const float *x, float *y, int64_t n);
void vectorErf(const float *x, float *y, int64_t n);
void vectorSigmoid(const float *x, float *y, int64_t n);
void vectorSilu(const float *x, float *y, int64_t n);
void vectorGelu(const float *x, float *y, int64_t n);
} // namespace sse2

/// The AVX2 versions (VectorMathAvx2.cpp, built on x86-64 only), which the
/// functions above call where the CPU has AVX2 and FMA.
namespace avx2 {
void vectorExp(const float *x, float *y, int64_t n);
void vectorLog(const float *x, float *y, int64_t n);
void vectorTanh(const float *x, float *y, int64_t n);
void vectorErf(const float *x, float *y, int64_t n);
void vectorSigmoid(const float *x, float *y, int64_t n);
void vectorSilu(const float *x, float *y, int64_t n);
void vectorGelu(const float *x, float *y, int64_t n);
} // namespace avx2

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_VECTORMATH_H
