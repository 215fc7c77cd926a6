//===- Protocol.h - The parameter server's messages -------------------------===//
//
// The protocol, over ZeroMQ: each server binds a ROUTER socket and writes
// its address into the job's directory; each worker connects a DEALER
// socket to every server. A message is a Header frame, then one frame per
// tensor piece:
//
//   worker -> server  Hello            server -> worker  Welcome (first step)
//   worker -> server  Pull             server -> worker  Params (its pieces
//                                      of the parameters, when the
//                                      consistency lets the worker go on)
//   worker -> server  Push (its pieces of the gradients, its loss)
//   worker -> server  Bye
//   worker -> server  Heartbeat        server -> worker  Heartbeat
//
// A worker waiting for a reply sends every server a Heartbeat each quarter
// of --ps-timeout, and each server answers it: a server then tells a
// waiting worker (whose pull it may hold for a sync round) from a stopped
// one, which goes silent and is dropped, and the worker tells a server that
// holds its pull from a stopped one, which answers nothing.
//
// A server applies the gradients as the consistency says: sync sums a
// round's gradients of every live worker and applies them once (data
// parallelism: the workers' gradients are partial sums of the step's);
// async applies each as it arrives, scaled to the pushing worker's own
// batch; ssp=K does the same, but holds a worker's pull while it is more
// than K steps ahead of the slowest live worker.
//
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PS_PROTOCOL_H
#define TESSERA_RUNTIME_PS_PROTOCOL_H

#include "tessera/runtime/Tensor.h"

#include <zmq.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessera::runtime::ps {

/// Both sides are built together, so a new type goes at the end and needs
/// no version of its own.
enum class MessageType : uint32_t {
  Hello,
  Welcome,
  Pull,
  Params,
  Push,
  Bye,
  Heartbeat
};

/// The first frame of every message.
struct Header {
  MessageType type;
  int32_t worker;
  /// Push: the step the gradients are of; Welcome: the last step done.
  int64_t step;
  /// Params: the server's version (updates applied); Push: the version of
  /// the parameters the gradients were computed on.
  int64_t version;
  double loss;
  /// The sender's process and host: a server drops a worker of its own host
  /// whose process is gone.
  int64_t pid;
  char host[64];
};

/// A header of `type` from `worker`, with this process and host.
Header makeHeader(MessageType type, int64_t worker);

/// This host's name.
std::string getHostName();

/// Seconds since the epoch: the processes' common clock in the logs.
double getWallSeconds();

/// The job directory's files: server `server`'s with `suffix` (".addr",
/// ".log", ".ckpt", ".final"), and worker `worker`'s pid file.
std::string getServerFile(const std::string &dir, int64_t server,
                          const char *suffix);
std::string getWorkerPidFile(const std::string &dir, int64_t worker);

/// A whole text file ("" where it cannot be read).
std::string readText(const std::string &path);

/// Adds a piece's elements (f32 or 16-bit floats) into `sum`.
void addInto(std::vector<float> &sum, const void *bytes, DType dtype);

/// Writes `scale` times `values` into `tensor`.
void storeScaled(const std::vector<float> &values, float scale,
                 Tensor &tensor);

inline zmq::message_t makeFrame(const void *data, size_t bytes) {
  return zmq::message_t(data, bytes);
}

/// A frame's bytes as a `T` (zeros past a short frame's end).
template <typename T> T readFrame(const zmq::message_t &frame) {
  T value{};
  std::memcpy(&value, frame.data(), std::min(sizeof value, frame.size()));
  return value;
}

} // namespace tessera::runtime::ps

#endif // TESSERA_RUNTIME_PS_PROTOCOL_H
