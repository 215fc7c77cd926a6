//===- CudaDevice.cpp - Kernels on a CUDA GPU -----------------------------===//
//
// Every kernel is first checked by checkKernel (the CPU backend's checks, on
// shapes and attributes only), then queued on the compute stream. GEMMs run
// through cuBLASLt in their own element type (bf16 and f16 with f32
// accumulation, or f32); elementwise math on 16-bit floats widens each
// element in the kernel; the other kernels compute in f32, with 16-bit float
// tensors widened into scratch memory around them. Ops that only move
// elements (reshape, transpose, slice, concat, broadcast, select, constant)
// and casts work on any element type directly.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"

#include <cublas_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

using namespace tessera::runtime;
using namespace tessera::runtime::cuda;

/// The loaded cuBLASLt (set by the first CudaDevice::init).
static const CublasLt *api = nullptr;

const CublasLt *tessera::runtime::cuda::loadCublasLt(std::string &error) {
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
  error = loadError;
  return loadError.empty() ? &functions : nullptr;
}

std::string tessera::runtime::cuda::getCudaError(cudaError_t status,
                                                 const std::string &what) {
  if (status == cudaSuccess)
    return "";
  return what + ": CUDA error: " + cudaGetErrorString(status);
}

static std::string getLtError(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return "";
  return std::string("nn.dot: ") + what + ": " +
         api->cublasLtGetStatusString(status);
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

std::string Scratch::take(size_t bytes, void *&data) {
  bytes = (bytes + 255) / 256 * 256;
  for (Block &block : blocks) {
    if (block.size - block.used >= bytes) {
      data = static_cast<uint8_t *>(block.data) + block.used;
      block.used += bytes;
      return "";
    }
  }
  // A new block at least twice the last, so a step settles on a few.
  size_t size = std::max<size_t>(
      {bytes, blocks.empty() ? size_t(1) << 24 : 2 * blocks.back().size});
  Block block{nullptr, size, bytes};
  if (std::string error = getCudaError(cudaMalloc(&block.data, size),
                                       "allocating scratch memory");
      !error.empty())
    return error;
  blocks.push_back(block);
  data = block.data;
  return "";
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

std::string CudaDevice::init(int ordinal) {
  std::string error;
  if (!(error = getCudaError(cudaSetDevice(ordinal),
                             "selecting GPU " + std::to_string(ordinal)))
           .empty())
    return error;
  this->ordinal = ordinal;
  if (!(error = getCudaError(
            cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
            "creating the compute stream"))
           .empty())
    return error;
  if (!(api = loadCublasLt(error)))
    return error;
  if (api->cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
    return "cannot create a cuBLASLt handle on GPU " + std::to_string(ordinal);
  if (!(error = getCudaError(cudaMalloc(&workspace, kWorkspaceBytes),
                             "allocating the cuBLASLt workspace"))
           .empty())
    return error;
  workspaceBytes = kWorkspaceBytes;
  void *mapped = nullptr;
  if (!(error = getCudaError(
            cudaHostAlloc(&mapped, sizeof(KernelError), cudaHostAllocMapped),
            "allocating the kernel error record"))
           .empty())
    return error;
  kernelError = static_cast<KernelError *>(mapped);
  std::memset(kernelError, 0, sizeof(KernelError));
  return "";
}

std::string CudaDevice::getName() const {
  return "cuda:" + std::to_string(ordinal);
}

std::string CudaDevice::allocate(size_t bytes, void *&data) {
  return getCudaError(cudaMalloc(&data, std::max<size_t>(bytes, 1)),
                      "allocating " + std::to_string(bytes) + " bytes");
}

void CudaDevice::deallocate(void *data) {
  // Work queued on the memory finishes first.
  cudaStreamSynchronize(compute);
  cudaFree(data);
}

std::string CudaDevice::copyWithin(void *dst, const void *src, size_t bytes) {
  if (dst == src || bytes == 0)
    return "";
  return getCudaError(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute),
      "copying on the GPU");
}

std::string CudaDevice::copyToDevice(void *dst, const void *src, size_t bytes) {
  return getCudaError(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute),
      "copying to the GPU");
}

std::string CudaDevice::copyToHost(void *dst, const void *src, size_t bytes) {
  if (std::string error = getCudaError(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, compute),
          "copying from the GPU");
      !error.empty())
    return error;
  return synchronize();
}

