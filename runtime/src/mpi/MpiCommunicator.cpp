//===- MpiCommunicator.cpp - Collectives over MPI sub-communicators -------===//
//
// One MPI communicator per set of mesh axes (MPI_Comm_split of the world by
// the coordinates outside the axes); dim-wise collectives pack their pieces
// contiguously around the MPI call.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/MpiWait.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

using namespace tessera::runtime;

namespace {

class MpiPending;

/// Serializes MPI calls between the executor's thread and a progress thread
/// that, while collectives are in flight, tests them every few
/// microseconds: MPI advances non-blocking collectives only inside MPI
/// calls, so without it a started collective would wait for its wait. Needs
/// MPI_THREAD_SERIALIZED; without it nothing runs in the background.
class Progress {
public:
  Progress(bool background, double timeoutSeconds)
      : timeoutSeconds(timeoutSeconds) {
    if (background)
      thread = std::thread([this] { loop(); });
  }
  ~Progress() {
    {
      std::lock_guard<std::recursive_mutex> guard(mutex);
      stop = true;
    }
    wake.notify_all();
    if (thread.joinable())
      thread.join();
  }

  /// Holds MPI for this thread while the progress thread runs; without it
  /// the executor's thread alone calls MPI, and nothing is locked.
  std::unique_lock<std::recursive_mutex> lock() {
    if (!thread.joinable())
      return std::unique_lock<std::recursive_mutex>(mutex, std::defer_lock);
    return std::unique_lock<std::recursive_mutex>(mutex);
  }
  /// Under lock(): the collectives the progress thread tests, if it runs
  /// (then true: remove it before it goes).
  bool add(MpiPending *pending) {
    if (!thread.joinable())
      return false;
    active.push_back(pending);
    restart = true;
    wake.notify_all();
    return true;
  }
  void remove(MpiPending *pending) {
    active.erase(std::remove(active.begin(), active.end(), pending),
                 active.end());
  }

  /// How long a wait may go without its requests completing.
  const double timeoutSeconds;

private:
  void loop();

  std::recursive_mutex mutex;
  std::condition_variable_any wake;
  std::vector<MpiPending *> active;
  bool stop = false;
  static constexpr std::chrono::microseconds kMinBackoff{50}, kMaxBackoff{800};
  std::chrono::microseconds backoff = kMinBackoff;
  /// A collective was added since the last round of tests.
  bool restart = false;
  std::thread thread;
};

/// Scratch memory that lives across steps: a collective takes a buffer of
/// at least the bytes it needs (and at most twice that) and gives it back
/// when it is destroyed, so each step's packed and gathered pieces reuse
/// the last step's buffers instead of allocating and faulting in new ones.
class ScratchPool {
public:
  /// A buffer taken from the pool, given back when destroyed.
  class Buffer {
  public:
    Buffer() = default;
    Buffer(ScratchPool *pool, std::unique_ptr<uint8_t[]> data, size_t bytes)
        : pool(pool), data(std::move(data)), bytes(bytes) {}
    Buffer(Buffer &&other) { *this = std::move(other); }
    /// Swaps: what this buffer held goes back with `other`.
    Buffer &operator=(Buffer &&other) {
      std::swap(pool, other.pool);
      std::swap(data, other.data);
      std::swap(bytes, other.bytes);
      return *this;
    }
    ~Buffer() {
      if (data)
        pool->give(std::move(data), bytes);
    }
    uint8_t *get() const { return data.get(); }

  private:
    ScratchPool *pool = nullptr;
    std::unique_ptr<uint8_t[]> data;
    size_t bytes = 0;
  };

  /// Uninitialised: what MPI writes or a pack fills.
  Buffer take(size_t bytes) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      auto it = free.lower_bound(bytes);
      if (it != free.end() && it->first <= 2 * bytes) {
        Buffer buffer(this, std::move(it->second), it->first);
        free.erase(it);
        return buffer;
      }
    }
    return Buffer(this, std::unique_ptr<uint8_t[]>(new uint8_t[bytes]), bytes);
  }

