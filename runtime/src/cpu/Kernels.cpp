//===- Kernels.cpp - The CPU backend's registry of kernels ----------------===//
//
// Every nn op of the table (Ops.def) on local row-major tensors, its kernel
// in the file of its family (GemmKernels.cpp, ElementwiseKernels.cpp, ...).
// Float math is f32, with double accumulators for reductions, norms and the
// optimizers; 16-bit floats are widened around a kernel here. The ops that
// only move data take any element type, as the dialect allows. Each kernel
// first checks its tensors and attributes against the op's rules (the same
// rules as the nn verifiers) and answers a message rather than touch memory
// it should not.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Kernels.h"

#include "KernelSupport.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

using namespace tessera;
using namespace tessera::runtime;

//===----------------------------------------------------------------------===//
// KernelAttrs
//===----------------------------------------------------------------------===//

std::optional<int64_t> KernelAttrs::getInt(const std::string &name) const {
  auto it = ints.find(name);
  if (it == ints.end())
    return std::nullopt;
  return it->second;
}

std::optional<double> KernelAttrs::getFloat(const std::string &name) const {
  auto it = floats.find(name);
  if (it == floats.end())
    return std::nullopt;
  return it->second;
}

const std::vector<int64_t> *
KernelAttrs::getList(const std::string &name) const {
  auto it = lists.find(name);
  return it == lists.end() ? nullptr : &it->second;
}

