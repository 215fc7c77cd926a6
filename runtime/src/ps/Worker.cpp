//===- Worker.cpp - A parameter-server worker -------------------------------===//
//
// A worker pulls, trains its batch and pushes, step by step, and finds a
// restarted server again by its address file.
//
//===----------------------------------------------------------------------===//

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

namespace fs = std::filesystem;

namespace tessera::runtime::ps {

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

bool WorkerProcess::receiveReply(
    int64_t server, std::vector<zmq::message_t> &reply,
    std::chrono::steady_clock::time_point &heard) {
  while (true) {
    reply.clear();
    if (!zmq::recv_multipart(*sockets[server], std::back_inserter(reply),
                             zmq::recv_flags::dontwait))
      return false;
    heard = std::chrono::steady_clock::now();
    if (reply.empty() ||
        readFrame<Header>(reply.front()).type != MessageType::Heartbeat)
      return true;
  }
}

void WorkerProcess::sendHeartbeats() {
  Header header = makeHeader(MessageType::Heartbeat, index);
  for (std::unique_ptr<zmq::socket_t> &socket : sockets)
    if (socket)
      (void)socket->send(makeFrame(&header, sizeof header),
                         zmq::send_flags::dontwait);
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
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now(), heard = start, beaten = start;
  // Heartbeats each quarter of the timeout, so that a server hears from a
  // waiting worker three times before it would drop it as silent.
  std::chrono::duration<double> beatEvery(options.timeout / 4);
  auto pollEvery = std::chrono::milliseconds(std::clamp<int64_t>(
      static_cast<int64_t>(options.timeout / 4 * 1000), 1, 100));
  std::string path = getServerFile(options.dir, server, ".addr");
  while (true) {
    zmq::pollitem_t item{static_cast<void *>(*sockets[server]), 0, ZMQ_POLLIN,
                         0};
    zmq::poll(&item, 1, pollEvery);
    if (receiveReply(server, *reply, heard))
      return Status::success();
    if (Clock::now() - beaten >= beatEvery) {
      sendHeartbeats();
      beaten = Clock::now();
    }
    // A server restarted from its checkpoint has a new address: ask it.
    std::string address = readText(path);
    address.erase(address.find_last_not_of("\n") + 1);
    if (!address.empty() && address != addresses[server]) {
      if (Status status = connect(server); !status.ok())
        return status;
      send();
      heard = Clock::now();
    }
    double waited =
        std::chrono::duration<double>(Clock::now() - start).count();
    // The servers stop once the job's workers are done and no other is
    // known to them: a worker that joins after asks in vain.
    if (options.join && waited > 2 && fs::exists(options.dir + "/stop"))
      return unavailable("the job in '" + options.dir +
                         "' ended before server " + std::to_string(server) +
                         " answered");
    // A server may hold a pull for as long as a round takes; only a silent
    // one (stopped, hung or unreachable) is given up on.
    double silent =
        std::chrono::duration<double>(Clock::now() - heard).count();
    if (silent > 2 * options.timeout)
      return timeoutError("server " + std::to_string(server) +
                          " sent nothing, not even a heartbeat, for " +
                          std::to_string(2 * options.timeout) +
                          " s (twice --ps-timeout): it is stopped, hung or "
                          "unreachable");
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
  } else if (Status status = writeFileAtomically(
                 getWorkerPidFile(options.dir, index),
                 {std::to_string(getpid()) + "\n"});
             !status.ok()) {
    return status;
  }
  // A worker past the plan's reads the batch of the one it shares a place
  // with.
  dataRank = index % workers;
  Expected<std::vector<OwnedTensor>> made =
      makeLocalInputs(program, mesh, dataRank, options.seed);
  if (!made.ok())
    return made.getStatus();
  locals = made.take();
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

} // namespace tessera::runtime::ps