private:
  void give(std::unique_ptr<uint8_t[]> data, size_t bytes) {
    std::lock_guard<std::mutex> guard(mutex);
    free.emplace(bytes, std::move(data));
  }

  std::mutex mutex;
  std::multimap<size_t, std::unique_ptr<uint8_t[]>> free;
};

/// The requests of one collective: the one that most collectives post is
/// kept inline (no allocation per call); a permute's sends and receives
/// beyond it go on the heap.
class Requests {
public:
  void push_back(MPI_Request request) {
    if (count == 0)
      first = request;
    else if (count == 1)
      more = {first, request};
    else
      more.push_back(request);
    ++count;
  }
  MPI_Request *data() { return count <= 1 ? &first : more.data(); }
  int size() const { return count; }

private:
  MPI_Request first = MPI_REQUEST_NULL;
  std::vector<MPI_Request> more;
  int count = 0;
};

/// MPI requests in flight, the scratch memory they use, and the work that
/// finishes the collective once they complete (unpacking, averaging).
class MpiPending final : public PendingCollective {
public:
  explicit MpiPending(Progress &progress) : progress(progress) {}
  ~MpiPending() override {
    if (!watched)
      return;
    auto guard = progress.lock();
    progress.remove(this);
  }

  /// A small collective's wrapper would otherwise cost a malloc and a free
  /// per call: the objects are kept for reuse, a few per thread.
  static void *operator new(size_t bytes);
  static void operator delete(void *block);

  Requests requests;
  ScratchPool::Buffer scratch;
  /// f32 copies that 16-bit floats are reduced in.
  std::vector<OwnedTensor> wide;
  std::function<void()> finish;
  Status error;
  Progress &progress;
  /// The progress thread tests the requests until wait().
  bool watched = false;
  /// When the progress thread saw the requests complete (under its lock).
  std::optional<std::chrono::steady_clock::time_point> completed;

  std::optional<std::chrono::steady_clock::time_point>
  getCompletionTime() const override {
    return completed;
  }

  /// Polls the requests busily, as MPI_Waitall does, but only until the
  /// timeout: MPI_Waitall would wait forever for a peer that stopped.
  Status wait() override {
    if (!error.ok())
      return error;
    auto guard = progress.lock();
    if (watched) {
      progress.remove(this);
      watched = false;
    }
    if (Status status = waitForRequests(
            requests.data(), requests.size(), progress.timeoutSeconds,
            "a rank of its group stopped, or waits for something else");
        !status.ok())
      return status;
    if (finish)
      finish();
    return Status::success();
  }
};

/// Freed MpiPending objects, ready for reuse.
struct PendingFreeList {
  static constexpr size_t kMaxKept = 16;
  std::vector<void *> blocks;
  ~PendingFreeList() {
    for (void *block : blocks)
      ::operator delete(block);
  }
};
thread_local PendingFreeList pendingFreeList;

void *MpiPending::operator new(size_t bytes) {
  std::vector<void *> &blocks = pendingFreeList.blocks;
  if (blocks.empty())
    return ::operator new(bytes);
  void *block = blocks.back();
  blocks.pop_back();
  return block;
}

void MpiPending::operator delete(void *block) {
  std::vector<void *> &blocks = pendingFreeList.blocks;
  if (blocks.size() < PendingFreeList::kMaxKept)
    blocks.push_back(block);
  else
    ::operator delete(block);
}

