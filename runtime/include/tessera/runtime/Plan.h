//===- Plan.h - Loading and validating plans ---------------------*- C++
//-*-===//

#ifndef TESSERA_RUNTIME_PLAN_H
#define TESSERA_RUNTIME_PLAN_H

#include "plan.pb.h"
#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// The mesh axis of microbatches, which a program with units runs in time:
/// an axis_index over it is the running microbatch.
inline constexpr const char *kMicrobatchAxis = "mb";

/// The most devices a plan's mesh has (the compiler's dist::kMaxDevices).
inline constexpr int64_t kMaxDevices = int64_t(1) << 20;

/// The most steps a run takes (tessera-run --steps): what a 32-bit step
/// counter holds, 25 days of 1 ms steps. More is a mistake, and a count
/// like 2^62 would start a run that never ends.
inline constexpr int64_t kMaxSteps = 2147483647;

/// How parameter servers apply the workers' gradients (plan::Consistency,
/// with ssp's bound).
struct Consistency {
  plan::Consistency mode = plan::SYNC;
  /// SSP: the most steps a worker runs ahead of the slowest.
  int64_t staleness = 0;
};

/// Reads "sync", "async" or "ssp=K" (K >= 0).
Status parseConsistency(const std::string &text, Consistency &consistency);

/// The text parseConsistency reads.
std::string formatConsistency(const Consistency &consistency);

/// Reads a plan file and validates it: the plan, or a data error (no such
/// file, not a plan) or the invalid plan error of validatePlan, named by the
/// file.
Expected<plan::Plan> loadPlan(const std::string &path);

/// Checks every field a runtime relies on: the format version, the mesh,
/// buffer ids, dtypes and shapes, the operands of every instruction, the
/// group of every collective and the shapes it implies, frees, arguments,
/// results, the memory plan, that transfers match and arrive in the order
/// they are sent, and the collective manifest (checkManifest: every group's
/// members issue the same collectives in one order, and no run deadlocks).
/// Fails with an invalid plan error naming the program, instruction or
/// buffer at fault.
Status validatePlan(const plan::Plan &plan);

/// The plan's mesh (no axes: one device).
Mesh getMesh(const plan::Plan &plan);

/// The runtime dtype of a plan dtype; plans are validated first, so an
/// unspecified dtype never reaches this.
DType getDType(plan::DType dtype);

/// A kernel instruction's attributes, decoded from the plan (which carries
/// every attribute of the op, defaults included).
KernelAttrs getKernelAttrs(const plan::Kernel &kernel);

/// The program that `rank` runs, or null.
const plan::Program *getProgramOfRank(const plan::Plan &plan, int64_t rank);

/// The (sender, receiver) world-rank pairs of a validated plan's point-to-point
/// transfers, sorted (Communicator::prepareTransfers sets them up).
std::vector<std::pair<int64_t, int64_t>>
getTransferChannels(const plan::Plan &plan);

/// The step's tensors that an argument holds, with their index in
/// the step as written: each member of a unit's flat buffer, or the tensor
/// itself (its source_index, else `index`), as an Argument of that shape.
std::vector<std::pair<int64_t, plan::Argument>>
getStepTensors(const plan::Argument &argument, int64_t index);

/// How a plan argument or result lays a global tensor out over the ranks:
/// the axes that split each dim, and the axes its piece is stored flat over
/// (padded with zeros to a multiple of their group, split evenly; empty:
/// not flat).
struct PieceLayout {
  std::vector<std::vector<std::string>> dimAxes;
  std::vector<std::string> flatAxes;
  /// The padded shape the pieces tile (empty: the global shape); a piece's
  /// elements past the global tensor's end are zeros.
  std::vector<int64_t> paddedShape;
  /// Dim 0 holds this many microbatches major (plan::Argument's
  /// microbatches_major): a piece is its pieces of each, one after another.
  int64_t microbatchesMajor = 0;
};

/// The layout of a plan argument or result.
template <typename T> PieceLayout getLayout(const T &message) {
  PieceLayout layout;
  for (const auto &dim : message.dim_axes())
    layout.dimAxes.emplace_back(dim.axes().begin(), dim.axes().end());
  layout.flatAxes.assign(message.flat_axes().begin(),
                         message.flat_axes().end());
  layout.paddedShape.assign(message.padded_shape().begin(),
                            message.padded_shape().end());
  if constexpr (std::is_same_v<T, plan::Argument>)
    layout.microbatchesMajor = message.microbatches_major();
  return layout;
}

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_PLAN_H