const std::string *KernelAttrs::getBytes(const std::string &name) const {
  auto it = bytes.find(name);
  return it == bytes.end() ? nullptr : &it->second;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

using KernelFn = CpuKernel::Fn;
using detail::concat;
using detail::KernelCall;

/// The registry, from the op table: built once, never changed, so that a
/// found kernel lives as long as the process.
static const std::unordered_map<std::string, CpuKernel> &getKernels() {
  static const std::unordered_map<std::string, CpuKernel> kernels = [] {
    std::unordered_map<std::string, CpuKernel> table;
#define TESSERA_OP(Id, Name) table.emplace(Name, CpuKernel(Name, cpu::run##Id));
#define TESSERA_MAP_OP(Id, Name, Arity)                                        \
  table.emplace(Name, CpuKernel(Name, cpu::runArrayMath));
#include "tessera/runtime/Ops.def"
    return table;
  }();
  return kernels;
}

/// A constant's elements are stored in its own dtype: a 16-bit float
/// constant computed in f32 has them widened too, in `wideAttrs`. Returns
/// the attributes to compute with.
static const KernelAttrs &
widenConstantValue(const std::string &op, const KernelAttrs &attrs,
                   const std::vector<Tensor *> &outputs,
                   KernelAttrs &wideAttrs) {
  if (op == "nn.constant" && !outputs.empty() && outputs[0] &&
      isHalf(outputs[0]->dtype)) {
    wideAttrs = attrs;
    if (const std::string *raw = attrs.getBytes("value")) {
      std::string wide(raw->size() / 2 * 4, '\0');
      for (size_t i = 0; i < raw->size() / 2; ++i) {
        uint16_t bits;
        std::memcpy(&bits, raw->data() + 2 * i, 2);
        float value = halfToFloat(outputs[0]->dtype, bits);
        std::memcpy(&wide[4 * i], &value, 4);
      }
      wideAttrs.bytes["value"] = wide;
    }
    return wideAttrs;
  }
  return attrs;
}

/// A kernel's message as a status: the data-dependent checks (a label
/// outside the vocabulary, a step below 1) are data errors, the others
/// arguments that do not fit.
static Status getStatus(const KernelCall &call, bool dataDependent) {
  if (call.getMessage().empty())
    return Status::success();
  return Status(dataDependent ? StatusCode::DataError
                              : StatusCode::InvalidArgument,
                call.getMessage());
}

/// Runs a kernel whose 16-bit float tensors have been widened to f32:
/// bf16 and f16 are storage formats here, and the math is f32 (as tensor
/// cores accumulate), rounded to nearest even when the results are narrowed.
static Status runWidened(KernelFn kernel, const std::string &op,
                         const KernelAttrs &attrs,
                         const std::vector<const Tensor *> &inputs,
                         const std::vector<Tensor *> &outputs) {
  std::vector<OwnedTensor> wideInputs, wideOutputs;
  std::vector<const Tensor *> ins;
  std::vector<Tensor *> outs;
  wideInputs.reserve(inputs.size());
  wideOutputs.reserve(outputs.size());
  for (const Tensor *input : inputs) {
    if (input && isHalf(input->dtype)) {
      wideInputs.push_back(widenToF32(*input));
      ins.push_back(&wideInputs.back().view);
    } else {
      ins.push_back(input);
    }
  }
  for (Tensor *output : outputs) {
    if (output && isHalf(output->dtype)) {
      wideOutputs.emplace_back(DType::F32, output->shape);
      outs.push_back(&wideOutputs.back().view);
    } else {
      outs.push_back(output);
    }
  }
  KernelAttrs wideAttrs;
  KernelCall call(op, widenConstantValue(op, attrs, outputs, wideAttrs), ins,
                  outs);
  kernel(call);
  if (!call.getMessage().empty())
    return getStatus(call, call.isDataError());
  size_t next = 0;
  for (Tensor *output : outputs)
    if (output && isHalf(output->dtype))
      narrowFromF32(wideOutputs[next++].view, *output);
  return Status::success();
}

Kernel::~Kernel() = default;

Expected<const CpuKernel *> runtime::findCpuKernel(const std::string &op) {
  const auto &kernels = getKernels();
  auto it = kernels.find(op);
  if (it == kernels.end())
    return invalidPlan(concat("unknown kernel '", op, "'"));
  return &it->second;
}

Status CpuKernel::run(const KernelAttrs &attrs,
                      const std::vector<const Tensor *> &inputs,
                      const std::vector<Tensor *> &outputs) const {
  auto isHalfTensor = [](const Tensor *t) { return t && isHalf(t->dtype); };
  if (std::any_of(inputs.begin(), inputs.end(), isHalfTensor) ||
      std::any_of(outputs.begin(), outputs.end(), isHalfTensor))
    return runWidened(fn, getOp(), attrs, inputs, outputs);
  KernelCall call(getOp(), attrs, inputs, outputs);
  fn(call);
  return getStatus(call, call.isDataError());
}

Status CpuKernel::check(const KernelAttrs &attrs,
                        const std::vector<const Tensor *> &inputs,
                        const std::vector<Tensor *> &outputs) const {
  // 16-bit floats are computed in f32: check views of them as f32 (the
  // element count is what matters; no element is read).
  std::vector<Tensor> views;
  views.reserve(inputs.size() + outputs.size());
  auto widen = [&](const Tensor *tensor) -> Tensor * {
    if (!tensor)
      return nullptr;
    views.push_back(*tensor);
    if (isHalf(tensor->dtype))
      views.back().dtype = DType::F32;
    return &views.back();
  };
  std::vector<const Tensor *> ins;
  std::vector<Tensor *> outs;
  for (const Tensor *input : inputs)
    ins.push_back(widen(input));
  for (Tensor *output : outputs)
    outs.push_back(widen(output));
  KernelAttrs wideAttrs;
  KernelCall call(getOp(),
                  widenConstantValue(getOp(), attrs, outputs, wideAttrs), ins,
                  outs, /*checkOnly=*/true);
  fn(call);
  return getStatus(call, /*dataDependent=*/false);
}

Status runtime::runCpuKernel(const std::string &op, const KernelAttrs &attrs,
                             const std::vector<const Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs) {
  Expected<const CpuKernel *> kernel = findCpuKernel(op);
  if (!kernel.ok())
    return kernel.getStatus();
  return (*kernel)->run(attrs, inputs, outputs);
}

Status runtime::checkKernel(const std::string &op, const KernelAttrs &attrs,
                            const std::vector<const Tensor *> &inputs,
                            const std::vector<Tensor *> &outputs) {
  Expected<const CpuKernel *> kernel = findCpuKernel(op);
  if (!kernel.ok())
    return kernel.getStatus();
  return (*kernel)->check(attrs, inputs, outputs);
}