void Progress::loop() {
  std::unique_lock<std::recursive_mutex> guard(mutex);
  while (!stop) {
    if (active.empty()) {
      wake.wait(guard, [&] { return stop || !active.empty(); });
      continue;
    }
    bool progressed = false;
    for (MpiPending *pending : active) {
      if (pending->completed)
        continue;
      int done = 0;
      MPI_Testall(pending->requests.size(), pending->requests.data(), &done,
                  MPI_STATUSES_IGNORE);
      if (done) {
        pending->completed = std::chrono::steady_clock::now();
        progressed = true;
      }
    }
    // Let the executor's thread in between the tests, backing off from 50
    // us to 800 us while nothing completes (on a busy core every test
    // takes time from the compute); a new collective or a completion starts
    // over at 50 us.
    backoff = progressed || restart ? kMinBackoff
                                    : std::min(2 * backoff, kMaxBackoff);
    restart = false;
    guard.unlock();
    std::this_thread::sleep_for(backoff);
    guard.lock();
  }
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(Mesh mesh, int rank, int size, bool background,
                  double timeoutSeconds)
      : mesh(std::move(mesh)), rank(rank), size(size),
        progress(background, timeoutSeconds) {}
  ~MpiCommunicator() override {
    auto guard = progress.lock();
    for (auto &[axes, made] : comms)
      MPI_Comm_free(&made.comm);
  }

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
  /// Splits MPI_COMM_WORLD for each group once every rank has come here:
  /// MPI_Comm_split, which has no nonblocking form, would wait forever for
  /// a rank that stopped before.
  Status prepareGroups(const std::vector<Axes> &groups) override {
    if (groups.empty())
      return Status::success();
    if (Status status = barrierWithin(
            progress.timeoutSeconds,
            "a rank stopped before setting up its communication groups");
        !status.ok())
      return status;
    for (const Axes &axes : groups)
      getGroupComm(axes);
    return Status::success();
  }
  Pending startSend(const Tensor &in, int64_t peer, int64_t tag) override;
  Pending startRecv(const Tensor &out, int64_t peer, int64_t tag) override;
  Status gatherToRoot(const std::vector<uint8_t> &in,
                      std::vector<std::vector<uint8_t>> &out) override;

private:
  /// A group's communicator, and this rank's place in the group.
  struct GroupComm {
    MPI_Comm comm;
    Group group;
  };
  /// Made on first use and kept: a collective looks its group up once.
  const GroupComm &getGroupComm(const Axes &axes);
  /// Starts `call`, which posts one request, and wraps it.
  template <typename Call>
  std::unique_ptr<MpiPending> post(const char *what, Call call);

  Mesh mesh;
  int rank, size;
  std::map<Axes, GroupComm> comms;
  /// The group that the last lookup found: a step's collectives run in one
  /// or two groups, and comparing the axes with its axes once is cheaper
  /// than the map's lookup (a fifth of a 1 KiB all_gather's overhead).
  const std::pair<const Axes, GroupComm> *lastGroup = nullptr;
  ScratchPool pool;
  Progress progress;
};

/// The MPI type to reduce elements of `dtype` with; null when MPI cannot.
MPI_Datatype getReduceType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  default:
    return MPI_DATATYPE_NULL;
  }
}

MPI_Op getOp(Reduction reduction) {
  switch (reduction) {
  case Reduction::Max:
    return MPI_MAX;
  case Reduction::Min:
    return MPI_MIN;
  case Reduction::Sum:
  case Reduction::Avg:
    return MPI_SUM;
  }
  return MPI_SUM;
}

/// Divides every element by `count` (the average of a sum).
void divideBy(const Tensor &tensor, int64_t count) {
  int64_t n = tensor.getNumElements();
  if (tensor.dtype == DType::F32)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<float>()[i] /= count;
  else if (tensor.dtype == DType::F64)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<double>()[i] /= count;
  else if (tensor.dtype == DType::I32)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<int32_t>()[i] /= count;
  else if (tensor.dtype == DType::I64)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<int64_t>()[i] /= count;
}

Status mpiError(int status, const char *what) {
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, message, &length);
  return communicationError(std::string(what) +
                            " failed: " + std::string(message, length));
}

/// `like` with dim `dim` resized: the shape of one piece.
Tensor pieceOf(const Tensor &like, int64_t dim, int64_t count, void *data) {
  Tensor piece = like;
  piece.shape[dim] /= count;
  piece.data = data;
  return piece;
}

} // namespace

