//===- CudaDevice.cpp - Kernels on a CUDA GPU -----------------------------===//
//
// Every kernel is first checked by its op's check (checkOp: shapes and
// attributes only, as every backend checks), then queued on the compute
// stream. GEMMs run
// through cuBLASLt in their own element type (bf16 and f16 with f32
// accumulation, or f32); elementwise math on 16-bit floats widens each
// element in the kernel; the other kernels compute in f32, with 16-bit float
// tensors widened into scratch memory around them. Ops that only move
// elements (reshape, transpose, slice, concat, broadcast, select, constant),
// iota and casts work on any element type directly.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"

#include "AttentionMath.h"

#include <cublas_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

using namespace tessera::runtime;
using namespace tessera::runtime::cuda;

/// The loaded cuBLASLt (set by the first CudaDevice::init).
static const CublasLt *api = nullptr;

Expected<const CublasLt *> tessera::runtime::cuda::loadCublasLt() {
  static CublasLt functions;
  static std::string loadError;
  static std::once_flag once;
  std::call_once(once, [] {
    // The runtime's soname first, then the library the build found.
    std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    void *library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library)
      library = dlopen(TESSERA_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      loadError = "cannot load cuBLASLt (" + soname + "): " + dlerror();
      return;
    }
#define TESSERA_LOAD(name)                                                     \
  functions.name =                                                             \
      reinterpret_cast<decltype(functions.name)>(dlsym(library, #name));       \
  if (!functions.name && loadError.empty())                                    \
    loadError = "cuBLASLt has no " #name;
    TESSERA_CUBLASLT_FUNCTIONS(TESSERA_LOAD)
#undef TESSERA_LOAD
  });
  if (!loadError.empty())
    return unavailable(loadError);
  return &functions;
}

std::string tessera::runtime::cuda::getCudaError(cudaError_t status,
                                                 const std::string &what) {
  if (status == cudaSuccess)
    return "";
  return what + ": CUDA error: " + cudaGetErrorString(status);
}

/// A failed cuBLASLt call of nn.dot as a device error.
static Status getLtStatus(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  return deviceError(std::string("nn.dot: ") + what + ": " +
                     api->cublasLtGetStatusString(status));
}

//===----------------------------------------------------------------------===//
// Scratch
//===----------------------------------------------------------------------===//

Scratch::~Scratch() {
  for (Block &block : blocks)
    cudaFree(block.data);
}

void Scratch::reset() {
  for (Block &block : blocks)
    block.used = 0;
}

Status Scratch::take(size_t bytes, void *&data) {
  bytes = (bytes + 255) / 256 * 256;
  for (Block &block : blocks) {
    if (block.size - block.used >= bytes) {
      data = static_cast<uint8_t *>(block.data) + block.used;
      block.used += bytes;
      return Status::success();
    }
  }
  // A new block at least twice the last, so a step settles on a few.
  size_t size = std::max<size_t>(
      {bytes, blocks.empty() ? size_t(1) << 24 : 2 * blocks.back().size});
  Block block{nullptr, size, bytes};
  if (cudaError_t error = cudaMalloc(&block.data, size); error != cudaSuccess)
    return deviceError(getCudaError(error, "allocating " + formatBytes(size) +
                                               " of scratch memory"));
  blocks.push_back(block);
  data = block.data;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// The device
//===----------------------------------------------------------------------===//

static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

CudaDevice::~CudaDevice() {
  if (ordinal < 0)
    return;
  cudaSetDevice(ordinal);
  if (compute)
    cudaStreamSynchronize(compute);
  if (lt)
    api->cublasLtDestroy(lt);
  cudaFree(workspace);
  if (kernelError)
    cudaFreeHost(kernelError);
  if (compute)
    cudaStreamDestroy(compute);
}

/// A failed CUDA call as a device error.
static Status getCudaStatus(cudaError_t status, const std::string &what) {
  if (status == cudaSuccess)
    return Status::success();
  return deviceError(getCudaError(status, what));
}

Status CudaDevice::init(int ordinal) {
  if (Status status = getCudaStatus(cudaSetDevice(ordinal),
                                    "selecting GPU " + std::to_string(ordinal));
      !status.ok())
    return status;
  this->ordinal = ordinal;
  if (Status status = getCudaStatus(
          cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
          "creating the compute stream");
      !status.ok())
    return status;
  Expected<const CublasLt *> loaded = loadCublasLt();
  if (!loaded.ok())
    return loaded.getStatus();
  api = *loaded;
  if (api->cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
    return deviceError("cannot create a cuBLASLt handle on GPU " +
                       std::to_string(ordinal));
  if (Status status = getCudaStatus(cudaMalloc(&workspace, kWorkspaceBytes),
                                    "allocating the cuBLASLt workspace");
      !status.ok())
    return status;
  workspaceBytes = kWorkspaceBytes;
  void *mapped = nullptr;
  if (Status status = getCudaStatus(
          cudaHostAlloc(&mapped, sizeof(KernelError), cudaHostAllocMapped),
          "allocating the kernel error record");
      !status.ok())
    return status;
  kernelError = static_cast<KernelError *>(mapped);
  std::memset(kernelError, 0, sizeof(KernelError));
  return Status::success();
}

std::string CudaDevice::getName() const {
  return "cuda:" + std::to_string(ordinal);
}

Status CudaDevice::allocate(size_t bytes, void *&data) {
  return getCudaStatus(cudaMalloc(&data, std::max<size_t>(bytes, 1)),
                       "allocating " + formatBytes(bytes));
}

void CudaDevice::deallocate(void *data) {
  // Work queued on the memory finishes first.
  cudaStreamSynchronize(compute);
  cudaFree(data);
}

Status CudaDevice::copyWithin(void *dst, const void *src, size_t bytes) {
  if (dst == src || bytes == 0)
    return Status::success();
  return getCudaStatus(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute),
      "copying on the GPU");
}

Status CudaDevice::copyToDevice(void *dst, const void *src, size_t bytes) {
  return getCudaStatus(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute),
      "copying to the GPU");
}

Status CudaDevice::copyToHost(void *dst, const void *src, size_t bytes) {
  if (Status status = getCudaStatus(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, compute),
          "copying from the GPU");
      !status.ok())
    return status;
  return synchronize();
}

