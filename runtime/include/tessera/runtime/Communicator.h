//===- Communicator.h - Collectives over mesh-axis groups --------*- C++ -*-===//
//
// Backends (MPI on CPU, NCCL on GPU) implement this interface; the executor
// calls it for every collective instruction. Every method works within the
// group of the calling rank over the given mesh axes (Mesh::getGroup) and
// returns an error message, or "" on success.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMMUNICATOR_H
#define TESSERA_RUNTIME_COMMUNICATOR_H

#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace tessera::runtime {

enum class Reduction { Sum, Max, Min, Avg };

using Axes = std::vector<std::string>;

class Communicator {
public:
  virtual ~Communicator();

  virtual int64_t getRank() const = 0;
  virtual int64_t getNumRanks() const = 0;

  /// Every rank of the group receives the combination of the group's inputs.
  virtual std::string allReduce(const Tensor &in, const Tensor &out,
                                Reduction reduction, const Axes &axes) = 0;
  /// `out` is the group's inputs concatenated along `dim` in group order.
  virtual std::string allGather(const Tensor &in, const Tensor &out,
                                int64_t dim, const Axes &axes) = 0;
  /// Piece i (along `dim`) of the combined inputs goes to group rank i.
  virtual std::string reduceScatter(const Tensor &in, const Tensor &out,
                                    int64_t dim, Reduction reduction,
                                    const Axes &axes) = 0;
  /// Piece j of `in` along `splitDim` goes to group rank j; what arrives is
  /// concatenated along `concatDim` in group order.
  virtual std::string allToAll(const Tensor &in, const Tensor &out,
                               int64_t splitDim, int64_t concatDim,
                               const Axes &axes) = 0;
  /// Every rank receives group rank `root`'s input.
  virtual std::string broadcast(const Tensor &in, const Tensor &out,
                                int64_t root, const Axes &axes) = 0;
  /// `pairs` are (source, target) group indices; a rank that is no target
  /// receives zeros.
  virtual std::string collectivePermute(const Tensor &in, const Tensor &out,
                                        const std::vector<int64_t> &pairs,
                                        const Axes &axes) = 0;
  /// Gathers equally shaped pieces of every rank of the world to rank 0, in
  /// rank order (`out` is only written on rank 0).
  virtual std::string gatherToRoot(const Tensor &in, std::vector<uint8_t> &out) = 0;
  /// Ends every rank of the job after a failure on this one.
  [[noreturn]] virtual void abort(int code) = 0;
};

/// Keeps this rank's piece `index` of `count` pieces of `in` along `dim` (a
/// local all_slice; also how ranks take their piece of a global input).
void slicePiece(const Tensor &in, const Tensor &out, int64_t dim,
                int64_t index, int64_t count);

/// Writes `piece` as piece `index` of `count` along `dim` of `out`.
void placePiece(const Tensor &piece, const Tensor &out, int64_t dim,
                int64_t index, int64_t count);

/// Creates the MPI communicator of a mesh; MPI must be initialized. Fails
/// when the world size is not the mesh's device count.
std::unique_ptr<Communicator> createMpiCommunicator(const Mesh &mesh,
                                                    std::string &error);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_COMMUNICATOR_H
