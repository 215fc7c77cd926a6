//===- ParameterServer.cpp - A parameter-server plan's job ----------------===//
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
//
// A server applies the gradients as the consistency says: sync sums a
// round's gradients of every live worker and applies them once (data
// parallelism: the workers' gradients are partial sums of the step's);
// async applies each as it arrives, scaled to the pushing worker's own
// batch; ssp=K does the same, but holds a worker's pull while it is more
// than K steps ahead of the slowest live worker.
//
//===----------------------------------------------------------------------===//

#include "ParameterServer.h"

#include "Data.h"

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/Safetensors.h"
#include "tessera/runtime/Threads.h"

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
namespace fs = std::filesystem;

namespace {

enum class MessageType : uint32_t { Hello, Welcome, Pull, Params, Push, Bye };

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

std::string getHostName() {
  char name[64] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

Header makeHeader(MessageType type, int64_t worker) {
  Header header{};
  header.type = type;
  header.worker = static_cast<int32_t>(worker);
  header.pid = getpid();
  std::string host = getHostName();
  std::strncpy(header.host, host.c_str(), sizeof header.host - 1);
  return header;
}

/// Seconds since the epoch: the processes' common clock in the logs.
double getWallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string getServerFile(const std::string &dir, int64_t server,
                          const char *suffix) {
  return dir + "/server" + std::to_string(server) + suffix;
}

std::string getWorkerPidFile(const std::string &dir, int64_t worker) {
  return dir + "/worker" + std::to_string(worker) + ".pid";
}

std::string readText(const std::string &path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// Writes `text` to `path` whole: readers never see a part.
Status writeTextAtomically(const std::string &path, const std::string &text) {
  std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary);
    file << text;
    if (!file)
      return dataError("cannot write '" + temporary + "'");
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error)
    return dataError("cannot write '" + path + "': " + error.message());
  return Status::success();
}

/// The number of elements of a piece's bytes, converted to floats.
void addInto(std::vector<float> &sum, const void *bytes, DType dtype) {
  if (dtype == DType::F32) {
    const float *values = static_cast<const float *>(bytes);
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += values[i];
    return;
  }
  const uint16_t *values = static_cast<const uint16_t *>(bytes);
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] += halfToFloat(dtype, values[i]);
}

/// Writes `scale` times `values` into `tensor`.
void storeScaled(const std::vector<float> &values, float scale,
                 Tensor &tensor) {
  for (size_t i = 0; i < values.size(); ++i) {
    float value = scale == 1 ? values[i] : values[i] * scale;
    if (tensor.dtype == DType::F32)
      tensor.as<float>()[i] = value;
    else
      tensor.as<uint16_t>()[i] = floatToHalf(tensor.dtype, value);
  }
}

zmq::message_t makeFrame(const void *data, size_t bytes) {
  return zmq::message_t(data, bytes);
}

template <typename T> T readFrame(const zmq::message_t &frame) {
  T value{};
  std::memcpy(&value, frame.data(), std::min(sizeof value, frame.size()));
  return value;
}

//===----------------------------------------------------------------------===//
// The server
//===----------------------------------------------------------------------===//

class Server {
public:
  Server(const plan::Plan &plan, const ServerJobOptions &options)
      : plan(plan), servers(plan.parameter_server().servers()),
        program(servers.programs(0)), mesh(getMesh(servers)), options(options),
        index(options.index), workers(getMesh(plan).getNumDevices()),
        communicator(createLocalCommunicator(options.index)),
        device(createCpuDevice()),
        executor(program, mesh, *communicator, device.get()) {
    consistency = {plan.parameter_server().consistency(),
                   plan.parameter_server().staleness()};
    if (options.consistency)
      consistency = *options.consistency;
  }

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
  /// A push of the round in progress (sync), with its gradient pieces.
  struct PendingPush {
    int64_t worker, step, version;
    double loss;
    std::vector<zmq::message_t> pieces;
  };