Status CudaDevice::synchronize() {
  if (Status status = getCudaStatus(cudaStreamSynchronize(compute),
                                    "running the GPU's kernels");
      !status.ok())
    return status;
  return takeKernelError();
}

Status CudaDevice::takeKernelError() {
  KernelError seen = *kernelError;
  std::memset(kernelError, 0, sizeof(KernelError));
  switch (seen.code) {
  case KernelError::LabelOutOfRange:
    return dataError("nn.cross_entropy: label " +
                     std::to_string(seen.values[0]) + " at position " +
                     std::to_string(seen.values[1]) + " is outside [0, " +
                     std::to_string(seen.values[2]) + ")");
  case KernelError::StepBelowOne:
    return dataError(
        "nn.adamw: expects a step of at least 1 (steps count from 1), got " +
        std::to_string(seen.values[0]));
  case KernelError::IndexOutOfRange:
    return dataError("nn.gather or nn.scatter_add: index " +
                     std::to_string(seen.values[0]) + " at position " +
                     std::to_string(seen.values[1]) + " is outside [0, " +
                     std::to_string(seen.values[2]) + ")");
  case KernelError::PieceOutOfRange:
    return dataError("a random op (nn.random_uniform, nn.dropout, "
                     "nn.attention): piece " +
                     std::to_string(seen.values[0]) + " of dim " +
                     std::to_string(seen.values[1]) + " is outside [0, " +
                     std::to_string(seen.values[2]) + ")");
  default:
    return Status::success();
  }
}

//===----------------------------------------------------------------------===//
// The kernels
//===----------------------------------------------------------------------===//

static bool is64(const Tensor &indices) { return indices.dtype == DType::I64; }

/// One function per op on f32 data (16-bit floats widened by runKernel,
/// except for the ops that move elements). Every launch passed the CPU
/// kernel's checks: each attribute a kernel reads is there (the plan carries
/// every attribute, defaults included).
struct CudaDevice::Ops {
  using Launch = CudaKernel::Launch;

  static const float *f(const Tensor &tensor) { return tensor.as<float>(); }
  static float *f(Tensor &tensor) { return tensor.as<float>(); }
  static double getFloat(const Launch &l, const char *name) {
    return *l.attrs.getFloat(name);
  }

  static Status dot(CudaDevice &d, const CudaKernel &, const Launch &l) {
    return d.runDot(l.attrs, l.in(0), l.in(1), l.out(0));
  }

  static Status map(CudaDevice &d, const CudaKernel &k, const Launch &l) {
    cuda::map(*k.getMapOp(), f(l.in(0)),
              l.inputs.size() > 1 ? f(l.in(1)) : nullptr, f(l.out(0)),
              l.out(0).getNumElements(), d.compute);
    return Status::success();
  }

  /// nn.fused reads and writes 16-bit floats as they are, rounding each
  /// value as its program says.
  static Status fused(CudaDevice &d, const CudaKernel &, const Launch &l) {
    FusedProgram program;
    if (Status status = planFused(l.attrs, l.inputs, l.outputs, program);
        !status.ok())
      return status;
    cuda::fused(program, d.compute);
    return Status::success();
  }

  static Status clamp(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::clamp(f(l.in(0)), f(l.out(0)), l.out(0).getNumElements(),
                static_cast<float>(getFloat(l, "min")),
                static_cast<float>(getFloat(l, "max")), d.compute);
    return Status::success();
  }

  /// nn.random_uniform (no input before the step) and nn.dropout.
  static Status drawRandom(CudaDevice &d, const CudaKernel &k,
                           const Launch &l) {
    bool dropout = k.getOpId() == OpId::Dropout;
    size_t stepInput = dropout ? 1 : 0;
    Tensor &out = l.out(0);
    random::PiecePlace place;
    std::vector<int64_t> globalShape;
    bool onPiece = l.inputs.size() > stepInput + 1;
    if (onPiece)
      globalShape = *l.attrs.getList("global_shape");
    // checkKernel has checked the shapes.
    random::makePiecePlace(out.shape, globalShape, place);
    cuda::drawRandom(dropout ? f(l.in(0)) : nullptr, f(out),
                     out.getNumElements(),
                     dropout ? static_cast<float>(getFloat(l, "rate")) : 0.0f,
                     static_cast<uint64_t>(*l.attrs.getInt("seed")),
                     l.in(stepInput).data, is64(l.in(stepInput)),
                     onPiece ? l.in(stepInput + 1).as<int64_t>() : nullptr,
                     place, d.kernelError, d.compute);
    return Status::success();
  }

  static Status compare(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::compare(*l.attrs.getInt("predicate"), l.in(0).dtype, l.in(0).data,
                  l.in(1).data, l.out(0).as<uint8_t>(),
                  l.out(0).getNumElements(), d.compute);
    return Status::success();
  }

