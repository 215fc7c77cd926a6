//===- ParameterServer.cpp - A parameter-server plan's job ------------------===//
//
// The job's supervisor and the entry point of each process; the protocol
// and its messages are Protocol.h's, the roles Server.h's and Worker.h's.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/ps/ParameterServer.h"

#include "Server.h"
#include "Worker.h"

#include "tessera/runtime/AtomicFile.h"
#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/Safetensors.h"
#include "tessera/runtime/Threads.h"
#include "tessera/runtime/training/Data.h"

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

using namespace tessera;
using namespace tessera::runtime;
using namespace tessera::runtime::ps;
namespace fs = std::filesystem;

namespace {

//===----------------------------------------------------------------------===//
// The job
//===----------------------------------------------------------------------===//

/// The environment of the job's processes: this one's, without an MPI
/// launcher's variables (they are no MPI ranks).
std::vector<std::string> getChildEnvironment() {
  std::vector<std::string> env;
  for (char **entry = environ; *entry; ++entry) {
    std::string variable = *entry;
    bool launcher = false;
    for (const char *prefix : {"OMPI_", "PMIX_", "PMI_", "OPAL_"})
      launcher |= variable.rfind(prefix, 0) == 0;
    if (!launcher)
      env.push_back(variable);
  }
  if (!std::getenv("OPENBLAS_NUM_THREADS"))
    env.push_back("OPENBLAS_NUM_THREADS=1");
  return env;
}

class JobSupervisor {
public:
  JobSupervisor(const plan::Plan &plan, const ServerJobOptions &options)
      : plan(plan), options(options), workers(getMesh(plan).getNumDevices()),
        servers(getMesh(plan.parameter_server().servers()).getNumDevices()) {}

  int run();

private:
  Expected<pid_t> spawn(const std::string &role, int64_t index, bool restore);
  /// Waits until a child ends and returns it (-1 once none is left),
  /// killing on the way each child stopped for the timeout.
  pid_t waitForChild(int &status);
  /// Kills each child stopped (SIGSTOP, SIGTSTP) for the timeout: stopped,
  /// it holds the job up as long as it lives; ended, it is a worker that
  /// the servers drop or a server that the job restarts (or fails on).
  void killStoppedChildren();
  /// How the child `pid` ended, for the messages: "was killed by signal
  /// 9", "was stopped by signal 19 for 5 s".
  std::string describeEnd(pid_t pid, int status);
  void stopAll();
  Status writeLosses() const;
  Status writeWeights() const;

  const plan::Plan &plan;
  ServerJobOptions options;
  int64_t workers, servers;
  std::map<pid_t, std::pair<std::string, int64_t>> children;
  /// The children stopped now: since when, and by which signal.
  std::map<pid_t, std::pair<std::chrono::steady_clock::time_point, int>>
      stopped;
  /// The children killed for being stopped, with how they ended.
  std::map<pid_t, std::string> killedWhileStopped;
};

Expected<pid_t> JobSupervisor::spawn(const std::string &role, int64_t index,
                           bool restore) {
  std::vector<std::string> args = {
      "tessera-run",   options.plan,
      "--ps-role",     role,
      "--ps-index",    std::to_string(index),
      "--ps-dir",      options.dir,
      "--steps",       std::to_string(options.steps),
      "--seed",        std::to_string(options.seed),
      "--ps-timeout",  std::to_string(options.timeout),
      "--threads",     std::to_string(options.threads),
      "--consistency", formatConsistency(*options.consistency)};
  if (!options.data.empty())
    args.insert(args.end(), {"--data", options.data});
  if (options.checkpointEvery > 0)
    args.insert(args.end(), {"--ps-checkpoint-every",
                             std::to_string(options.checkpointEvery)});
  for (const auto &[worker, ms] : options.stragglers)
    args.insert(args.end(), {"--straggler", std::to_string(worker) + ":" +
                                                std::to_string(ms)});
  if (restore)
    args.push_back("--ps-restore");
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = getChildEnvironment();
  std::vector<char *> envp;
  for (std::string &variable : env)
    envp.push_back(variable.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (int error = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr,
                              argv.data(), envp.data());
      error != 0)
    return unavailable("cannot start " + role + " " + std::to_string(index) +
                       ": " + std::strerror(error));
  children[pid] = {role, index};
  return pid;
}

pid_t JobSupervisor::waitForChild(int &status) {
  while (true) {
    pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid < 0)
      return -1;
    if (pid == 0) {
      killStoppedChildren();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (WIFSTOPPED(status)) {
      stopped[pid] = {std::chrono::steady_clock::now(), WSTOPSIG(status)};
      continue;
    }
    if (WIFCONTINUED(status)) {
      stopped.erase(pid);
      continue;
    }
    stopped.erase(pid);
    return pid;
  }
}

void JobSupervisor::killStoppedChildren() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = stopped.begin(); it != stopped.end();) {
    auto [since, signal] = it->second;
    if (std::chrono::duration<double>(now - since).count() <= options.timeout) {
      ++it;
      continue;
    }
    char how[96];
    std::snprintf(how, sizeof how, "was stopped by signal %d for %g s", signal,
                  options.timeout);
    killedWhileStopped[it->first] = how;
    ::kill(it->first, SIGKILL);
    it = stopped.erase(it);
  }
}

