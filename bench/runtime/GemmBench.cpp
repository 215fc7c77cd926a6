//===- GemmBench.cpp - CPU backend GEMM against OpenBLAS alone ------------===//
//
// Run: OPENBLAS_NUM_THREADS=1 build/bin/tessera-bench-gemm
// nn.dot through the CPU backend (argument checks, layout, sgemm) against
// cblas_sgemm called directly on the same square f32 matrices; the
// GFLOP/s counters show the overhead of the kernel entry point.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Kernels.h"

#include <benchmark/benchmark.h>
#include <cblas.h>

using namespace tessera::runtime;

static void setFlops(benchmark::State &state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * n * n * n * state.iterations(), benchmark::Counter::kIsRate,
      benchmark::Counter::kIs1000);
}

static void BM_OpenBlasSgemm(benchmark::State &state) {
  int64_t n = state.range(0);
  OwnedTensor a(DType::F32, {n, n}), b(DType::F32, {n, n}),
      c(DType::F32, {n, n});
  for (auto _ : state)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.view.as<float>(), n, b.view.as<float>(), n, 0.0f,
                c.view.as<float>(), n);
  setFlops(state, n);
}
BENCHMARK(BM_OpenBlasSgemm)->RangeMultiplier(2)->Range(64, 1024);

static void BM_BackendDot(benchmark::State &state) {
  int64_t n = state.range(0);
  OwnedTensor a(DType::F32, {n, n}), b(DType::F32, {n, n}),
      c(DType::F32, {n, n});
  KernelAttrs attrs;
  attrs.lists["lhs_batching_dims"] = {};
  attrs.lists["rhs_batching_dims"] = {};
  attrs.lists["lhs_contracting_dims"] = {1};
  attrs.lists["rhs_contracting_dims"] = {0};
  for (auto _ : state) {
    std::string error =
        runCpuKernel("nn.dot", attrs, {&a.view, &b.view}, {&c.view}).message();
    if (!error.empty())
      state.SkipWithError(error.c_str());
  }
  setFlops(state, n);
}
BENCHMARK(BM_BackendDot)->RangeMultiplier(2)->Range(64, 1024);

BENCHMARK_MAIN();
