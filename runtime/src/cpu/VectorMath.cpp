//===- VectorMath.cpp - Vectorised element math on the CPU ----------------===//

#include "VectorMath.h"

#include <algorithm>
#include <cmath>

#ifdef __SSE2__
#include "VectorMathIsa.h"

#include <sleef.h>

#include <emmintrin.h>
#endif

using namespace tessera::runtime::cpu;

#ifdef __SSE2__
namespace {
struct Sse2 {
  using V = __m128;
  static constexpr int64_t kLanes = 4;
  static V load(const float *p) { return _mm_loadu_ps(p); }
  static void store(float *p, V v) { _mm_storeu_ps(p, v); }
  static V set(float x) { return _mm_set1_ps(x); }
  static V add(V a, V b) { return _mm_add_ps(a, b); }
  static V sub(V a, V b) { return _mm_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm_mul_ps(a, b); }
  static V div(V a, V b) { return _mm_div_ps(a, b); }
  static V exp(V v) { return Sleef_expf4_u10(v); }
  static V log(V v) { return Sleef_logf4_u10(v); }
  /// |v|, and `magnitude` with the sign of `sign`.
  static V abs(V v) { return _mm_andnot_ps(set(-0.0f), v); }
  static V withSignOf(V magnitude, V sign) {
    return _mm_or_ps(magnitude, _mm_and_ps(sign, set(-0.0f)));
  }
  /// All ones in the lanes where a < b; the lanes of `t` there, else `f`.
  static V lessThan(V a, V b) { return _mm_cmplt_ps(a, b); }
  static V select(V mask, V t, V f) {
    return _mm_or_ps(_mm_and_ps(mask, t), _mm_andnot_ps(mask, f));
  }
  static V erf(V v) { return Sleef_erff4_u10(v); }
};
using Kernels = VectorKernels<Sse2>;

/// Whether this process computes on eight lanes: decided once, so that
/// every kernel call takes the same path.
bool useAvx2() {
#ifdef TESSERA_VECTOR_MATH_AVX2
  static const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
#else
  return false;
#endif
}
} // namespace

#define TESSERA_SSE2(name, kernel)                                             \
  void tessera::runtime::cpu::sse2::name(const float *x, float *y,             \
                                         int64_t n) {                          \
    Kernels::kernel(x, y, n);                                                  \
  }
TESSERA_SSE2(vectorExp, exp)
TESSERA_SSE2(vectorLog, log)
TESSERA_SSE2(vectorTanh, tanh)
TESSERA_SSE2(vectorErf, erf)
TESSERA_SSE2(vectorSigmoid, sigmoid)
TESSERA_SSE2(vectorSilu, silu)
TESSERA_SSE2(vectorGelu, gelu)
#undef TESSERA_SSE2

#ifdef TESSERA_VECTOR_MATH_AVX2
#define TESSERA_DISPATCH(name)                                                 \
  void tessera::runtime::cpu::name(const float *x, float *y, int64_t n) {      \
    if (useAvx2())                                                             \
      return avx2::name(x, y, n);                                              \
    sse2::name(x, y, n);                                                       \
  }
#else
#define TESSERA_DISPATCH(name)                                                 \
  void tessera::runtime::cpu::name(const float *x, float *y, int64_t n) {      \
    sse2::name(x, y, n);                                                       \
  }
#endif
TESSERA_DISPATCH(vectorExp)
TESSERA_DISPATCH(vectorLog)
TESSERA_DISPATCH(vectorTanh)
TESSERA_DISPATCH(vectorErf)
TESSERA_DISPATCH(vectorSigmoid)
TESSERA_DISPATCH(vectorSilu)
TESSERA_DISPATCH(vectorGelu)
#undef TESSERA_DISPATCH

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
