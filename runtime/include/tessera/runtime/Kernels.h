//===- Kernels.h - Kernels, and the CPU backend's ---------------*- C++ -*-===//
//
// A device's kernel of an nn op, found by name once per kernel instruction
// when the executor loads a program, and the CPU backend's registry of them
// (one per op of the table, Ops.def). Attributes arrive as the plan
// exported them, every one of them (see KernelAttrs). The checks every
// backend runs before a kernel are the op table's (Ops.h, checkKernel).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_KERNELS_H
#define TESSERA_RUNTIME_KERNELS_H

#include "tessera/runtime/KernelAttrs.h"
#include "tessera/runtime/Ops.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

namespace detail {
class KernelCall;
} // namespace detail

/// One nn op's kernel on some device. A device resolves an op name to its
/// kernel once (Device::findKernel), when the executor loads a program, so
/// that no launch looks a name up; the device's registry owns the kernel.
class Kernel {
public:
  explicit Kernel(std::string op) : op(std::move(op)) {}
  virtual ~Kernel();
  /// The nn op, e.g. "nn.dot".
  const std::string &getOp() const { return op; }

private:
  std::string op;
};

/// An op's CPU kernel: the reference the other backends are tested
/// against.
class CpuKernel final : public Kernel {
public:
  using Fn = void (*)(detail::KernelCall &);
  /// `fn` computes a call the op's check (Ops.h) accepted.
  CpuKernel(const OpInfo &op, Fn fn) : Kernel(op.name), id(op.id), fn(fn) {}

  /// Checks the call as checkKernel does, then runs the kernel on
  /// `inputs`, writing `outputs`, whose dtypes and shapes the executor has
  /// set from the plan and whose memory it owns. Fails with a message
  /// naming the op and what is wrong (a missing attribute, an unsupported
  /// dtype, shapes that do not fit, a label outside the vocabulary); never
  /// aborts on bad input.
  Status run(const KernelAttrs &attrs,
             const std::vector<const Tensor *> &inputs,
             const std::vector<Tensor *> &outputs) const;

private:
  OpId id;
  Fn fn;
};

/// The CPU kernel of `op`; an op without one fails with "unknown kernel
/// '<op>'" (InvalidPlan).
Expected<const CpuKernel *> findCpuKernel(const std::string &op);

/// findCpuKernel, then CpuKernel::run: for tools and tests that run one op.
Status runCpuKernel(const std::string &op, const KernelAttrs &attrs,
                    const std::vector<const Tensor *> &inputs,
                    const std::vector<Tensor *> &outputs);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_KERNELS_H
