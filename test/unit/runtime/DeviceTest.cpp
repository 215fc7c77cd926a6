//===- DeviceTest.cpp - checkKernel, and every GPU kernel against the CPU -===//
//
// The CUDA tests run each nn op on random inputs on the CPU backend and on
// GPU 0 and compare, with a tolerance per result dtype; they skip without
// the CUDA backend or without a GPU. bench/gpu-check.sh runs them on a GPU
// machine.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Device.h"
#include "tessera/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <unistd.h>

using namespace tessera::runtime;

namespace {

//===----------------------------------------------------------------------===//
// checkKernel (runs everywhere)
//===----------------------------------------------------------------------===//

/// A tensor whose data pointer must never be followed.
Tensor fakeTensor(DType dtype, std::vector<int64_t> shape) {
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.data = reinterpret_cast<void *>(uintptr_t(16));
  return tensor;
}

TEST(CheckKernelTest, AcceptsValidCallsWithoutReadingData) {
  Tensor lhs = fakeTensor(DType::BF16, {2, 3, 8});
  Tensor rhs = fakeTensor(DType::BF16, {8, 5});
  Tensor result = fakeTensor(DType::F32, {2, 3, 5});
  KernelAttrs dot;
  dot.lists["lhs_batching_dims"] = {};
  dot.lists["rhs_batching_dims"] = {};
  dot.lists["lhs_contracting_dims"] = {2};
  dot.lists["rhs_contracting_dims"] = {0};
  EXPECT_EQ(checkKernel("nn.dot", dot, {&lhs, &rhs}, {&result}).message(), "");

  Tensor logits = fakeTensor(DType::F32, {4, 10});
  Tensor labels = fakeTensor(DType::I32, {4});
  Tensor loss = fakeTensor(DType::F32, {4});
  EXPECT_EQ(checkKernel("nn.cross_entropy", {}, {&logits, &labels}, {&loss})
                .message(),
            "");

  Tensor param = fakeTensor(DType::F32, {6});
  Tensor step = fakeTensor(DType::I64, {});
  KernelAttrs adamw;
  adamw.floats = {{"lr", 0.01},
                  {"beta1", 0.9},
                  {"beta2", 0.999},
                  {"epsilon", 1.0e-8},
                  {"weight_decay", 0.01}};
  adamw.floats["min_lr"] = 0;
  adamw.floats["max_grad_norm"] = 0;
  adamw.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  EXPECT_EQ(checkKernel("nn.adamw", adamw,
                        {&param, &param, &param, &param, &step},
                        {&param, &param, &param})
                .message(),
            "");

  // A 16-bit constant's value is in its own type.
  Tensor constant = fakeTensor(DType::F16, {3});
  KernelAttrs value;
  value.bytes["value"] = std::string(6, '\0');
  EXPECT_EQ(checkKernel("nn.constant", value, {}, {&constant}).message(), "");
}

TEST(CheckKernelTest, RejectsWhatTheCpuKernelRejects) {
  OwnedTensor lhs(DType::F32, {3, 4}), rhs(DType::F32, {5, 2}),
      result(DType::F32, {3, 2});
  KernelAttrs dot;
  dot.lists["lhs_batching_dims"] = {};
  dot.lists["rhs_batching_dims"] = {};
  dot.lists["lhs_contracting_dims"] = {1};
  dot.lists["rhs_contracting_dims"] = {0};
  std::vector<const Tensor *> ins = {&lhs.view, &rhs.view};
  std::vector<Tensor *> outs = {&result.view};
  std::string checked = checkKernel("nn.dot", dot, ins, outs).message();
  EXPECT_EQ(
      checked,
      "nn.dot: lhs contracting dim 1 has size 4 but rhs dim 0 has size 5");
  EXPECT_EQ(runCpuKernel("nn.dot", dot, ins, outs).message(), checked);

  EXPECT_EQ(checkKernel("nn.frobnicate", {}, {}, {}).message(),
            "unknown kernel 'nn.frobnicate'");
  Tensor wide = fakeTensor(DType::F64, {2});
  EXPECT_EQ(checkKernel("nn.exp", {}, {&wide}, {&wide}).message(),
            "nn.exp: the kernels compute f32 (bf16 and f16 widened), got f64");
  Tensor x = fakeTensor(DType::F32, {2, 3});
  KernelAttrs softmax;
  softmax.ints["dim"] = 2;
  softmax.floats["scale"] = 1.0;
  softmax.ints["causal"] = 0;
  EXPECT_EQ(checkKernel("nn.softmax", softmax, {&x}, {&x}).message(),
            "nn.softmax: dim 2 is out of range for rank 2");
}

TEST(CpuDeviceTest, RunsKernelsOnHostMemory) {
  std::unique_ptr<Device> device = createCpuDevice();
  EXPECT_EQ(device->getName(), "cpu");
  void *arena = nullptr;
  ASSERT_EQ(device->allocate(64, arena).message(), "");
  Tensor x{DType::F32, {4}, arena};
  Tensor y{DType::F32, {4}, static_cast<uint8_t *>(arena) + 16};
  float values[4] = {-1, 0, 2, -3}, out[4];
  ASSERT_EQ(device->copyToDevice(x.data, values, sizeof(values)).message(), "");
  ASSERT_EQ(device->runKernel("nn.relu", {}, {&x}, {&y}).message(), "");
  ASSERT_EQ(device->copyToHost(out, y.data, sizeof(out)).message(), "");
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{0, 0, 2, 0}));
  ASSERT_EQ(device->copyWithin(y.data, x.data, sizeof(values)).message(), "");
  ASSERT_EQ(device->copyToHost(out, y.data, sizeof(out)).message(), "");
  EXPECT_EQ(std::vector<float>(out, out + 4),
            (std::vector<float>{-1, 0, 2, -3}));
  device->deallocate(arena);
}

