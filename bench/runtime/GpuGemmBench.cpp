//===- GpuGemmBench.cpp - nn.dot on a GPU against cuBLAS alone ------------===//
//
// Run: build/bin/tessera-bench-gpu-gemm [--peak-bf16 FLOPS] [--peak-fp32 FLOPS]
// Square GEMMs through the CUDA device's nn.dot (checks, layout, cuBLASLt)
// and through cublasGemmEx called directly on the same memory, in bf16,
// f16 (f32 accumulation) and f32; prints TFLOP/s of both, their ratio, and
// the share of the datasheet peak when one is given (bench/gpu-check.sh
// passes the H100/H200 figures of machines/).
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace tessera::runtime;

namespace {

/// Seconds per call of `call` (after `warmup` calls), timed over `reps`
/// calls with `sync` after the last.
double timeCalls(const std::function<void()> &call,
                 const std::function<void()> &sync, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i)
    call();
  sync();
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    call();
  sync();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
             .count() /
         reps;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "tessera-bench-gpu-gemm: error: %s\n", message.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  double peakHalf = 0, peakF32 = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--peak-bf16"))
      peakHalf = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--peak-fp32"))
      peakF32 = std::atof(argv[i + 1]);
    else
      return fail(std::string("unknown option '") + argv[i] + "'");
  }
  Expected<std::unique_ptr<Device>> created = createCudaDevice(0);
  if (!created.ok())
    return fail(created.message());
  std::unique_ptr<Device> device = created.take();
  std::string error;
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS)
    return fail("cannot create a cuBLAS handle");

  std::printf("%-5s %6s %14s %14s %7s %9s\n", "dtype", "n", "nn.dot TFLOP/s",
              "cuBLAS TFLOP/s", "ratio", "of peak");
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    for (int64_t n : {1024, 2048, 4096, 8192}) {
      Tensor a{dtype, {n, n}, nullptr}, b = a, c = a;
      void *arena = nullptr;
      size_t bytes = a.getBytes();
      if (!(error = device->allocate(3 * bytes, arena).message()).empty())
        return fail(error);
      a.data = arena;
      b.data = static_cast<uint8_t *>(arena) + bytes;
      c.data = static_cast<uint8_t *>(arena) + 2 * bytes;
      // Small values, the same in every element's bits: no overflow in
      // any dtype, and no all-zero shortcut.
      std::vector<uint8_t> fill(bytes);
      for (size_t i = 0; i < bytes; ++i)
        fill[i] =
            i % getDTypeBytes(dtype) == getDTypeBytes(dtype) - 1 ? 0x3c : 0;
      if (!(error = device->copyToDevice(a.data, fill.data(), bytes).message())
               .empty() ||
          !(error = device->copyToDevice(b.data, fill.data(), bytes).message())
               .empty())
        return fail(error);

      KernelAttrs attrs;
      attrs.lists["lhs_batching_dims"] = {};
      attrs.lists["rhs_batching_dims"] = {};
      attrs.lists["lhs_contracting_dims"] = {1};
      attrs.lists["rhs_contracting_dims"] = {0};
      double tessera = timeCalls(
          [&] {
            if (error.empty())
              error =
                  device->runKernel("nn.dot", attrs, {&a, &b}, {&c}).message();
          },
          [&] {
            if (error.empty())
              error = device->synchronize().message();
          },
          3, 20);
      if (!error.empty())
        return fail(error);

      cudaDataType_t type = dtype == DType::BF16  ? CUDA_R_16BF
                            : dtype == DType::F16 ? CUDA_R_16F
                                                  : CUDA_R_32F;
      float alpha = 1, beta = 0;
      cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
      double direct = timeCalls(
          [&] {
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
            if (status == CUBLAS_STATUS_SUCCESS)
              status = cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n,
                                    &alpha, b.data, type, n, a.data, type, n,
                                    &beta, c.data, type, n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
          },
          [] { cudaDeviceSynchronize(); }, 3, 20);
      if (status != CUBLAS_STATUS_SUCCESS)
        return fail(std::string("cublasGemmEx: ") +
                    cublasGetStatusString(status));

      double flops = 2.0 * n * n * n;
      double peak = dtype == DType::F32 ? peakF32 : peakHalf;
      char share[16] = "-";
      if (peak > 0)
        std::snprintf(share, sizeof(share), "%.1f%%",
                      100 * flops / tessera / peak);
      std::printf("%-5s %6lld %14.1f %14.1f %7.3f %9s\n", getDTypeName(dtype),
                  static_cast<long long>(n), flops / tessera / 1e12,
                  flops / direct / 1e12, direct / tessera, share);
      device->deallocate(arena);
    }
  }
  cublasDestroy(blas);
  return 0;
}