Status tessera::runtime::waitForRequests(MPI_Request *requests, int count,
                                         double timeoutSeconds,
                                         const char *why) {
  // The clock is read every 256 tests, the first time to set the deadline:
  // a small collective's wait ends before it.
  std::chrono::time_point<std::chrono::steady_clock,
                          std::chrono::duration<double>>
      deadline;
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    // One request (most collectives' one): MPI_Test, which in Open MPI
    // tests again after it progresses, where MPI_Testall needs another call
    // (at 1-4 KiB a tenth of the collective's time).
    int status = count == 1
                     ? MPI_Test(requests, &done, MPI_STATUS_IGNORE)
                     : MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (status != MPI_SUCCESS) {
      char message[MPI_MAX_ERROR_STRING];
      int length = 0;
      MPI_Error_string(status, message, &length);
      return communicationError("MPI collective failed: " +
                                std::string(message, length));
    }
    if (done)
      return Status::success();
    if (polls % 256 != 255)
      continue;
    if (polls == 255)
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration<double>(timeoutSeconds);
    else if (std::chrono::steady_clock::now() > deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
      return timeoutError(std::string("not finished after ") + seconds +
                          " s (--comm-timeout): " + why);
    }
  }
}

Status tessera::runtime::allReduceMinWithin(int value, int &least,
                                            double timeoutSeconds,
                                            const std::string &why) {
  MPI_Request request;
  if (int status = MPI_Iallreduce(&value, &least, 1, MPI_INT, MPI_MIN,
                                  MPI_COMM_WORLD, &request);
      status != MPI_SUCCESS)
    return mpiError(status, "MPI_Iallreduce");
  return waitForRequests(&request, 1, timeoutSeconds, why.c_str());
}

Status tessera::runtime::barrierWithin(double timeoutSeconds,
                                       const std::string &why) {
  MPI_Request request;
  if (int status = MPI_Ibarrier(MPI_COMM_WORLD, &request);
      status != MPI_SUCCESS)
    return mpiError(status, "MPI_Ibarrier");
  return waitForRequests(&request, 1, timeoutSeconds, why.c_str());
}

const MpiCommunicator::GroupComm &
MpiCommunicator::getGroupComm(const Axes &axes) {
  if (lastGroup && lastGroup->first == axes)
    return lastGroup->second;
  auto it = comms.find(axes);
  if (it == comms.end()) {
    GroupComm made{MPI_COMM_NULL, mesh.getGroup(rank, axes)};
    auto guard = progress.lock();
    MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(made.group.color),
                   static_cast<int>(made.group.index), &made.comm);
    it = comms.emplace(axes, made).first;
  }
  lastGroup = &*it;
  return it->second;
}

template <typename Call>
std::unique_ptr<MpiPending> MpiCommunicator::post(const char *what, Call call) {
  auto pending = std::make_unique<MpiPending>(progress);
  MPI_Request request;
  auto guard = progress.lock();
  int status = call(&request);
  if (status != MPI_SUCCESS) {
    pending->error = mpiError(status, what);
  } else {
    pending->requests.push_back(request);
    pending->watched = progress.add(pending.get());
  }
  return pending;
}