  static Status select(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::select(l.in(0).as<uint8_t>(), l.in(1).data, l.in(2).data,
                 l.out(0).data, getDTypeBytes(l.out(0).dtype),
                 l.out(0).getNumElements(), d.compute);
    return Status::success();
  }

  static Status cast(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::cast(l.in(0).dtype, l.in(0).data, l.out(0).dtype, l.out(0).data,
               l.out(0).getNumElements(), d.compute);
    return Status::success();
  }

  static Status constant(CudaDevice &d, const CudaKernel &k, const Launch &l) {
    Tensor &out = l.out(0);
    size_t elementBytes = getDTypeBytes(out.dtype);
    const std::string &value = *l.attrs.getBytes("value");
    if (value.size() == elementBytes) {
      uint64_t pattern = 0;
      std::memcpy(&pattern, value.data(), elementBytes);
      fill(out.data, elementBytes, pattern, out.getNumElements(), d.compute);
      return Status::success();
    }
    // Pageable memory: the call returns once `value` has been staged.
    return getCudaStatus(cudaMemcpyAsync(out.data, value.data(), value.size(),
                                         cudaMemcpyHostToDevice, d.compute),
                         k.getOp());
  }

  static Status iota(CudaDevice &d, const CudaKernel &, const Launch &l) {
    Tensor &out = l.out(0);
    int64_t dim = *l.attrs.getInt("dim");
    int64_t inner = 1;
    for (int64_t i = dim + 1; i < out.getRank(); ++i)
      inner *= out.shape[i];
    cuda::iota(out.dtype, getPiece(l, 0), out.data, out.getNumElements(), inner,
               out.shape[dim], d.compute);
    return Status::success();
  }

  static Status reshape(CudaDevice &d, const CudaKernel &k, const Launch &l) {
    Tensor &out = l.out(0);
    if (out.data == l.in(0).data || out.getBytes() == 0)
      return Status::success();
    return getCudaStatus(cudaMemcpyAsync(out.data, l.in(0).data, out.getBytes(),
                                         cudaMemcpyDeviceToDevice, d.compute),
                         k.getOp());
  }

  static Status transpose(CudaDevice &d, const CudaKernel &, const Launch &l) {
    Tensor copy;
    return d.permute(l.in(0), *l.attrs.getList("permutation"), copy,
                     l.out(0).data);
  }

  /// A slice or a broadcast: one strided copy.
  static Status copyStrided(CudaDevice &d, const Launch &l,
                            const StridedCopy &copy) {
    cuda::copyStrided(l.in(0).data, l.out(0).data,
                      getDTypeBytes(l.out(0).dtype), copy, d.compute);
    return Status::success();
  }

  static Status slice(CudaDevice &d, const CudaKernel &, const Launch &l) {
    StridedCopy copy;
    if (Status status = planSlice(l.in(0).shape, *l.attrs.getList("start"),
                                  l.out(0).shape, copy);
        !status.ok())
      return status;
    return copyStrided(d, l, copy);
  }

  static Status broadcast(CudaDevice &d, const CudaKernel &, const Launch &l) {
    StridedCopy copy;
    if (Status status = planBroadcast(l.in(0).shape, *l.attrs.getList("dims"),
                                      l.out(0).shape, copy);
        !status.ok())
      return status;
    return copyStrided(d, l, copy);
  }

  static Status concat(CudaDevice &d, const CudaKernel &, const Launch &l) {
    // Input k lands at offset (sum of the earlier inputs' sizes) along dim.
    Tensor &out = l.out(0);
    int64_t dim = *l.attrs.getInt("dim");
    int64_t offset = 0;
    int64_t rowBytes = getDTypeBytes(out.dtype), outer = 1;
    for (int64_t d = dim + 1; d < static_cast<int64_t>(out.shape.size()); ++d)
      rowBytes *= out.shape[d];
    for (int64_t d = 0; d < dim; ++d)
      outer *= out.shape[d];
    for (const Tensor *input : l.inputs) {
      // An input made in place (Buffer.placed_in, or a padding's value
      // written over): along the outermost dim its bytes are already there.
      if (outer == 1 &&
          input->data == static_cast<uint8_t *>(out.data) + offset * rowBytes) {
        offset += input->shape[dim];
        continue;
      }
      StridedCopy copy;
      if (Status status =
              planConcatInput(input->shape, out.shape, dim, offset, copy);
          !status.ok())
        return status;
      cuda::copyStrided(input->data, out.data, getDTypeBytes(out.dtype), copy,
                        d.compute);
      offset += input->shape[dim];
    }
    return Status::success();
  }

  template <RowReduce kind>
  static Status reduce(CudaDevice &d, const CudaKernel &, const Launch &l) {
    RowReduction plan =
        planRowReduction(l.in(0).shape, *l.attrs.getList("dims"));
    Tensor rows = l.in(0);
    if (!plan.perm.empty())
      if (Status status = d.permute(l.in(0), plan.perm, rows); !status.ok())
        return status;
    reduceRows(kind, f(rows), f(l.out(0)), plan.rows, plan.cols, d.compute);
    return Status::success();
  }

