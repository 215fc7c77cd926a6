//===- Worker.h - A parameter-server worker ---------------------------------===//
//
// One worker of the job: a data-parallel replica that pulls the
// parameters from every server, runs its batch's forward and backward and
// pushes its gradients.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PS_WORKER_H
#define TESSERA_RUNTIME_PS_WORKER_H

#include "Protocol.h"

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Device.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/ps/ParameterServer.h"

#include <zmq.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace tessera::runtime::ps {

class WorkerProcess {
public:
  WorkerProcess(const plan::Plan &plan, const ServerJobOptions &options)
      : plan(plan), program(plan.programs(0)),
        servers(plan.parameter_server().servers()), update(servers.programs(0)),
        mesh(getMesh(plan)), serverMesh(getMesh(servers)), options(options) {}

  /// Trains; on a failure, drops what it has not sent (a server that does
  /// not answer will not take it either).
  Status run() {
    Status status = train();
    if (!status.ok())
      for (std::unique_ptr<zmq::socket_t> &socket : sockets)
        if (socket)
          socket->set(zmq::sockopt::linger, 0);
    return status;
  }

private:
  Status train();
  Status setUp();
  Status connect(int64_t server);
  /// Sends `parts` to `server` and waits for its reply (none: returns
  /// after sending), sending again after the server restarts. While it
  /// waits it sends every server heartbeats, and it fails once `server`
  /// has sent nothing, not even a heartbeat's answer, for twice the
  /// timeout (the job restarts a server stopped for the timeout).
  Status request(int64_t server, std::vector<zmq::message_t> &&parts,
                 std::vector<zmq::message_t> *reply);
  /// Takes what `server` has sent: true with its reply in `reply`; a
  /// heartbeat's answer only moves `heard` (when `server` last sent).
  bool receiveReply(int64_t server, std::vector<zmq::message_t> &reply,
                    std::chrono::steady_clock::time_point &heard);
  /// Tells every server that this worker is alive; never blocks (a stopped
  /// server's queue may be full).
  void sendHeartbeats();

  const plan::Plan &plan;
  const plan::Program &program;
  const plan::Plan &servers;
  const plan::Program &update;
  Mesh mesh, serverMesh;
  const ServerJobOptions &options;
  int64_t index = -1, dataRank = 0;
  std::vector<OwnedTensor> locals;
  std::map<std::string, int> paramOf, gradientOf; // name -> arg / result
  zmq::context_t context;
  std::vector<std::unique_ptr<zmq::socket_t>> sockets;
  std::vector<std::string> addresses;
};


} // namespace tessera::runtime::ps

#endif // TESSERA_RUNTIME_PS_WORKER_H