std::string CudaDevice::synchronize() {
  if (std::string error = getCudaError(cudaStreamSynchronize(compute),
                                       "running the GPU's kernels");
      !error.empty())
    return error;
  return takeKernelError();
}

std::string CudaDevice::takeKernelError() {
  KernelError seen = *kernelError;
  std::memset(kernelError, 0, sizeof(KernelError));
  switch (seen.code) {
  case KernelError::LabelOutOfRange:
    return "nn.cross_entropy: label " + std::to_string(seen.values[0]) +
           " at position " + std::to_string(seen.values[1]) +
           " is outside [0, " + std::to_string(seen.values[2]) + ")";
  case KernelError::StepBelowOne:
    return "nn.adamw: expects a step of at least 1 (steps count from 1), "
           "got " +
           std::to_string(seen.values[0]);
  default:
    return "";
  }
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

/// The elementwise math ops.
static std::optional<MapOp> getMapOp(const std::string &op) {
  static const std::unordered_map<std::string, MapOp> maps = {
      {"nn.add", MapOp::Add},     {"nn.sub", MapOp::Sub},
      {"nn.mul", MapOp::Mul},     {"nn.div", MapOp::Div},
      {"nn.neg", MapOp::Neg},     {"nn.exp", MapOp::Exp},
      {"nn.log", MapOp::Log},     {"nn.sqrt", MapOp::Sqrt},
      {"nn.rsqrt", MapOp::Rsqrt}, {"nn.tanh", MapOp::Tanh},
      {"nn.relu", MapOp::Relu},   {"nn.gelu", MapOp::Gelu},
      {"nn.silu", MapOp::Silu}};
  auto it = maps.find(op);
  if (it == maps.end())
    return std::nullopt;
  return it->second;
}

/// Whether every tensor has the 16-bit float type `dtype`.
static bool allOfHalfType(const std::vector<const Tensor *> &inputs,
                          const Tensor &output) {
  if (!isHalf(output.dtype))
    return false;
  for (const Tensor *input : inputs)
    if (input->dtype != output.dtype)
      return false;
  return true;
}

/// Ops that move elements without computing, on any element type.
static bool isElementMove(const std::string &op) {
  return op == "nn.reshape" || op == "nn.transpose" || op == "nn.slice" ||
         op == "nn.concat" || op == "nn.broadcast" || op == "nn.select" ||
         op == "nn.constant" || op == "nn.cast";
}

std::string CudaDevice::runKernel(const std::string &op,
                                  const KernelAttrs &attrs,
                                  const std::vector<const Tensor *> &inputs,
                                  const std::vector<Tensor *> &outputs) {
  if (std::string error = checkKernel(op, attrs, inputs, outputs);
      !error.empty())
    return error;
  scratch.reset();
  std::string error;
  std::optional<MapOp> mapOp = getMapOp(op);
  if (op == "nn.dot") {
    error = runDot(attrs, *inputs[0], *inputs[1], *outputs[0]);
  } else if (mapOp && allOfHalfType(inputs, *outputs[0])) {
    mapHalf(*mapOp, outputs[0]->dtype, inputs[0]->as<uint16_t>(),
            inputs.size() > 1 ? inputs[1]->as<uint16_t>() : nullptr,
            outputs[0]->as<uint16_t>(), outputs[0]->getNumElements(), compute);
  } else if (isElementMove(op)) {
    error = runF32(op, attrs, inputs, outputs);
  } else {
    // Widen 16-bit float tensors into f32 scratch, run, narrow the results.
    std::vector<Tensor> wide(inputs.size() + outputs.size());
    std::vector<const Tensor *> ins;
    std::vector<Tensor *> outs;
    auto widen = [&](const Tensor &tensor, Tensor &f32) -> std::string {
      f32 = tensor;
      if (!isHalf(tensor.dtype))
        return "";
      f32.dtype = DType::F32;
      return scratch.take(f32.getBytes(), f32.data);
    };
    for (size_t i = 0; i < inputs.size() && error.empty(); ++i) {
      Tensor &f32 = wide[i];
      if ((error = widen(*inputs[i], f32)).empty() &&
          f32.data != inputs[i]->data)
        cast(inputs[i]->dtype, inputs[i]->data, DType::F32, f32.data,
             f32.getNumElements(), compute);
      ins.push_back(&f32);
    }
    for (size_t i = 0; i < outputs.size() && error.empty(); ++i) {
      error = widen(*outputs[i], wide[inputs.size() + i]);
      outs.push_back(&wide[inputs.size() + i]);
    }
    if (error.empty())
      error = runF32(op, attrs, ins, outs);
    for (size_t i = 0; i < outputs.size() && error.empty(); ++i)
      if (outs[i]->data != outputs[i]->data)
        cast(DType::F32, outs[i]->data, outputs[i]->dtype, outputs[i]->data,
             outputs[i]->getNumElements(), compute);
  }
  if (error.empty())
    error = getCudaError(cudaGetLastError(), op);
  return error;
}

std::string CudaDevice::permute(const Tensor &tensor,
                                const std::vector<int64_t> &perm, Tensor &copy,
                                void *into) {
  copy = tensor;
  copy.shape.clear();
  for (int64_t dim : perm)
    copy.shape.push_back(tensor.shape[dim]);
  copy.data = into;
  StridedCopy plan;
  std::string error = planPermute(tensor.shape, perm, plan);
  if (error.empty() && !into)
    error = scratch.take(copy.getBytes(), copy.data);
  if (error.empty())
    copyStrided(tensor.data, copy.data, getDTypeBytes(tensor.dtype), plan,
                compute);
  return error;
}

static bool is64(const Tensor &indices) { return indices.dtype == DType::I64; }

std::string CudaDevice::runF32(const std::string &op, const KernelAttrs &attrs,
                               const std::vector<const Tensor *> &inputs,
                               const std::vector<Tensor *> &outputs) {
  // The checks passed: every attribute a kernel reads is there, except
  // where the op has a default (the same defaults as the CPU kernels).
  auto in = [&](size_t i) -> const Tensor & { return *inputs[i]; };
  Tensor &out = *outputs[0];
  auto f = [](const Tensor &tensor) { return tensor.as<float>(); };
  auto floatAttr = [&](const char *name, double defaultValue) {
    return attrs.getFloat(name).value_or(defaultValue);
  };
  size_t elementBytes = getDTypeBytes(out.dtype);

  if (std::optional<MapOp> mapOp = getMapOp(op)) {
    map(*mapOp, f(in(0)), inputs.size() > 1 ? f(in(1)) : nullptr, f(out),
        out.getNumElements(), compute);
    return "";
  }
  if (op == "nn.compare") {
    compare(*attrs.getInt("predicate"), in(0).dtype, in(0).data, in(1).data,
            out.as<uint8_t>(), out.getNumElements(), compute);
    return "";
  }
  if (op == "nn.select") {
    select(in(0).as<uint8_t>(), in(1).data, in(2).data, out.data, elementBytes,
           out.getNumElements(), compute);
    return "";
  }
  if (op == "nn.cast") {
    cast(in(0).dtype, in(0).data, out.dtype, out.data, out.getNumElements(),
         compute);
    return "";
  }
  if (op == "nn.constant") {
    const std::string &value = *attrs.getBytes("value");
    if (value.size() == elementBytes) {
      uint64_t pattern = 0;
      std::memcpy(&pattern, value.data(), elementBytes);
      fill(out.data, elementBytes, pattern, out.getNumElements(), compute);
      return "";
    }
    // Pageable memory: the call returns once `value` has been staged.
    return getCudaError(cudaMemcpyAsync(out.data, value.data(), value.size(),
                                        cudaMemcpyHostToDevice, compute),
                        op);
  }
  if (op == "nn.reshape") {
    if (out.data == in(0).data || out.getBytes() == 0)
      return "";
    return getCudaError(cudaMemcpyAsync(out.data, in(0).data, out.getBytes(),
                                        cudaMemcpyDeviceToDevice, compute),
                        op);
  }
  if (op == "nn.transpose") {
    Tensor copy;
    return permute(in(0), *attrs.getList("permutation"), copy, out.data);
  }
  if (op == "nn.slice" || op == "nn.broadcast") {
    StridedCopy copy;
    std::string error =
        op == "nn.slice"
            ? planSlice(in(0).shape, *attrs.getList("start"), out.shape, copy)
            : planBroadcast(in(0).shape, *attrs.getList("dims"), out.shape,
                            copy);
    if (error.empty())
      copyStrided(in(0).data, out.data, elementBytes, copy, compute);
    return error;
  }
  if (op == "nn.concat") {
    // Input k lands at offset (sum of the earlier inputs' sizes) along dim.
    int64_t dim = *attrs.getInt("dim");
    int64_t offset = 0;
    for (const Tensor *input : inputs) {
      StridedCopy copy;
      if (std::string error =
              planConcatInput(input->shape, out.shape, dim, offset, copy);
          !error.empty())
        return error;
      copyStrided(input->data, out.data, elementBytes, copy, compute);
      offset += input->shape[dim];
    }
    return "";
  }
  if (op == "nn.reduce_sum" || op == "nn.reduce_max" ||
      op == "nn.reduce_mean") {
    RowReduction plan = planRowReduction(in(0).shape, *attrs.getList("dims"));
    Tensor rows = in(0);
    if (!plan.perm.empty())
      if (std::string error = permute(in(0), plan.perm, rows); !error.empty())
        return error;
    RowReduce kind = op == "nn.reduce_sum"   ? RowReduce::Sum
                     : op == "nn.reduce_max" ? RowReduce::Max
                                             : RowReduce::Mean;
    reduceRows(kind, f(rows), f(out), plan.rows, plan.cols, compute);
    return "";
  }
  if (op == "nn.softmax" || op == "nn.log_softmax") {
    int64_t dim = *attrs.getInt("dim");
    const std::vector<int64_t> &shape = in(0).shape;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= shape[d];
    for (size_t d = dim + 1; d < shape.size(); ++d)
      inner *= shape[d];
    softmax(op == "nn.log_softmax", f(in(0)), f(out), outer, shape[dim], inner,
            compute);
    return "";
  }
  if (op == "nn.layer_norm" || op == "nn.rms_norm") {
    bool rms = op == "nn.rms_norm";
    int64_t features = in(0).shape.back();
    if (features == 0)
      return "";
    norm(rms, f(in(0)), f(in(1)), rms ? nullptr : f(in(2)), f(out),
         in(0).getNumElements() / features, features,
         floatAttr("epsilon", rms ? 1.0e-6 : 1.0e-5), compute);
    return "";
  }
  if (op == "nn.layer_norm_grad" || op == "nn.rms_norm_grad") {
    bool rms = op == "nn.rms_norm_grad";
    int64_t features = in(0).shape.back();
    if (features == 0)
      return "";
    normGrad(rms, f(in(0)), f(in(1)), f(in(2)), f(out), f(*outputs[1]),
             in(0).getNumElements() / features, features,
             floatAttr("epsilon", rms ? 1.0e-6 : 1.0e-5), compute);
    return "";
  }
  if (op == "nn.embedding") {
    embedding(f(in(0)), in(1).data, is64(in(1)), f(out), in(1).getNumElements(),
              in(0).shape[0], in(0).shape[1], compute);
    return "";
  }
  if (op == "nn.embedding_grad") {
    embeddingGrad(f(in(0)), in(1).data, is64(in(1)), f(out),
                  in(1).getNumElements(), out.shape[0], out.shape[1], compute);
    return "";
  }
  if (op == "nn.one_hot") {
    oneHot(in(0).data, is64(in(0)), f(out), in(0).getNumElements(),
           out.shape.back(), compute);
    return "";
  }
  if (op == "nn.cross_entropy") {
    crossEntropy(f(in(0)), in(1).data, is64(in(1)), f(out),
                 in(1).getNumElements(), in(0).shape.back(), kernelError,
                 compute);
    return "";
  }
  if (op == "nn.causal_mask") {
    const std::vector<int64_t> &shape = in(0).shape;
    causalMask(f(in(0)), f(out), out.getNumElements(), shape[shape.size() - 2],
               shape.back(), compute);
    return "";
  }
  if (op == "nn.sgd") {
    sgd(f(in(0)), f(in(1)), f(out), out.getNumElements(), *attrs.getFloat("lr"),
        floatAttr("weight_decay", 0.0), compute);
    return "";
  }
  if (op == "nn.adamw") {
    adamw(f(in(0)), f(in(1)), f(in(2)), f(in(3)), in(4).data, is64(in(4)),
          f(*outputs[0]), f(*outputs[1]), f(*outputs[2]),
          in(0).getNumElements(), *attrs.getFloat("lr"),
          floatAttr("beta1", 0.9), floatAttr("beta2", 0.999),
          floatAttr("epsilon", 1.0e-8), floatAttr("weight_decay", 0.01),
          kernelError, compute);
    return "";
  }
  return op + ": the CUDA backend has no kernel for it";
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
std::string CudaDevice::runDot(const KernelAttrs &attrs, const Tensor &lhs,
                               const Tensor &rhs, const Tensor &result) {
  static const std::vector<int64_t> none;
  auto list = [&](const char *name) -> const std::vector<int64_t> & {
    const std::vector<int64_t> *value = attrs.getList(name);
    return value ? *value : none;
  };
  GemmPlan plan =
      planGemm(lhs.shape, rhs.shape, list("lhs_batching_dims"),
               list("rhs_batching_dims"), list("lhs_contracting_dims"),
               list("rhs_contracting_dims"));
  int64_t batch = plan.batch, m = plan.m, n = plan.n, k = plan.k;
  if (batch * m * n == 0)
    return "";
  if (k == 0)
    return getCudaError(
        cudaMemsetAsync(result.data, 0, result.getBytes(), compute), "nn.dot");

  // Operands of one element type (else both in f32), each as stored,
  // transposed or permuted into scratch.
  std::string error;
  Tensor a = lhs, b = rhs;
  if (lhs.dtype != rhs.dtype) {
    for (Tensor *operand : {&a, &b}) {
      if (operand->dtype == DType::F32)
        continue;
      Tensor wide = *operand;
      wide.dtype = DType::F32;
      if (!(error = scratch.take(wide.getBytes(), wide.data)).empty())
        return error;
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
    if (!(error = permute(*operand, *perm, copy)).empty())
      return error;
    *operand = copy;
  }
  // The result in its own type when cuBLASLt writes it (the operands' type
  // or f32), else in f32 scratch and narrowed.
  Tensor d = result;
  if (result.dtype != a.dtype && result.dtype != DType::F32) {
    d.dtype = DType::F32;
    if (!(error = scratch.take(d.getBytes(), d.data)).empty())
      return error;
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
  if (!(error = getLtError(status, "describing the matmul")).empty())
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
    if (!(error = getLtError(status, "choosing an algorithm")).empty())
      return error;
    if (returned == 0)
      return "nn.dot: cuBLASLt has no algorithm for [" + std::to_string(m) +
             ", " + std::to_string(k) + "] x [" + std::to_string(k) + ", " +
             std::to_string(n) + "] in " + getDTypeName(a.dtype);
    found = algorithms.emplace(key, heuristic.algo).first;
  }
  float alpha = 1.0f, beta = 0.0f;
  status =
      api->cublasLtMatmul(lt, desc.op, &alpha, b.data, desc.a, a.data, desc.b,
                          &beta, d.data, desc.d, d.data, desc.d, &found->second,
                          workspace, workspaceBytes, compute);
  if (!(error = getLtError(status, "running the matmul")).empty())
    return error;
  if (d.data != result.data)
    cast(DType::F32, d.data, result.dtype, result.data, result.getNumElements(),
         compute);
  return "";
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

std::unique_ptr<Device> tessera::runtime::createCudaDevice(int ordinal,
                                                           std::string &error) {
  int count = getCudaDeviceCount();
  if (ordinal < 0 || ordinal >= count) {
    error = "no GPU " + std::to_string(ordinal) + " (this process sees " +
            std::to_string(count) + ")";
    return nullptr;
  }
  auto device = std::make_unique<CudaDevice>();
  if (!(error = device->init(ordinal)).empty())
    return nullptr;
  return device;
}
