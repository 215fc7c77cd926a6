//===- ArrayMath.cpp - The float math of the CPU's elementwise ops --------===//

#include "ArrayMath.h"

#include "VectorMath.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

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
} // namespace

const ArrayMath *tessera::runtime::cpu::findArrayMath(const std::string &op) {
  static const std::unordered_map<std::string, ArrayMath> table = {
      {"nn.add", {2, binary<add>}},
      {"nn.sub", {2, binary<sub>}},
      {"nn.mul", {2, binary<mul>}},
      {"nn.div", {2, binary<div>}},
      {"nn.max", {2, binary<max>}},
      {"nn.min", {2, binary<min>}},
      {"nn.pow", {2, binary<pow>}},
      {"nn.neg", {1, unary<neg>}},
      {"nn.exp", {1, vector<vectorExp>}},
      {"nn.log", {1, vector<vectorLog>}},
      {"nn.sqrt", {1, unary<sqrt>}},
      {"nn.rsqrt", {1, unary<rsqrt>}},
      {"nn.tanh", {1, vector<vectorTanh>}},
      {"nn.sin", {1, unary<sin>}},
      {"nn.cos", {1, unary<cos>}},
      {"nn.sigmoid", {1, vector<vectorSigmoid>}},
      {"nn.abs", {1, unary<abs>}},
      {"nn.erf", {1, vector<vectorErf>}},
      {"nn.relu", {1, unary<relu>}},
      {"nn.gelu", {1, vector<vectorGelu>}},
      {"nn.silu", {1, vector<vectorSilu>}},
  };
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}