  Status setUp();
  Status handle(std::vector<zmq::message_t> &parts);
  /// Checks a push's gradient pieces (after its route and header).
  Status checkPush(const std::vector<zmq::message_t> &parts,
                   const Header &header) const;
  /// Adds gradient pieces to `sums`.
  void addPieces(const zmq::message_t *pieces);
  /// Applies `sums` scaled by `scale` as one update.
  Status apply(float scale);
  /// Applies the round once every live worker has pushed (sync).
  Status completeRound();
  /// Whether `worker` pushed into the round in progress (sync).
  bool hasPushed(int64_t worker) const;
  bool mayPull(int64_t worker) const;
  int64_t getSlowestClock() const;
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
  Consistency consistency;
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<Device> device;
  Executor executor;
  std::vector<OwnedTensor> locals;
  /// The GRADIENT arguments, in program order, and their running sums.
  std::vector<int> gradientArgs, paramArgs;
  std::vector<std::vector<float>> sums;
  int64_t version = 0;
  std::map<int64_t, Worker> live;
  /// Per worker ever seen, the last step it pushed.
  std::map<int64_t, int64_t> clocks;
  std::vector<PendingPush> pending;
  std::vector<std::pair<int64_t, std::string>> heldPulls; // worker, route
  std::map<int64_t, int64_t> staleness; // staleness -> updates
  std::ofstream logFile;
  std::unique_ptr<zmq::context_t> context;
  std::unique_ptr<zmq::socket_t> socket;
};

Status Server::setUp() {
  // The workers' parameters, by name, with their index in the step: a
  // server's piece is of the same generated tensor as a worker's.
  const plan::Program &worker = plan.programs(0);
  std::map<std::string, std::pair<plan::Argument, int64_t>> params;
  for (int i = 0; i < worker.arguments_size(); ++i)
    for (auto &[source, tensor] : getStepTensors(worker.arguments(i), i))
      if (tensor.role() == plan::PARAM)
        params.emplace(tensor.name(), std::make_pair(tensor, source));
  for (int i = 0; i < program.arguments_size(); ++i) {
    const plan::Argument &argument = program.arguments(i);
    const plan::Buffer &buffer = program.buffers(argument.buffer());
    if (argument.role() == plan::GRADIENT) {
      gradientArgs.push_back(i);
      locals.emplace_back(
          getDType(buffer.dtype()),
          std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()));
      sums.emplace_back(locals.back().view.getNumElements(), 0.0f);
      continue;
    }
    if (argument.role() == plan::PARAM)
      paramArgs.push_back(i);
    auto param = params.find(argument.name());
    OwnedTensor global =
        argument.role() == plan::PARAM && param != params.end()
            ? makeGlobalInput(param->second.first, options.seed,
                              param->second.second)
            : makeGlobalInput(argument, options.seed, i);
    locals.push_back(
        takeLocalPiece(global.view, getLayout(argument), mesh, index));
  }
  for (int i : gradientArgs)
    if (locals[i].view.dtype != DType::F32 && !isHalf(locals[i].view.dtype))
      return invalidPlan("the servers' gradient of '" +
                         program.arguments(i).name() + "' is not a float");
  if (options.restore)
    if (Status status = restore(); !status.ok())
      return status;
  // The job's workers are expected from the start (a sync round waits for
  // each), and so, after a restart, is every worker of the job still
  // running: known by their pid files until they say hello.
  for (int64_t worker = 0;
       worker < workers ||
       (options.restore && fs::exists(getWorkerPidFile(options.dir, worker)));
       ++worker) {
    Worker &info = live[worker];
    info.host = getHostName();
    info.lastSeen = std::chrono::steady_clock::now();
    clocks.emplace(worker, 0);
  }

  logFile.open(getServerFile(options.dir, index, ".log"), std::ios::app);
  if (!logFile)
    return dataError("cannot write the server log in '" + options.dir + "'");
  if (options.restore)
    log("restore " + std::to_string(version));
  context = std::make_unique<zmq::context_t>();
  socket = std::make_unique<zmq::socket_t>(*context, zmq::socket_type::router);
  socket->set(zmq::sockopt::linger, 0);
  const char *host = std::getenv("TESSERA_PS_HOST");
  socket->bind(std::string("tcp://") + (host ? host : "127.0.0.1") + ":*");
  std::string endpoint = socket->get(zmq::sockopt::last_endpoint);
  return writeTextAtomically(getServerFile(options.dir, index, ".addr"),
                             endpoint + "\n");
}