  template <bool log>
  static Status softmax(CudaDevice &d, const CudaKernel &, const Launch &l) {
    int64_t dim = *l.attrs.getInt("dim");
    const std::vector<int64_t> &shape = l.in(0).shape;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dim; ++i)
      outer *= shape[i];
    for (size_t i = dim + 1; i < shape.size(); ++i)
      inner *= shape[i];
    // Log-softmax has no scale or mask.
    float scale = log ? 1.0f : static_cast<float>(*l.attrs.getFloat("scale"));
    bool causal = !log && *l.attrs.getInt("causal") != 0;
    cuda::softmax(log, f(l.in(0)), f(l.out(0)), outer, shape[dim], inner, scale,
                  causal ? shape[shape.size() - 2] : 0, d.compute);
    return Status::success();
  }

  template <bool rms>
  static Status norm(CudaDevice &d, const CudaKernel &, const Launch &l) {
    int64_t features = l.in(0).shape.back();
    if (features == 0)
      return Status::success();
    cuda::norm(rms, f(l.in(0)), f(l.in(1)), rms ? nullptr : f(l.in(2)),
               f(l.out(0)), l.in(0).getNumElements() / features, features,
               getFloat(l, "epsilon"), d.compute);
    return Status::success();
  }

  template <bool rms>
  static Status normGrad(CudaDevice &d, const CudaKernel &, const Launch &l) {
    int64_t features = l.in(0).shape.back();
    if (features == 0)
      return Status::success();
    cuda::normGrad(rms, f(l.in(0)), f(l.in(1)), f(l.in(2)), f(l.out(0)),
                   f(l.out(1)), l.in(0).getNumElements() / features, features,
                   getFloat(l, "epsilon"), d.compute);
    return Status::success();
  }

  /// The piece index of an nn.OffsetOpInterface op, input `input` if the
  /// kernel has it (the host-side check validated it).
  static const int64_t *getPiece(const Launch &l, size_t input) {
    return l.inputs.size() > input
               ? static_cast<const int64_t *>(l.in(input).data)
               : nullptr;
  }

  static Status embedding(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::embedding(f(l.in(0)), l.in(1).data, is64(l.in(1)), getPiece(l, 2),
                    f(l.out(0)), l.in(1).getNumElements(), l.in(0).shape[0],
                    l.in(0).shape[1], d.compute);
    return Status::success();
  }

  static Status embeddingGrad(CudaDevice &d, const CudaKernel &,
                              const Launch &l) {
    cuda::embeddingGrad(f(l.in(0)), l.in(1).data, is64(l.in(1)), getPiece(l, 2),
                        f(l.out(0)), l.in(1).getNumElements(),
                        l.out(0).shape[0], l.out(0).shape[1], d.compute);
    return Status::success();
  }

  static Status oneHot(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::oneHot(l.in(0).data, is64(l.in(0)), getPiece(l, 1), f(l.out(0)),
                 l.in(0).getNumElements(), l.out(0).shape.back(), d.compute);
    return Status::success();
  }

  static Status moeDispatch(CudaDevice &d, const CudaKernel &,
                            const Launch &l) {
    const Tensor &indices = l.in(0);
    Tensor &mask = l.out(0);
    int64_t k = indices.shape.back();
    int64_t tokens = indices.shape[indices.getRank() - 2];
    int64_t experts = mask.shape[mask.getRank() - 2];
    int64_t groups =
        indices.getNumElements() / std::max<int64_t>(tokens * k, 1);
    cuda::moeDispatch(indices.data, is64(indices), f(mask), groups, tokens, k,
                      experts, mask.shape.back(), d.compute);
    return Status::success();
  }

  /// nn.gather (the input whole, the result picked) or nn.scatter_add
  /// (the source picked, the result whole).
  template <bool scatter>
  static Status indexedAxis(CudaDevice &d, const CudaKernel &,
                            const Launch &l) {
    const Tensor &whole = scatter ? l.out(0) : l.in(0);
    const Tensor &picked = scatter ? l.in(0) : l.out(0);
    int64_t axis = *l.attrs.getInt("axis"), inner = 1;
    for (int64_t dim = axis + 1; dim < whole.getRank(); ++dim)
      inner *= whole.shape[dim];
    cuda::indexedAxis(scatter, f(l.in(0)), f(l.out(0)), l.in(1).data,
                      is64(l.in(1)), picked.getNumElements(),
                      picked.shape[axis], whole.shape[axis], inner,
                      whole.getNumElements(), d.kernelError, d.compute);
    return Status::success();
  }

  static Status topK(CudaDevice &d, const CudaKernel &, const Launch &l) {
    const Tensor &input = l.in(0);
    int64_t size = input.shape.back();
    cuda::topK(f(input), f(l.out(0)), l.out(1).as<int64_t>(),
               size ? input.getNumElements() / size : 0, size,
               *l.attrs.getInt("k"), d.compute);
    return Status::success();
  }

  static Status crossEntropy(CudaDevice &d, const CudaKernel &,
                             const Launch &l) {
    cuda::crossEntropy(f(l.in(0)), l.in(1).data, is64(l.in(1)), f(l.out(0)),
                       l.in(1).getNumElements(), l.in(0).shape.back(),
                       d.kernelError, d.compute);
    return Status::success();
  }

  static Status causalMask(CudaDevice &d, const CudaKernel &, const Launch &l) {
    const std::vector<int64_t> &shape = l.in(0).shape;
    cuda::causalMask(f(l.in(0)), f(l.out(0)), l.out(0).getNumElements(),
                     shape[shape.size() - 2], shape.back(),
                     static_cast<float>(getFloat(l, "fill")), d.compute);
    return Status::success();
  }

  /// Why the GPU's attention kernels do not take these head dims, if so.
  static Status checkHeadDims(const CudaKernel &k, const Launch &l) {
    const std::vector<int64_t> &q = l.in(0).shape, &v = l.in(2).shape;
    if (q[3] > kAttentionMaxHeadDim || v[3] > kAttentionMaxHeadDim)
      return Status(StatusCode::Unavailable,
                    k.getOp() + ": head dims above " +
                        std::to_string(kAttentionMaxHeadDim) +
                        " are not supported on the GPU, got " +
                        std::to_string(q[3]) + " and " + std::to_string(v[3]));
    return Status::success();
  }

  /// An attention kernel's sizes, scale and causality, from q, k and v.
  static AttentionShape makeAttentionShape(const Launch &l) {
    const std::vector<int64_t> &q = l.in(0).shape, &v = l.in(2).shape;
    AttentionShape shape{q[0],
                         q[1],
                         v[1],
                         q[2],
                         v[2],
                         int(q[3]),
                         int(v[3]),
                         static_cast<float>(getFloat(l, "scale")),
                         *l.attrs.getInt("causal") != 0};
    shape.zigzag = *l.attrs.getInt("zigzag");
    return shape;
  }

  /// nn.attention's (or its gradient's) sizes, or why the GPU kernels do
  /// not take them.
  static Status getAttentionShape(const CudaKernel &k, const Launch &l,
                                  AttentionShape &shape) {
    if (Status status = checkHeadDims(k, l); !status.ok())
      return status;
    const std::vector<int64_t> &q = l.in(0).shape;
    shape = makeAttentionShape(l);
    // The dropout's step (a scalar) and the piece index follow q, k, v (and
    // o, do); a causal piece of the queries has the piece without a step.
    size_t tensors = k.getOpId() == OpId::Attention ? 3 : 5;
    shape.dropout.rate = static_cast<float>(getFloat(l, "dropout"));
    bool hasStep = l.inputs.size() > tensors && l.in(tensors).getRank() == 0;
    size_t piece = hasStep ? tensors + 1 : tensors;
    std::vector<int64_t> globalShape;
    if (l.inputs.size() > piece) {
      globalShape = *l.attrs.getList("global_shape");
      shape.piece = l.in(piece).as<int64_t>();
    }
    if (hasStep) {
      shape.dropout.seed = static_cast<uint64_t>(*l.attrs.getInt("seed"));
      shape.step = l.in(tensors).data;
      shape.step64 = is64(l.in(tensors));
    }
    // checkKernel has checked the shapes.
    if (hasStep || shape.piece)
      random::makePiecePlace({q[0], q[1], q[2], l.in(1).shape[2]}, globalShape,
                             shape.dropout.place);
    return Status::success();
  }

  static Status attention(CudaDevice &d, const CudaKernel &k, const Launch &l) {
    AttentionShape shape;
    if (Status status = getAttentionShape(k, l, shape); !status.ok())
      return status;
    shape.error = d.kernelError;
    cuda::attention(shape, f(l.in(0)), f(l.in(1)), f(l.in(2)), f(l.out(0)),
                    nullptr, d.compute);
    return Status::success();
  }

  /// nn.attention_block's (or its gradient's) sizes and place in the ring;
  /// checkKernel has checked the shapes and the attributes.
  static AttentionShape getAttentionBlockShape(const Launch &l,
                                               size_t indexInput) {
    AttentionShape shape = makeAttentionShape(l);
    shape.ringIndex = l.in(indexInput).as<int64_t>();
    shape.ringStep = *l.attrs.getInt("ring_step");
    shape.ringSize = *l.attrs.getInt("ring_size");
    return shape;
  }

  static Status attentionBlock(CudaDevice &d, const CudaKernel &k,
                               const Launch &l) {
    if (Status status = checkHeadDims(k, l); !status.ok())
      return status;
    AttentionShape shape = getAttentionBlockShape(l, 3);
    shape.error = d.kernelError;
    cuda::attention(shape, f(l.in(0)), f(l.in(1)), f(l.in(2)), f(l.out(0)),
                    f(l.out(1)), d.compute);
    return Status::success();
  }

  static Status attentionBlockGrad(CudaDevice &d, const CudaKernel &k,
                                   const Launch &l) {
    if (Status status = checkHeadDims(k, l); !status.ok())
      return status;
    AttentionShape shape = getAttentionBlockShape(l, 6);
    shape.error = d.kernelError;
    // rowsum(do · o) per query row; the log-sum-exps are given.
    size_t rows = size_t(shape.batch * shape.heads * shape.queries);
    void *stats = nullptr;
    if (Status status = d.scratch.take(rows * sizeof(float), stats);
        !status.ok())
      return status;
    cuda::attentionGrad(
        shape, f(l.in(0)), f(l.in(1)), f(l.in(2)), f(l.in(3)), f(l.in(4)),
        f(l.out(0)), f(l.out(1)), f(l.out(2)), const_cast<float *>(f(l.in(5))),
        static_cast<float *>(stats), /*lseGiven=*/true, d.compute);
    return Status::success();
  }

  static Status attentionGrad(CudaDevice &d, const CudaKernel &k,
                              const Launch &l) {
    AttentionShape shape;
    if (Status status = getAttentionShape(k, l, shape); !status.ok())
      return status;
    shape.error = d.kernelError;
    // Two floats per query row: its log-sum-exp and rowsum(do · o).
    size_t rows = size_t(shape.batch * shape.heads * shape.queries);
    void *stats = nullptr;
    if (Status status = d.scratch.take(2 * rows * sizeof(float), stats);
        !status.ok())
      return status;
    float *lse = static_cast<float *>(stats);
    cuda::attentionGrad(shape, f(l.in(0)), f(l.in(1)), f(l.in(2)), f(l.in(3)),
                        f(l.in(4)), f(l.out(0)), f(l.out(1)), f(l.out(2)), lse,
                        lse + rows, /*lseGiven=*/false, d.compute);
    return Status::success();
  }

  static Status sgd(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::sgd(f(l.in(0)), f(l.in(1)), f(l.out(0)), l.out(0).getNumElements(),
              getFloat(l, "lr"), getFloat(l, "weight_decay"), d.compute);
    return Status::success();
  }

  static Status adamw(CudaDevice &d, const CudaKernel &, const Launch &l) {
    cuda::AdamWRate rate = {
        static_cast<LrSchedule>(*l.attrs.getInt("schedule")),
        getFloat(l, "lr"),
        getFloat(l, "min_lr"),
        *l.attrs.getInt("warmup_steps"),
        *l.attrs.getInt("decay_steps"),
        l.inputs.size() >= 6 ? f(l.in(5)) : nullptr,
        static_cast<float>(getFloat(l, "max_grad_norm")),
        l.inputs.size() == 7 ? f(l.in(6)) : nullptr};
    cuda::adamw(f(l.in(0)), l.in(1).data, l.in(1).dtype, f(l.in(2)), f(l.in(3)),
                l.in(4).data, is64(l.in(4)), f(l.out(0)), f(l.out(1)),
                f(l.out(2)), l.in(0).getNumElements(), rate,
                getFloat(l, "beta1"), getFloat(l, "beta2"),
                getFloat(l, "epsilon"), getFloat(l, "weight_decay"),
                d.kernelError, d.compute);
    return Status::success();
  }

  static Status sumSquares(CudaDevice &d, const CudaKernel &, const Launch &l) {
    void *partials = nullptr;
    if (Status status =
            d.scratch.take(cuda::kSumSquaresBlocks * sizeof(double), partials);
        !status.ok())
      return status;
    cuda::sumSquares(l.in(0).data, l.in(0).dtype, l.in(0).getNumElements(),
                     static_cast<double *>(partials), f(l.out(0)), d.compute);
    return Status::success();
  }

  // Each op's launch, named after its id in the op table (Ops.def): an op
  // the table has and this backend lacks is a compile error here. The map
  // ops share `map`.
  static constexpr CudaKernel::Fn launchDot = dot;
  static constexpr CudaKernel::Fn launchClamp = clamp;
  static constexpr CudaKernel::Fn launchCompare = compare;
  static constexpr CudaKernel::Fn launchSelect = select;
  static constexpr CudaKernel::Fn launchCast = cast;
  static constexpr CudaKernel::Fn launchConstant = constant;
  static constexpr CudaKernel::Fn launchIota = iota;
  static constexpr CudaKernel::Fn launchBroadcast = broadcast;
  static constexpr CudaKernel::Fn launchFused = fused;
  static constexpr CudaKernel::Fn launchRandomUniform = drawRandom;
  static constexpr CudaKernel::Fn launchDropout = drawRandom;
  static constexpr CudaKernel::Fn launchReduceSum = reduce<RowReduce::Sum>;
  static constexpr CudaKernel::Fn launchReduceMax = reduce<RowReduce::Max>;
  static constexpr CudaKernel::Fn launchReduceMean = reduce<RowReduce::Mean>;
  static constexpr CudaKernel::Fn launchReshape = reshape;
  static constexpr CudaKernel::Fn launchTranspose = transpose;
  static constexpr CudaKernel::Fn launchSlice = slice;
  static constexpr CudaKernel::Fn launchConcat = concat;
  static constexpr CudaKernel::Fn launchSoftmax = softmax<false>;
  static constexpr CudaKernel::Fn launchLogSoftmax = softmax<true>;
  static constexpr CudaKernel::Fn launchCrossEntropy = crossEntropy;
  static constexpr CudaKernel::Fn launchLayerNorm = norm<false>;
  static constexpr CudaKernel::Fn launchRmsNorm = norm<true>;
  static constexpr CudaKernel::Fn launchLayerNormGrad = normGrad<false>;
  static constexpr CudaKernel::Fn launchRmsNormGrad = normGrad<true>;
  static constexpr CudaKernel::Fn launchEmbedding = embedding;
  static constexpr CudaKernel::Fn launchEmbeddingGrad = embeddingGrad;
  static constexpr CudaKernel::Fn launchGather = indexedAxis<false>;
  static constexpr CudaKernel::Fn launchScatterAdd = indexedAxis<true>;
  static constexpr CudaKernel::Fn launchTopK = topK;
  static constexpr CudaKernel::Fn launchOneHot = oneHot;
  static constexpr CudaKernel::Fn launchMoeDispatch = moeDispatch;
  static constexpr CudaKernel::Fn launchCausalMask = causalMask;
  static constexpr CudaKernel::Fn launchAttention = attention;
  static constexpr CudaKernel::Fn launchAttentionGrad = attentionGrad;
  static constexpr CudaKernel::Fn launchAttentionBlock = attentionBlock;
  static constexpr CudaKernel::Fn launchAttentionBlockGrad = attentionBlockGrad;
  static constexpr CudaKernel::Fn launchSgd = sgd;
  static constexpr CudaKernel::Fn launchAdamW = adamw;
  static constexpr CudaKernel::Fn launchSumSquares = sumSquares;

  /// The registry, from the op table and in its order: one kernel per op.
  static const std::vector<CudaKernel> &getKernels() {
    static const std::vector<CudaKernel> kernels = {
#define TESSERA_OP(Id, Name) CudaKernel(getOpInfo(OpId::Id), launch##Id),
#define TESSERA_MAP_OP(Id, Name, Arity) CudaKernel(getOpInfo(OpId::Id), map),
#include "tessera/runtime/Ops.def"
    };
    return kernels;
  }
};

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

