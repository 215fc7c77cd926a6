//===- Ops.h - The runtime's table of nn ops --------------------*- C++ -*-===//
//
// What the runtime knows of an op before any backend: its id, its name in a
// plan, its kind and its checks, from the one table Ops.def. The plan
// loader, the executor and every backend's registry look ops up here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_OPS_H
#define TESSERA_RUNTIME_OPS_H

#include "tessera/runtime/KernelAttrs.h"
#include "tessera/runtime/OpIds.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <string>
#include <vector>

namespace tessera::runtime {

enum class OpKind : uint8_t {
  /// Elementwise math of one float result (Ops.def's TESSERA_MAP_OP).
  Map,
  /// Moves elements of any type without computing on them: no backend
  /// widens or narrows 16-bit floats around it (TESSERA_MOVE_OP).
  Move,
  /// Any other op: computes in f32, 16-bit floats widened around it.
  Compute,
};

struct OpInfo {
  OpId id;
  /// The op's name in a plan, e.g. "nn.dot".
  const char *name;
  OpKind kind;
  /// Map ops: their math and number of operands.
  MapOp mapOp;
  int mapArity;
};

/// The number of ops in the table.
constexpr size_t kNumOps = 0
#define TESSERA_OP(Id, Name) +1
#include "tessera/runtime/Ops.def"
    ;

/// The table's entry of `id`.
const OpInfo &getOpInfo(OpId id);

/// The op named `name` in a plan; an op the table does not have fails with
/// "unknown kernel '<name>'" (InvalidPlan).
Expected<const OpInfo *> findOp(const std::string &name);

/// Checks one launch of `op` as every backend does before it runs: the
/// arity, element types, shapes and attributes, against the op's rules (its
/// check in src/ops), reading no element, so the tensors may live on a
/// GPU. 16-bit float tensors are checked as the f32 the kernels compute
/// in. Data-dependent errors (a label outside the vocabulary) are the
/// running kernel's to report. The plan validator checks every kernel
/// instruction with it, and the CUDA device every launch.
Status checkOp(const OpInfo &op, const KernelAttrs &attrs,
               const std::vector<const Tensor *> &inputs,
               const std::vector<Tensor *> &outputs);

/// findOp, then checkOp.
Status checkKernel(const std::string &op, const KernelAttrs &attrs,
                   const std::vector<const Tensor *> &inputs,
                   const std::vector<Tensor *> &outputs);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_OPS_H
