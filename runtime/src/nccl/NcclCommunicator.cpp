//===- NcclCommunicator.cpp - Collectives over NCCL on a GPU --------------===//
//
// The world communicator comes from a unique id broadcast over MPI, or over
// the TCP rendezvous of a torchrun-style start (Rendezvous.h); each set
// of mesh axes gets its groups by ncclCommSplit, and each (sender, receiver)
// channel of point-to-point transfers a two-rank communicator and stream of
// its own, so that transfers in different directions never queue behind one
// another (NCCL matches sends to receives by order, not by tag).
//
// Collectives run on a communication stream that first waits (by an event)
// for the work queued on the device's compute stream; a wait polls the
// collective's completion event, the communicators' asynchronous errors
// and a deadline, and aborts them on an error or timeout: a peer that fails
// or never arrives ends the run with a message, not a hang. Dim-wise
// collectives pack pieces contiguously with the device's strided copy.
//
//===----------------------------------------------------------------------===//

#include "../cuda/CudaDevice.h"
#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/MpiWait.h"
#include "tessera/runtime/Rendezvous.h"

#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

using namespace tessera::runtime;
using namespace tessera::runtime::cuda;

namespace {

std::string getNcclError(ncclResult_t result, const std::string &what,
                         ncclComm_t comm = nullptr) {
  if (result == ncclSuccess)
    return "";
  std::string message = what + ": NCCL error: " + ncclGetErrorString(result);
  if (const char *last = ncclGetLastError(comm); last && *last)
    message += std::string(" (") + last + ")";
  return message;
}

ncclDataType_t getNcclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::F64:
    return ncclFloat64;
  case DType::F16:
    return ncclFloat16;
  case DType::BF16:
    return ncclBfloat16;
  case DType::I32:
    return ncclInt32;
  case DType::I64:
    return ncclInt64;
  default:
    return ncclUint8;
  }
}

ncclRedOp_t getNcclOp(Reduction reduction) {
  switch (reduction) {
  case Reduction::Max:
    return ncclMax;
  case Reduction::Min:
    return ncclMin;
  case Reduction::Avg:
    return ncclAvg;
  default:
    return ncclSum;
  }
}

/// Moves between a tensor of `count` pieces along `dim` and the pieces one
/// after another (`toPieces`), or back (see planPieces).
void movePieces(const void *src, void *dst, DType dtype,
                const std::vector<int64_t> &pieceShape, int64_t dim,
                int64_t count, bool toPieces, cudaStream_t stream) {
  copyStrided(src, dst, getDTypeBytes(dtype),
              planPieces(pieceShape, dim, count, toPieces), stream);
}

class NcclCommunicator;

/// A collective or transfer queued on a stream; done when `done` fires.
class NcclPending final : public PendingCollective {
public:
  NcclPending(NcclCommunicator &owner, cudaEvent_t done,
              std::vector<ncclComm_t> comms, std::string what)
      : owner(owner), done(done), comms(std::move(comms)),
        what(std::move(what)) {}
  ~NcclPending() override {
    if (done)
      cudaEventDestroy(done);
  }
  Status wait() override;
  std::optional<std::chrono::steady_clock::time_point>
  getCompletionTime() const override {
    return completed;
  }

private:
  NcclCommunicator &owner;
  cudaEvent_t done;
  std::vector<ncclComm_t> comms;
  std::string what;
  std::optional<std::chrono::steady_clock::time_point> completed;
};

class NcclCommunicator final : public Communicator {
public:
  /// The host side travels over `mpi` or, where it is null, `rendezvous`.
  NcclCommunicator(const Mesh &mesh, CudaDevice &device, double timeout,
                   std::unique_ptr<Communicator> mpi, Rendezvous *rendezvous,
                   int rank, int size)
      : mesh(mesh), device(device), timeout(timeout), mpi(std::move(mpi)),
        rendezvous(rendezvous), rank(rank), size(size) {}
  ~NcclCommunicator() override;

  /// Creates the world communicator.
  Status init();