Expected<const Kernel *> CudaDevice::findKernel(const std::string &op) {
  Expected<const OpInfo *> info = findOp(op);
  if (!info.ok())
    return info.getStatus();
  return static_cast<const Kernel *>(
      &Ops::getKernels()[static_cast<size_t>((*info)->id)]);
}

/// Whether every tensor has the 16-bit float type of `output`.
static bool allOfHalfType(const std::vector<const Tensor *> &inputs,
                          const Tensor &output) {
  if (!isHalf(output.dtype))
    return false;
  for (const Tensor *input : inputs)
    if (input->dtype != output.dtype)
      return false;
  return true;
}

Status CudaDevice::runKernel(const Kernel &kernel, const KernelAttrs &attrs,
                             const std::vector<const Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs) {
  // Every kernel this device hands out is a CudaKernel.
  const auto &k = static_cast<const CudaKernel &>(kernel);
  if (Status status = k.check(attrs, inputs, outputs); !status.ok())
    return status;
  scratch.reset();
  Status status;
  if (k.getMapOp() && allOfHalfType(inputs, *outputs[0])) {
    mapHalf(*k.getMapOp(), outputs[0]->dtype, inputs[0]->as<uint16_t>(),
            inputs.size() > 1 ? inputs[1]->as<uint16_t>() : nullptr,
            outputs[0]->as<uint16_t>(), outputs[0]->getNumElements(), compute);
  } else if (k.isElementMove() || k.getOpId() == OpId::Dot) {
    // GEMMs run in their own element type (runDot).
    status = k.run(*this, {attrs, inputs, outputs});
  } else {
    // Widen 16-bit float tensors into f32 scratch, run, narrow the results.
    std::vector<Tensor> wide(inputs.size() + outputs.size());
    std::vector<const Tensor *> ins;
    std::vector<Tensor *> outs;
    auto widen = [&](const Tensor &tensor, Tensor &f32) -> Status {
      f32 = tensor;
      if (!isHalf(tensor.dtype))
        return Status::success();
      f32.dtype = DType::F32;
      return scratch.take(f32.getBytes(), f32.data);
    };
    for (size_t i = 0; i < inputs.size() && status.ok(); ++i) {
      Tensor &f32 = wide[i];
      if ((status = widen(*inputs[i], f32)).ok() && f32.data != inputs[i]->data)
        cuda::cast(inputs[i]->dtype, inputs[i]->data, DType::F32, f32.data,
                   f32.getNumElements(), compute);
      ins.push_back(&f32);
    }
    for (size_t i = 0; i < outputs.size() && status.ok(); ++i) {
      status = widen(*outputs[i], wide[inputs.size() + i]);
      outs.push_back(&wide[inputs.size() + i]);
    }
    if (status.ok())
      status = k.run(*this, {attrs, ins, outs});
    for (size_t i = 0; i < outputs.size() && status.ok(); ++i)
      if (outs[i]->data != outputs[i]->data)
        cuda::cast(DType::F32, outs[i]->data, outputs[i]->dtype,
                   outputs[i]->data, outputs[i]->getNumElements(), compute);
  }
  if (status.ok())
    status = getCudaStatus(cudaGetLastError(), k.getOp());
  return status;
}