Pending MpiCommunicator::startAllReduce(const Tensor &in, const Tensor &out,
                                        Reduction reduction, const Axes &axes) {
  if (isHalf(in.dtype)) {
    // 16-bit floats reduce in f32 and round once at the end.
    OwnedTensor wide = widenToF32(in);
    const GroupComm &group = getGroupComm(axes);
    MPI_Comm comm = group.comm;
    auto pending = post("MPI_Iallreduce", [&](MPI_Request *request) {
      return MPI_Iallreduce(MPI_IN_PLACE, wide.view.data,
                            wide.view.getNumElements(), MPI_FLOAT,
                            getOp(reduction), comm, request);
    });
    pending->wide.push_back(std::move(wide));
    pending->finish = [out, reduction, count = group.group.size,
                       wide = &pending->wide.back()] {
      if (reduction == Reduction::Avg)
        divideBy(wide->view, count);
      narrowFromF32(wide->view, out);
    };
    return pending;
  }
  MPI_Datatype type = getReduceType(in.dtype);
  if (type == MPI_DATATYPE_NULL)
    return makeFinishedCollective(
        invalidArgument(std::string("all_reduce of ") + getDTypeName(in.dtype) +
                        " is not supported"));
  const GroupComm &group = getGroupComm(axes);
  MPI_Comm comm = group.comm;
  auto pending = post("MPI_Iallreduce", [&](MPI_Request *request) {
    return MPI_Iallreduce(in.data, out.data, in.getNumElements(), type,
                          getOp(reduction), comm, request);
  });
  if (reduction == Reduction::Avg)
    pending->finish = [out, count = group.group.size] { divideBy(out, count); };
  return pending;
}

Pending MpiCommunicator::startAllGather(const Tensor &in, const Tensor &out,
                                        int64_t dim, const Axes &axes) {
  const GroupComm &group = getGroupComm(axes);
  int64_t count = group.group.size;
  MPI_Comm comm = group.comm;
  int64_t bytes = in.getBytes();
  // Pieces along the outermost dim arrive where they belong.
  if (isOutermost(out.shape, dim))
    return post("MPI_Iallgather", [&](MPI_Request *request) {
      return MPI_Iallgather(in.data, bytes, MPI_BYTE, out.data, bytes, MPI_BYTE,
                            comm, request);
    });
  ScratchPool::Buffer gathered = pool.take(bytes * count);
  auto pending = post("MPI_Iallgather", [&](MPI_Request *request) {
    return MPI_Iallgather(in.data, bytes, MPI_BYTE, gathered.get(), bytes,
                          MPI_BYTE, comm, request);
  });
  pending->scratch = std::move(gathered);
  // The group's pieces arrive one after another; place them along `dim`.
  pending->finish = [in, out, dim, count, scratch = &pending->scratch] {
    for (int64_t i = 0; i < count; ++i) {
      Tensor piece = in;
      piece.data = scratch->get() + i * in.getBytes();
      placePiece(piece, out, dim, i, count);
    }
  };
  return pending;
}

Pending MpiCommunicator::startReduceScatter(const Tensor &in, const Tensor &out,
                                            int64_t dim, Reduction reduction,
                                            const Axes &axes) {
  bool half = isHalf(in.dtype);
  MPI_Datatype type = half ? MPI_FLOAT : getReduceType(in.dtype);
  if (type == MPI_DATATYPE_NULL)
    return makeFinishedCollective(
        invalidArgument(std::string("reduce_scatter of ") +
                        getDTypeName(in.dtype) + " is not supported"));
  const GroupComm &group = getGroupComm(axes);
  int64_t count = group.group.size;
  MPI_Comm comm = group.comm;
  // MPI scatters contiguous blocks: pieces along the outermost dim are sent
  // from where they lie (the input lives until the wait), others packed one
  // after another first.
  if (!half && isOutermost(in.shape, dim)) {
    auto pending = post("MPI_Ireduce_scatter_block", [&](MPI_Request *request) {
      return MPI_Ireduce_scatter_block(in.data, out.data, out.getNumElements(),
                                       type, getOp(reduction), comm, request);
    });
    if (reduction == Reduction::Avg)
      pending->finish = [out, count] { divideBy(out, count); };
    return pending;
  }
  ScratchPool::Buffer packed = pool.take(in.getBytes());
  for (int64_t i = 0; i < count; ++i)
    slicePiece(in, pieceOf(out, 0, 1, packed.get() + i * out.getBytes()), dim,
               i, count);
  if (half) {
    // 16-bit floats reduce in f32 and round once at the end.
    Tensor packedView = in;
    packedView.shape = {in.getNumElements()};
    packedView.data = packed.get();
    OwnedTensor wideIn = widenToF32(packedView);
    OwnedTensor wideOut(DType::F32, out.shape);
    auto pending = post("MPI_Ireduce_scatter_block", [&](MPI_Request *request) {
      return MPI_Ireduce_scatter_block(wideIn.view.data, wideOut.view.data,
                                       out.getNumElements(), MPI_FLOAT,
                                       getOp(reduction), comm, request);
    });
    pending->wide.push_back(std::move(wideIn));
    pending->wide.push_back(std::move(wideOut));
    pending->finish = [out, reduction, count, wide = &pending->wide] {
      if (reduction == Reduction::Avg)
        divideBy((*wide)[1].view, count);
      narrowFromF32((*wide)[1].view, out);
    };
    return pending;
  }
  auto pending = post("MPI_Ireduce_scatter_block", [&](MPI_Request *request) {
    return MPI_Ireduce_scatter_block(packed.get(), out.data,
                                     out.getNumElements(), type,
                                     getOp(reduction), comm, request);
  });
  pending->scratch = std::move(packed);
  if (reduction == Reduction::Avg)
    pending->finish = [out, count] { divideBy(out, count); };
  return pending;
}

