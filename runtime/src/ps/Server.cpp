//===- Server.cpp - A parameter server
//--------------------------------------===//
//
// A server of the job: its piece of every parameter and of its optimizer
// state, the workers' messages, the updates its consistency's rule
// (UpdateRule.h) makes of their pushes, its log and its checkpoints.
//
//===----------------------------------------------------------------------===//

#include "Server.h"

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

namespace fs = std::filesystem;

namespace tessera::runtime::ps {

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
    Expected<OwnedTensor> global =
        argument.role() == plan::PARAM && param != params.end()
            ? makeGlobalInput(param->second.first, options.seed,
                              param->second.second)
            : makeGlobalInput(argument, options.seed, i);
    if (!global.ok())
      return global.getStatus();
    locals.push_back(
        takeLocalPiece(global->view, getLayout(argument), mesh, index));
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
    rule.getClocks().emplace(worker, 0);
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
  std::string line = endpoint + "\n";
  return writeFileAtomically(getServerFile(options.dir, index, ".addr"),
                             {line});
}

void Server::log(const std::string &line) {
  char time[32];
  std::snprintf(time, sizeof time, " %.6f", getWallSeconds());
  logFile << line << time << "\n";
  logFile.flush();
}

Consistency Server::getConsistency(const plan::Plan &plan,
                                   const ServerJobOptions &options) {
  if (options.consistency)
    return *options.consistency;
  return {plan.parameter_server().consistency(),
          plan.parameter_server().staleness()};
}

std::set<int64_t> Server::getLiveWorkers() const {
  std::set<int64_t> workers;
  for (const auto &entry : live)
    workers.insert(entry.first);
  return workers;
}

void Server::grantPulls() {
  for (auto it = heldPulls.begin(); it != heldPulls.end();) {
    int64_t worker = it->first;
    if (!live.count(worker)) {
      it = heldPulls.erase(it);
      continue;
    }
    std::set<int64_t> liveWorkers = getLiveWorkers();
    if (!rule.mayPull(worker, liveWorkers)) {
      ++it;
      continue;
    }
    log("pull " + std::to_string(worker) + " " +
        std::to_string(rule.getClock(worker)) + " " +
        std::to_string(rule.getSlowestClock(liveWorkers)) + " " +
        std::to_string(version));
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

void Server::logPush(const PushRecord &push, int64_t stale) {
  char line[160];
  std::snprintf(line, sizeof line, "push %lld %lld %lld %lld %.9g",
                static_cast<long long>(push.worker),
                static_cast<long long>(push.step),
                static_cast<long long>(version), static_cast<long long>(stale),
                push.loss);
  log(line);
}

Status Server::applyReadyUpdate() {
  std::optional<Update> update = rule.takeUpdate(getLiveWorkers());
  if (!update)
    return Status::success();
  for (const PushRecord &push : update->pushes) {
    addPieces(pushedPieces.at(push.worker).data());
    int64_t stale = version - push.version;
    ++staleness[stale];
    logPush(push, stale);
  }
  pushedPieces.clear();
  return apply(update->scale);
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

void Server::sendHeader(const std::string &route, const Header &header) {
  socket->send(makeFrame(route.data(), route.size()), zmq::send_flags::sndmore);
  socket->send(makeFrame(&header, sizeof header), zmq::send_flags::none);
}

void Server::answerHeartbeat(int64_t worker, const std::string &route) {
  // A heartbeat keeps a worker live but does not make one live: a worker
  // not yet welcomed, or dropped, counts again with its next pull or push
  // (a sync round would wait for a worker that only says it is there).
  if (auto known = live.find(worker); known != live.end())
    known->second.lastSeen = std::chrono::steady_clock::now();
  sendHeader(route, makeHeader(MessageType::Heartbeat, index));
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
    return applyReadyUpdate();
  }
  if (header.type == MessageType::Heartbeat) {
    answerHeartbeat(worker, route);
    return Status::success();
  }
  // Any other message says the worker is alive (again, after a drop for
  // silence, or to a server restarted since its last).
  Worker &info = live[worker];
  info.pid = header.pid;
  info.host = header.host;
  info.lastSeen = std::chrono::steady_clock::now();
  switch (header.type) {
  case MessageType::Hello: {
    int64_t clock = rule.welcome(worker, getLiveWorkers(), version);
    log("hello " + std::to_string(worker) + " " + std::to_string(clock));
    Header reply = makeHeader(MessageType::Welcome, index);
    reply.step = clock;
    reply.version = version;
    sendHeader(route, reply);
    return Status::success();
  }
  case MessageType::Pull:
    rule.notePull(worker, header.step);
    heldPulls.emplace_back(worker, route);
    return Status::success();
  case MessageType::Push: {
    rule.advanceClock(worker, header.step);
    if (rule.isRepeatedPush(worker))
      return Status::success();
    if (Status status = checkPush(parts, header); !status.ok())
      return status;
    rule.addPush({worker, header.step, header.version, header.loss});
    pushedPieces[worker] = {std::make_move_iterator(parts.begin() + 2),
                            std::make_move_iterator(parts.end())};
    return applyReadyUpdate();
  }
  default:
    return Status::success();
  }
}

Status Server::checkpoint() {
  std::vector<OwnedTensor> saved;
  const std::map<int64_t, int64_t> &clocks = rule.getClocks();
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
  if (Status status = writeFileAtomically(
          path,
          [&](const std::string &staging) {
            return writeTensors(staging, saved);
          },
          "the checkpoint");
      !status.ok())
    return status;
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
    rule.getClocks()[state.as<int64_t>()[i]] = state.as<int64_t>()[i + 1];
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
      if (Status status = applyReadyUpdate(); !status.ok())
        return status;
    grantPulls();
    // Done once the job says no more of its workers come and every worker
    // that came has left.
    if (live.empty() && fs::exists(stopFile))
      return finish();
  }
}

} // namespace tessera::runtime::ps
