//===- Tensor.cpp - Typed views over runtime buffers ----------------------===//

#include "tessera/runtime/Tensor.h"

#include <algorithm>

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

OwnedTensor::OwnedTensor(DType dtype, std::vector<int64_t> shape) {
  // A negative size is a malformed shape, which the plan loader rejects; here
  // it just gets no storage rather than an enormous allocation.
  int64_t count = std::max<int64_t>(runtime::getNumElements(shape), 0);
  storage.assign(count * getDTypeBytes(dtype), 0);
  view.dtype = dtype;
  view.shape = std::move(shape);
  view.data = storage.data();
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