  int64_t getRank() const override { return rank; }
  int64_t getNumRanks() const override { return size; }

  Pending startAllReduce(const Tensor &in, const Tensor &out,
                         Reduction reduction, const Axes &axes) override;
  Pending startAllGather(const Tensor &in, const Tensor &out, int64_t dim,
                         const Axes &axes) override;
  Pending startReduceScatter(const Tensor &in, const Tensor &out, int64_t dim,
                             Reduction reduction, const Axes &axes) override;
  Pending startAllToAll(const Tensor &in, const Tensor &out, int64_t splitDim,
                        int64_t concatDim, const Axes &axes) override;
  Pending startBroadcast(const Tensor &in, const Tensor &out, int64_t root,
                         const Axes &axes) override;
  Pending startCollectivePermute(const Tensor &in, const Tensor &out,
                                 const std::vector<int64_t> &pairs,
                                 const Axes &axes) override;
  Status prepareGroups(const std::vector<Axes> &groups) override;
  Status prepareTransfers(
      const std::vector<std::pair<int64_t, int64_t>> &channels) override;
  Pending startSend(const Tensor &in, int64_t peer, int64_t tag) override;
  Pending startRecv(const Tensor &out, int64_t peer, int64_t tag) override;
  Status gatherToRoot(const std::vector<uint8_t> &in,
                      std::vector<std::vector<uint8_t>> &out) override {
    if (mpi)
      return mpi->gatherToRoot(in, out);
    Status status = rendezvous->allGather(in, out);
    if (rank != 0)
      out.clear();
    return status;
  }

  /// Waits for `done`, watching `comms`; aborts every communicator on an
  /// error or past the timeout.
  Status waitFor(cudaEvent_t done, const std::vector<ncclComm_t> &comms,
                 const std::string &what);

private:
  /// Queues `enqueue(stream)` on `stream` after the compute stream's work.
  template <typename Enqueue>
  Pending start(const std::string &what, cudaStream_t stream,
                std::vector<ncclComm_t> comms, Enqueue enqueue);
  /// The communicator of this rank's group over `axes`, or null.
  ncclComm_t getGroupComm(const Axes &axes) const;
  Status abortAll(const Status &reason);

  struct Channel {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };

  Mesh mesh;
  CudaDevice &device;
  double timeout;
  std::unique_ptr<Communicator> mpi;
  Rendezvous *rendezvous;
  int rank, size;
  ncclComm_t world = nullptr;
  cudaStream_t stream = nullptr;
  std::map<Axes, ncclComm_t> groups;
  std::map<std::pair<int64_t, int64_t>, Channel> channels;
  /// Every channel set up so far, this rank's or not.
  std::set<std::pair<int64_t, int64_t>> prepared;
  Scratch scratch;
  /// Set once the communicators were aborted: every later call fails.
  Status broken;
};

Status NcclPending::wait() {
  if (!done)
    return Status::success();
  Status status = owner.waitFor(done, comms, what);
  completed = std::chrono::steady_clock::now();
  return status;
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device.getOrdinal());
  if (broken.ok()) {
    for (auto &[axes, comm] : groups)
      ncclCommDestroy(comm);
    for (auto &[pair, channel] : channels)
      ncclCommDestroy(channel.comm);
    if (world)
      ncclCommDestroy(world);
  }
  for (auto &[pair, channel] : channels)
    cudaStreamDestroy(channel.stream);
  if (stream)
    cudaStreamDestroy(stream);
}

