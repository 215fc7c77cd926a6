//===- Tensor.cpp - Typed views over runtime buffers ----------------------===//

#include "tessera/runtime/Tensor.h"

#include <cstdio>
#include <cstring>

#include <algorithm>
#include <new>
#include <stdexcept>

using namespace tessera;
using namespace tessera::runtime;

size_t runtime::getDTypeBytes(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I1:
    return 1;
  }
  // Only a value cast from outside the enum gets here.
  return 0;
}

const char *runtime::getDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::I1:
    return "i1";
  }
  return "unknown";
}

int64_t runtime::getNumElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

std::string runtime::formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string runtime::formatBytes(uint64_t bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  if (bytes < (uint64_t(1) << 20))
    return text;
  char scaled[32];
  if (bytes < (uint64_t(1) << 30))
    std::snprintf(scaled, sizeof(scaled), " (%.1f MiB)",
                  static_cast<double>(bytes) / (1 << 20));
  else
    std::snprintf(scaled, sizeof(scaled), " (%.1f GiB)",
                  static_cast<double>(bytes) / (1 << 30));
  return text + scaled;
}

std::optional<int64_t>
runtime::getCheckedNumElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    if (size < 0 || __builtin_mul_overflow(count, size, &count))
      return std::nullopt;
  return count;
}

OwnedTensor::OwnedTensor(DType dtype, std::vector<int64_t> shape) {
  // A negative size is a malformed shape, which the plan loader rejects; here
  // it just gets no storage rather than an enormous allocation.
  int64_t count = std::max<int64_t>(runtime::getNumElements(shape), 0);
  storage.assign(count * getDTypeBytes(dtype), 0);
  view.dtype = dtype;
  view.shape = std::move(shape);
  view.data = storage.data();
}

Expected<OwnedTensor> OwnedTensor::allocate(DType dtype,
                                            std::vector<int64_t> shape,
                                            const std::string &what) {
  std::optional<int64_t> count = getCheckedNumElements(shape);
  uint64_t bytes = 0;
  if (!count || __builtin_mul_overflow(static_cast<uint64_t>(*count),
                                       getDTypeBytes(dtype), &bytes))
    return invalidArgument(what + " of shape " + formatShape(shape) +
                           " has no size in bytes (a size is negative, or "
                           "the bytes pass 2^64)");
  // Only the allocation can throw here: std::vector reports a size past its
  // maximum with std::length_error, and no memory with std::bad_alloc.
  try {
    return OwnedTensor(dtype, std::move(shape));
  } catch (const std::bad_alloc &) {
  } catch (const std::length_error &) {
  }
  return deviceError("out of host memory for " + what + ": " +
                     formatBytes(bytes));
}

OwnedTensor::OwnedTensor(const OwnedTensor &other)
    : storage(other.storage), view(other.view) {
  view.data = storage.data();
}

OwnedTensor &OwnedTensor::operator=(const OwnedTensor &other) {
  if (this == &other)
    return *this;
  storage = other.storage;
  view = other.view;
  view.data = storage.data();
  return *this;
}

bool tessera::runtime::isHalf(DType dtype) {
  return dtype == DType::BF16 || dtype == DType::F16;
}

bool tessera::runtime::isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || isHalf(dtype);
}

float tessera::runtime::halfToFloat(DType dtype, uint16_t bits) {
  uint32_t word;
  if (dtype == DType::BF16) {
    word = static_cast<uint32_t>(bits) << 16;
  } else {
    uint32_t sign = (bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    if (exponent == 0x1f) {
      word = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
      word = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      word = sign;
    } else {
      // A subnormal half is a normal float: shift the mantissa up.
      exponent = 113;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        --exponent;
      }
      word = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
    }
  }
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

uint16_t tessera::runtime::floatToHalf(DType dtype, float value) {
  uint32_t word;
  std::memcpy(&word, &value, 4);
  if (dtype == DType::BF16) {
    if ((word & 0x7fffffffu) > 0x7f800000u)
      return static_cast<uint16_t>((word >> 16) | 0x40); // keep a NaN a NaN
    word += 0x7fffu + ((word >> 16) & 1);
    return static_cast<uint16_t>(word >> 16);
  }
  uint32_t sign = (word >> 16) & 0x8000u;
  int32_t exponent = static_cast<int32_t>((word >> 23) & 0xff) - 112;
  uint32_t mantissa = word & 0x7fffffu;
  if (((word >> 23) & 0xff) == 0xff) // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0));
  if (exponent >= 0x1f)
    return static_cast<uint16_t>(sign | 0x7c00u); // overflow to inf
  if (exponent <= 0) {
    if (exponent < -10)
      return static_cast<uint16_t>(sign);
    // Subnormal: shift in the implicit bit, round to nearest even.
    mantissa |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exponent);
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1),
             midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half =
      sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half; // may carry into the exponent, which rounds up correctly
  return static_cast<uint16_t>(half);
}

OwnedTensor tessera::runtime::widenToF32(const Tensor &half) {
  OwnedTensor wide(DType::F32, half.shape);
  const auto *bits = static_cast<const uint16_t *>(half.data);
  for (int64_t i = 0, e = half.getNumElements(); i < e; ++i)
    wide.view.as<float>()[i] = halfToFloat(half.dtype, bits[i]);
  return wide;
}

void tessera::runtime::narrowFromF32(const Tensor &wide, const Tensor &half) {
  auto *bits = static_cast<uint16_t *>(half.data);
  for (int64_t i = 0, e = half.getNumElements(); i < e; ++i)
    bits[i] = floatToHalf(half.dtype, wide.as<float>()[i]);
}

double tessera::runtime::getScalar(const Tensor &tensor) {
  if (isHalf(tensor.dtype))
    return halfToFloat(tensor.dtype, tensor.as<uint16_t>()[0]);
  return tensor.as<float>()[0];
}