std::string JobSupervisor::describeEnd(pid_t pid, int status) {
  if (auto killed = killedWhileStopped.find(pid);
      killed != killedWhileStopped.end()) {
    std::string how = killed->second;
    killedWhileStopped.erase(killed);
    return how;
  }
  return WIFSIGNALED(status)
             ? "was killed by signal " + std::to_string(WTERMSIG(status))
             : "exited with " + std::to_string(WEXITSTATUS(status));
}

void JobSupervisor::stopAll() {
  for (const auto &[pid, child] : children)
    ::kill(pid, SIGKILL);
  for (const auto &[pid, child] : children)
    ::waitpid(pid, nullptr, 0);
  children.clear();
}

Status JobSupervisor::writeLosses() const {
  // Server 0's pushes: each step's loss is the mean of its workers'.
  std::ifstream log(getServerFile(options.dir, 0, ".log"));
  std::map<int64_t, std::pair<double, int64_t>> steps;
  std::string kind;
  for (std::string line; std::getline(log, line);) {
    std::istringstream fields(line);
    int64_t worker, step, version, stale;
    double loss;
    if (fields >> kind && kind == "push" &&
        fields >> worker >> step >> version >> stale >> loss) {
      steps[step].first += loss;
      ++steps[step].second;
    }
  }
  if (!steps.empty())
    std::printf("loss: step 1 %.6f, step %lld %.6f (each the mean of its "
                "workers')\n",
                steps.begin()->second.first / steps.begin()->second.second,
                static_cast<long long>(steps.rbegin()->first),
                steps.rbegin()->second.first / steps.rbegin()->second.second);
  if (options.dumpLosses.empty())
    return Status::success();
  std::FILE *file = std::fopen(options.dumpLosses.c_str(), "w");
  if (!file)
    return dataError("cannot write '" + options.dumpLosses + "'");
  for (const auto &[step, total] : steps)
    std::fprintf(file, "%.9g\n", total.first / total.second);
  std::fclose(file);
  return Status::success();
}

