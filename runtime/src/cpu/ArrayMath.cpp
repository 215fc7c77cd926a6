//===- ArrayMath.cpp - The float math of the CPU's elementwise ops --------===//

#include "ArrayMath.h"

#include "VectorMath.h"

#include "tessera/runtime/Ops.h"

#include <algorithm>
#include <cmath>

using namespace tessera::runtime::cpu;

namespace {
/// A unary op from its per-element function.
template <float (*F)(float)>
TESSERA_CLONES void unary(const float *a, const float *, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = F(a[i]);
}

/// A unary op from a VectorMath array function.
template <void (*F)(const float *, float *, int64_t)>
void vector(const float *a, const float *, float *y, int64_t n) {
  F(a, y, n);
}

template <float (*F)(float, float)>
TESSERA_CLONES void binary(const float *a, const float *b, float *y,
                           int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = F(a[i], b[i]);
}

float add(float a, float b) { return a + b; }
float sub(float a, float b) { return a - b; }
float mul(float a, float b) { return a * b; }
float div(float a, float b) { return a / b; }
// NaN wins, as in torch.maximum and torch.minimum.
float max(float a, float b) {
  return a != a || b != b ? a + b : std::max(a, b);
}
float min(float a, float b) {
  return a != a || b != b ? a + b : std::min(a, b);
}
float pow(float a, float b) { return std::pow(a, b); }
float neg(float x) { return -x; }
float sqrt(float x) { return std::sqrt(x); }
float rsqrt(float x) { return 1.0f / std::sqrt(x); }
float sin(float x) { return std::sin(x); }
float cos(float x) { return std::cos(x); }
float abs(float x) { return std::fabs(x); }
// `x < 0 ? 0 : x` rather than max(x, 0), so that NaN stays NaN.
float relu(float x) { return x < 0.0f ? 0.0f : x; }

// Each map op's math, named after its id in the table (Ops.def).
constexpr ArrayFn mathAdd = binary<add>;
constexpr ArrayFn mathSub = binary<sub>;
constexpr ArrayFn mathMul = binary<mul>;
constexpr ArrayFn mathDiv = binary<div>;
constexpr ArrayFn mathMax = binary<max>;
constexpr ArrayFn mathMin = binary<min>;
constexpr ArrayFn mathPow = binary<pow>;
constexpr ArrayFn mathNeg = unary<neg>;
constexpr ArrayFn mathExp = vector<vectorExp>;
constexpr ArrayFn mathLog = vector<vectorLog>;
constexpr ArrayFn mathSqrt = unary<sqrt>;
constexpr ArrayFn mathRsqrt = unary<rsqrt>;
constexpr ArrayFn mathTanh = vector<vectorTanh>;
constexpr ArrayFn mathSin = unary<sin>;
constexpr ArrayFn mathCos = unary<cos>;
constexpr ArrayFn mathSigmoid = vector<vectorSigmoid>;
constexpr ArrayFn mathAbs = unary<abs>;
constexpr ArrayFn mathErf = vector<vectorErf>;
constexpr ArrayFn mathRelu = unary<relu>;
constexpr ArrayFn mathGelu = vector<vectorGelu>;
constexpr ArrayFn mathSilu = vector<vectorSilu>;
} // namespace

const ArrayMath &tessera::runtime::cpu::getArrayMath(MapOp op) {
  static const ArrayMath table[] = {
#define TESSERA_OP(Id, Name)
#define TESSERA_MAP_OP(Id, Name, Arity) {Arity, math##Id},
#include "tessera/runtime/Ops.def"
  };
  return table[static_cast<size_t>(op)];
}

const ArrayMath *tessera::runtime::cpu::findArrayMath(const std::string &op) {
  Expected<const OpInfo *> info = findOp(op);
  if (!info.ok() || (*info)->kind != OpKind::Map)
    return nullptr;
  return &getArrayMath((*info)->mapOp);
}
