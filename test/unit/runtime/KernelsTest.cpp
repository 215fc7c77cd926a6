//===- KernelsTest.cpp - the CPU backend's dispatch: errors, widening, registry ---===//

#include "KernelsTestSupport.h"
#include "tessera/runtime/Device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

TEST(KernelsTest, RejectsMismatchedShapes) {
  OwnedTensor lhs(DType::F32, {2, 3}), rhs(DType::F32, {3, 2});
  OwnedTensor result(DType::F32, {2, 3});
  EXPECT_EQ(run("nn.add", {}, {&lhs, &rhs}, {&result}),
            "nn.add: expects rhs of shape [2, 3], got [3, 2]");
}

TEST(KernelsTest, RejectsAnUnknownOp) {
  EXPECT_EQ(run("nn.foo", {}, {}, {}), "unknown kernel 'nn.foo'");
}

TEST(KernelsTest, HalfFloatsComputeInF32AndRoundToNearestEven) {
  // bf16 1.0, 2.0, 0.5 and 1 + 2^-7 (the next bf16 after 1).
  OwnedTensor input(DType::BF16, {4});
  uint16_t *bits = input.view.as<uint16_t>();
  bits[0] = 0x3f80;
  bits[1] = 0x4000;
  bits[2] = 0x3f00;
  bits[3] = 0x3f81;
  OwnedTensor result(DType::BF16, {4});
  ASSERT_EQ(run("nn.add", {}, {&input, &input}, {&result}), "");
  const uint16_t *sum = result.view.as<uint16_t>();
  EXPECT_EQ(sum[0], 0x4000); // 2
  EXPECT_EQ(sum[1], 0x4080); // 4
  EXPECT_EQ(sum[2], 0x3f80); // 1
  EXPECT_EQ(sum[3], 0x4001); // 2 + 2^-6
  // f16 round trip of 1/3: 0x3555 is the nearest half.
  EXPECT_EQ(floatToHalf(DType::F16, 1.0f / 3.0f), 0x3555);
  EXPECT_NEAR(halfToFloat(DType::F16, 0x3555), 1.0f / 3.0f, 1e-4);
  EXPECT_EQ(halfToFloat(DType::F16, 0x0001), std::ldexp(1.0f, -24));
}

TEST(KernelsTest, RejectsIntegerMath) {
  OwnedTensor ints(DType::I32, {4}), floats(DType::F32, {4});
  EXPECT_EQ(run("nn.exp", {}, {&ints}, {&floats}),
            "nn.exp: expects a float input, got i32");
}

TEST(KernelsTest, RejectsWrongArityAndMissingAttributes) {
  OwnedTensor input(DType::F32, {4});
  OwnedTensor result(DType::F32, {4});
  EXPECT_EQ(run("nn.add", {}, {&input}, {&result}),
            "nn.add: expects 2 inputs and 1 output, got 1 and 1");
  EXPECT_EQ(run("nn.softmax", {}, {&input}, {&result}),
            "nn.softmax: missing integer attribute 'dim'");
  EXPECT_EQ(run("nn.sgd", {}, {&input, &input}, {&result}),
            "nn.sgd: missing float attribute 'lr'");
  std::vector<const Tensor *> inputs = {nullptr};
  std::vector<Tensor *> outputs = {&result.view};
  EXPECT_EQ(runCpuKernel("nn.neg", {}, inputs, outputs).message(),
            "nn.neg: input #0 is null");
}

TEST(KernelRegistryTest, FindsEachOpOnce) {
  Expected<const CpuKernel *> first = findCpuKernel("nn.dot");
  Expected<const CpuKernel *> second = findCpuKernel("nn.dot");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ((*first)->getOp(), "nn.dot");

  Expected<const CpuKernel *> unknown = findCpuKernel("nn.frobnicate");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.getStatus().getCode(), StatusCode::InvalidPlan);
  EXPECT_EQ(unknown.message(), "unknown kernel 'nn.frobnicate'");

  std::unique_ptr<Device> cpu = createCpuDevice();
  Expected<const Kernel *> onDevice = cpu->findKernel("nn.frobnicate");
  EXPECT_EQ(onDevice.message(), "unknown kernel 'nn.frobnicate'");
}

TEST(KernelRegistryTest, TellsDataErrorsFromBadArguments) {
  OwnedTensor logits(DType::F32, {1, 4}), labels(DType::I32, {1}),
      loss(DType::F32, {1});
  labels.view.as<int32_t>()[0] = 7;
  Status bad = runCpuKernel("nn.cross_entropy", {},
                            {&logits.view, &labels.view}, {&loss.view});
  EXPECT_EQ(bad.getCode(), StatusCode::DataError);
  EXPECT_EQ(bad.message(),
            "nn.cross_entropy: label 7 at position 0 is outside [0, 4)");
  Status wrong = runCpuKernel("nn.neg", {}, {&logits.view}, {&loss.view});
  EXPECT_EQ(wrong.getCode(), StatusCode::InvalidArgument);
}

} // namespace
