//===- Tensor.h - Typed views over runtime buffers --------------*- C++ -*-===//

#ifndef TESSERA_RUNTIME_TENSOR_H
#define TESSERA_RUNTIME_TENSOR_H

#include "tessera/runtime/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Element types a plan may use (the plan's DType without UNSPECIFIED).
enum class DType { F32, F64, F16, BF16, I32, I64, I1 };

/// Bytes of one element; i1 takes a byte.
size_t getDTypeBytes(DType dtype);
const char *getDTypeName(DType dtype);

/// 16-bit floats: bfloat16 and IEEE half, widened for math and narrowed back
/// with rounding to nearest even.
bool isHalf(DType dtype);
/// f32, f64 and the 16-bit floats.
bool isFloat(DType dtype);
float halfToFloat(DType dtype, uint16_t bits);
uint16_t floatToHalf(DType dtype, float value);

/// Row-major element count of a shape (1 for scalars).
int64_t getNumElements(const std::vector<int64_t> &shape);
/// "[2, 64]": a shape as messages print it.
std::string formatShape(const std::vector<int64_t> &shape);
/// "412408086528 bytes (384.1 GiB)": bytes as a message prints them.
std::string formatBytes(uint64_t bytes);
/// The elements of `shape` read from a file: nothing where a size is
/// negative or the count overflows int64.
std::optional<int64_t> getCheckedNumElements(const std::vector<int64_t> &shape);

/// A typed, shaped view over memory the executor owns.
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  void *data = nullptr;

  int64_t getNumElements() const { return runtime::getNumElements(shape); }
  int64_t getRank() const { return shape.size(); }
  size_t getBytes() const { return getNumElements() * getDTypeBytes(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// The value of a scalar f32 or 16-bit float tensor (a loss, a metric).
double getScalar(const Tensor &tensor);

/// Owned storage with a tensor view.
struct OwnedTensor {
  std::vector<uint8_t> storage;
  Tensor view;

  OwnedTensor() = default;
  /// Zeroed storage; throws std::bad_alloc where the host has no memory for
  /// it, so that whatever may be large is made with allocate instead.
  OwnedTensor(DType dtype, std::vector<int64_t> shape);
  /// Zeroed storage, or a device error naming `what` (e.g. "the global
  /// value of 'wte'") and its bytes where the host has no memory for it.
  static Expected<OwnedTensor> allocate(DType dtype, std::vector<int64_t> shape,
                                        const std::string &what);
  OwnedTensor(const OwnedTensor &other);
  OwnedTensor &operator=(const OwnedTensor &other);
  OwnedTensor(OwnedTensor &&) = default;
  OwnedTensor &operator=(OwnedTensor &&) = default;
};

/// A copy of a 16-bit float tensor in f32.
OwnedTensor widenToF32(const Tensor &half);
/// Writes the f32 `wide` into the 16-bit float tensor `half` of its shape.
void narrowFromF32(const Tensor &wide, const Tensor &half);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TENSOR_H
