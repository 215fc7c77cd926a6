//===- ElementMath.h - The CUDA kernels' per-element math -------*- C++ -*-===//
//
// What the elementwise, compare and cast kernels compute for one element,
// as functions that nvcc compiles for the GPU and any C++ compiler for the
// host: a unit test (CudaLayoutsTest) runs the very same code on a CPU
// against the CPU kernels, edge cases (NaN, infinities, saturation)
// included. 16-bit floats go through CUDA's conversions on the GPU and the
// runtime's (the same rounding: to nearest even) on the host.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_ELEMENTMATH_H
#define TESSERA_RUNTIME_CUDA_ELEMENTMATH_H

#include "tessera/runtime/OpIds.h"
#include "tessera/runtime/Tensor.h"

#include <climits>
#include <cstdint>
#include <math.h>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif

namespace tessera::runtime::cuda {

/// The map ops of the op table (Ops.def), whose math applyMap computes.
using MapOp = tessera::runtime::MapOp;

TESSERA_HOST_DEVICE inline float applyMap(MapOp op, float a, float b) {
  switch (op) {
  case MapOp::Add:
    return a + b;
  case MapOp::Sub:
    return a - b;
  case MapOp::Mul:
    return a * b;
  case MapOp::Div:
    return a / b;
  // NaN wins, as in torch.maximum and torch.minimum.
  case MapOp::Max:
    return a != a || b != b ? a + b : (a > b ? a : b);
  case MapOp::Min:
    return a != a || b != b ? a + b : (a < b ? a : b);
  case MapOp::Pow:
    return powf(a, b);
  case MapOp::Neg:
    return -a;
  case MapOp::Exp:
    return expf(a);
  case MapOp::Log:
    return logf(a);
  case MapOp::Sqrt:
    return sqrtf(a);
  case MapOp::Rsqrt:
    return 1.0f / sqrtf(a);
  case MapOp::Tanh:
    return tanhf(a);
  case MapOp::Sin:
    return sinf(a);
  case MapOp::Cos:
    return cosf(a);
  case MapOp::Erf:
    return erff(a);
  case MapOp::Sigmoid:
    return 1.0f / (1.0f + expf(-a));
  case MapOp::Abs:
    return fabsf(a);
  case MapOp::Relu:
    return a < 0.0f ? 0.0f : a; // NaN stays NaN, as on the CPU.
  case MapOp::Gelu:
    return 0.5f * a *
           (1.0f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)));
  case MapOp::Silu:
    return a / (1.0f + expf(-a));
  }
  return 0.0f;
}

/// nn.clamp: NaN stays NaN.
TESSERA_HOST_DEVICE inline float applyClamp(float x, float lo, float hi) {
  return x != x ? x : (x < lo ? lo : (x > hi ? hi : x));
}

/// Where element `i` of gather's result (or scatter_add's source), laid out
/// [outer, picked, inner] around the axis, reads (writes) in the whole
/// tensor [outer, whole, inner], for the index `index` (in range).
TESSERA_HOST_DEVICE inline int64_t getIndexedOffset(int64_t i, int64_t index,
                                                    int64_t picked,
                                                    int64_t whole,
                                                    int64_t inner) {
  int64_t row = i / inner / picked;
  return (row * whole + index) * inner + i % inner;
}

/// Whether element `a` of a row comes before `b` in nn.top_k's order:
/// larger first, NaN above every number, ties by lower index.
TESSERA_HOST_DEVICE inline bool topKBefore(float xa, int64_t a, float xb,
                                           int64_t b) {
  bool nanA = xa != xa, nanB = xb != xb;
  if (nanA != nanB)
    return nanA;
  if (!nanA && xa != xb)
    return xa > xb;
  return a < b;
}

/// nn.top_k of one row of `size` elements: k passes, each picking the
/// first element in order after the previous pick.
TESSERA_HOST_DEVICE inline void topKRow(const float *x, int64_t size,
                                        int64_t k, float *values,
                                        int64_t *indices) {
  int64_t previous = -1;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t i = 0; i < size; ++i) {
      if (previous >= 0 && !topKBefore(x[previous], previous, x[i], i))
        continue;
      if (best < 0 || topKBefore(x[i], i, x[best], best))
        best = i;
    }
    values[j] = x[best];
    indices[j] = best;
    previous = best;
  }
}