TEST(CpuDeviceTest, RefusesMoreThanTheMachinesMemory) {
  // Linux would promise the bytes and kill the run that touches them.
  std::unique_ptr<Device> device = createCpuDevice();
  size_t machine = static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) *
                   static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void *data = nullptr;
  Status status = device->allocate(machine + (size_t(1) << 30), data);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("are more than the"), std::string::npos)
      << status.message();
  EXPECT_EQ(data, nullptr);
}

TEST(CudaDeviceTest, NamesWhyThereIsNoGpu) {
  if (getCudaDeviceCount() > 0)
    GTEST_SKIP() << "this machine has a GPU";
  Expected<std::unique_ptr<Device>> device = createCudaDevice(0);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.getStatus().getCode(), StatusCode::Unavailable);
  EXPECT_EQ(device.message(),
            hasCudaBackend()
                ? "no GPU 0 (this process sees 0)"
                : "this build of Tessera has no CUDA backend (configure "
                  "it where nvcc, cuBLAS and NCCL are installed, with "
                  "TESSERA_ENABLE_CUDA=ON)");
}

//===----------------------------------------------------------------------===//
// The GPU against the CPU
//===----------------------------------------------------------------------===//

struct Spec {
  DType dtype;
  std::vector<int64_t> shape;
};

class CudaKernelsTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!hasCudaBackend())
      GTEST_SKIP() << "built without the CUDA backend";
    if (getCudaDeviceCount() == 0)
      GTEST_SKIP() << "no GPU";
    Expected<std::unique_ptr<Device>> created = createCudaDevice(0);
    ASSERT_TRUE(created.ok()) << created.message();
    device = created.take();
  }

  /// Random elements: floats uniform in [low, high), integers in [0, bound).
  OwnedTensor random(Spec spec, float low = -1.0f, float high = 1.0f,
                     int64_t bound = 2) {
    OwnedTensor tensor(spec.dtype, spec.shape);
    std::uniform_real_distribution<float> real(low, high);
    std::uniform_int_distribution<int64_t> integer(0, bound - 1);
    for (int64_t i = 0, e = tensor.view.getNumElements(); i < e; ++i) {
      switch (spec.dtype) {
      case DType::F32:
        tensor.view.as<float>()[i] = real(rng);
        break;
      case DType::BF16:
      case DType::F16:
        tensor.view.as<uint16_t>()[i] = floatToHalf(spec.dtype, real(rng));
        break;
      case DType::I32:
        tensor.view.as<int32_t>()[i] = integer(rng);
        break;
      case DType::I64:
        tensor.view.as<int64_t>()[i] = integer(rng);
        break;
      case DType::I1:
        tensor.view.as<uint8_t>()[i] = integer(rng) & 1;
        break;
      default:
        break;
      }
    }
    return tensor;
  }

  /// Runs `op` on the GPU; "" or its error (from the call or the sync).
  std::string runOnGpu(const std::string &op, const KernelAttrs &attrs,
                       const std::vector<OwnedTensor> &inputs,
                       std::vector<OwnedTensor> &outputs) {
    size_t bytes = 0;
    auto place = [&](const Tensor &tensor) {
      size_t offset = bytes;
      bytes += (tensor.getBytes() + 255) / 256 * 256;
      return offset;
    };
    std::vector<size_t> offsets;
    for (const OwnedTensor &tensor : inputs)
      offsets.push_back(place(tensor.view));
    for (const OwnedTensor &tensor : outputs)
      offsets.push_back(place(tensor.view));
    if (arena)
      device->deallocate(arena);
    if (std::string error = device->allocate(bytes + 256, arena).message();
        !error.empty())
      return error;
    std::vector<Tensor> views;
    for (const OwnedTensor &tensor : inputs)
      views.push_back(tensor.view);
    for (const OwnedTensor &tensor : outputs)
      views.push_back(tensor.view);
    for (size_t i = 0; i < views.size(); ++i)
      views[i].data = static_cast<uint8_t *>(arena) + offsets[i];
    std::vector<const Tensor *> ins;
    std::vector<Tensor *> outs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ins.push_back(&views[i]);
      if (std::string error =
              device
                  ->copyToDevice(views[i].data, inputs[i].view.data,
                                 inputs[i].view.getBytes())
                  .message();
          !error.empty())
        return error;
    }
    for (size_t i = 0; i < outputs.size(); ++i)
      outs.push_back(&views[inputs.size() + i]);
    if (std::string error = device->runKernel(op, attrs, ins, outs).message();
        !error.empty())
      return error;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (std::string error =
              device
                  ->copyToHost(outputs[i].view.data, outs[i]->data,
                               outputs[i].view.getBytes())
                  .message();
          !error.empty())
        return error;
    return device->synchronize().message();
  }

  /// Runs `op` on both backends and compares every result element within
  /// `tolerance` (absolute plus relative), widened to f64.
  void check(const std::string &op, const KernelAttrs &attrs,
             const std::vector<OwnedTensor> &inputs,
             const std::vector<Spec> &results, double tolerance = 0) {
    std::vector<OwnedTensor> cpu, gpu;
    for (const Spec &spec : results) {
      cpu.emplace_back(spec.dtype, spec.shape);
      gpu.emplace_back(spec.dtype, spec.shape);
    }
    std::vector<const Tensor *> ins;
    for (const OwnedTensor &tensor : inputs)
      ins.push_back(&tensor.view);
    std::vector<Tensor *> outs;
    for (OwnedTensor &tensor : cpu)
      outs.push_back(&tensor.view);
    ASSERT_EQ(runCpuKernel(op, attrs, ins, outs).message(), "") << op;
    ASSERT_EQ(runOnGpu(op, attrs, inputs, gpu), "") << op;
    for (size_t r = 0; r < results.size(); ++r) {
      DType dtype = results[r].dtype;
      double tol = tolerance;
      if (tol == 0)
        tol = dtype == DType::BF16  ? 1.6e-2
              : dtype == DType::F16 ? 2e-3
              : dtype == DType::F32 ? 2e-5
                                    : 0.0;
      for (int64_t i = 0, e = cpu[r].view.getNumElements(); i < e; ++i) {
        double want = getElement(cpu[r].view, i),
               got = getElement(gpu[r].view, i);
        if (std::isnan(want) && std::isnan(got))
          continue;
        if (std::isinf(want) && want == got)
          continue;
        ASSERT_LE(std::abs(got - want), tol * (1 + std::abs(want)))
            << op << " result " << r << " element " << i << " ("
            << getDTypeName(dtype) << ")";
      }
    }
  }

  static double getElement(const Tensor &tensor, int64_t i) {
    switch (tensor.dtype) {
    case DType::F32:
      return tensor.as<float>()[i];
    case DType::BF16:
    case DType::F16:
      return halfToFloat(tensor.dtype, tensor.as<uint16_t>()[i]);
    case DType::I32:
      return tensor.as<int32_t>()[i];
    case DType::I64:
      return static_cast<double>(tensor.as<int64_t>()[i]);
    case DType::I1:
      return tensor.as<uint8_t>()[i];
    default:
      return 0;
    }
  }

  void TearDown() override {
    if (arena)
      device->deallocate(arena);
  }

  std::mt19937_64 rng{7};
  std::unique_ptr<Device> device;
  /// Device memory of the last runOnGpu.
  void *arena = nullptr;
};