void Server::log(const std::string &line) {
  char time[32];
  std::snprintf(time, sizeof time, " %.6f", getWallSeconds());
  logFile << line << time << "\n";
  logFile.flush();
}

bool Server::hasPushed(int64_t worker) const {
  return std::any_of(
      pending.begin(), pending.end(),
      [&](const PendingPush &push) { return push.worker == worker; });
}

bool Server::mayPull(int64_t worker) const {
  switch (consistency.mode) {
  case plan::SYNC:
    return !hasPushed(worker);
  case plan::SSP:
    return clocks.at(worker) - getSlowestClock() <= consistency.staleness;
  default:
    return true;
  }
}

int64_t Server::getSlowestClock() const {
  int64_t slowest = -1;
  for (const auto &[worker, info] : live)
    if (slowest < 0 || clocks.at(worker) < slowest)
      slowest = clocks.at(worker);
  return std::max<int64_t>(slowest, 0);
}

void Server::grantPulls() {
  for (auto it = heldPulls.begin(); it != heldPulls.end();) {
    int64_t worker = it->first;
    if (!live.count(worker)) {
      it = heldPulls.erase(it);
      continue;
    }
    if (!mayPull(worker)) {
      ++it;
      continue;
    }
    log("pull " + std::to_string(worker) + " " +
        std::to_string(clocks[worker]) + " " +
        std::to_string(getSlowestClock()) + " " + std::to_string(version));
    Header header = makeHeader(MessageType::Params, index);
    header.version = version;
    socket->send(makeFrame(it->second.data(), it->second.size()),
                 zmq::send_flags::sndmore);
    socket->send(makeFrame(&header, sizeof header),
                 paramArgs.empty() ? zmq::send_flags::none
                                   : zmq::send_flags::sndmore);
    for (size_t p = 0; p < paramArgs.size(); ++p) {
      const Tensor &piece = locals[paramArgs[p]].view;
      socket->send(makeFrame(piece.data, piece.getBytes()),
                   p + 1 < paramArgs.size() ? zmq::send_flags::sndmore
                                            : zmq::send_flags::none);
    }
    it = heldPulls.erase(it);
  }
}

Status Server::checkPush(const std::vector<zmq::message_t> &parts,
                         const Header &header) const {
  if (parts.size() != 2 + gradientArgs.size())
    return communicationError("worker " + std::to_string(header.worker) +
                              " pushed " + std::to_string(parts.size() - 2) +
                              " gradient pieces, the plan has " +
                              std::to_string(gradientArgs.size()));
  for (size_t g = 0; g < gradientArgs.size(); ++g) {
    const Tensor &local = locals[gradientArgs[g]].view;
    if (parts[2 + g].size() != local.getBytes())
      return communicationError("worker " + std::to_string(header.worker) +
                                "'s gradient of '" +
                                program.arguments(gradientArgs[g]).name() +
                                "' is not this server's piece");
  }
  return Status::success();
}

void Server::addPieces(const zmq::message_t *pieces) {
  for (size_t g = 0; g < gradientArgs.size(); ++g)
    addInto(sums[g], pieces[g].data(), locals[gradientArgs[g]].view.dtype);
}

Status Server::apply(float scale) {
  for (size_t g = 0; g < gradientArgs.size(); ++g) {
    storeScaled(sums[g], scale, locals[gradientArgs[g]].view);
    std::fill(sums[g].begin(), sums[g].end(), 0.0f);
  }
  setStepCounters(program, version + 1, locals);
  std::vector<OwnedTensor> results;
  if (Status status = executor.run(locals, results); !status.ok())
    return status;
  for (int i = 0; i < program.results_size(); ++i)
    if (program.results(i).has_updates_argument())
      locals[program.results(i).updates_argument()] = std::move(results[i]);
  ++version;
  if (options.checkpointEvery > 0 && version % options.checkpointEvery == 0)
    return checkpoint();
  return Status::success();
}

