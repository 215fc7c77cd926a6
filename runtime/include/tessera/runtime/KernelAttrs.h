//===- KernelAttrs.h - An op's attributes at one launch ---------*- C++ -*-===//
//
// The attributes of one kernel instruction, decoded once when the executor
// loads a program, as the plan exported them: every one of them, defaults
// included, so that the op definition is their one source.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_KERNELATTRS_H
#define TESSERA_RUNTIME_KERNELATTRS_H

#include "tessera/runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
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

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_KERNELATTRS_H
