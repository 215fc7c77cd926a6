//===- KernelsTestSupport.h - Small tensors for the kernels' tests -*- C++ -*-===//
//
// Tensors made from value lists, read back as vectors, and one kernel run
// on them by name (runCpuKernel), answering its message: what every kernel
// family's test uses.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TEST_UNIT_RUNTIME_KERNELSTESTSUPPORT_H
#define TESSERA_TEST_UNIT_RUNTIME_KERNELSTESTSUPPORT_H

#include "tessera/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace tessera::runtime::kernels_test {

template <typename T>
OwnedTensor makeTensor(DType dtype, std::vector<int64_t> shape,
                       const std::vector<T> &values) {
  OwnedTensor tensor(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), tensor.view.getNumElements());
  EXPECT_EQ(sizeof(T), getDTypeBytes(dtype));
  std::memcpy(tensor.view.data, values.data(), values.size() * sizeof(T));
  return tensor;
}

inline OwnedTensor f32(std::vector<int64_t> shape, const std::vector<float> &values) {
  return makeTensor(DType::F32, std::move(shape), values);
}
inline OwnedTensor i32(std::vector<int64_t> shape,
                const std::vector<int32_t> &values) {
  return makeTensor(DType::I32, std::move(shape), values);
}
inline OwnedTensor i64(std::vector<int64_t> shape,
                const std::vector<int64_t> &values) {
  return makeTensor(DType::I64, std::move(shape), values);
}
inline OwnedTensor i1(std::vector<int64_t> shape, const std::vector<uint8_t> &values) {
  return makeTensor(DType::I1, std::move(shape), values);
}

/// Values of increasing, non-round floats, so that a misplaced element shows.
inline std::vector<float> iota(int64_t count, float scale = 0.25f) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = scale * static_cast<float>(i) - 1.0f;
  return values;
}

template <typename T> std::vector<T> read(const OwnedTensor &tensor) {
  const T *data = tensor.view.as<T>();
  return std::vector<T>(data, data + tensor.view.getNumElements());
}

inline std::string run(const std::string &op, const KernelAttrs &attrs,
                std::initializer_list<const OwnedTensor *> inputs,
                std::initializer_list<OwnedTensor *> outputs) {
  std::vector<const Tensor *> in;
  for (const OwnedTensor *tensor : inputs)
    in.push_back(&tensor->view);
  std::vector<Tensor *> out;
  for (OwnedTensor *tensor : outputs)
    out.push_back(&tensor->view);
  return runCpuKernel(op, attrs, in, out).message();
}

inline void expectNear(const std::vector<float> &actual,
                const std::vector<float> &expected, float tolerance = 1e-5f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "at element " << i;
}

/// Pseudo-random values in [-1, 1), reproducible.
inline std::vector<float> noise(int64_t count, uint32_t seed) {
  std::vector<float> values(count);
  uint32_t state = seed * 2654435761u + 1;
  for (float &value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) / float(1 << 23) - 1.0f;
  }
  return values;
}

} // namespace tessera::runtime::kernels_test

#endif // TESSERA_TEST_UNIT_RUNTIME_KERNELSTESTSUPPORT_H