Status Server::completeRound() {
  if (consistency.mode != plan::SYNC || pending.empty())
    return Status::success();
  for (const auto &[worker, info] : live)
    if (!hasPushed(worker))
      return Status::success();
  // The step's gradient is the sum of every worker's; a round that lost
  // workers stands for them with the mean of the rest.
  float scale = static_cast<float>(workers) / pending.size();
  // Summed in the workers' order, whatever order they came in: a round
  // gives the same update every time.
  std::sort(pending.begin(), pending.end(),
            [](const PendingPush &a, const PendingPush &b) {
              return a.worker < b.worker;
            });
  for (const PendingPush &push : pending) {
    addPieces(push.pieces.data());
    int64_t stale = version - push.version;
    ++staleness[stale];
    char line[160];
    std::snprintf(line, sizeof line, "push %lld %lld %lld %lld %.9g",
                  static_cast<long long>(push.worker),
                  static_cast<long long>(push.step),
                  static_cast<long long>(version),
                  static_cast<long long>(stale), push.loss);
    log(line);
  }
  pending.clear();
  return apply(scale);
}

void Server::drop(int64_t worker, const std::string &why) {
  if (!live.erase(worker))
    return;
  log("drop " + std::to_string(worker));
  if (why != "done")
    std::fprintf(stderr, "tessera-run: server %lld: dropped worker %lld (%s)\n",
                 static_cast<long long>(index), static_cast<long long>(worker),
                 why.c_str());
}

void Server::dropGoneWorkers() {
  std::string host = getHostName();
  auto now = std::chrono::steady_clock::now();
  for (auto &[worker, info] : std::map<int64_t, Worker>(live)) {
    // Known by its pid file until it says hello.
    if (info.pid == 0)
      info.pid = live[worker].pid =
          std::atoll(readText(getWorkerPidFile(options.dir, worker)).c_str());
    bool gone = info.host == host && ::kill(info.pid, 0) != 0 && errno == ESRCH;
    if (gone && !info.goneSince)
      live[worker].goneSince = now;
    if (gone && now - info.goneSince.value_or(now) > std::chrono::seconds(1))
      drop(worker, "its process " + std::to_string(info.pid) + " is gone");
    else if (std::chrono::duration<double>(now - info.lastSeen).count() >
             options.timeout)
      drop(worker, "silent for " + std::to_string(options.timeout) + " s");
  }
}

Status Server::handle(std::vector<zmq::message_t> &parts) {
  if (parts.size() < 2 || parts[1].size() != sizeof(Header))
    return Status::success(); // not a Tessera worker's message
  Header header = readFrame<Header>(parts[1]);
  int64_t worker = header.worker;
  std::string route(static_cast<const char *>(parts[0].data()),
                    parts[0].size());
  if (header.type == MessageType::Bye) {
    drop(worker, "done");
    return completeRound();
  }
  // Any other message says the worker is alive (again, after a drop for
  // silence, or to a server restarted since its last).
  Worker &info = live[worker];
  info.pid = header.pid;
  info.host = header.host;
  info.lastSeen = std::chrono::steady_clock::now();
  switch (header.type) {
  case MessageType::Hello: {
    // A worker new to this server starts at the slowest live worker's
    // step (so that it holds no one back), or in sync at the rounds done;
    // one it knows resumes after its last push.
    if (!clocks.count(worker)) {
      int64_t others = -1;
      for (const auto &[other, unused] : live)
        if (other != worker && clocks.count(other))
          others = others < 0 ? clocks[other] : std::min(others, clocks[other]);
      clocks[worker] = consistency.mode == plan::SYNC
                           ? (others < 0 ? 0 : version)
                           : std::max<int64_t>(others, 0);
    }
    log("hello " + std::to_string(worker) + " " +
        std::to_string(clocks[worker]));
    Header reply = makeHeader(MessageType::Welcome, index);
    reply.step = clocks[worker];
    reply.version = version;
    socket->send(makeFrame(route.data(), route.size()),
                 zmq::send_flags::sndmore);
    socket->send(makeFrame(&reply, sizeof reply), zmq::send_flags::none);
    return Status::success();
  }
  case MessageType::Pull:
    clocks.emplace(worker, header.step);
    heldPulls.emplace_back(worker, route);
    return Status::success();
  case MessageType::Push: {
    clocks[worker] = std::max(clocks[worker], header.step);
    if (consistency.mode == plan::SYNC) {
      // A push sent again (to a server restarted since) counts once.
      if (hasPushed(worker))
        return Status::success();
      if (Status status = checkPush(parts, header); !status.ok())
        return status;
      pending.push_back({worker,
                         header.step,
                         header.version,
                         header.loss,
                         {std::make_move_iterator(parts.begin() + 2),
                          std::make_move_iterator(parts.end())}});
      return completeRound();
    }
    if (Status status = checkPush(parts, header); !status.ok())
      return status;
    addPieces(parts.data() + 2);
    int64_t stale = version - header.version;
    ++staleness[stale];
    char line[160];
    std::snprintf(line, sizeof line, "push %lld %lld %lld %lld %.9g",
                  static_cast<long long>(worker),
                  static_cast<long long>(header.step),
                  static_cast<long long>(version),
                  static_cast<long long>(stale), header.loss);
    log(line);
    // A worker's gradient is its part of a step's: alone, it stands for
    // the step as its batch gives it.
    return apply(static_cast<float>(workers));
  }
  default:
    return Status::success();
  }
}

