//===- Rendezvous.h - Ranks that find each other over TCP -------*- C++ -*-===//
//
// How the ranks of a job started without an MPI launcher meet, as
// PyTorch's TCPStore does under torchrun: rank 0 listens at MASTER_ADDR:
// MASTER_PORT, every other rank connects to it, and rank 0 relays small
// host messages between them (the NCCL unique id, the ranks' agreement on
// an error, gathered results). Every call has a deadline: a rank that never
// comes, or leaves, is an error that names it, never a hang.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_RENDEZVOUS_H
#define TESSERA_RUNTIME_RENDEZVOUS_H

#include "tessera/runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::runtime {

/// A process's place in a job that torchrun-style variables describe:
/// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
struct TorchrunEnvironment {
  int rank = 0, size = 1, localRank = 0, localSize = 1;
  std::string host;
  int port = 0;
};

/// The variables of this process, or none (a world of one) where
/// WORLD_SIZE is unset or 1; fails naming a variable that is missing or
/// not a number in range.
Expected<TorchrunEnvironment> getTorchrunEnvironment();

class Rendezvous {
public:
  /// Meets the other `size` - 1 ranks at host:port within
  /// `timeoutSeconds`: rank 0 listens there (on every interface), the others
  /// connect, retrying while rank 0 is not up yet. Fails naming the ranks
  /// that did not come, a rank that came twice or with another world size,
  /// or an address that does not resolve.
  static Expected<std::unique_ptr<Rendezvous>> connect(const std::string &host,
                                                       int port, int rank,
                                                       int size,
                                                       double timeoutSeconds);
  ~Rendezvous();

  int getRank() const { return rank; }
  int getSize() const { return size; }

  /// Every rank's `mine`, in rank order, on every rank; each rank's call
  /// returns once all have called it (a barrier).
  Status allGather(const std::vector<uint8_t> &mine,
                   std::vector<std::vector<uint8_t>> &all);
  /// The least of every rank's `value`.
  Status allReduceMin(int value, int &least);

private:
  Rendezvous(int rank, int size, double timeoutSeconds)
      : rank(rank), size(size), timeoutSeconds(timeoutSeconds) {}

  int rank, size;
  double timeoutSeconds;
  /// Rank 0: the socket of each other rank (index = rank; -1 for itself).
  /// Another rank: its socket to rank 0 alone.
  std::vector<int> sockets;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_RENDEZVOUS_H