Status CudaDevice::permute(const Tensor &tensor,
                           const std::vector<int64_t> &perm, Tensor &copy,
                           void *into) {
  copy = tensor;
  copy.shape.clear();
  for (int64_t dim : perm)
    copy.shape.push_back(tensor.shape[dim]);
  copy.data = into;
  StridedCopy plan;
  Status status = planPermute(tensor.shape, perm, plan);
  if (status.ok() && !into)
    status = scratch.take(copy.getBytes(), copy.data);
  if (status.ok())
    copyStrided(tensor.data, copy.data, getDTypeBytes(tensor.dtype), plan,
                compute);
  return status;
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

static cudaDataType_t getCudaType(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

namespace {
/// Frees cuBLASLt descriptors at scope exit.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    if (preference)
      api->cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, d})
      if (layout)
        api->cublasLtMatrixLayoutDestroy(layout);
    if (op)
      api->cublasLtMatmulDescDestroy(op);
  }
};
} // namespace

/// A column-major layout of `rows` x `cols` (leading dim `rows`), `batch`
/// of them `rows * cols` apart.
static cublasStatus_t makeLayout(cublasLtMatrixLayout_t &layout,
                                 cudaDataType_t type, int64_t rows,
                                 int64_t cols, int64_t batch) {
  cublasStatus_t status =
      api->cublasLtMatrixLayoutCreate(&layout, type, rows, cols, rows);
  int32_t count = static_cast<int32_t>(batch);
  int64_t stride = rows * cols;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = api->cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = api->cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof(stride));
  return status;
}