Status NcclCommunicator::init() {
  ncclUniqueId id;
  std::string error;
  if (rank == 0 &&
      !(error = getNcclError(ncclGetUniqueId(&id), "ncclGetUniqueId")).empty())
    return communicationError(error);
  if (rendezvous) {
    std::vector<uint8_t> mine;
    if (rank == 0)
      mine.assign(reinterpret_cast<const uint8_t *>(&id),
                  reinterpret_cast<const uint8_t *>(&id) + sizeof(id));
    std::vector<std::vector<uint8_t>> all;
    if (Status status = rendezvous->allGather(mine, all); !status.ok())
      return status.withPrefix("sharing the NCCL unique id: ");
    if (all[0].size() != sizeof(id))
      return communicationError("rank 0 sent no NCCL unique id");
    std::memcpy(&id, all[0].data(), sizeof(id));
  } else {
    MPI_Request request;
    if (MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, &request) !=
        MPI_SUCCESS)
      return communicationError(
          "broadcasting the NCCL unique id over MPI failed");
    if (Status status = waitForRequests(
            &request, 1, timeout,
            "a rank stopped before receiving the NCCL unique id");
        !status.ok())
      return status;
  }
  if (!(error = getCudaError(cudaSetDevice(device.getOrdinal()),
                             "selecting the GPU"))
           .empty() ||
      !(error = getCudaError(
            cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            "creating the communication stream"))
           .empty())
    return deviceError(error);
  error = getNcclError(ncclCommInitRank(&world, size, id, rank),
                       "ncclCommInitRank");
  if (!error.empty())
    return communicationError(error);
  return Status::success();
}

Status NcclCommunicator::prepareGroups(const std::vector<Axes> &list) {
  for (const Axes &axes : list) {
    if (groups.count(axes))
      continue;
    Group group = mesh.getGroup(rank, axes);
    ncclComm_t comm = nullptr;
    if (std::string error = getNcclError(
            ncclCommSplit(world, static_cast<int>(group.color),
                          static_cast<int>(group.index), &comm, nullptr),
            "ncclCommSplit");
        !error.empty())
      return communicationError(error);
    groups[axes] = comm;
  }
  return Status::success();
}

Status NcclCommunicator::prepareTransfers(
    const std::vector<std::pair<int64_t, int64_t>> &list) {
  for (const auto &[sender, receiver] : list) {
    // Every rank skips the same pairs, so that the splits below match.
    if (sender == receiver || !prepared.insert({sender, receiver}).second)
      continue;
    bool mine = rank == sender || rank == receiver;
    // Every rank takes part in the split; the two ends get ranks 0
    // (sender) and 1 (receiver) of the new communicator.
    ncclComm_t comm = nullptr;
    if (std::string error =
            getNcclError(ncclCommSplit(world, mine ? 0 : NCCL_SPLIT_NOCOLOR,
                                       rank == sender ? 0 : 1, &comm, nullptr),
                         "ncclCommSplit (channel " + std::to_string(sender) +
                             " -> " + std::to_string(receiver) + ")");
        !error.empty())
      return communicationError(error);
    if (!mine)
      continue;
    Channel channel{comm, nullptr};
    if (std::string error = getCudaError(
            cudaStreamCreateWithFlags(&channel.stream, cudaStreamNonBlocking),
            "creating a transfer stream");
        !error.empty())
      return deviceError(error);
    channels[{sender, receiver}] = channel;
  }
  return Status::success();
}

ncclComm_t NcclCommunicator::getGroupComm(const Axes &axes) const {
  auto it = groups.find(axes);
  return it == groups.end() ? nullptr : it->second;
}

Status NcclCommunicator::abortAll(const Status &reason) {
  if (!broken.ok())
    return broken;
  for (auto &[axes, comm] : groups)
    ncclCommAbort(comm);
  for (auto &[pair, channel] : channels)
    ncclCommAbort(channel.comm);
  ncclCommAbort(world);
  broken = Status(reason.getCode(),
                  reason.message() + " (NCCL communicators aborted)");
  return broken;
}