Status Server::checkpoint() {
  std::vector<OwnedTensor> saved;
  OwnedTensor state(DType::I64, {1 + 2 * static_cast<int64_t>(clocks.size())});
  state.view.as<int64_t>()[0] = version;
  int64_t at = 1;
  for (const auto &[worker, clock] : clocks) {
    state.view.as<int64_t>()[at++] = worker;
    state.view.as<int64_t>()[at++] = clock;
  }
  saved.push_back(std::move(state));
  for (int i = 0; i < program.arguments_size(); ++i)
    if (program.arguments(i).role() == plan::PARAM ||
        program.arguments(i).role() == plan::OPTIMIZER_STATE)
      saved.push_back(locals[i]);
  std::string path = getServerFile(options.dir, index, ".ckpt");
  if (Status status = writeTensors(path + ".tmp", saved); !status.ok())
    return status;
  std::error_code error;
  fs::rename(path + ".tmp", path, error);
  if (error)
    return dataError("cannot write the checkpoint '" + path +
                     "': " + error.message());
  log("checkpoint " + std::to_string(version));
  return Status::success();
}

Status Server::restore() {
  std::string path = getServerFile(options.dir, index, ".ckpt");
  // Dead before its first checkpoint: it starts again from the start.
  if (!fs::exists(path)) {
    std::fprintf(stderr,
                 "tessera-run: server %lld restarted from the start (it died "
                 "before its first checkpoint)\n",
                 static_cast<long long>(index));
    return Status::success();
  }
  Expected<std::vector<OwnedTensor>> read = readTensors(path);
  if (!read.ok())
    return read.getStatus().withPrefix("server " + std::to_string(index) +
                                       " restarts from its checkpoint: ");
  std::vector<OwnedTensor> saved = read.take();
  size_t at = 1;
  for (int i = 0; i < program.arguments_size(); ++i) {
    plan::ArgumentRole role = program.arguments(i).role();
    if (role != plan::PARAM && role != plan::OPTIMIZER_STATE)
      continue;
    if (at >= saved.size() || saved[at].view.shape != locals[i].view.shape ||
        saved[at].view.dtype != locals[i].view.dtype)
      return dataError("'" + path + "' is not a checkpoint of this server");
    locals[i] = std::move(saved[at++]);
  }
  const Tensor &state = saved[0].view;
  version = state.as<int64_t>()[0];
  for (int64_t i = 1; i + 1 < state.getNumElements(); i += 2)
    clocks[state.as<int64_t>()[i]] = state.as<int64_t>()[i + 1];
  std::fprintf(stderr,
               "tessera-run: server %lld restarted from its checkpoint at "
               "update %lld\n",
               static_cast<long long>(index), static_cast<long long>(version));
  return Status::success();
}

