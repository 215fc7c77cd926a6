//===- ArrayMath.h - The float math of the CPU's elementwise ops -*- C++
//-*-===//
//
// One function per elementwise nn op over f32 arrays, shared by the op's own
// kernel and by nn.fused, which applies the very same function to its tiles:
// a fused program computes what the ops compute one by one, bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_ARRAYMATH_H
#define TESSERA_RUNTIME_CPU_ARRAYMATH_H

#include "tessera/runtime/OpIds.h"

#include <cstdint>
#include <string>

// A loop marked TESSERA_CLONES is built twice on x86-64, for AVX2 and for
// any CPU, and the first call picks the clone the CPU runs best (GCC's
// function multiversioning; Clang's does not take templates, and builds
// one). Each element's operations are the same IEEE ones either way: no
// FMA, so no product and sum are contracted.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TESSERA_CLONES
#endif

namespace tessera::runtime::cpu {

/// y[i] = f(a[i]) (unary) or f(a[i], b[i]) (binary) for i < n; `y` may be
/// `a` or `b`.
using ArrayFn = void (*)(const float *a, const float *b, float *y, int64_t n);

struct ArrayMath {
  int arity;
  ArrayFn fn;
};

/// The math of a map op of the table (Ops.def).
const ArrayMath &getArrayMath(MapOp op);

/// The math of elementwise op `op` (the table's map ops: nn.add, nn.exp,
/// ...); null for any other op.
const ArrayMath *findArrayMath(const std::string &op);

/// nn.clamp of one element: NaN stays NaN.
inline float clampElement(float x, float lo, float hi) {
  return x != x ? x : (x < lo ? lo : (x > hi ? hi : x));
}

/// nn.compare's predicates 0..5 (eq, ne, lt, le, gt, ge).
template <typename T> bool comparePredicate(int64_t predicate, T a, T b) {
  switch (predicate) {
  case 0:
    return a == b;
  case 1:
    return a != b;
  case 2:
    return a < b;
  case 3:
    return a <= b;
  case 4:
    return a > b;
  case 5:
    return a >= b;
  }
  return false;
}

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_ARRAYMATH_H
