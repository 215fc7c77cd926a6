//===- ElementwiseBench.cpp - CPU element math against libm ---------------===//
//
// Run: build/bin/tessera-bench-elementwise
// The CPU backend's transcendental kernels (nn.exp, nn.log, nn.tanh,
// nn.erf, nn.sigmoid, nn.silu, nn.gelu, and nn.softmax over rows of 1024)
// on 1M floats, next to the scalar libm loop each ran as before SLEEF
// (issue 27's trace: nn.gelu and nn.tanh at about 20 ns an element), in
// elements per second.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Kernels.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <string>

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
  if (op == "nn.softmax")
    attrs.ints["dim"] = 1;
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

BENCHMARK_MAIN();
