//===- Server.h - A parameter server
//----------------------------------------===//
//
// One server of the job: its piece of every parameter and of its optimizer
// state, the updates it applies as the consistency says, its log and its
// checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PS_SERVER_H
#define TESSERA_RUNTIME_PS_SERVER_H

#include "Protocol.h"
#include "UpdateRule.h"

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Device.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/ps/ParameterServer.h"

#include <zmq.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace tessera::runtime::ps {

class Server {
public:
  Server(const plan::Plan &plan, const ServerJobOptions &options)
      : plan(plan), servers(plan.parameter_server().servers()),
        program(servers.programs(0)), mesh(getMesh(servers)), options(options),
        index(options.index), workers(getMesh(plan).getNumDevices()),
        communicator(createLocalCommunicator(options.index)),
        device(createCpuDevice()),
        executor(program, mesh, *communicator, device.get()),
        rule(getConsistency(plan, options), workers) {}

  Status run();

private:
  struct Worker {
    int64_t pid = 0;
    std::string host;
    std::chrono::steady_clock::time_point lastSeen;
    /// When its process was first seen gone (its last messages may still be
    /// on their way for a while).
    std::optional<std::chrono::steady_clock::time_point> goneSince;
  };
  Status setUp();
  Status handle(std::vector<zmq::message_t> &parts);
  /// Sends `header` alone to the worker at `route`.
  void sendHeader(const std::string &route, const Header &header);
  /// Keeps `worker` live, if it is, and answers its heartbeat.
  void answerHeartbeat(int64_t worker, const std::string &route);
  /// Checks a push's gradient pieces (after its route and header).
  Status checkPush(const std::vector<zmq::message_t> &parts,
                   const Header &header) const;
  /// Adds gradient pieces to `sums`.
  void addPieces(const zmq::message_t *pieces);
  /// Applies `sums` scaled by `scale` as one update.
  Status apply(float scale);
  /// Applies the update the pushes so far make, if the rule has one ready.
  Status applyReadyUpdate();
  void logPush(const PushRecord &push, int64_t stale);
  /// The consistency the plan asks for, or the one the options override it
  /// with.
  static Consistency getConsistency(const plan::Plan &plan,
                                    const ServerJobOptions &options);
  std::set<int64_t> getLiveWorkers() const;
  void grantPulls();
  void dropGoneWorkers();
  void drop(int64_t worker, const std::string &why);
  Status checkpoint();
  Status restore();
  Status finish();
  void log(const std::string &line);

  const plan::Plan &plan;
  const plan::Plan &servers;
  const plan::Program &program;
  Mesh mesh;
  const ServerJobOptions &options;
  int64_t index;
  /// The workers the plan was compiled for: the step's gradient is the sum
  /// of their pushes.
  int64_t workers;
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<Device> device;
  Executor executor;
  UpdateRule rule;
  std::vector<OwnedTensor> locals;
  /// The GRADIENT arguments, in program order, and their running sums.
  std::vector<int> gradientArgs, paramArgs;
  std::vector<std::vector<float>> sums;
  int64_t version = 0;
  std::map<int64_t, Worker> live;
  /// The gradient pieces of the pushes the rule has not yet applied, by
  /// worker.
  std::map<int64_t, std::vector<zmq::message_t>> pushedPieces;
  std::vector<std::pair<int64_t, std::string>> heldPulls; // worker, route
  std::map<int64_t, int64_t> staleness; // staleness -> updates
  std::ofstream logFile;
  std::unique_ptr<zmq::context_t> context;
  std::unique_ptr<zmq::socket_t> socket;
};

} // namespace tessera::runtime::ps

#endif // TESSERA_RUNTIME_PS_SERVER_H
