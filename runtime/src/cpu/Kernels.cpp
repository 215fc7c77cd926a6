//===- Kernels.cpp - The CPU backend's registry of kernels ----------------===//
//
// Every nn op of the table (Ops.def) on local row-major tensors, its kernel
// in the file of its family (GemmKernels.cpp, ElementwiseKernels.cpp, ...).
// Float math is f32, with double accumulators for reductions, norms and the
// optimizers; 16-bit floats are widened around a kernel here. The ops that
// only move data take any element type, as the dialect allows. A kernel
// runs only on a call its op's check (src/ops) accepted, and answers a
// message where the data is wrong rather than touch memory it should not.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Kernels.h"

#include "KernelSupport.h"

#include <algorithm>
#include <vector>

using namespace tessera;
using namespace tessera::runtime;
using detail::KernelCall;

/// The registry, from the op table and in its order: built once, never
/// changed, so that a found kernel lives as long as the process.
static const std::vector<CpuKernel> &getKernels() {
  static const std::vector<CpuKernel> kernels = {
#define TESSERA_OP(Id, Name) CpuKernel(getOpInfo(OpId::Id), cpu::run##Id),
#define TESSERA_MAP_OP(Id, Name, Arity)                                        \
  CpuKernel(getOpInfo(OpId::Id), cpu::runArrayMath),
#include "tessera/runtime/Ops.def"
  };
  return kernels;
}

Kernel::~Kernel() = default;

Expected<const CpuKernel *> runtime::findCpuKernel(const std::string &op) {
  Expected<const OpInfo *> info = findOp(op);
  if (!info.ok())
    return info.getStatus();
  return &getKernels()[static_cast<size_t>((*info)->id)];
}

Status CpuKernel::run(const KernelAttrs &attrs,
                      const std::vector<const Tensor *> &inputs,
                      const std::vector<Tensor *> &outputs) const {
  auto isHalfTensor = [](const Tensor *t) { return t && isHalf(t->dtype); };
  if (std::none_of(inputs.begin(), inputs.end(), isHalfTensor) &&
      std::none_of(outputs.begin(), outputs.end(), isHalfTensor)) {
    KernelCall call(getOp(), attrs, inputs, outputs);
    if (getCheck(id)(call))
      fn(call);
    return call.getStatus();
  }
  // 16-bit floats are storage formats here, and the math is f32 (as tensor
  // cores accumulate): the tensors are widened to f32 and the results
  // rounded to nearest even when they are narrowed.
  std::vector<OwnedTensor> wideInputs, wideOutputs;
  std::vector<const Tensor *> ins;
  std::vector<Tensor *> outs;
  wideInputs.reserve(inputs.size());
  wideOutputs.reserve(outputs.size());
  for (const Tensor *input : inputs) {
    if (isHalfTensor(input)) {
      wideInputs.push_back(widenToF32(*input));
      ins.push_back(&wideInputs.back().view);
    } else {
      ins.push_back(input);
    }
  }
  for (Tensor *output : outputs) {
    if (isHalfTensor(output)) {
      wideOutputs.emplace_back(DType::F32, output->shape);
      outs.push_back(&wideOutputs.back().view);
    } else {
      outs.push_back(output);
    }
  }
  KernelAttrs wideAttrs;
  KernelCall call(getOp(), widenConstantValue(id, attrs, outputs, wideAttrs),
                  ins, outs);
  if (getCheck(id)(call))
    fn(call);
  if (Status status = call.getStatus(); !status.ok())
    return status;
  size_t next = 0;
  for (Tensor *output : outputs)
    if (isHalfTensor(output))
      narrowFromF32(wideOutputs[next++].view, *output);
  return Status::success();
}

Status runtime::runCpuKernel(const std::string &op, const KernelAttrs &attrs,
                             const std::vector<const Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs) {
  Expected<const CpuKernel *> kernel = findCpuKernel(op);
  if (!kernel.ok())
    return kernel.getStatus();
  return (*kernel)->run(attrs, inputs, outputs);
}
