//===- ElementwiseKernels.cpp - The CPU's elementwise kernels -------------===//
//
// The math ops (ArrayMath.h), clamp, select, compare, cast, constants,
// iota, broadcast and nn.fused.
//
//===----------------------------------------------------------------------===//

#include "ArrayMath.h"
#include "FusedKernel.h"
#include "KernelSupport.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Elementwise loops read element i of every input before writing element i,
// so an output may alias an input (an in-place update).

/// An elementwise op of ArrayMath.h on same-shaped f32 tensors.
void runArrayMath(KernelCall &c) {
  const cpu::ArrayMath *math = cpu::findArrayMath(c.getOp());
  size_t arity = math->arity;
  const float *a = c.in(0).as<float>(), *b = c.in(arity - 1).as<float>();
  float *y = c.out(0).as<float>();
  cpu::parallelFor(c.in(0).getNumElements(), kElementsPerThread,
                   [&](int64_t begin, int64_t end) {
                     math->fn(a + begin, b + begin, y + begin, end - begin);
                   });
}

/// nn.clamp: NaN stays NaN.
void runClamp(KernelCall &c) {
  std::optional<double> min = c.getFloat("min"), max = c.getFloat("max");
  float lo = static_cast<float>(*min), hi = static_cast<float>(*max);
  const float *x = c.in(0).as<float>();
  float *y = c.out(0).as<float>();
  for (int64_t i = 0, e = c.in(0).getNumElements(); i < e; ++i)
    y[i] = cpu::clampElement(x[i], lo, hi);
}

template <size_t ElementBytes>
static void selectFixed(const uint8_t *condition, const uint8_t *onTrue,
                        const uint8_t *onFalse, uint8_t *result,
                        int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(result + i * ElementBytes,
                (condition[i] ? onTrue : onFalse) + i * ElementBytes,
                ElementBytes);
}

void runSelect(KernelCall &c) {
  const Tensor &onTrue = c.in(1);
  auto *condition = c.in(0).as<const uint8_t>();
  auto *t = onTrue.as<const uint8_t>(), *f = c.in(2).as<const uint8_t>();
  auto *result = c.out(0).as<uint8_t>();
  int64_t count = onTrue.getNumElements();
  switch (getDTypeBytes(onTrue.dtype)) {
  case 1:
    return selectFixed<1>(condition, t, f, result, count);
  case 2:
    return selectFixed<2>(condition, t, f, result, count);
  case 4:
    return selectFixed<4>(condition, t, f, result, count);
  case 8:
    return selectFixed<8>(condition, t, f, result, count);
  }
}

template <typename T, typename Cmp>
static void compareWith(const Tensor &lhs, const Tensor &rhs, Tensor &result,
                        Cmp cmp) {
  const T *a = lhs.as<T>(), *b = rhs.as<T>();
  auto *r = result.as<uint8_t>();
  for (int64_t i = 0, e = lhs.getNumElements(); i < e; ++i)
    r[i] = cmp(a[i], b[i]) ? 1 : 0;
}

template <typename T>
static void compareAs(const Tensor &lhs, const Tensor &rhs, Tensor &result,
                      int64_t predicate) {
  switch (predicate) {
  case 0:
    return compareWith<T>(lhs, rhs, result, std::equal_to<T>());
  case 1:
    return compareWith<T>(lhs, rhs, result, std::not_equal_to<T>());
  case 2:
    return compareWith<T>(lhs, rhs, result, std::less<T>());
  case 3:
    return compareWith<T>(lhs, rhs, result, std::less_equal<T>());
  case 4:
    return compareWith<T>(lhs, rhs, result, std::greater<T>());
  case 5:
    return compareWith<T>(lhs, rhs, result, std::greater_equal<T>());
  }
}

/// nn.compare; the predicate is the ComparePredicate case (eq, ne, lt, le,
/// gt, ge = 0..5). i1 operands compare as 0 and 1.
void runCompare(KernelCall &c) {
  std::optional<int64_t> predicate = c.getInt("predicate");
  const Tensor &lhs = c.in(0), &rhs = c.in(1);
  switch (lhs.dtype) {
  case DType::F32:
    return compareAs<float>(lhs, rhs, c.out(0), *predicate);
  case DType::I32:
    return compareAs<int32_t>(lhs, rhs, c.out(0), *predicate);
  case DType::I64:
    return compareAs<int64_t>(lhs, rhs, c.out(0), *predicate);
  case DType::I1:
    return compareAs<uint8_t>(lhs, rhs, c.out(0), *predicate);
  default:
    return; // Other floats were refused above.
  }
}

namespace {
/// An i1 element: one byte; any nonzero byte reads as true.
struct Bool {
  uint8_t byte;
};
} // namespace

/// Float to integer truncates toward zero and saturates, NaN giving 0: the C++
/// conversion is undefined outside the target's range, and a kernel must not
/// be.
template <typename To> static To truncateToInt(float x) {
  if (std::isnan(x))
    return 0;
  double value = x;
  if (value >= static_cast<double>(std::numeric_limits<To>::max()))
    return std::numeric_limits<To>::max();
  if (value <= static_cast<double>(std::numeric_limits<To>::min()))
    return std::numeric_limits<To>::min();
  return static_cast<To>(value);
}