KernelAttrs makeDot(std::vector<int64_t> lhsContract,
                    std::vector<int64_t> rhsContract,
                    std::vector<int64_t> lhsBatch = {},
                    std::vector<int64_t> rhsBatch = {}) {
  KernelAttrs attrs;
  attrs.lists["lhs_contracting_dims"] = std::move(lhsContract);
  attrs.lists["rhs_contracting_dims"] = std::move(rhsContract);
  attrs.lists["lhs_batching_dims"] = std::move(lhsBatch);
  attrs.lists["rhs_batching_dims"] = std::move(rhsBatch);
  return attrs;
}

TEST_F(CudaKernelsTest, DotInEveryLayoutAndType) {
  // x·W, Q·Kᵀ (batched, the rhs transposed), and an lhs that needs a copy.
  check("nn.dot", makeDot({2}, {0}),
        {random({DType::F32, {2, 7, 64}}), random({DType::F32, {64, 33}})},
        {{DType::F32, {2, 7, 33}}}, 1e-4);
  check("nn.dot", makeDot({2}, {2}, {0}, {0}),
        {random({DType::F32, {3, 16, 32}}), random({DType::F32, {3, 24, 32}})},
        {{DType::F32, {3, 16, 24}}}, 1e-4);
  check("nn.dot", makeDot({0}, {1}, {1}, {0}),
        {random({DType::F32, {32, 4, 8}}), random({DType::F32, {4, 32, 5}})},
        {{DType::F32, {4, 8, 5}}}, 1e-4);
  for (DType type : {DType::BF16, DType::F16}) {
    check("nn.dot", makeDot({1}, {0}),
          {random({type, {64, 128}}), random({type, {128, 96}})},
          {{DType::F32, {64, 96}}}, 1e-3);
    check("nn.dot", makeDot({1}, {0}),
          {random({type, {64, 128}}), random({type, {128, 96}})},
          {{type, {64, 96}}});
  }
  // Mixed operand types go through f32.
  check("nn.dot", makeDot({1}, {0}),
        {random({DType::BF16, {8, 16}}), random({DType::F32, {16, 4}})},
        {{DType::F32, {8, 4}}}, 1e-4);
}

TEST_F(CudaKernelsTest, Elementwise) {
  for (DType type : {DType::F32, DType::BF16, DType::F16}) {
    Spec spec{type, {5, 37}};
    for (const char *op : {"nn.add", "nn.sub", "nn.mul"})
      check(op, {}, {random(spec), random(spec)}, {spec});
    check("nn.div", {}, {random(spec), random(spec, 0.5f, 2.0f)}, {spec});
    for (const char *op : {"nn.max", "nn.min"})
      check(op, {}, {random(spec), random(spec)}, {spec});
    check("nn.pow", {}, {random(spec, 0.1f, 4.0f), random(spec)}, {spec});
    KernelAttrs bounds;
    bounds.floats["min"] = -0.5;
    bounds.floats["max"] = 0.25;
    check("nn.clamp", bounds, {random(spec)}, {spec});
    for (const char *op :
         {"nn.neg", "nn.exp", "nn.tanh", "nn.sin", "nn.cos", "nn.erf",
          "nn.sigmoid", "nn.abs", "nn.relu", "nn.gelu", "nn.silu"})
      check(op, {}, {random(spec)}, {spec});
    for (const char *op : {"nn.log", "nn.sqrt", "nn.rsqrt"})
      check(op, {}, {random(spec, 0.1f, 4.0f)}, {spec});
  }
}

