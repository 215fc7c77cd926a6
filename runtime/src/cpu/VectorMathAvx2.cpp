//===- VectorMathAvx2.cpp - VectorMath's kernels on AVX2 ------------------===//
//
// Compiled with -mavx2 and called only where the CPU has AVX2 and FMA
// (SLEEF's AVX2 functions use both).
//
//===----------------------------------------------------------------------===//

#include "VectorMath.h"
#include "VectorMathIsa.h"

#include <sleef.h>

#include <immintrin.h>

using namespace tessera::runtime::cpu;

namespace {
struct Avx2 {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  static V load(const float *p) { return _mm256_loadu_ps(p); }
  static void store(float *p, V v) { _mm256_storeu_ps(p, v); }
  static V set(float x) { return _mm256_set1_ps(x); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V exp(V v) { return Sleef_expf8_u10avx2(v); }
  static V log(V v) { return Sleef_logf8_u10avx2(v); }
  /// |v|, and `magnitude` with the sign of `sign`.
  static V abs(V v) { return _mm256_andnot_ps(set(-0.0f), v); }
  static V withSignOf(V magnitude, V sign) {
    return _mm256_or_ps(magnitude, _mm256_and_ps(sign, set(-0.0f)));
  }
  /// All ones in the lanes where a < b; the lanes of `t` there, else `f`.
  static V lessThan(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static V select(V mask, V t, V f) { return _mm256_blendv_ps(f, t, mask); }
  static V erf(V v) { return Sleef_erff8_u10avx2(v); }
};
using Kernels = VectorKernels<Avx2>;
} // namespace

#define TESSERA_AVX2(name, kernel)                                             \
  void tessera::runtime::cpu::avx2::name(const float *x, float *y,             \
                                         int64_t n) {                          \
    Kernels::kernel(x, y, n);                                                  \
  }
TESSERA_AVX2(vectorExp, exp)
TESSERA_AVX2(vectorLog, log)
TESSERA_AVX2(vectorTanh, tanh)
TESSERA_AVX2(vectorErf, erf)
TESSERA_AVX2(vectorSigmoid, sigmoid)
TESSERA_AVX2(vectorSilu, silu)
TESSERA_AVX2(vectorGelu, gelu)
#undef TESSERA_AVX2
