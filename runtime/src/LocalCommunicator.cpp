//===- LocalCommunicator.cpp - The communicator of a one-rank run ---------===//
//
// Every group has one rank: each collective gives its input back. Lets tools
// run single-device plans in process, without MPI, and a parameter-server
// process run its program (which exchanges nothing) at its rank.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Communicator.h"

#include <cstring>

using namespace tessera::runtime;

namespace {
class LocalCommunicator final : public Communicator {
public:
  explicit LocalCommunicator(int64_t rank) : rank(rank) {}
  int64_t getRank() const override { return rank; }
  int64_t getNumRanks() const override { return 1; }

  Pending startAllReduce(const Tensor &in, const Tensor &out, Reduction,
                         const Axes &) override {
    return copy(in, out);
  }
  Pending startAllGather(const Tensor &in, const Tensor &out, int64_t,
                         const Axes &) override {
    return copy(in, out);
  }
  Pending startReduceScatter(const Tensor &in, const Tensor &out, int64_t,
                             Reduction, const Axes &) override {
    return copy(in, out);
  }
  Pending startAllToAll(const Tensor &in, const Tensor &out, int64_t, int64_t,
                        const Axes &) override {
    return copy(in, out);
  }
  Pending startBroadcast(const Tensor &in, const Tensor &out, int64_t,
                         const Axes &) override {
    return copy(in, out);
  }
  Pending startCollectivePermute(const Tensor &in, const Tensor &out,
                                 const std::vector<int64_t> &pairs,
                                 const Axes &) override {
    // Only 0 -> 0 keeps the tensor; a rank that is no target gets zeros.
    if (pairs.size() >= 2 && pairs[0] == 0 && pairs[1] == 0)
      return copy(in, out);
    std::memset(out.data, 0, out.getBytes());
    return makeFinishedCollective(Status::success());
  }
  Pending startSend(const Tensor &, int64_t, int64_t) override {
    return makeFinishedCollective(
        communicationError("a one-rank run has no peer to send to"));
  }
  Pending startRecv(const Tensor &, int64_t, int64_t) override {
    return makeFinishedCollective(
        communicationError("a one-rank run has no peer to receive from"));
  }
  Status gatherToRoot(const std::vector<uint8_t> &in,
                      std::vector<std::vector<uint8_t>> &out) override {
    out = {in};
    return Status::success();
  }

private:
  int64_t rank;

  static Pending copy(const Tensor &in, const Tensor &out) {
    if (in.getBytes() != out.getBytes())
      return makeFinishedCollective(
          invalidArgument("a one-rank collective must keep its size"));
    std::memmove(out.data, in.data, in.getBytes());
    return makeFinishedCollective(Status::success());
  }
};
} // namespace

std::unique_ptr<Communicator>
tessera::runtime::createLocalCommunicator(int64_t rank) {
  return std::make_unique<LocalCommunicator>(rank);
}
