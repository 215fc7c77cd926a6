//===- Communicator.h - Collectives over mesh-axis groups --------*- C++
//-*-===//
//
// Backends (MPI on CPU, NCCL on GPU) implement this interface; the executor
// calls it for every collective instruction. Every method works within the
// group of the calling rank over the given mesh axes (Mesh::getGroup).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMMUNICATOR_H
#define TESSERA_RUNTIME_COMMUNICATOR_H

#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

enum class Reduction { Sum, Max, Min, Avg };

using Axes = std::vector<std::string>;

/// A collective in flight: its inputs must stay unchanged and its output
/// unread until wait() returns.
class PendingCollective {
public:
  virtual ~PendingCollective();
  /// Completes the collective.
  virtual Status wait() = 0;
  /// After wait(): when the collective's transfers were seen complete, if
  /// that was before wait() (a progress thread saw them); else nothing.
  virtual std::optional<std::chrono::steady_clock::time_point>
  getCompletionTime() const {
    return std::nullopt;
  }
};
using Pending = std::unique_ptr<PendingCollective>;

/// A collective that finished when it was started: wait() answers `status`.
Pending makeFinishedCollective(Status status);

class Communicator {
public:
  virtual ~Communicator();

  virtual int64_t getRank() const = 0;
  virtual int64_t getNumRanks() const = 0;

  /// Non-blocking forms; each returns at once with the collective in flight.
  ///
  /// Every rank of the group receives the combination of the group's inputs.
  virtual Pending startAllReduce(const Tensor &in, const Tensor &out,
                                 Reduction reduction, const Axes &axes) = 0;
  /// `out` is the group's inputs concatenated along `dim` in group order.
  virtual Pending startAllGather(const Tensor &in, const Tensor &out,
                                 int64_t dim, const Axes &axes) = 0;
  /// Piece i (along `dim`) of the combined inputs goes to group rank i.
  virtual Pending startReduceScatter(const Tensor &in, const Tensor &out,
                                     int64_t dim, Reduction reduction,
                                     const Axes &axes) = 0;
  /// Piece j of `in` along `splitDim` goes to group rank j; what arrives is
  /// concatenated along `concatDim` in group order.
  virtual Pending startAllToAll(const Tensor &in, const Tensor &out,
                                int64_t splitDim, int64_t concatDim,
                                const Axes &axes) = 0;
  /// Every rank receives group rank `root`'s input.
  virtual Pending startBroadcast(const Tensor &in, const Tensor &out,
                                 int64_t root, const Axes &axes) = 0;
  /// `pairs` are (source, target) group indices; a rank that is no target
  /// receives zeros.
  virtual Pending startCollectivePermute(const Tensor &in, const Tensor &out,
                                         const std::vector<int64_t> &pairs,
                                         const Axes &axes) = 0;

  /// Blocking forms: start, then wait.
  Status allReduce(const Tensor &in, const Tensor &out, Reduction reduction,
                   const Axes &axes) {
    return startAllReduce(in, out, reduction, axes)->wait();
  }
  Status allGather(const Tensor &in, const Tensor &out, int64_t dim,
                   const Axes &axes) {
    return startAllGather(in, out, dim, axes)->wait();
  }
  Status reduceScatter(const Tensor &in, const Tensor &out, int64_t dim,
                       Reduction reduction, const Axes &axes) {
    return startReduceScatter(in, out, dim, reduction, axes)->wait();
  }
  Status allToAll(const Tensor &in, const Tensor &out, int64_t splitDim,
                  int64_t concatDim, const Axes &axes) {
    return startAllToAll(in, out, splitDim, concatDim, axes)->wait();
  }
  Status broadcast(const Tensor &in, const Tensor &out, int64_t root,
                   const Axes &axes) {
    return startBroadcast(in, out, root, axes)->wait();
  }
  Status collectivePermute(const Tensor &in, const Tensor &out,
                           const std::vector<int64_t> &pairs,
                           const Axes &axes) {
    return startCollectivePermute(in, out, pairs, axes)->wait();
  }

  /// Collective over all ranks: sets up the groups of these axes lists
  /// that later collectives run in. Where ranks run different programs
  /// (pipeline stages), a group set up at its first use would wait for
  /// ranks that are busy elsewhere; every rank calls this with the same
  /// list first.
  virtual Status prepareGroups(const std::vector<Axes> &groups) {
    return Status::success();
  }

  /// Collective over all ranks, like prepareGroups: sets up the channels
  /// of these (sender, receiver) world-rank pairs that later sends and
  /// receives use (NCCL needs a communicator per channel; MPI needs none).
  virtual Status
  prepareTransfers(const std::vector<std::pair<int64_t, int64_t>> &channels) {
    return Status::success();
  }

  /// Point to point (pipeline stages): `in` goes to world rank `peer`,
  /// which receives it into `out` by a startRecv from this rank with the
  /// same `tag`. Both stay in use until wait() returns.
  virtual Pending startSend(const Tensor &in, int64_t peer, int64_t tag) = 0;
  virtual Pending startRecv(const Tensor &out, int64_t peer, int64_t tag) = 0;

  /// Gathers every rank's bytes (any number, per rank) to rank 0, in rank
  /// order (`out` is only written on rank 0).
  virtual Status gatherToRoot(const std::vector<uint8_t> &in,
                              std::vector<std::vector<uint8_t>> &out) = 0;
};

/// Keeps this rank's piece `index` of `count` pieces of `in` along `dim` (a
/// local all_slice; also how ranks take their piece of a global input).
void slicePiece(const Tensor &in, const Tensor &out, int64_t dim, int64_t index,
                int64_t count);

/// Writes `piece` as piece `index` of `count` along `dim` of `out`.
void placePiece(const Tensor &piece, const Tensor &out, int64_t dim,
                int64_t index, int64_t count);

/// Whether the pieces of a tensor of `shape` along `dim` lie one after
/// another in its bytes (every dim before `dim` has size 1), so that a
/// collective reads or writes them in place.
bool isOutermost(const std::vector<int64_t> &shape, int64_t dim);

/// The communicator of a one-rank run (every collective a copy), for
/// running single-device plans in process without MPI; or of a process that
/// runs a program without collectives at `rank` of its mesh (a parameter
/// server's or its worker's), so that ops placed by rank (axis_index,
/// random draws) see their place.
std::unique_ptr<Communicator> createLocalCommunicator(int64_t rank = 0);

/// Creates the MPI communicator of a mesh; MPI must be initialized. Fails
/// when the world size is not the mesh's device count. A wait that goes
/// `timeoutSeconds` without its collective or transfer completing fails
/// with a timeout error. With `progressThread` (and MPI_THREAD_SERIALIZED),
/// a thread progresses collectives started on another stream while the
/// caller computes; without it they progress at their waits, and a program
/// that starts none there needs none.
Expected<std::unique_ptr<Communicator>>
createMpiCommunicator(const Mesh &mesh, double timeoutSeconds = 600,
                      bool progressThread = true);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_COMMUNICATOR_H
