//===- ElementwiseBench.cpp - CPU element math against libm ---------------===//
//
// Run: build/bin/tessera-bench-elementwise
// The CPU backend's transcendental kernels (nn.exp, nn.log, nn.tanh,
// nn.erf, nn.sigmoid, nn.silu, nn.gelu, and nn.softmax over rows of 1024)
// on 1M floats, next to the scalar libm loop each ran as before SLEEF
// (issue 27's trace: nn.gelu and nn.tanh at about 20 ns an element), in
// elements per second; and the GELU gradient's 23 ops as one nn.fused
// kernel next to the same ops one kernel each.
//
//===----------------------------------------------------------------------===//

#include "GeluGradient.h"

#include "tessera/runtime/Kernels.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

using namespace tessera::runtime;

namespace {
constexpr int64_t kElements = 1 << 20;

OwnedTensor makeInput() {
  OwnedTensor x(DType::F32, {kElements / 1024, 1024});
  float *data = x.view.as<float>();
  for (int64_t i = 0; i < kElements; ++i)
    data[i] = 0.001f * static_cast<float>(i % 8000) - 4.0f + 4.5f * (i % 2);
  return x;
}

void setElements(benchmark::State &state) {
  state.SetItemsProcessed(kElements * state.iterations());
}

/// The kernel `op` through the CPU backend.
void runKernel(benchmark::State &state, const std::string &op) {
  OwnedTensor x = makeInput(), y(DType::F32, x.view.shape);
  KernelAttrs attrs;
  if (op == "nn.softmax") {
    attrs.ints["dim"] = 1;
    attrs.floats["scale"] = 1.0;
    attrs.ints["causal"] = 0;
  }
  for (auto _ : state) {
    std::string error = runCpuKernel(op, attrs, {&x.view}, {&y.view}).message();
    if (!error.empty())
      state.SkipWithError(error.c_str());
    benchmark::DoNotOptimize(y.view.data);
  }
  setElements(state);
}

/// The scalar libm loop the kernel ran before.
template <typename Fn> void runLibm(benchmark::State &state, Fn fn) {
  OwnedTensor x = makeInput(), y(DType::F32, x.view.shape);
  const float *in = x.view.as<float>();
  float *out = y.view.as<float>();
  for (auto _ : state) {
    for (int64_t i = 0; i < kElements; ++i)
      out[i] = fn(in[i]);
    benchmark::DoNotOptimize(out);
  }
  setElements(state);
}

float gelu(float x) {
  return 0.5f * x *
         (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
} // namespace

#define TESSERA_ELEMENTWISE(name, op, scalar)                                  \
  static void BM_Kernel_##name(benchmark::State &state) {                      \
    runKernel(state, op);                                                      \
  }                                                                            \
  BENCHMARK(BM_Kernel_##name);                                                 \
  static void BM_Libm_##name(benchmark::State &state) {                        \
    runLibm(state, scalar);                                                    \
  }                                                                            \
  BENCHMARK(BM_Libm_##name);

TESSERA_ELEMENTWISE(exp, "nn.exp", [](float x) { return std::exp(x); })
TESSERA_ELEMENTWISE(log, "nn.log",
                    [](float x) { return std::log(std::fabs(x)); })
TESSERA_ELEMENTWISE(tanh, "nn.tanh", [](float x) { return std::tanh(x); })
TESSERA_ELEMENTWISE(erf, "nn.erf", [](float x) { return std::erf(x); })
TESSERA_ELEMENTWISE(sigmoid, "nn.sigmoid",
                    [](float x) { return 1.0f / (1.0f + std::exp(-x)); })
TESSERA_ELEMENTWISE(silu, "nn.silu",
                    [](float x) { return x / (1.0f + std::exp(-x)); })
TESSERA_ELEMENTWISE(gelu, "nn.gelu", gelu)

static void BM_Kernel_softmax(benchmark::State &state) {
  runKernel(state, "nn.softmax");
}
BENCHMARK(BM_Kernel_softmax);

/// The GELU gradient as one nn.fused kernel.
static void BM_GeluGradient_Fused(benchmark::State &state) {
  OwnedTensor x = makeInput(), dy = makeInput(), y(DType::F32, x.view.shape);
  KernelAttrs attrs;
  attrs.fusedSteps = makeGeluGradient();
  attrs.fusedResults = {static_cast<int64_t>(attrs.fusedSteps.size()) + 1};
  for (auto _ : state) {
    std::string error =
        runCpuKernel("nn.fused", attrs, {&x.view, &dy.view}, {&y.view})
            .message();
    if (!error.empty())
      state.SkipWithError(error.c_str());
    benchmark::DoNotOptimize(y.view.data);
  }
  setElements(state);
}
BENCHMARK(BM_GeluGradient_Fused);

/// The same ops as 23 kernels, each value in memory (as without fusion: a
/// constant is a splat tensor, made before the kernel that reads it).
static void BM_GeluGradient_Unfused(benchmark::State &state) {
  std::vector<FusedStep> steps = makeGeluGradient();
  std::vector<OwnedTensor> values;
  values.push_back(makeInput());
  values.push_back(makeInput());
  for (size_t i = 0; i < steps.size(); ++i)
    values.emplace_back(DType::F32, values[0].view.shape);
  for (auto _ : state) {
    for (size_t i = 0; i < steps.size(); ++i) {
      std::vector<const Tensor *> inputs;
      for (int64_t operand : steps[i].operands)
        inputs.push_back(&values[operand].view);
      std::string error = runCpuKernel(steps[i].op, steps[i].attrs, inputs,
                                       {&values[i + 2].view})
                              .message();
      if (!error.empty())
        state.SkipWithError(error.c_str());
    }
    benchmark::DoNotOptimize(values.back().view.data);
  }
  setElements(state);
}
BENCHMARK(BM_GeluGradient_Unfused);

/// A bias add over rows of 1024 ([1024, 1024] + [1024]), fused (the bias
/// read through a broadcast) and as its two kernels; and the MLP's bias add
/// and GELU, fused, with both results written (the backward reads the
/// first).
static void runBiasAdd(benchmark::State &state, bool gelu) {
  OwnedTensor x = makeInput(), bias(DType::F32, {1024}),
              y(DType::F32, x.view.shape), g(DType::F32, x.view.shape);
  KernelAttrs attrs;
  FusedStep broadcast{"nn.broadcast", {1}, {}, DType::F32};
  broadcast.attrs.lists["dims"] = {1};
  attrs.fusedSteps = {broadcast, FusedStep{"nn.add", {0, 2}, {}, DType::F32}};
  attrs.fusedResults = {3};
  std::vector<Tensor *> outputs = {&y.view};
  if (gelu) {
    attrs.fusedSteps.push_back(FusedStep{"nn.gelu", {3}, {}, DType::F32});
    attrs.fusedResults.push_back(4);
    outputs.push_back(&g.view);
  }
  for (auto _ : state) {
    std::string error =
        runCpuKernel("nn.fused", attrs, {&x.view, &bias.view}, outputs)
            .message();
    if (!error.empty())
      state.SkipWithError(error.c_str());
    benchmark::DoNotOptimize(y.view.data);
  }
  setElements(state);
}
static void BM_BiasAdd_Fused(benchmark::State &state) {
  runBiasAdd(state, /*gelu=*/false);
}
BENCHMARK(BM_BiasAdd_Fused);
static void BM_BiasAddGelu_Fused(benchmark::State &state) {
  runBiasAdd(state, /*gelu=*/true);
}
BENCHMARK(BM_BiasAddGelu_Fused);

static void BM_BiasAdd_Unfused(benchmark::State &state) {
  OwnedTensor x = makeInput(), bias(DType::F32, {1024}),
              b(DType::F32, x.view.shape), y(DType::F32, x.view.shape);
  KernelAttrs dims;
  dims.lists["dims"] = {1};
  for (auto _ : state) {
    std::string error =
        runCpuKernel("nn.broadcast", dims, {&bias.view}, {&b.view}).message() +
        runCpuKernel("nn.add", {}, {&x.view, &b.view}, {&y.view}).message();
    if (!error.empty())
      state.SkipWithError(error.c_str());
    benchmark::DoNotOptimize(y.view.data);
  }
  setElements(state);
}
BENCHMARK(BM_BiasAdd_Unfused);

BENCHMARK_MAIN();