/// nn.compare's predicates 0..5: eq, ne, lt, le, gt, ge.
template <typename T>
TESSERA_HOST_DEVICE inline bool applyPredicate(int predicate, T x, T z) {
  switch (predicate) {
  case 0:
    return x == z;
  case 1:
    return x != z;
  case 2:
    return x < z;
  case 3:
    return x <= z;
  case 4:
    return x > z;
  case 5:
    return x >= z;
  }
  return false;
}

TESSERA_HOST_DEVICE inline float widenHalf(DType dtype, uint16_t bits) {
#ifdef __CUDA_ARCH__
  return dtype == DType::BF16 ? __bfloat162float(__ushort_as_bfloat16(bits))
                              : __half2float(__ushort_as_half(bits));
#else
  return halfToFloat(dtype, bits);
#endif
}

TESSERA_HOST_DEVICE inline uint16_t narrowToHalf(DType dtype, float value) {
#ifdef __CUDA_ARCH__
  return dtype == DType::BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(value))
                              : __half_as_ushort(__float2half_rn(value));
#else
  return floatToHalf(dtype, value);
#endif
}

/// One element as a cast reads it: floats widened to f32, integers to i64.
struct Scalar {
  bool isFloat;
  float f;
  long long i;
};

TESSERA_HOST_DEVICE inline Scalar loadScalar(DType dtype, const void *x,
                                             int64_t index) {
  switch (dtype) {
  case DType::F32:
    return {true, static_cast<const float *>(x)[index], 0};
  case DType::BF16:
  case DType::F16:
    return {true, widenHalf(dtype, static_cast<const uint16_t *>(x)[index]), 0};
  case DType::I32:
    return {false, 0.0f, static_cast<const int32_t *>(x)[index]};
  case DType::I64:
    return {false, 0.0f, static_cast<const long long *>(x)[index]};
  case DType::I1:
    return {false, 0.0f, static_cast<const uint8_t *>(x)[index] != 0 ? 1 : 0};
  default:
    return {false, 0.0f, 0};
  }
}

/// Float to integer: truncation toward zero, saturating, NaN to 0.
template <typename To>
TESSERA_HOST_DEVICE inline To truncateToInt(float x, To lo, To hi) {
  if (x != x)
    return 0;
  double value = x;
  if (value >= static_cast<double>(hi))
    return hi;
  if (value <= static_cast<double>(lo))
    return lo;
  return static_cast<To>(value);
}

/// nn.cast's store: integer narrowing wraps, to i1 tests `!= 0`.
TESSERA_HOST_DEVICE inline void storeScalar(DType dtype, void *y, int64_t index,
                                            Scalar s) {
  float asFloat = s.isFloat ? s.f : static_cast<float>(s.i);
  switch (dtype) {
  case DType::F32:
    static_cast<float *>(y)[index] = asFloat;
    return;
  case DType::BF16:
  case DType::F16:
    static_cast<uint16_t *>(y)[index] = narrowToHalf(dtype, asFloat);
    return;
  case DType::I32:
    static_cast<int32_t *>(y)[index] =
        s.isFloat ? truncateToInt<int32_t>(s.f, INT32_MIN, INT32_MAX)
                  : static_cast<int32_t>(s.i);
    return;
  case DType::I64:
    static_cast<long long *>(y)[index] =
        s.isFloat ? truncateToInt<long long>(s.f, LLONG_MIN, LLONG_MAX) : s.i;
    return;
  case DType::I1:
    static_cast<uint8_t *>(y)[index] =
        (s.isFloat ? s.f != 0.0f : s.i != 0) ? 1 : 0;
    return;
  default:
    return;
  }
}

} // namespace tessera::runtime::cuda

#endif // TESSERA_RUNTIME_CUDA_ELEMENTMATH_H