/// A fused bias add, GELU and mask in each float type, bias broadcast over
/// rows, an i1 result among them.
TEST_F(CudaKernelsTest, Fused) {
  for (DType type : {DType::F32, DType::BF16, DType::F16}) {
    Spec spec{type, {5, 37}};
    KernelAttrs attrs;
    auto step = [&](const char *op, std::vector<int64_t> operands,
                    DType dtype) -> FusedStep & {
      return attrs.fusedSteps.emplace_back(
          FusedStep{op, std::move(operands), {}, dtype});
    };
    step("nn.broadcast", {1}, type).attrs.lists["dims"] = {1}; // 3
    step("nn.add", {0, 3}, type);                              // 4
    step("nn.gelu", {4}, type);                                // 5
    // The inputs' order, not the GELU's: rounding differs by backend.
    step("nn.compare", {0, 2}, DType::I1).attrs.ints["predicate"] = 4; // 6
    step("nn.select", {6, 5, 0}, type);                                // 7
    attrs.fusedResults = {7, 6, 4};
    check("nn.fused", attrs, {random(spec), random({type, {37}}), random(spec)},
          {spec, {DType::I1, {5, 37}}, spec});
  }
}

TEST_F(CudaKernelsTest, SelectCompareCastConstant) {
  Spec f{DType::F32, {6, 9}};
  check("nn.select", {}, {random({DType::I1, {6, 9}}), random(f), random(f)},
        {f});
  for (int64_t predicate = 0; predicate < 6; ++predicate) {
    KernelAttrs attrs;
    attrs.ints["predicate"] = predicate;
    check("nn.compare", attrs, {random(f), random(f)}, {{DType::I1, {6, 9}}});
    check("nn.compare", attrs,
          {random({DType::I32, {6, 9}}, 0, 0, 3),
           random({DType::I32, {6, 9}}, 0, 0, 3)},
          {{DType::I1, {6, 9}}});
  }
  check("nn.cast", {}, {random(f, -50.0f, 50.0f)}, {{DType::I32, {6, 9}}});
  check("nn.cast", {}, {random({DType::I64, {6, 9}}, 0, 0, 5)},
        {{DType::F32, {6, 9}}});
  check("nn.cast", {}, {random({DType::I64, {6, 9}}, 0, 0, 3)},
        {{DType::I1, {6, 9}}});
  check("nn.cast", {}, {random(f)}, {{DType::BF16, {6, 9}}});
  check("nn.cast", {}, {random({DType::F16, {6, 9}})}, {f});
  KernelAttrs splat, full;
  float half = 0.5f;
  splat.bytes["value"] = std::string(reinterpret_cast<char *>(&half), 4);
  check("nn.constant", splat, {}, {f});
  std::string values(6 * 2, '\0');
  for (int i = 0; i < 6; ++i) {
    uint16_t bits = floatToHalf(DType::BF16, 0.25f * i);
    std::memcpy(&values[2 * i], &bits, 2);
  }
  full.bytes["value"] = values;
  check("nn.constant", full, {}, {{DType::BF16, {2, 3}}});
  KernelAttrs iota;
  iota.ints["dim"] = 1;
  check("nn.iota", iota, {}, {f});
  check("nn.iota", iota, {}, {{DType::I64, {2, 3}}});
  check("nn.iota", iota, {}, {{DType::BF16, {2, 300}}});
}

TEST_F(CudaKernelsTest, ShapesAndReductions) {
  KernelAttrs broadcast;
  broadcast.lists["dims"] = {0, 2};
  check("nn.broadcast", broadcast, {random({DType::F32, {4, 1}})},
        {{DType::F32, {4, 3, 5}}});
  KernelAttrs transpose;
  transpose.lists["permutation"] = {2, 0, 1};
  check("nn.transpose", transpose, {random({DType::BF16, {3, 4, 5}})},
        {{DType::BF16, {5, 3, 4}}});
  KernelAttrs slice;
  slice.lists["start"] = {1, 2};
  slice.lists["limit"] = {3, 7};
  check("nn.slice", slice, {random({DType::F32, {4, 8}})},
        {{DType::F32, {2, 5}}});
  check("nn.reshape", {}, {random({DType::I64, {4, 6}}, 0, 0, 100)},
        {{DType::I64, {6, 4}}});
  KernelAttrs concat;
  concat.ints["dim"] = 1;
  check("nn.concat", concat,
        {random({DType::F32, {3, 2, 4}}), random({DType::F32, {3, 5, 4}})},
        {{DType::F32, {3, 7, 4}}});
  for (const char *op : {"nn.reduce_sum", "nn.reduce_max", "nn.reduce_mean"}) {
    KernelAttrs inner, outer;
    inner.lists["dims"] = {2};
    outer.lists["dims"] = {0, 2};
    check(op, inner, {random({DType::F32, {3, 4, 300}})},
          {{DType::F32, {3, 4}}});
    check(op, outer, {random({DType::F32, {3, 4, 5}})}, {{DType::F32, {4}}});
  }
}