Status Server::finish() {
  std::vector<OwnedTensor> params;
  for (int i : paramArgs)
    params.push_back(locals[i]);
  if (Status status =
          writeTensors(getServerFile(options.dir, index, ".final"), params);
      !status.ok())
    return status;
  std::string histogram;
  int64_t updates = 0;
  for (const auto &[stale, count] : staleness) {
    histogram += " " + std::to_string(stale) + ":" + std::to_string(count);
    updates += count;
  }
  std::printf("server %lld: %lld updates, %lld pushes by staleness "
              "(steps:pushes)%s\n",
              static_cast<long long>(index), static_cast<long long>(version),
              static_cast<long long>(updates), histogram.c_str());
  std::fflush(stdout);
  return Status::success();
}

Status Server::run() {
  if (Status status = setUp(); !status.ok())
    return status;
  std::string stopFile = options.dir + "/stop";
  while (true) {
    zmq::pollitem_t item{static_cast<void *>(*socket), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    while (true) {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(*socket, std::back_inserter(parts),
                               zmq::recv_flags::dontwait))
        break;
      if (Status status = handle(parts); !status.ok())
        return status;
    }
    size_t before = live.size();
    dropGoneWorkers();
    if (live.size() != before)
      if (Status status = completeRound(); !status.ok())
        return status;
    grantPulls();
    // Done once the job says no more of its workers come and every worker
    // that came has left.
    if (live.empty() && fs::exists(stopFile))
      return finish();
  }
}

//===----------------------------------------------------------------------===//
// The worker
//===----------------------------------------------------------------------===//

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
  /// after sending), sending again after the server restarts.
  Status request(int64_t server, std::vector<zmq::message_t> &&parts,
                 std::vector<zmq::message_t> *reply);

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

