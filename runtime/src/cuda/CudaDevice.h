//===- CudaDevice.h - A CUDA GPU as the executor's device -------*- C++ -*-===//
//
// Internal to the runtime: the NCCL communicator orders its streams after
// this device's compute stream and packs pieces with its kernels.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_CUDADEVICE_H
#define TESSERA_RUNTIME_CUDA_CUDADEVICE_H

#include "CudaKernels.h"
#include "tessera/runtime/Device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::runtime::cuda {

/// "<what>: <CUDA's message>" for a failed call, else "".
std::string getCudaError(cudaError_t status, const std::string &what);

/// cuBLASLt, loaded when the first CUDA device is made rather than linked:
/// loading it costs about 0.35 s, which every process (every CPU run and
/// every rank of an MPI job) would pay at startup.
#define TESSERA_CUBLASLT_FUNCTIONS(X)                                          \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtGetStatusString)                                                   \
  X(cublasLtMatmul)                                                            \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)
struct CublasLt {
#define TESSERA_DECLARE(name) decltype(&::name) name = nullptr;
  TESSERA_CUBLASLT_FUNCTIONS(TESSERA_DECLARE)
#undef TESSERA_DECLARE
};
/// The loaded library, or null with `error` set.
const CublasLt *loadCublasLt(std::string &error);

/// Device memory taken in pieces while work on one stream is queued, and
/// given back all at once (reset) when the next call may reuse it: stream
/// order keeps earlier work on the stream from seeing the reuse. Blocks are
/// only ever added, so pointers taken since the last reset stay valid.
class Scratch {
public:
  ~Scratch();
  void reset();
  /// `bytes` of device memory (256-byte aligned), or an error.
  std::string take(size_t bytes, void *&data);

private:
  struct Block {
    void *data;
    size_t size, used;
  };
  std::vector<Block> blocks;
};

class CudaDevice final : public Device {
public:
  ~CudaDevice() override;
  /// Sets up GPU `ordinal`: its compute stream, cuBLASLt and the error
  /// record; "" or an error.
  std::string init(int ordinal);

  std::string getName() const override;
  std::string allocate(size_t bytes, void *&data) override;
  void deallocate(void *data) override;
  std::string copyToDevice(void *dst, const void *src, size_t bytes) override;
  std::string copyToHost(void *dst, const void *src, size_t bytes) override;
  std::string copyWithin(void *dst, const void *src, size_t bytes) override;
  std::string runKernel(const std::string &op, const KernelAttrs &attrs,
                        const std::vector<const Tensor *> &inputs,
                        const std::vector<Tensor *> &outputs) override;
  std::string synchronize() override;

  int getOrdinal() const { return ordinal; }
  cudaStream_t getComputeStream() const { return compute; }

private:
  /// The kernel of `op` on f32 data (16-bit floats widened by runKernel).
  std::string runF32(const std::string &op, const KernelAttrs &attrs,
                     const std::vector<const Tensor *> &inputs,
                     const std::vector<Tensor *> &outputs);
  std::string runDot(const KernelAttrs &attrs, const Tensor &lhs,
                     const Tensor &rhs, const Tensor &result);
  /// `tensor` with its dims permuted into `copy`, in memory at `into` or
  /// else in scratch.
  std::string permute(const Tensor &tensor, const std::vector<int64_t> &perm,
                      Tensor &copy, void *into = nullptr);
  /// Reports and clears the kernels' data-dependent error.
  std::string takeKernelError();

  int ordinal = -1;
  cudaStream_t compute = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  Scratch scratch;
  /// Host-mapped, so the host reads it after a synchronize.
  KernelError *kernelError = nullptr;
  /// The cuBLASLt algorithm of each GEMM seen: element types, transposes,
  /// batch, m, n, k and the alignments of the lhs, rhs and result.
  using GemmKey = std::tuple<int, int, bool, bool, int64_t, int64_t, int64_t,
                             int64_t, uint32_t, uint32_t, uint32_t>;
  std::map<GemmKey, cublasLtMatmulAlgo_t> algorithms;
};

} // namespace tessera::runtime::cuda

#endif // TESSERA_RUNTIME_CUDA_CUDADEVICE_H