Status NcclCommunicator::waitFor(cudaEvent_t done,
                                 const std::vector<ncclComm_t> &comms,
                                 const std::string &what) {
  if (!broken.ok())
    return broken;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  while (true) {
    cudaError_t status = cudaEventQuery(done);
    if (status == cudaSuccess)
      return Status::success();
    if (status != cudaErrorNotReady)
      return abortAll(deviceError(getCudaError(status, what)));
    for (ncclComm_t comm : comms) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        return abortAll(communicationError(getNcclError(async, what, comm)));
    }
    if (std::chrono::steady_clock::now() > deadline)
      return abortAll(timeoutError(what + ": not finished after " +
                                   std::to_string(static_cast<int>(timeout)) +
                                   " s (a peer failed, or never reached it)"));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

template <typename Enqueue>
Pending NcclCommunicator::start(const std::string &what, cudaStream_t on,
                                std::vector<ncclComm_t> comms,
                                Enqueue enqueue) {
  if (!broken.ok())
    return makeFinishedCollective(broken);
  // The stream waits for the compute stream's work so far: the producers of
  // the inputs, and the last readers of the output's memory.
  cudaEvent_t ready = nullptr, done = nullptr;
  std::string error = getCudaError(
      cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), what);
  if (error.empty())
    error = getCudaError(
        cudaEventCreateWithFlags(&done, cudaEventDisableTiming), what);
  if (error.empty())
    error =
        getCudaError(cudaEventRecord(ready, device.getComputeStream()), what);
  if (error.empty())
    error = getCudaError(cudaStreamWaitEvent(on, ready, 0), what);
  if (error.empty())
    error = enqueue(on);
  if (error.empty())
    error = getCudaError(cudaGetLastError(), what);
  if (error.empty())
    error = getCudaError(cudaEventRecord(done, on), what);
  if (ready)
    cudaEventDestroy(ready); // Released once the stream has passed it.
  if (!error.empty()) {
    if (done)
      cudaEventDestroy(done);
    return makeFinishedCollective(communicationError(error));
  }
  return std::make_unique<NcclPending>(*this, done, std::move(comms), what);
}

static std::string noGroup(const char *what, const Axes &axes) {
  std::string names;
  for (const std::string &axis : axes)
    names += (names.empty() ? "" : ", ") + axis;
  return std::string(what) + " over [" + names +
         "]: its group was not prepared (prepareGroups)";
}

Pending NcclCommunicator::startAllReduce(const Tensor &in, const Tensor &out,
                                         Reduction reduction,
                                         const Axes &axes) {
  ncclComm_t comm = getGroupComm(axes);
  if (!comm)
    return makeFinishedCollective(invalidPlan(noGroup("all_reduce", axes)));
  return start("all_reduce", stream, {comm}, [&](cudaStream_t on) {
    return getNcclError(ncclAllReduce(in.data, out.data, in.getNumElements(),
                                      getNcclType(in.dtype),
                                      getNcclOp(reduction), comm, on),
                        "ncclAllReduce", comm);
  });
}

Pending NcclCommunicator::startAllGather(const Tensor &in, const Tensor &out,
                                         int64_t dim, const Axes &axes) {
  ncclComm_t comm = getGroupComm(axes);
  if (!comm)
    return makeFinishedCollective(invalidPlan(noGroup("all_gather", axes)));
  int64_t count = mesh.getGroup(rank, axes).size;
  return start("all_gather", stream, {comm}, [&](cudaStream_t on) {
    // NCCL concatenates along the outermost dim; a gather along an inner
    // dim lands in scratch, one piece after another, and is moved.
    void *gathered = out.data;
    scratch.reset();
    if (!isOutermost(in.shape, dim))
      if (Status status = scratch.take(out.getBytes(), gathered); !status.ok())
        return status.message();
    std::string error =
        getNcclError(ncclAllGather(in.data, gathered, in.getNumElements(),
                                   getNcclType(in.dtype), comm, on),
                     "ncclAllGather", comm);
    if (error.empty() && gathered != out.data)
      movePieces(gathered, out.data, in.dtype, in.shape, dim, count,
                 /*toPieces=*/false, on);
    return error;
  });
}

