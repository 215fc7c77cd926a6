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
#include "tessera/runtime/Ops.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <optional>
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
/// The loaded library (dlopened on the first call), or why it is not there.
Expected<const CublasLt *> loadCublasLt();

/// Device memory taken in pieces while work on one stream is queued, and
/// given back all at once (reset) when the next call may reuse it: stream
/// order keeps earlier work on the stream from seeing the reuse. Blocks are
/// only ever added, so pointers taken since the last reset stay valid.
class Scratch {
public:
  ~Scratch();
  void reset();
  /// Points `data` at `bytes` of device memory (256-byte aligned), or fails
  /// with a device error.
  Status take(size_t bytes, void *&data);

private:
  struct Block {
    void *data;
    size_t size, used;
  };
  std::vector<Block> blocks;
};

class CudaDevice;

/// One op's kernel on a GPU, found once per instruction by
/// CudaDevice::findKernel: the op of the table, whose checks every launch
/// passes first, and how the GPU runs the op.
class CudaKernel final : public Kernel {
public:
  /// The op's tensors at one launch, with 16-bit floats widened to f32
  /// unless the op moves elements of any type.
  struct Launch {
    const KernelAttrs &attrs;
    const std::vector<const Tensor *> &inputs;
    const std::vector<Tensor *> &outputs;
    const Tensor &in(size_t index) const { return *inputs[index]; }
    Tensor &out(size_t index) const { return *outputs[index]; }
  };
  using Fn = Status (*)(CudaDevice &device, const CudaKernel &kernel,
                        const Launch &launch);

  CudaKernel(const OpInfo &info, Fn fn) : Kernel(info.name), info(info), fn(fn) {}

  OpId getOpId() const { return info.id; }
  /// The op's checks (checkOp), which every launch passes first.
  Status check(const KernelAttrs &attrs,
               const std::vector<const Tensor *> &inputs,
               const std::vector<Tensor *> &outputs) const {
    return checkOp(info, attrs, inputs, outputs);
  }
  /// The elementwise math op, which runs on 16-bit floats directly.
  std::optional<MapOp> getMapOp() const {
    if (info.kind != OpKind::Map)
      return std::nullopt;
    return info.mapOp;
  }
  /// Whether the op only moves elements (any element type, no widening).
  bool isElementMove() const { return info.kind == OpKind::Move; }
  Status run(CudaDevice &device, const Launch &launch) const {
    return fn(device, *this, launch);
  }

private:
  const OpInfo &info;
  Fn fn;
};

class CudaDevice final : public Device {
public:
  using Device::runKernel;

  ~CudaDevice() override;
  /// Sets up GPU `ordinal`: its compute stream, cuBLASLt and the error
  /// record.
  Status init(int ordinal);

  std::string getName() const override;
  Status allocate(size_t bytes, void *&data) override;
  void deallocate(void *data) override;
  Status copyToDevice(void *dst, const void *src, size_t bytes) override;
  Status copyToHost(void *dst, const void *src, size_t bytes) override;
  Status copyWithin(void *dst, const void *src, size_t bytes) override;
  Expected<const Kernel *> findKernel(const std::string &op) override;
  Status runKernel(const Kernel &kernel, const KernelAttrs &attrs,
                   const std::vector<const Tensor *> &inputs,
                   const std::vector<Tensor *> &outputs) override;
  Status synchronize() override;

  int getOrdinal() const { return ordinal; }
  cudaStream_t getComputeStream() const { return compute; }

private:
  /// The kernels of the registry, one function per op (CudaDevice.cpp).
  struct Ops;

  Status runDot(const KernelAttrs &attrs, const Tensor &lhs, const Tensor &rhs,
                const Tensor &result);
  /// `tensor` with its dims permuted into `copy`, in memory at `into` or
  /// else in scratch.
  Status permute(const Tensor &tensor, const std::vector<int64_t> &perm,
                 Tensor &copy, void *into = nullptr);
  /// Reports and clears the kernels' data-dependent error.
  Status takeKernelError();

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
