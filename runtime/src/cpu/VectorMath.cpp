//===- VectorMath.cpp - Vectorised element math on the CPU ----------------===//

#include "VectorMath.h"

#include <sleef.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

using namespace tessera::runtime::cpu;

#ifdef __SSE2__
namespace {
constexpr int64_t kLanes = 4;

/// Applies `fn` (four lanes) to x[0, n) into y: whole groups in place, the
/// last partial one through a zero-padded group.
template <typename Fn> void map(const float *x, float *y, int64_t n, Fn fn) {
  int64_t whole = n - n % kLanes;
  for (int64_t i = 0; i < whole; i += kLanes)
    _mm_storeu_ps(y + i, fn(_mm_loadu_ps(x + i)));
  if (whole == n)
    return;
  alignas(16) float group[kLanes] = {};
  std::memcpy(group, x + whole, (n - whole) * sizeof(float));
  _mm_store_ps(group, fn(_mm_load_ps(group)));
  std::memcpy(y + whole, group, (n - whole) * sizeof(float));
}

/// 1 + exp(-x).
__m128 onePlusExpNeg(__m128 x) {
  return _mm_add_ps(_mm_set1_ps(1.0f),
                    Sleef_expf4_u10(_mm_sub_ps(_mm_setzero_ps(), x)));
}
} // namespace

void tessera::runtime::cpu::vectorExp(const float *x, float *y, int64_t n) {
  map(x, y, n, [](__m128 v) { return Sleef_expf4_u10(v); });
}

void tessera::runtime::cpu::vectorLog(const float *x, float *y, int64_t n) {
  map(x, y, n, [](__m128 v) { return Sleef_logf4_u10(v); });
}

void tessera::runtime::cpu::vectorTanh(const float *x, float *y, int64_t n) {
  map(x, y, n, [](__m128 v) { return Sleef_tanhf4_u10(v); });
}

void tessera::runtime::cpu::vectorErf(const float *x, float *y, int64_t n) {
  map(x, y, n, [](__m128 v) { return Sleef_erff4_u10(v); });
}

void tessera::runtime::cpu::vectorSigmoid(const float *x, float *y, int64_t n) {
  map(x, y, n,
      [](__m128 v) { return _mm_div_ps(_mm_set1_ps(1.0f), onePlusExpNeg(v)); });
}

void tessera::runtime::cpu::vectorSilu(const float *x, float *y, int64_t n) {
  map(x, y, n, [](__m128 v) { return _mm_div_ps(v, onePlusExpNeg(v)); });
}

void tessera::runtime::cpu::vectorGelu(const float *x, float *y, int64_t n) {
  map(x, y, n, [](__m128 v) {
    const __m128 half = _mm_set1_ps(0.5f), one = _mm_set1_ps(1.0f);
    __m128 cube = _mm_mul_ps(_mm_mul_ps(v, v), v);
    __m128 inner =
        _mm_mul_ps(_mm_set1_ps(0.7978845608028654f),
                   _mm_add_ps(v, _mm_mul_ps(_mm_set1_ps(0.044715f), cube)));
    return _mm_mul_ps(_mm_mul_ps(half, v),
                      _mm_add_ps(one, Sleef_tanhf4_u10(inner)));
  });
}

#else
// Without SSE2: libm, one element at a time.
void tessera::runtime::cpu::vectorExp(const float *x, float *y, int64_t n) {
  std::transform(x, x + n, y, [](float v) { return std::exp(v); });
}
void tessera::runtime::cpu::vectorLog(const float *x, float *y, int64_t n) {
  std::transform(x, x + n, y, [](float v) { return std::log(v); });
}
void tessera::runtime::cpu::vectorTanh(const float *x, float *y, int64_t n) {
  std::transform(x, x + n, y, [](float v) { return std::tanh(v); });
}
void tessera::runtime::cpu::vectorErf(const float *x, float *y, int64_t n) {
  std::transform(x, x + n, y, [](float v) { return std::erf(v); });
}
void tessera::runtime::cpu::vectorSigmoid(const float *x, float *y, int64_t n) {
  std::transform(x, x + n, y,
                 [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
}
void tessera::runtime::cpu::vectorSilu(const float *x, float *y, int64_t n) {
  std::transform(x, x + n, y,
                 [](float v) { return v / (1.0f + std::exp(-v)); });
}
void tessera::runtime::cpu::vectorGelu(const float *x, float *y, int64_t n) {
  std::transform(x, x + n, y, [](float v) {
    return 0.5f * v *
           (1.0f +
            std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  });
}
#endif