/// Converts one element as nn.cast does; conversions to i1 test `x != 0` and
/// integer narrowing wraps (two's complement), as StableHLO's convert.
template <typename To, typename From> static To convertElement(From x) {
  if constexpr (std::is_same_v<From, Bool>)
    return convertElement<To>(static_cast<int32_t>(x.byte != 0));
  else if constexpr (std::is_same_v<To, Bool>)
    return Bool{static_cast<uint8_t>(x != From(0))};
  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>)
    return truncateToInt<To>(x);
  else
    return static_cast<To>(x);
}

/// Calls `fn` with a value of the C++ type of a castable dtype; false for the
/// others.
template <typename Fn> static bool withCastType(DType dtype, Fn fn) {
  switch (dtype) {
  case DType::F32:
    fn(float());
    return true;
  case DType::I32:
    fn(int32_t());
    return true;
  case DType::I64:
    fn(int64_t());
    return true;
  case DType::I1:
    fn(Bool());
    return true;
  default:
    return false;
  }
}

void runCast(KernelCall &c) {
  const Tensor &input = c.in(0);
  Tensor &result = c.out(0);
  withCastType(input.dtype, [&](auto from) {
    withCastType(result.dtype, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      // Elements are copied in and out through memcpy: Bool and the
      // executor's buffers are only bytes.
      auto *src = input.as<const uint8_t>();
      auto *dst = result.as<uint8_t>();
      for (int64_t i = 0, e = input.getNumElements(); i < e; ++i) {
        From x;
        std::memcpy(&x, src + i * sizeof(From), sizeof(From));
        To y = convertElement<To>(x);
        std::memcpy(dst + i * sizeof(To), &y, sizeof(To));
      }
    });
  });
}

/// nn.constant: `value` holds either every element or one (a splat).
void runConstant(KernelCall &c) {
  const std::string *value = c.getBytes("value");
  Tensor &result = c.out(0);
  size_t elementBytes = getDTypeBytes(result.dtype);
  if (value->size() == elementBytes) {
    // A splat: filled as words of the element's width, at memset's speed.
    auto fill = [&](auto word) {
      std::memcpy(&word, value->data(), sizeof word);
      std::fill_n(static_cast<decltype(word) *>(result.data),
                  result.getNumElements(), word);
    };
    switch (elementBytes) {
    case 1:
      return fill(uint8_t());
    case 2:
      return fill(uint16_t());
    case 4:
      return fill(uint32_t());
    case 8:
      return fill(uint64_t());
    }
    auto *dst = result.as<uint8_t>();
    for (int64_t i = 0, e = result.getNumElements(); i < e; ++i)
      std::memcpy(dst + i * elementBytes, value->data(), elementBytes);
    return;
  }
  copyBytes(result.data, value->data(), value->size());
}

int64_t readPieceOffset(KernelCall &c, int64_t input, int64_t size) {
  if (static_cast<int64_t>(c.getNumInputs()) <= input)
    return 0;
  return c.in(input).as<int64_t>()[0] * size;
}

/// nn.iota: each element its index along `dim`.
void runIota(KernelCall &c) {
  Tensor &result = c.out(0);
  std::optional<int64_t> dim = c.getInt("dim");
  int64_t size = result.shape[*dim];
  int64_t offset = readPieceOffset(c, 0, size);
  // Row-major: the index along dim repeats `inner` times and wraps at its
  // size.
  int64_t inner = 1;
  for (int64_t d = *dim + 1; d < result.getRank(); ++d)
    inner *= result.shape[d];
  for (int64_t i = 0, e = result.getNumElements(); i < e; ++i) {
    int64_t index = offset + i / inner % size;
    switch (result.dtype) {
    case DType::F32:
      result.as<float>()[i] = static_cast<float>(index);
      break;
    case DType::I32:
      result.as<int32_t>()[i] = static_cast<int32_t>(index);
      break;
    default:
      result.as<int64_t>()[i] = index;
      break;
    }
  }
}

/// nn.broadcast: operand dim i is result dim dims[i]; a size-1 operand dim
/// and every new dim read with stride 0.
void runBroadcast(KernelCall &c) {
  const std::vector<int64_t> *dims = c.getList("dims");
  const Tensor &input = c.in(0);
  Tensor &result = c.out(0);
  std::vector<int64_t> inputStrides = getStrides(input.shape);
  std::vector<int64_t> strides(result.getRank(), 0);
  for (size_t index = 0; index < dims->size(); ++index)
    if (input.shape[index] != 1)
      strides[(*dims)[index]] = inputStrides[index];
  gatherElements(input.data, getDTypeBytes(input.dtype), result.shape, strides,
                 0, result.data);
}

/// nn.fused: its expression program (FusedKernel.h).
void runFused(KernelCall &c) {
  DecodedFusedProgram program;
  decodeFusedProgram(c.getAttrs(), c.getInputs(), c.getOutputs(), program);
  cpu::runFusedProgram(c.getAttrs(), c.getInputs(), c.getOutputs(), program);
}

} // namespace tessera::runtime::cpu