Pending MpiCommunicator::startAllToAll(const Tensor &in, const Tensor &out,
                                       int64_t splitDim, int64_t concatDim,
                                       const Axes &axes) {
  const GroupComm &group = getGroupComm(axes);
  int64_t count = group.group.size;
  MPI_Comm comm = group.comm;
  size_t pieceBytes = in.getBytes() / count;
  // Both halves live in one scratch buffer: what is sent, then what arrives.
  ScratchPool::Buffer both = pool.take(2 * in.getBytes());
  for (int64_t i = 0; i < count; ++i)
    slicePiece(in, pieceOf(in, splitDim, count, both.get() + i * pieceBytes),
               splitDim, i, count);
  auto pending = post("MPI_Ialltoall", [&](MPI_Request *request) {
    return MPI_Ialltoall(both.get(), pieceBytes, MPI_BYTE,
                         both.get() + in.getBytes(), pieceBytes, MPI_BYTE, comm,
                         request);
  });
  pending->scratch = std::move(both);
  pending->finish = [in, out, splitDim, concatDim, count, pieceBytes,
                     scratch = &pending->scratch] {
    uint8_t *received = scratch->get() + in.getBytes();
    for (int64_t i = 0; i < count; ++i)
      placePiece(pieceOf(in, splitDim, count, received + i * pieceBytes), out,
                 concatDim, i, count);
  };
  return pending;
}

Pending MpiCommunicator::startBroadcast(const Tensor &in, const Tensor &out,
                                        int64_t root, const Axes &axes) {
  std::memcpy(out.data, in.data, in.getBytes());
  MPI_Comm comm = getGroupComm(axes).comm;
  return post("MPI_Ibcast", [&](MPI_Request *request) {
    return MPI_Ibcast(out.data, out.getBytes(), MPI_BYTE,
                      static_cast<int>(root), comm, request);
  });
}

Pending
MpiCommunicator::startCollectivePermute(const Tensor &in, const Tensor &out,
                                        const std::vector<int64_t> &pairs,
                                        const Axes &axes) {
  const GroupComm &group = getGroupComm(axes);
  MPI_Comm comm = group.comm;
  int64_t index = group.group.index;
  std::memset(out.data, 0, out.getBytes());
  auto pending = std::make_unique<MpiPending>(progress);
  auto guard = progress.lock();
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    int64_t source = pairs[i], target = pairs[i + 1];
    if (source == index && target == index) {
      std::memcpy(out.data, in.data, in.getBytes());
      continue;
    }
    MPI_Request request;
    if (source == index) {
      MPI_Isend(in.data, in.getBytes(), MPI_BYTE, static_cast<int>(target), 0,
                comm, &request);
      pending->requests.push_back(request);
    }
    if (target == index) {
      MPI_Irecv(out.data, out.getBytes(), MPI_BYTE, static_cast<int>(source), 0,
                comm, &request);
      pending->requests.push_back(request);
    }
  }
  pending->watched = progress.add(pending.get());
  return pending;
}