Pending NcclCommunicator::startReduceScatter(const Tensor &in,
                                             const Tensor &out, int64_t dim,
                                             Reduction reduction,
                                             const Axes &axes) {
  ncclComm_t comm = getGroupComm(axes);
  if (!comm)
    return makeFinishedCollective(invalidPlan(noGroup("reduce_scatter", axes)));
  int64_t count = mesh.getGroup(rank, axes).size;
  return start("reduce_scatter", stream, {comm}, [&](cudaStream_t on) {
    const void *pieces = in.data;
    scratch.reset();
    if (!isOutermost(out.shape, dim)) {
      void *packed = nullptr;
      if (Status status = scratch.take(in.getBytes(), packed); !status.ok())
        return status.message();
      movePieces(in.data, packed, in.dtype, out.shape, dim, count,
                 /*toPieces=*/true, on);
      pieces = packed;
    }
    return getNcclError(ncclReduceScatter(pieces, out.data,
                                          out.getNumElements(),
                                          getNcclType(in.dtype),
                                          getNcclOp(reduction), comm, on),
                        "ncclReduceScatter", comm);
  });
}

Pending NcclCommunicator::startAllToAll(const Tensor &in, const Tensor &out,
                                        int64_t splitDim, int64_t concatDim,
                                        const Axes &axes) {
  ncclComm_t comm = getGroupComm(axes);
  if (!comm)
    return makeFinishedCollective(invalidPlan(noGroup("all_to_all", axes)));
  int64_t count = mesh.getGroup(rank, axes).size;
  std::vector<int64_t> pieceShape = in.shape;
  pieceShape[splitDim] /= count;
  return start("all_to_all", stream, {comm}, [&](cudaStream_t on) {
    // Pieces to send one after another; pieces received likewise, then
    // concatenated along concatDim.
    scratch.reset();
    void *sendPieces = nullptr, *recvPieces = nullptr;
    Status status = scratch.take(in.getBytes(), sendPieces);
    if (status.ok())
      status = scratch.take(out.getBytes(), recvPieces);
    if (!status.ok())
      return status.message();
    movePieces(in.data, sendPieces, in.dtype, pieceShape, splitDim, count,
               /*toPieces=*/true, on);
    size_t pieceBytes = in.getBytes() / count;
    int64_t pieceElements = in.getNumElements() / count;
    ncclGroupStart();
    for (int64_t j = 0; j < count; ++j) {
      ncclSend(static_cast<uint8_t *>(sendPieces) + j * pieceBytes,
               pieceElements, getNcclType(in.dtype), j, comm, on);
      ncclRecv(static_cast<uint8_t *>(recvPieces) + j * pieceBytes,
               pieceElements, getNcclType(in.dtype), j, comm, on);
    }
    std::string error = getNcclError(ncclGroupEnd(), "all_to_all", comm);
    if (error.empty())
      movePieces(recvPieces, out.data, in.dtype, pieceShape, concatDim, count,
                 /*toPieces=*/false, on);
    return error;
  });
}

Pending NcclCommunicator::startBroadcast(const Tensor &in, const Tensor &out,
                                         int64_t root, const Axes &axes) {
  ncclComm_t comm = getGroupComm(axes);
  if (!comm)
    return makeFinishedCollective(invalidPlan(noGroup("broadcast", axes)));
  return start("broadcast", stream, {comm}, [&](cudaStream_t on) {
    return getNcclError(ncclBroadcast(in.data, out.data, in.getNumElements(),
                                      getNcclType(in.dtype),
                                      static_cast<int>(root), comm, on),
                        "ncclBroadcast", comm);
  });
}