Status WorkerProcess::connect(int64_t server) {
  std::string path = getServerFile(options.dir, server, ".addr");
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(options.timeout);
  std::string address;
  while ((address = readText(path)).empty()) {
    if (std::chrono::steady_clock::now() > deadline)
      return timeoutError("server " + std::to_string(server) +
                          " wrote no address into '" + path + "' within " +
                          std::to_string(options.timeout) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  address.erase(address.find_last_not_of("\n") + 1);
  auto socket =
      std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
  // The last push and the goodbye go out before the worker exits, unless
  // the server is gone for the whole timeout.
  socket->set(zmq::sockopt::linger,
              static_cast<int>(std::min(options.timeout, 60.0) * 1000));
  try {
    socket->connect(address);
  } catch (const zmq::error_t &error) {
    return communicationError("cannot connect to server " +
                              std::to_string(server) + " at '" + address +
                              "' (from '" + path + "'): " + error.what());
  }
  // What was queued for a server that is gone goes with it.
  if (sockets[server])
    sockets[server]->set(zmq::sockopt::linger, 0);
  sockets[server] = std::move(socket);
  addresses[server] = address;
  return Status::success();
}

Status WorkerProcess::request(int64_t server,
                              std::vector<zmq::message_t> &&parts,
                              std::vector<zmq::message_t> *reply) {
  auto send = [&]() {
    for (size_t i = 0; i < parts.size(); ++i)
      sockets[server]->send(zmq::message_t(parts[i].data(), parts[i].size()),
                            i + 1 < parts.size() ? zmq::send_flags::sndmore
                                                 : zmq::send_flags::none);
  };
  send();
  if (!reply)
    return Status::success();
  auto start = std::chrono::steady_clock::now();
  std::string path = getServerFile(options.dir, server, ".addr");
  while (true) {
    zmq::pollitem_t item{static_cast<void *>(*sockets[server]), 0, ZMQ_POLLIN,
                         0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    reply->clear();
    if (zmq::recv_multipart(*sockets[server], std::back_inserter(*reply),
                            zmq::recv_flags::dontwait))
      return Status::success();
    // A server restarted from its checkpoint has a new address: ask it.
    std::string address = readText(path);
    address.erase(address.find_last_not_of("\n") + 1);
    if (!address.empty() && address != addresses[server]) {
      if (Status status = connect(server); !status.ok())
        return status;
      send();
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    // The servers stop once the job's workers are done and no other is
    // known to them: a worker that joins after asks in vain.
    if (options.join && waited > 2 && fs::exists(options.dir + "/stop"))
      return unavailable("the job in '" + options.dir +
                         "' ended before server " + std::to_string(server) +
                         " answered");
    if (waited > options.timeout)
      return timeoutError("server " + std::to_string(server) +
                          " did not answer within " +
                          std::to_string(options.timeout) + " s");
  }
}

Status WorkerProcess::setUp() {
  int64_t workers = mesh.getNumDevices();
  index = options.index;
  if (options.join) {
    // The first free index past the job's own workers.
    for (index = workers;; ++index) {
      int fd = ::open(getWorkerPidFile(options.dir, index).c_str(),
                      O_CREAT | O_EXCL | O_WRONLY, 0644);
      if (fd >= 0) {
        std::string pid = std::to_string(getpid()) + "\n";
        (void)!::write(fd, pid.data(), pid.size());
        ::close(fd);
        break;
      }
      if (errno != EEXIST)
        return dataError("cannot join the job in '" + options.dir +
                         "': " + std::strerror(errno));
    }
  } else if (Status status =
                 writeTextAtomically(getWorkerPidFile(options.dir, index),
                                     std::to_string(getpid()) + "\n");
             !status.ok()) {
    return status;
  }
  // A worker past the plan's reads the batch of the one it shares a place
  // with.
  dataRank = index % workers;
  locals = makeLocalInputs(program, mesh, dataRank, options.seed);
  for (int i = 0; i < program.arguments_size(); ++i)
    if (program.arguments(i).role() == plan::PARAM)
      paramOf[program.arguments(i).name()] = i;
  for (int i = 0; i < program.results_size(); ++i)
    if (!program.results(i).grad_of().empty())
      gradientOf[program.results(i).grad_of()] = i;
  int64_t count = serverMesh.getNumDevices();
  sockets.resize(count);
  addresses.resize(count);
  for (int64_t server = 0; server < count; ++server)
    if (Status status = connect(server); !status.ok())
      return status;
  return Status::success();
}

Status WorkerProcess::train() {
  if (Status status = setUp(); !status.ok())
    return status;
  std::unique_ptr<Communicator> communicator =
      createLocalCommunicator(dataRank);
  std::unique_ptr<Device> device = createCpuDevice();
  Executor executor(program, mesh, *communicator, device.get());
  std::unique_ptr<DataFeed> feed;
  if (!options.data.empty()) {
    // A worker past the plan's reads its place's pieces in an order of its
    // own.
    Expected<std::unique_ptr<DataFeed>> created =
        DataFeed::create(options.data, plan, program, mesh, dataRank,
                         options.seed + index / mesh.getNumDevices());
    if (!created.ok())
      return created.getStatus();
    feed = created.take();
  }
  int64_t count = serverMesh.getNumDevices();
  auto message = [&](MessageType type) {
    std::vector<zmq::message_t> parts;
    Header header = makeHeader(type, index);
    parts.push_back(makeFrame(&header, sizeof header));
    return parts;
  };
  // Where to start: after the steps server 0 has of this worker.
  int64_t done = 0;
  for (int64_t server = 0; server < count; ++server) {
    std::vector<zmq::message_t> reply;
    if (Status status = request(server, message(MessageType::Hello), &reply);
        !status.ok())
      return status;
    if (server == 0 && !reply.empty())
      done = readFrame<Header>(reply.front()).step;
  }
  auto straggler = options.stragglers.find(index);
  std::vector<int64_t> versions(count, 0);
  std::vector<OwnedTensor> results;
  for (int64_t step = done + 1; step <= options.steps; ++step) {
    setStepCounters(program, step, locals);
    if (feed) {
      feed->prefetch(step);
      if (Status status = feed->fill(step, locals); !status.ok())
        return status.withPrefix("step " + std::to_string(step) + ": ");
    }
    // Pull every server's pieces of the parameters.
    for (int64_t server = 0; server < count; ++server) {
      std::vector<zmq::message_t> pull = message(MessageType::Pull);
      Header header = readFrame<Header>(pull.front());
      header.step = step - 1;
      pull.front() = makeFrame(&header, sizeof header);
      std::vector<zmq::message_t> reply;
      if (Status status = request(server, std::move(pull), &reply);
          !status.ok())
        return status;
      versions[server] = readFrame<Header>(reply.front()).version;
      size_t frame = 1;
      for (const plan::Argument &argument : update.arguments()) {
        if (argument.role() != plan::PARAM)
          continue;
        const plan::Buffer &buffer = update.buffers(argument.buffer());
        Tensor piece{getDType(buffer.dtype()),
                     {buffer.shape().begin(), buffer.shape().end()},
                     nullptr};
        if (frame >= reply.size() || reply[frame].size() != piece.getBytes())
          return communicationError("server " + std::to_string(server) +
                                    " sent no piece of '" + argument.name() +
                                    "' of its plan");
        piece.data = reply[frame++].data();
        placeLocalPiece(piece, locals[paramOf.at(argument.name())].view,
                        getLayout(argument), serverMesh, server);
      }
    }
    if (Status status = executor.run(locals, results); !status.ok())
      return status.withPrefix("step " + std::to_string(step) + ": ");
    if (straggler != options.stragglers.end())
      std::this_thread::sleep_for(std::chrono::milliseconds(straggler->second));
    double loss = 0;
    for (int i = 0; i < program.results_size(); ++i)
      if (program.results(i).grad_of().empty() &&
          results[i].view.getNumElements() == 1) {
        loss = getScalar(results[i].view);
        break;
      }
    // Push every server its pieces of the gradients.
    for (int64_t server = 0; server < count; ++server) {
      std::vector<zmq::message_t> push = message(MessageType::Push);
      Header header = readFrame<Header>(push.front());
      header.step = step;
      header.version = versions[server];
      header.loss = loss;
      push.front() = makeFrame(&header, sizeof header);
      for (const plan::Argument &argument : update.arguments()) {
        if (argument.role() != plan::GRADIENT)
          continue;
        OwnedTensor piece =
            takeLocalPiece(results[gradientOf.at(argument.name())].view,
                           getLayout(argument), serverMesh, server);
        push.push_back(makeFrame(piece.view.data, piece.view.getBytes()));
      }
      if (Status status = request(server, std::move(push), nullptr);
          !status.ok())
        return status;
    }
  }
  for (int64_t server = 0; server < count; ++server)
    if (Status status = request(server, message(MessageType::Bye), nullptr);
        !status.ok())
      return status;
  return Status::success();
}

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

class Job {
public:
  Job(const plan::Plan &plan, const ServerJobOptions &options)
      : plan(plan), options(options), workers(getMesh(plan).getNumDevices()),
        servers(getMesh(plan.parameter_server().servers()).getNumDevices()) {}

  int run();

private:
  Expected<pid_t> spawn(const std::string &role, int64_t index, bool restore);
  void stopAll();
  Status writeLosses() const;
  Status writeWeights() const;

  const plan::Plan &plan;
  ServerJobOptions options;
  int64_t workers, servers;
  std::map<pid_t, std::pair<std::string, int64_t>> children;
};

Expected<pid_t> Job::spawn(const std::string &role, int64_t index,
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

void Job::stopAll() {
  for (const auto &[pid, child] : children)
    ::kill(pid, SIGKILL);
  for (const auto &[pid, child] : children)
    ::waitpid(pid, nullptr, 0);
  children.clear();
}

Status Job::writeLosses() const {
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

Status Job::writeWeights() const {
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

int Job::run() {
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
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0)
      break;
    auto child = children.find(pid);
    if (child == children.end())
      continue;
    auto [role, index] = child->second;
    children.erase(child);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::string how =
        WIFSIGNALED(status)
            ? "was killed by signal " + std::to_string(WTERMSIG(status))
            : "exited with " + std::to_string(WEXITSTATUS(status));
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
          !writeTextAtomically(options.dir + "/stop", "").ok())
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

} // namespace

int tessera::runtime::runParameterServerJob(const plan::Plan &plan,
                                            const ServerJobOptions &options) {
  if (options.role.empty() && !options.join)
    return Job(plan, options).run();
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