Pending MpiCommunicator::startSend(const Tensor &in, int64_t peer,
                                   int64_t tag) {
  return post("MPI_Isend", [&](MPI_Request *request) {
    return MPI_Isend(in.data, in.getBytes(), MPI_BYTE, static_cast<int>(peer),
                     static_cast<int>(tag), MPI_COMM_WORLD, request);
  });
}

Pending MpiCommunicator::startRecv(const Tensor &out, int64_t peer,
                                   int64_t tag) {
  return post("MPI_Irecv", [&](MPI_Request *request) {
    return MPI_Irecv(out.data, out.getBytes(), MPI_BYTE, static_cast<int>(peer),
                     static_cast<int>(tag), MPI_COMM_WORLD, request);
  });
}

Status MpiCommunicator::gatherToRoot(const std::vector<uint8_t> &in,
                                     std::vector<std::vector<uint8_t>> &out) {
  // Non-blocking, so that its waits time out as the collectives' do.
  int64_t bytes = static_cast<int64_t>(in.size());
  std::vector<int64_t> sizes(size);
  Status status =
      post("MPI_Iallgather", [&](MPI_Request *request) {
        return MPI_Iallgather(&bytes, 1, MPI_INT64_T, sizes.data(), 1,
                              MPI_INT64_T, MPI_COMM_WORLD, request);
      })->wait();
  if (!status.ok())
    return status.withPrefix("gathering the results' sizes on rank 0: ");
  // MPI counts and displacements are ints: the bytes go in rounds of at
  // most INT_MAX in all, each rank sending up to its share of that.
  int64_t share = std::numeric_limits<int>::max() / size;
  int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  out.assign(rank == 0 ? size : 0, {});
  for (int r = 0; r < static_cast<int>(out.size()); ++r)
    out[r].reserve(sizes[r]);
  std::vector<uint8_t> round;
  for (int64_t at = 0; at == 0 || at < largest; at += share) {
    auto getCount = [&](int64_t total) {
      return static_cast<int>(std::clamp<int64_t>(total - at, 0, share));
    };
    std::vector<int> counts, offsets;
    if (rank == 0) {
      int total = 0;
      for (int64_t each : sizes) {
        offsets.push_back(total);
        counts.push_back(getCount(each));
        total += counts.back();
      }
      round.resize(total);
    }
    status = post("MPI_Igatherv", [&](MPI_Request *request) {
               return MPI_Igatherv(in.data() + std::min(at, bytes),
                                   getCount(bytes), MPI_BYTE, round.data(),
                                   counts.data(), offsets.data(), MPI_BYTE, 0,
                                   MPI_COMM_WORLD, request);
             })->wait();
    if (!status.ok())
      return status.withPrefix("gathering the results on rank 0: ");
    for (int r = 0; r < static_cast<int>(out.size()); ++r)
      out[r].insert(out[r].end(), round.begin() + offsets[r],
                    round.begin() + offsets[r] + counts[r]);
  }
  return Status::success();
}

Expected<std::unique_ptr<Communicator>>
tessera::runtime::createMpiCommunicator(const Mesh &mesh, double timeoutSeconds,
                                        bool progressThread) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != mesh.getNumDevices()) {
    return invalidPlan(
        "the plan's mesh has " + std::to_string(mesh.getNumDevices()) +
        " devices but the job has " + std::to_string(size) +
        " ranks (mpirun -np " + std::to_string(mesh.getNumDevices()) + ")");
  }
  // Errors come back as return codes so that a failing rank can say why
  // before it aborts the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int threads = MPI_THREAD_SINGLE;
  MPI_Query_thread(&threads);
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(
      mesh, rank, size,
      /*background=*/progressThread && threads >= MPI_THREAD_SERIALIZED,
      timeoutSeconds));
}
