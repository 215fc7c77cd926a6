//===- Kernels.h - The CPU backend's kernels of the nn ops -------*- C++
//-*-===//
//
// A registry of one kernel per nn op on local tensors, looked up by name once
// per kernel instruction when the executor loads a program. Attributes arrive
// as the plan exported them, every one of them (see KernelAttrs).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_KERNELS_H
#define TESSERA_RUNTIME_KERNELS_H

#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// The attributes of one kernel, by name, as the plan holds them (decoded
/// once per instruction when a program is loaded): integers
/// (i64 attributes and enum cases), floats (f32 attributes, widened), integer
/// lists (dims, permutations, bounds) and raw little-endian element bytes
/// (constants).
struct FusedStep;
struct KernelAttrs {
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> floats;
  std::map<std::string, std::vector<int64_t>> lists;
  std::map<std::string, std::string> bytes;
  /// nn.fused: its expression program (plan.proto's Kernel.fused_steps and
  /// fused_results). Values are numbered from 0: the inputs, then the steps.
  std::vector<FusedStep> fusedSteps;
  std::vector<int64_t> fusedResults;

  std::optional<int64_t> getInt(const std::string &name) const;
  std::optional<double> getFloat(const std::string &name) const;
  const std::vector<int64_t> *getList(const std::string &name) const;
  const std::string *getBytes(const std::string &name) const;
};

/// One op of a fused kernel's body over earlier values, its result rounded
/// to `dtype`.
struct FusedStep {
  std::string op;
  std::vector<int64_t> operands;
  KernelAttrs attrs;
  DType dtype = DType::F32;
};

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

/// An op's CPU kernel: the reference the other backends check against.
class CpuKernel final : public Kernel {
public:
  using Fn = void (*)(detail::KernelCall &);
  CpuKernel(std::string op, Fn fn) : Kernel(std::move(op)), fn(fn) {}

  /// Runs the kernel on `inputs`, writing `outputs`, whose dtypes and
  /// shapes the executor has set from the plan and whose memory it owns.
  /// Fails with a message naming the op and what is wrong (a missing
  /// attribute, an unsupported dtype, shapes that do not fit); never aborts
  /// on bad input.
  Status run(const KernelAttrs &attrs,
             const std::vector<const Tensor *> &inputs,
             const std::vector<Tensor *> &outputs) const;

  /// Checks what run checks before it computes (the arity, element types,
  /// shapes and attributes) without reading or writing any element, so the
  /// tensors may live on a GPU. Data-dependent errors (a label outside the
  /// vocabulary) are the running kernel's to report.
  Status check(const KernelAttrs &attrs,
               const std::vector<const Tensor *> &inputs,
               const std::vector<Tensor *> &outputs) const;

private:
  Fn fn;
};

/// The CPU kernel of `op`; an op without one fails with "unknown kernel
/// '<op>'" (InvalidPlan).
Expected<const CpuKernel *> findCpuKernel(const std::string &op);

/// findCpuKernel, then CpuKernel::run: for tools and tests that run one op.
Status runCpuKernel(const std::string &op, const KernelAttrs &attrs,
                    const std::vector<const Tensor *> &inputs,
                    const std::vector<Tensor *> &outputs);

/// findCpuKernel, then CpuKernel::check. The plan validator checks every
/// kernel instruction with it, and the CUDA device every launch.
Status checkKernel(const std::string &op, const KernelAttrs &attrs,
                   const std::vector<const Tensor *> &inputs,
                   const std::vector<Tensor *> &outputs);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_KERNELS_H
