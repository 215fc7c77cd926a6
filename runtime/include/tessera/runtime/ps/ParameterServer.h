//===- ParameterServer.h - A parameter-server plan's job --------*- C++ -*-===//
//
// A plan compiled with --ps runs as a job of processes that meet over
// ZeroMQ, not MPI (MPI ends the whole job when one process dies): S servers,
// each holding its piece of every parameter and of its optimizer state, and
// W workers, each a data-parallel replica that pulls the parameters, runs
// its batch's forward and backward, and pushes its gradients.
//
// `tessera-run PLAN` starts the job (started once, not per rank): it spawns
// the servers and workers (this binary with --ps-role), restarts a server
// that dies from its last checkpoint, lets the servers stop once its
// workers are done, and writes the losses and the weights. A worker may
// join a running job (`tessera-run PLAN --ps-join DIR`), and a worker that
// dies, or stops answering, is dropped while the others train on. A server
// or worker stopped (SIGSTOP) for the timeout is killed, and then handled
// as a dead one.
//
// The job's directory (--ps-dir, else a temporary one) is how its processes
// find each other: each server's address (server<s>.addr), each worker's
// pid (worker<w>.pid), and the job's end (stop). It also holds each
// server's log (server<s>.log: a line per update applied and per pull
// granted), checkpoint (server<s>.ckpt) and final pieces (server<s>.final).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PS_PARAMETERSERVER_H
#define TESSERA_RUNTIME_PS_PARAMETERSERVER_H

#include "tessera/runtime/Plan.h"

#include "plan.pb.h"

#include <map>
#include <optional>
#include <string>

namespace tessera::runtime {

/// The longest a straggler waits each step (--straggler W:MS): an hour, in
/// milliseconds. A longer delay stalls the job for good (2^63 ms never
/// ends).
inline constexpr int64_t kMaxStragglerMilliseconds = 3600 * 1000;

struct ServerJobOptions {
  std::string plan;
  int64_t steps = 1;
  uint64_t seed = 0;
  /// A token file the workers train on (tessera-run --data).
  std::string data;
  /// The job's directory (empty: a temporary one).
  std::string dir;
  /// This process's part: "" (the job), "server" or "worker".
  std::string role;
  int64_t index = -1;
  /// A worker joining the running job in `dir` (--ps-join).
  bool join = false;
  /// A server restarted after a failure: it resumes from its checkpoint.
  bool restore = false;
  /// Overrides the plan's consistency.
  std::optional<Consistency> consistency;
  /// Per worker, the milliseconds it waits each step (--straggler W:MS):
  /// workers of the plan, delays up to kMaxStragglerMilliseconds.
  std::map<int64_t, int64_t> stragglers;
  /// A server checkpoints after every this many updates (0: never).
  int64_t checkpointEvery = 0;
  /// Seconds a process waits for another before it gives up on it: a
  /// worker silent this long is dropped, a process stopped this long is
  /// killed, and a worker fails once a server is silent for twice this.
  double timeout = 600;
  /// CPU kernel threads per process (0: the cores shared by all).
  int threads = 0;
  std::string dumpLosses;
  std::string saveWeights;
};

/// Runs this process's part of the job of `plan` (a parameter-server plan);
/// returns its exit code. Options out of the plan's range (a server or
/// worker it does not have, a straggler's delay past
/// kMaxStragglerMilliseconds) are refused before anything starts, with the
/// exit code 2.
int runParameterServerJob(const plan::Plan &plan,
                          const ServerJobOptions &options);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_PS_PARAMETERSERVER_H