TEST_F(CudaKernelsTest, Layers) {
  for (int64_t dim : {1, 2}) {
    KernelAttrs attrs;
    attrs.ints["dim"] = dim;
    check("nn.log_softmax", attrs, {random({DType::BF16, {2, 30, 3}})},
          {{DType::BF16, {2, 30, 3}}});
    attrs.floats["scale"] = 0.5;
    attrs.ints["causal"] = 0;
    check("nn.softmax", attrs, {random({DType::F32, {2, 300, 3}})},
          {{DType::F32, {2, 300, 3}}});
  }
  KernelAttrs causal;
  causal.ints["dim"] = 2;
  causal.floats["scale"] = 0.125;
  causal.ints["causal"] = 1;
  check("nn.softmax", causal, {random({DType::F32, {3, 40, 300}})},
        {{DType::F32, {3, 40, 300}}});
  Spec x{DType::F32, {6, 513}};
  KernelAttrs layerNorm, rmsNorm;
  layerNorm.floats["epsilon"] = 1.0e-5;
  rmsNorm.floats["epsilon"] = 1.0e-6;
  check("nn.layer_norm", layerNorm,
        {random(x), random({DType::F32, {513}}), random({DType::F32, {513}})},
        {x}, 1e-4);
  check("nn.rms_norm", rmsNorm, {random(x), random({DType::F32, {513}})}, {x},
        1e-4);
  check("nn.layer_norm_grad", layerNorm,
        {random(x), random({DType::F32, {513}}), random(x)}, {x, x}, 1e-4);
  check("nn.rms_norm_grad", rmsNorm,
        {random(x), random({DType::F32, {513}}), random(x)}, {x, x}, 1e-4);
  // Attention across query blocks (64) and key tiles (16), GQA, causal and
  // not, in f32 and bf16; its gradient from random o and do.
  for (bool causal : {true, false}) {
    KernelAttrs attention;
    attention.floats["scale"] = 0.25;
    attention.ints["causal"] = causal;
    attention.ints["zigzag"] = 0;
    attention.floats["dropout"] = 0;
    Spec q{DType::F32, {2, 4, 70, 16}}, kv{DType::F32, {2, 2, 70, 16}};
    check("nn.attention", attention, {random(q), random(kv), random(kv)}, {q},
          1e-4);
    check("nn.attention", attention,
          {random({DType::BF16, {1, 2, 33, 8}}),
           random({DType::BF16, {1, 1, 33, 8}}),
           random({DType::BF16, {1, 1, 33, 8}})},
          {{DType::BF16, {1, 2, 33, 8}}}, 1e-2);
    check("nn.attention_grad", attention,
          {random(q), random(kv), random(kv), random(q), random(q)},
          {q, kv, kv}, 1e-3);
    // With dropout of the probabilities, drawn for the step.
    attention.floats["dropout"] = 0.2;
    attention.ints["seed"] = 5;
    Spec step{DType::I64, {}};
    check("nn.attention", attention,
          {random(q), random(kv), random(kv), random(step)}, {q}, 1e-4);
    check(
        "nn.attention_grad", attention,
        {random(q), random(kv), random(kv), random(q), random(q), random(step)},
        {q, kv, kv}, 1e-3);
  }
  KernelAttrs axis;
  axis.ints["axis"] = 1;
  check("nn.gather", axis,
        {random({DType::F32, {4, 9, 3}}),
         random({DType::I64, {4, 5, 3}}, 0, 0, 9)},
        {{DType::F32, {4, 5, 3}}});
  check("nn.scatter_add", axis,
        {random({DType::F32, {4, 5, 3}}),
         random({DType::I32, {4, 5, 3}}, 0, 0, 9)},
        {{DType::F32, {4, 9, 3}}}, 1e-5);
  KernelAttrs topK;
  topK.ints["k"] = 4;
  check("nn.top_k", topK, {random({DType::F32, {300, 17}})},
        {{DType::F32, {300, 4}}, {DType::I64, {300, 4}}});
  // Indices outside the table give zero rows.
  check("nn.embedding", {},
        {random({DType::F32, {10, 8}}), random({DType::I32, {4, 3}}, 0, 0, 12)},
        {{DType::F32, {4, 3, 8}}});
  check(
      "nn.embedding_grad", {},
      {random({DType::F32, {4, 3, 8}}), random({DType::I64, {4, 3}}, 0, 0, 5)},
      {{DType::F32, {5, 8}}});
  check("nn.one_hot", {}, {random({DType::I32, {7}}, 0, 0, 6)},
        {{DType::F32, {7, 5}}});
  // Choices of experts out of range are dropped; slots run out.
  check("nn.moe_dispatch", {}, {random({DType::I64, {3, 20, 2}}, 0, -1, 6)},
        {{DType::F32, {3, 20, 5, 7}}});
  check("nn.cross_entropy", {},
        {random({DType::F32, {4, 3, 50}}, -4.0f, 4.0f),
         random({DType::I32, {4, 3}}, 0, 0, 50)},
        {{DType::F32, {4, 3}}}, 1e-4);
  KernelAttrs mask;
  mask.floats["fill"] = -std::numeric_limits<float>::infinity();
  check("nn.causal_mask", mask, {random({DType::F32, {2, 5, 5}})},
        {{DType::F32, {2, 5, 5}}});
  mask.floats["fill"] = 0;
  check("nn.causal_mask", mask, {random({DType::F32, {2, 5, 5}})},
        {{DType::F32, {2, 5, 5}}});
}