Status JobSupervisor::writeWeights() const {
  if (options.saveWeights.empty())
    return Status::success();
  const plan::Plan &serverPlan = plan.parameter_server().servers();
  const plan::Program &update = serverPlan.programs(0);
  Mesh serverMesh = getMesh(serverPlan);
  std::vector<std::pair<std::string, OwnedTensor>> params;
  for (const plan::Argument &argument : update.arguments())
    if (argument.role() == plan::PARAM)
      params.emplace_back(argument.name(),
                          OwnedTensor(getDType(argument.dtype()),
                                      {argument.global_shape().begin(),
                                       argument.global_shape().end()}));
  for (int64_t server = 0; server < servers; ++server) {
    Expected<std::vector<OwnedTensor>> pieces =
        readTensors(getServerFile(options.dir, server, ".final"));
    if (!pieces.ok())
      return pieces.getStatus();
    if (pieces->size() != params.size())
      return dataError("server " + std::to_string(server) +
                       " left other pieces than its plan's");
    size_t p = 0;
    for (const plan::Argument &argument : update.arguments())
      if (argument.role() == plan::PARAM) {
        placeLocalPiece((*pieces)[p].view, params[p].second.view,
                        getLayout(argument), serverMesh, server);
        ++p;
      }
  }
  std::vector<std::pair<std::string, const Tensor *>> named;
  for (const auto &[name, tensor] : params)
    named.emplace_back(name, &tensor.view);
  return writeSafetensors(options.saveWeights, named, {{"format", "pt"}});
}

int JobSupervisor::run() {
  auto fail = [&](const std::string &message) {
    std::fprintf(stderr, "tessera-run: error: %s\n", message.c_str());
    stopAll();
    return 1;
  };
  bool temporary = options.dir.empty();
  if (temporary) {
    std::string pattern =
        (fs::temp_directory_path() / "tessera-ps-XXXXXX").string();
    if (!mkdtemp(pattern.data()))
      return fail("cannot make a directory for the job");
    options.dir = pattern;
  }
  std::error_code error;
  fs::create_directories(options.dir, error);
  if (!fs::is_directory(options.dir))
    return fail("--ps-dir '" + options.dir + "': cannot make the directory");
  // What an earlier job left would mislead this one's processes.
  for (const fs::directory_entry &entry :
       fs::directory_iterator(options.dir, error)) {
    std::string name = entry.path().filename().string();
    if (name == "stop" || name.rfind("server", 0) == 0 ||
        name.rfind("worker", 0) == 0)
      fs::remove(entry.path(), error);
  }
  if (!options.consistency)
    options.consistency = Consistency{plan.parameter_server().consistency(),
                                      plan.parameter_server().staleness()};
  if (options.threads == 0)
    options.threads = getDefaultKernelThreads(workers + servers, false);
  std::printf("parameter servers: %lld servers, %lld workers, %s, in '%s'\n",
              static_cast<long long>(servers), static_cast<long long>(workers),
              formatConsistency(*options.consistency).c_str(),
              options.dir.c_str());
  std::fflush(stdout);
  for (int64_t server = 0; server < servers; ++server)
    if (Expected<pid_t> pid = spawn("server", server, false); !pid.ok())
      return fail(pid.message());
  for (int64_t worker = 0; worker < workers; ++worker)
    if (Expected<pid_t> pid = spawn("worker", worker, false); !pid.ok())
      return fail(pid.message());
  int64_t workersLeft = workers, workersDone = 0;
  std::map<int64_t, int> restarts;
  while (!children.empty()) {
    int status = 0;
    pid_t pid = waitForChild(status);
    if (pid < 0)
      break;
    auto child = children.find(pid);
    if (child == children.end())
      continue;
    auto [role, index] = child->second;
    children.erase(child);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::string how = describeEnd(pid, status);
    if (role == "worker") {
      --workersLeft;
      if (ok) {
        ++workersDone;
      } else {
        std::fprintf(stderr,
                     "tessera-run: worker %lld %s: the servers drop it, and "
                     "training goes on\n",
                     static_cast<long long>(index), how.c_str());
      }
      // The servers stop once the job's workers are done and every worker
      // that joined has left.
      if (workersLeft == 0 &&
          !writeFileAtomically(options.dir + "/stop", {""}).ok())
        return fail("cannot write '" + options.dir + "/stop'");
      continue;
    }
    if (ok)
      continue;
    if (options.checkpointEvery == 0)
      return fail("server " + std::to_string(index) + " " + how +
                  ", and the servers keep no checkpoint to restart it from "
                  "(--ps-checkpoint-every N)");
    if (++restarts[index] > 3)
      return fail("server " + std::to_string(index) + " " + how +
                  " a fourth time");
    std::fprintf(stderr,
                 "tessera-run: server %lld %s: restarting it from its last "
                 "checkpoint\n",
                 static_cast<long long>(index), how.c_str());
    fs::remove(getServerFile(options.dir, index, ".addr"), error);
    if (Expected<pid_t> restarted = spawn("server", index, true);
        !restarted.ok())
      return fail(restarted.message());
  }
  if (workersDone == 0)
    return fail("no worker finished its steps");
  if (Status status = writeLosses(); !status.ok())
    return fail(status.message());
  if (Status status = writeWeights(); !status.ok())
    return fail(status.message());
  if (temporary)
    fs::remove_all(options.dir, error);
  return 0;
}

