//===- FusedKernelTest.cpp - nn.fused on the CPU against its ops one by one
//===//

#include "tessera/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace tessera::runtime;

namespace {

FusedStep step(const char *op, std::vector<int64_t> operands,
               DType dtype = DType::F32) {
  return FusedStep{op, std::move(operands), {}, dtype};
}

FusedStep constant(float value) {
  FusedStep s = step("nn.constant", {});
  s.attrs.bytes["value"] =
      std::string(reinterpret_cast<const char *>(&value), sizeof(float));
  return s;
}

/// Floats over [-4, 4) in an order that is not monotonic, NaN and the
/// infinities among them.
OwnedTensor makeInput(std::vector<int64_t> shape, int seed) {
  OwnedTensor tensor(DType::F32, std::move(shape));
  float *data = tensor.view.as<float>();
  for (int64_t i = 0, e = tensor.view.getNumElements(); i < e; ++i)
    data[i] =
        std::fmod(0.37f * static_cast<float>(i * 7 + seed * 13), 8.0f) - 4.0f;
  if (tensor.view.getNumElements() > 3) {
    data[1] = std::nanf("");
    data[2] = INFINITY;
    data[3] = -INFINITY;
  }
  return tensor;
}

std::string run(const KernelAttrs &attrs,
                const std::vector<const OwnedTensor *> &inputs,
                const std::vector<OwnedTensor *> &outputs) {
  std::vector<const Tensor *> in;
  for (const OwnedTensor *tensor : inputs)
    in.push_back(&tensor->view);
  std::vector<Tensor *> out;
  for (OwnedTensor *tensor : outputs)
    out.push_back(&tensor->view);
  return runCpuKernel("nn.fused", attrs, in, out).message();
}

/// Runs `steps` one kernel each (a constant as a splat tensor, a broadcast
/// as nn.broadcast), the way the unfused program would, and returns every
/// value: the inputs, then one per step.
std::vector<OwnedTensor> runOneByOne(const std::vector<FusedStep> &steps,
                                     std::vector<OwnedTensor> values,
                                     const std::vector<int64_t> &shape) {
  for (const FusedStep &s : steps) {
    std::vector<const Tensor *> in;
    for (int64_t operand : s.operands)
      in.push_back(&values[operand].view);
    OwnedTensor result(s.dtype, shape);
    EXPECT_EQ(runCpuKernel(s.op, s.attrs, in, {&result.view}).message(), "")
        << s.op;
    values.push_back(std::move(result));
  }
  return values;
}

void expectSameBits(const OwnedTensor &actual, const OwnedTensor &expected) {
  ASSERT_EQ(actual.view.getBytes(), expected.view.getBytes());
  EXPECT_EQ(
      std::memcmp(actual.view.data, expected.view.data, actual.view.getBytes()),
      0);
  const float *a = actual.view.as<float>(), *b = expected.view.as<float>();
  if (actual.view.dtype == DType::F32)
    for (int64_t i = 0, e = actual.view.getNumElements(); i < e; ++i)
      if (std::memcmp(a + i, b + i, 4) != 0) {
        ADD_FAILURE() << "element " << i << ": " << a[i] << " != " << b[i];
        return;
      }
}

/// The GELU gradient as the train step computes it, with a bias broadcast
/// over rows added to x first: 1500 x 40 elements cross several tiles, one
/// of them partial.
TEST(FusedKernelTest, ComputesWhatItsOpsComputeBitForBit) {
  std::vector<int64_t> shape = {1500, 40};
  const float a = 0.044715f, c = 0.7978845608028654f;
  FusedStep bias = step("nn.broadcast", {2});
  bias.attrs.lists["dims"] = {1};
  std::vector<FusedStep> steps = {
      bias,                     // 3
      step("nn.add", {0, 3}),   // 4: x
      step("nn.mul", {4, 4}),   // 5: x²
      step("nn.mul", {5, 4}),   // 6
      constant(a),              // 7
      step("nn.mul", {6, 7}),   // 8
      step("nn.add", {4, 8}),   // 9
      constant(c),              // 10
      step("nn.mul", {9, 10}),  // 11
      step("nn.tanh", {11}),    // 12
      constant(1.0f),           // 13
      step("nn.add", {13, 12}), // 14
      constant(0.5f),           // 15
      step("nn.mul", {14, 15}), // 16
      step("nn.mul", {12, 12}), // 17
      step("nn.sub", {13, 17}), // 18
      step("nn.mul", {4, 15}),  // 19
      step("nn.mul", {18, 19}), // 20
      step("nn.add", {16, 20}), // 21
      step("nn.mul", {1, 21}),  // 22
      step("nn.exp", {22}),     // 23
      step("nn.sigmoid", {23}), // 24
      step("nn.max", {24, 4}),  // 25
      step("nn.relu", {25}),    // 26
      step("nn.rsqrt", {26}),   // 27
  };
  FusedStep clamp = step("nn.clamp", {27});
  clamp.attrs.floats["min"] = -1.0;
  clamp.attrs.floats["max"] = 2.0;
  steps.push_back(clamp); // 28
  std::vector<OwnedTensor> inputs;
  inputs.push_back(makeInput(shape, 1));
  inputs.push_back(makeInput(shape, 2));
  inputs.push_back(makeInput({40}, 3));
  KernelAttrs attrs;
  attrs.fusedSteps = steps;
  attrs.fusedResults = {22, 28, 4};
  std::vector<OwnedTensor> results;
  for (int i = 0; i < 3; ++i)
    results.emplace_back(DType::F32, shape);
  ASSERT_EQ(run(attrs, {&inputs[0], &inputs[1], &inputs[2]},
                {&results[0], &results[1], &results[2]}),
            "");
  std::vector<OwnedTensor> values =
      runOneByOne(steps, {inputs[0], inputs[1], inputs[2]}, shape);
  expectSameBits(results[0], values[22]);
  expectSameBits(results[1], values[28]);
  expectSameBits(results[2], values[4]);
}

/// Each value of a 16-bit float type is rounded to it, as each op's result
/// would be: a bf16 program matches its ops on bf16 tensors.
TEST(FusedKernelTest, RoundsEachValueToItsElementType) {
  std::vector<int64_t> shape = {700};
  OwnedTensor x = makeInput(shape, 4), y = makeInput(shape, 5);
  OwnedTensor xh(DType::BF16, shape), yh(DType::BF16, shape);
  narrowFromF32(x.view, xh.view);
  narrowFromF32(y.view, yh.view);
  std::vector<FusedStep> steps = {
      step("nn.mul", {0, 1}, DType::BF16), // 2
      step("nn.exp", {2}, DType::BF16),    // 3
      step("nn.div", {3, 0}, DType::BF16), // 4
      step("nn.cast", {4}, DType::F32),    // 5
      step("nn.add", {5, 5}, DType::F32),  // 6
      step("nn.cast", {6}, DType::F16),    // 7
  };
  KernelAttrs attrs;
  attrs.fusedSteps = steps;
  attrs.fusedResults = {4, 7};
  OwnedTensor r0(DType::BF16, shape), r1(DType::F16, shape);
  ASSERT_EQ(run(attrs, {&xh, &yh}, {&r0, &r1}), "");
  std::vector<OwnedTensor> values = runOneByOne(steps, {xh, yh}, shape);
  expectSameBits(r0, values[4]);
  expectSameBits(r1, values[7]);
}

/// A mask: a condition broadcast from i1 rows, a float compare and selects,
/// with an i1 result.
TEST(FusedKernelTest, SelectsByConditionsAndWritesI1Results) {
  std::vector<int64_t> shape = {6, 5};
  OwnedTensor x = makeInput(shape, 6), y = makeInput(shape, 7);
  OwnedTensor rows(DType::I1, {6});
  for (int64_t i = 0; i < 6; ++i)
    rows.view.as<uint8_t>()[i] = i < 4 ? 1 : 0;
  FusedStep broadcast = step("nn.broadcast", {2}, DType::I1);
  broadcast.attrs.lists["dims"] = {0};
  FusedStep greater = step("nn.compare", {0, 1}, DType::I1);
  greater.attrs.ints["predicate"] = 4;
  std::vector<FusedStep> steps = {
      broadcast,                    // 3
      constant(0.0f),               // 4
      step("nn.select", {3, 0, 4}), // 5
      greater,                      // 6
      step("nn.select", {6, 5, 1}), // 7
  };
  KernelAttrs attrs;
  attrs.fusedSteps = steps;
  attrs.fusedResults = {7, 6};
  OwnedTensor r0(DType::F32, shape), r1(DType::I1, shape);
  ASSERT_EQ(run(attrs, {&x, &y, &rows}, {&r0, &r1}), "");
  std::vector<OwnedTensor> values = runOneByOne(steps, {x, y, rows}, shape);
  expectSameBits(r0, values[7]);
  expectSameBits(r1, values[6]);
}

TEST(FusedKernelTest, WritesInPlaceOfAnInput) {
  OwnedTensor x = makeInput({1030}, 8), expected(DType::F32, {1030});
  KernelAttrs attrs;
  attrs.fusedSteps = {step("nn.neg", {0}), step("nn.exp", {1})};
  attrs.fusedResults = {2};
  ASSERT_EQ(run(attrs, {&x}, {&expected}), "");
  ASSERT_EQ(run(attrs, {&x}, {&x}), "");
  expectSameBits(x, expected);
}

/// What is wrong with a program, one message each.
TEST(FusedKernelTest, RejectsBadPrograms) {
  OwnedTensor x(DType::F32, {4, 3}), row(DType::F32, {3}),
      y(DType::F32, {4, 3});
  OwnedTensor flags(DType::I1, {4, 3}), wide(DType::F32, {4, 4});
  auto check = [&](std::vector<FusedStep> steps, std::vector<int64_t> results,
                   const std::vector<const OwnedTensor *> &inputs,
                   OwnedTensor *output) {
    KernelAttrs attrs;
    attrs.fusedSteps = std::move(steps);
    attrs.fusedResults = std::move(results);
    return run(attrs, inputs, {output});
  };
  EXPECT_EQ(check({step("nn.dot", {0, 0})}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.dot') is not an elementwise op that fuses");
  EXPECT_EQ(check({step("nn.add", {0, 1})}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.add') reads value 1, expected < 1");
  EXPECT_EQ(check({step("nn.exp", {0, 0})}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.exp') expects 1 operands, got 2");
  EXPECT_EQ(check({step("nn.add", {0, 1})}, {2}, {&x, &row}, &y),
            "nn.fused: step 0 ('nn.add') reads input 1 of shape [3] without "
            "a broadcast to [4, 3]");
  FusedStep broadcast = step("nn.broadcast", {1});
  broadcast.attrs.lists["dims"] = {0};
  EXPECT_EQ(check({broadcast}, {1}, {&x, &row}, &y),
            "nn.fused: step 0 ('nn.broadcast') cannot broadcast input shape "
            "[3] to [4, 3]");
  broadcast.operands = {2};
  EXPECT_EQ(check({step("nn.exp", {0}), broadcast}, {2}, {&x, &row}, &y),
            "nn.fused: step 1 ('nn.broadcast') expects to broadcast an input "
            "of the kernel");
  EXPECT_EQ(check({step("nn.exp", {0})}, {1}, {&flags}, &y),
            "nn.fused: step 0 ('nn.exp') expects operand 0 of float "
            "elements, got i1");
  EXPECT_EQ(check({step("nn.select", {0, 0, 0})}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.select') expects operand 0 of i1 "
            "elements, got f32");
  EXPECT_EQ(check({step("nn.compare", {0, 0}, DType::I1)}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.compare') expects an integer attribute "
            "'predicate' in [0, 5]");
  EXPECT_EQ(check({step("nn.exp", {0}, DType::I1)}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.exp') expects a float result, got i1");
  EXPECT_EQ(check({step("nn.exp", {0})}, {1}, {&x}, &flags),
            "nn.fused: expects output 0 of element type f32, got i1");
  KernelAttrs twoResults;
  twoResults.fusedSteps = {step("nn.exp", {0})};
  twoResults.fusedResults = {1, 1};
  EXPECT_EQ(run(twoResults, {&x}, {&y, &wide}),
            "nn.fused: expects output 1 of shape [4, 3], got [4, 4]");
  EXPECT_EQ(check({step("nn.exp", {0})}, {5}, {&x}, &y),
            "nn.fused: result 0 is value 5, expected < 2");
  EXPECT_EQ(check({step("nn.constant", {})}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.constant') expects a float splat 'value' "
            "of its element type");
  EXPECT_EQ(check({step("nn.clamp", {0})}, {1}, {&x}, &y),
            "nn.fused: step 0 ('nn.clamp') expects float attributes 'min' "
            "and 'max'");
}

} // namespace