TEST_F(CudaKernelsTest, OptimizerUpdates) {
  Spec p{DType::F32, {1000}};
  KernelAttrs sgd;
  sgd.floats["lr"] = 0.1;
  sgd.floats["weight_decay"] = 0.01;
  check("nn.sgd", sgd, {random(p), random(p)}, {p});
  KernelAttrs adamw;
  adamw.floats = {{"lr", 0.01},
                  {"beta1", 0.9},
                  {"beta2", 0.999},
                  {"epsilon", 1.0e-8},
                  {"weight_decay", 0.01}};
  adamw.floats["min_lr"] = 0;
  adamw.floats["max_grad_norm"] = 0;
  adamw.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  OwnedTensor step(DType::I64, {});
  step.view.as<int64_t>()[0] = 3;
  check("nn.adamw", adamw,
        {random(p), random(p), random(p), random(p, 0.0f, 1.0f), step},
        {p, p, p}, 1e-5);
}

TEST_F(CudaKernelsTest, DataErrorsAreReportedAtTheSync) {
  std::vector<OwnedTensor> outputs;
  outputs.emplace_back(DType::F32, std::vector<int64_t>{2});
  OwnedTensor labels(DType::I32, {2});
  labels.view.as<int32_t>()[0] = 1;
  labels.view.as<int32_t>()[1] = 9;
  EXPECT_EQ(runOnGpu("nn.cross_entropy", {},
                     {random({DType::F32, {2, 4}}), labels}, outputs),
            "nn.cross_entropy: label 9 at position 1 is outside [0, 4)");
  // The error is reported once: the next kernel runs clean.
  KernelAttrs adamw;
  adamw.floats = {{"lr", 0.01},
                  {"beta1", 0.9},
                  {"beta2", 0.999},
                  {"epsilon", 1.0e-8},
                  {"weight_decay", 0.01}};
  adamw.floats["min_lr"] = 0;
  adamw.floats["max_grad_norm"] = 0;
  adamw.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  OwnedTensor step(DType::I32, {});
  Spec p{DType::F32, {4}};
  std::vector<OwnedTensor> updated;
  for (int i = 0; i < 3; ++i)
    updated.emplace_back(DType::F32, std::vector<int64_t>{4});
  EXPECT_EQ(runOnGpu("nn.adamw", adamw,
                     {random(p), random(p), random(p), random(p), step},
                     updated),
            "nn.adamw: expects a step of at least 1 (steps count from 1), "
            "got 0");
}

} // namespace