/// nn.dot as one strided-batched cuBLASLt matmul laid out by planGemm.
Status CudaDevice::runDot(const KernelAttrs &attrs, const Tensor &lhs,
                          const Tensor &rhs, const Tensor &result) {
  // The launch passed the checks: every list is there.
  auto list = [&](const char *name) -> const std::vector<int64_t> & {
    return *attrs.getList(name);
  };
  GemmPlan plan =
      planGemm(lhs.shape, rhs.shape, list("lhs_batching_dims"),
               list("rhs_batching_dims"), list("lhs_contracting_dims"),
               list("rhs_contracting_dims"));
  int64_t batch = plan.batch, m = plan.m, n = plan.n, k = plan.k;
  if (batch * m * n == 0)
    return Status::success();
  if (k == 0)
    return getCudaStatus(
        cudaMemsetAsync(result.data, 0, result.getBytes(), compute), "nn.dot");

  // Operands of one element type (else both in f32), each as stored,
  // transposed or permuted into scratch.
  Tensor a = lhs, b = rhs;
  if (lhs.dtype != rhs.dtype) {
    for (Tensor *operand : {&a, &b}) {
      if (operand->dtype == DType::F32)
        continue;
      Tensor wide = *operand;
      wide.dtype = DType::F32;
      if (Status status = scratch.take(wide.getBytes(), wide.data);
          !status.ok())
        return status;
      cast(operand->dtype, operand->data, DType::F32, wide.data,
           wide.getNumElements(), compute);
      *operand = wide;
    }
  }
  for (auto [operand, perm] :
       {std::pair(&a, &plan.lhsPerm), std::pair(&b, &plan.rhsPerm)}) {
    if (perm->empty())
      continue;
    Tensor copy;
    if (Status status = permute(*operand, *perm, copy); !status.ok())
      return status;
    *operand = copy;
  }
  // The result in its own type when cuBLASLt writes it (the operands' type
  // or f32), else in f32 scratch and narrowed.
  Tensor d = result;
  if (result.dtype != a.dtype && result.dtype != DType::F32) {
    d.dtype = DType::F32;
    if (Status status = scratch.take(d.getBytes(), d.data); !status.ok())
      return status;
  }

  cudaDataType_t abType = getCudaType(a.dtype), dType = getCudaType(d.dtype);
  LtDescriptors desc;
  cublasStatus_t status =
      api->cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  // Lt's A is the rhs and its B the lhs (see GemmPlan).
  cublasOperation_t opA = plan.rhsTransposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = plan.lhsTransposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = api->cublasLtMatmulDescSetAttribute(
        desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = api->cublasLtMatmulDescSetAttribute(
        desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = makeLayout(desc.a, abType, plan.aRows, plan.aCols, batch);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = makeLayout(desc.b, abType, plan.bRows, plan.bCols, batch);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = makeLayout(desc.d, dType, plan.dRows, plan.dCols, batch);
  if (Status error = getLtStatus(status, "describing the matmul"); !error.ok())
    return error;

  // The algorithms cuBLASLt offers by default assume 256-byte aligned
  // matrices; the arena aligns buffers to 64 bytes.
  auto getAlignment = [&](const Tensor &matrix, int64_t elements) {
    uint32_t alignment = 256;
    uintptr_t address = reinterpret_cast<uintptr_t>(matrix.data);
    size_t stride = batch > 1 ? elements * getDTypeBytes(matrix.dtype) : 0;
    while (alignment > 1 &&
           (address % alignment != 0 || stride % alignment != 0))
      alignment /= 2;
    return alignment;
  };
  uint32_t alignA = getAlignment(b, n * k), alignB = getAlignment(a, m * k),
           alignD = getAlignment(d, m * n);
  GemmKey key{abType,
              dType,
              plan.lhsTransposed,
              plan.rhsTransposed,
              batch,
              m,
              n,
              k,
              alignA,
              alignB,
              alignD};
  auto found = algorithms.find(key);
  if (found == algorithms.end()) {
    status = api->cublasLtMatmulPreferenceCreate(&desc.preference);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = api->cublasLtMatmulPreferenceSetAttribute(
          desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
          &workspaceBytes, sizeof(workspaceBytes));
    std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignD},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD}};
    for (auto &[attribute, alignment] : alignments)
      if (status == CUBLAS_STATUS_SUCCESS)
        status = api->cublasLtMatmulPreferenceSetAttribute(
            desc.preference, attribute, &alignment, sizeof(alignment));
    cublasLtMatmulHeuristicResult_t heuristic = {};
    int returned = 0;
    if (status == CUBLAS_STATUS_SUCCESS)
      status = api->cublasLtMatmulAlgoGetHeuristic(
          lt, desc.op, desc.a, desc.b, desc.d, desc.d, desc.preference, 1,
          &heuristic, &returned);
    if (Status error = getLtStatus(status, "choosing an algorithm");
        !error.ok())
      return error;
    if (returned == 0)
      return deviceError("nn.dot: cuBLASLt has no algorithm for [" +
                         std::to_string(m) + ", " + std::to_string(k) +
                         "] x [" + std::to_string(k) + ", " +
                         std::to_string(n) + "] in " + getDTypeName(a.dtype));
    found = algorithms.emplace(key, heuristic.algo).first;
  }
  float alpha = 1.0f, beta = 0.0f;
  status =
      api->cublasLtMatmul(lt, desc.op, &alpha, b.data, desc.a, a.data, desc.b,
                          &beta, d.data, desc.d, d.data, desc.d, &found->second,
                          workspace, workspaceBytes, compute);
  if (Status error = getLtStatus(status, "running the matmul"); !error.ok())
    return error;
  if (d.data != result.data)
    cast(DType::F32, d.data, result.dtype, result.data, result.getNumElements(),
         compute);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

bool tessera::runtime::hasCudaBackend() { return true; }

int tessera::runtime::getCudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // No driver or no GPU: not an error to keep.
    return 0;
  }
  return count;
}

Expected<std::unique_ptr<Device>>
tessera::runtime::createCudaDevice(int ordinal) {
  int count = getCudaDeviceCount();
  if (ordinal < 0 || ordinal >= count)
    return unavailable("no GPU " + std::to_string(ordinal) +
                       " (this process sees " + std::to_string(count) + ")");
  auto device = std::make_unique<CudaDevice>();
  if (Status status = device->init(ordinal); !status.ok())
    return status;
  return std::unique_ptr<Device>(std::move(device));
}