Pending
NcclCommunicator::startCollectivePermute(const Tensor &in, const Tensor &out,
                                         const std::vector<int64_t> &pairs,
                                         const Axes &axes) {
  ncclComm_t comm = getGroupComm(axes);
  if (!comm)
    return makeFinishedCollective(
        invalidPlan(noGroup("collective_permute", axes)));
  int64_t me = mesh.getGroup(rank, axes).index;
  return start("collective_permute", stream, {comm}, [&](cudaStream_t on) {
    bool target = false;
    for (size_t i = 0; i + 1 < pairs.size(); i += 2)
      target |= pairs[i + 1] == me;
    std::string error;
    if (!target) // A rank that is no target receives zeros.
      error = getCudaError(cudaMemsetAsync(out.data, 0, out.getBytes(), on),
                           "collective_permute");
    ncclGroupStart();
    for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
      int64_t source = pairs[i], dest = pairs[i + 1];
      if (source == me && dest == me) {
        cudaMemcpyAsync(out.data, in.data, in.getBytes(),
                        cudaMemcpyDeviceToDevice, on);
        continue;
      }
      if (source == me)
        ncclSend(in.data, in.getNumElements(), getNcclType(in.dtype),
                 static_cast<int>(dest), comm, on);
      if (dest == me)
        ncclRecv(out.data, out.getNumElements(), getNcclType(out.dtype),
                 static_cast<int>(source), comm, on);
    }
    std::string grouped =
        getNcclError(ncclGroupEnd(), "collective_permute", comm);
    return error.empty() ? grouped : error;
  });
}

Pending NcclCommunicator::startSend(const Tensor &in, int64_t peer,
                                    int64_t tag) {
  auto it = channels.find({rank, peer});
  std::string what =
      "send tag " + std::to_string(tag) + " to rank " + std::to_string(peer);
  if (it == channels.end())
    return makeFinishedCollective(communicationError(
        what + ": the channel was not prepared (prepareTransfers)"));
  ncclComm_t comm = it->second.comm;
  return start(what, it->second.stream, {comm}, [&](cudaStream_t on) {
    return getNcclError(ncclSend(in.data, in.getBytes(), ncclUint8,
                                 /*peer=*/1, comm, on),
                        what, comm);
  });
}

Pending NcclCommunicator::startRecv(const Tensor &out, int64_t peer,
                                    int64_t tag) {
  auto it = channels.find({peer, rank});
  std::string what = "receive tag " + std::to_string(tag) + " from rank " +
                     std::to_string(peer);
  if (it == channels.end())
    return makeFinishedCollective(communicationError(
        what + ": the channel was not prepared (prepareTransfers)"));
  ncclComm_t comm = it->second.comm;
  return start(what, it->second.stream, {comm}, [&](cudaStream_t on) {
    return getNcclError(ncclRecv(out.data, out.getBytes(), ncclUint8,
                                 /*peer=*/0, comm, on),
                        what, comm);
  });
}

} // namespace

Expected<std::unique_ptr<Communicator>>
tessera::runtime::createNcclCommunicator(const Mesh &mesh, Device &device,
                                         double timeoutSeconds,
                                         Rendezvous *rendezvous) {
  auto *cuda = dynamic_cast<CudaDevice *>(&device);
  if (!cuda)
    return invalidArgument("the NCCL communicator needs a CUDA device, got " +
                           device.getName());
  std::unique_ptr<NcclCommunicator> communicator;
  if (rendezvous) {
    if (rendezvous->getSize() != mesh.getNumDevices())
      return invalidArgument(
          "the plan's mesh has " + std::to_string(mesh.getNumDevices()) +
          " devices but " + std::to_string(rendezvous->getSize()) +
          " ranks met (WORLD_SIZE): start one rank per device");
    communicator = std::make_unique<NcclCommunicator>(
        mesh, *cuda, timeoutSeconds, nullptr, rendezvous, rendezvous->getRank(),
        rendezvous->getSize());
  } else {
    // MPI checks the job's size against the mesh and carries gatherToRoot.
    Expected<std::unique_ptr<Communicator>> mpi = createMpiCommunicator(mesh);
    if (!mpi.ok())
      return mpi.getStatus();
    int rank = (*mpi)->getRank(), size = (*mpi)->getNumRanks();
    communicator = std::make_unique<NcclCommunicator>(
        mesh, *cuda, timeoutSeconds, mpi.take(), nullptr, rank, size);
  }
  if (Status status = communicator->init(); !status.ok())
    return status;
  return std::unique_ptr<Communicator>(std::move(communicator));
}