/// Fails unless `options` fit `plan`'s job: --ps-index names a server or
/// worker of the plan (and comes with --ps-role), and each --straggler names
/// a worker of the plan and a delay of at most kMaxStragglerMilliseconds.
/// Checked where the plan is known, before any process starts: a process
/// past the plan's would wait for a job that never holds it, and a delay of
/// 2^63 ms never ends.
Status checkServerJobOptions(const plan::Plan &plan,
                             const ServerJobOptions &options) {
  int64_t workers = getMesh(plan).getNumDevices();
  int64_t servers = getMesh(plan.parameter_server().servers()).getNumDevices();
  auto range = [](int64_t count, const std::string &what) {
    return "from 0 to " + std::to_string(count - 1) + " (the plan has " +
           std::to_string(count) + " " + what + ")";
  };
  if (options.role.empty() && options.index >= 0)
    return invalidArgument("--ps-index needs --ps-role server or worker");
  if (!options.role.empty()) {
    bool server = options.role == "server";
    int64_t count = server ? servers : workers;
    if (options.index >= count)
      return invalidArgument("--ps-role " + options.role +
                             " expects --ps-index " +
                             range(count, server ? "servers" : "workers") +
                             ", got " + std::to_string(options.index));
  }
  for (const auto &[worker, milliseconds] : options.stragglers) {
    std::string given =
        std::to_string(worker) + ":" + std::to_string(milliseconds);
    if (worker >= workers)
      return invalidArgument("--straggler expects a worker " +
                             range(workers, "workers") + ", got '" + given +
                             "'");
    if (milliseconds > kMaxStragglerMilliseconds)
      return invalidArgument("--straggler expects a delay of at most " +
                             std::to_string(kMaxStragglerMilliseconds) +
                             " ms (an hour), got '" + given + "'");
  }
  return Status::success();
}

} // namespace

int tessera::runtime::runParameterServerJob(const plan::Plan &plan,
                                            const ServerJobOptions &options) {
  if (Status checked = checkServerJobOptions(plan, options); !checked.ok()) {
    std::fprintf(stderr, "tessera-run: error: %s\n", checked.message().c_str());
    return 2;
  }
  if (options.role.empty() && !options.join)
    return JobSupervisor(plan, options).run();
  // A process the job started ends with it, whatever ends the job.
  if (!options.role.empty()) {
    pid_t parent = getppid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
      return 1;
  }
  Status status;
  try {
    if (options.role == "server") {
      setKernelThreads(std::max(1, options.threads));
      status = Server(plan, options).run();
    } else {
      setKernelThreads(std::max(1, options.threads > 0
                                       ? options.threads
                                       : getDefaultKernelThreads(1, false)));
      status = WorkerProcess(plan, options).run();
    }
  } catch (const zmq::error_t &error) {
    status = communicationError(std::string("ZeroMQ: ") + error.what());
  }
  if (status.ok())
    return 0;
  std::string who = options.join
                        ? "the joining worker"
                        : options.role + " " + std::to_string(options.index);
  std::fprintf(stderr, "tessera-run: error: %s: %s\n", who.c_str(),
               status.message().c_str());
  return 1;
}
