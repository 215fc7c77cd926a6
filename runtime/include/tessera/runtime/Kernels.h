//===- Kernels.h - The CPU backend's kernels of the nn ops -------*- C++
//-*-===//
//
// One entry point runs any nn op on local tensors; the executor calls it for
// every kernel instruction of a plan. Attributes arrive as the plan exported
// them (see KernelAttrs).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_KERNELS_H
#define TESSERA_RUNTIME_KERNELS_H

#include "tessera/runtime/Tensor.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime {

/// The attributes of one kernel, by name, as the plan holds them: integers
/// (i64 attributes and enum cases), floats (f32 attributes, widened), integer
/// lists (dims, permutations, bounds) and raw little-endian element bytes
/// (constants).
struct KernelAttrs {
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> floats;
  std::map<std::string, std::vector<int64_t>> lists;
  std::map<std::string, std::string> bytes;

  std::optional<int64_t> getInt(const std::string &name) const;
  std::optional<double> getFloat(const std::string &name) const;
  const std::vector<int64_t> *getList(const std::string &name) const;
  const std::string *getBytes(const std::string &name) const;
};

/// Runs the nn op `op` (e.g. "nn.dot") on `inputs`, writing `outputs`, whose
/// dtypes and shapes the executor has set from the plan and whose memory it
/// owns. Returns an empty string on success, else a message naming the op
/// and what is wrong (an unknown op, a missing attribute, an unsupported
/// dtype, shapes that do not fit); never aborts on bad input.
std::string runCpuKernel(const std::string &op, const KernelAttrs &attrs,
                         const std::vector<const Tensor *> &inputs,
                         const std::vector<Tensor *> &outputs);

/// Checks what runCpuKernel checks before it computes (the arity, element
/// types, shapes and attributes) without reading or writing any element, so
/// the tensors may live on a GPU. Data-dependent errors (a label outside the
/// vocabulary) are the running kernel's to report.
std::string checkKernel(const std::string &op, const KernelAttrs &attrs,
                        const std::vector<const Tensor *> &inputs,
                        const std::vector<Tensor *> &outputs);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_KERNELS_H
