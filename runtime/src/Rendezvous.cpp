//===- Rendezvous.cpp - Ranks that find each other over TCP ---------------===//
//
// A star around rank 0 over blocking TCP sockets, each read and write
// polled against the call's deadline. A connection opens with a handshake
// (magic, rank, world size) that rank 0 answers with a status once every
// rank has come; a message is its length (8 bytes) and its bytes.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace tessera::runtime;

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x56525354; // "TSRV"
/// The largest message a rank relays: far above any the runtime sends.
constexpr uint64_t kMaxMessageBytes = uint64_t(1) << 30;

struct Handshake {
  uint32_t magic;
  int32_t rank, size;
};

int getMillisecondsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

/// Waits until `fd` is ready for `events` or the deadline passes.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd entry{fd, events, 0};
    int ready = ::poll(&entry, 1, getMillisecondsLeft(deadline));
    if (ready > 0)
      return true;
    if (ready == 0 || errno != EINTR)
      return false;
  }
}

std::string describe(int rank) { return "rank " + std::to_string(rank); }

Status timedOut(const std::string &what) {
  return timeoutError(what + ": not done within the timeout (--comm-timeout)");
}

Status sendAll(int fd, const void *data, size_t bytes,
               Clock::time_point deadline, const std::string &peer) {
  const char *at = static_cast<const char *>(data);
  while (bytes > 0) {
    if (!waitFor(fd, POLLOUT, deadline))
      return timedOut("sending to " + peer + " in the rendezvous");
    ssize_t sent = ::send(fd, at, bytes, MSG_NOSIGNAL);
    if (sent < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (sent <= 0)
      return communicationError(
          peer + " left the rendezvous: " + std::strerror(errno));
    at += sent;
    bytes -= static_cast<size_t>(sent);
  }
  return Status::success();
}

Status receiveAll(int fd, void *data, size_t bytes, Clock::time_point deadline,
                  const std::string &peer) {
  char *at = static_cast<char *>(data);
  while (bytes > 0) {
    if (!waitFor(fd, POLLIN, deadline))
      return timedOut("waiting for " + peer + " in the rendezvous");
    ssize_t got = ::recv(fd, at, bytes, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got == 0)
      return communicationError(peer +
                                " left the rendezvous (its connection closed)");
    if (got < 0)
      return communicationError(
          peer + " left the rendezvous: " + std::strerror(errno));
    at += got;
    bytes -= static_cast<size_t>(got);
  }
  return Status::success();
}

Status sendMessage(int fd, const std::vector<uint8_t> &message,
                   Clock::time_point deadline, const std::string &peer) {
  uint64_t length = message.size();
  if (Status status = sendAll(fd, &length, sizeof(length), deadline, peer);
      !status.ok())
    return status;
  return sendAll(fd, message.data(), message.size(), deadline, peer);
}

Status receiveMessage(int fd, std::vector<uint8_t> &message,
                      Clock::time_point deadline, const std::string &peer) {
  uint64_t length = 0;
  if (Status status = receiveAll(fd, &length, sizeof(length), deadline, peer);
      !status.ok())
    return status;
  if (length > kMaxMessageBytes)
    return communicationError(peer + " sent a message of " +
                              std::to_string(length) +
                              " bytes in the rendezvous, more than any it "
                              "sends: is something else at the port?");
  message.resize(length);
  return receiveAll(fd, message.data(), length, deadline, peer);
}

/// The addresses of host:port (host empty: every interface, to listen on).
Expected<addrinfo *> resolve(const std::string &host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
  addrinfo *list = nullptr;
  int error = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                            std::to_string(port).c_str(), &hints, &list);
  if (error != 0)
    return invalidArgument("the rendezvous address '" + host + ":" +
                           std::to_string(port) +
                           "' does not resolve: " + ::gai_strerror(error));
  return list;
}

void setNoDelay(int fd) {
  int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

/// A socket connected to one of `list`'s addresses, or -1.
int tryConnect(addrinfo *list, Clock::time_point deadline) {
  for (addrinfo *address = list; address; address = address->ai_next) {
    int fd = ::socket(address->ai_family, address->ai_socktype,
                      address->ai_protocol);
    if (fd < 0)
      continue;
    // Nonblocking, so that an unreachable host costs a poll, not the
    // kernel's minutes.
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int result = ::connect(fd, address->ai_addr, address->ai_addrlen);
    if (result != 0 && errno == EINPROGRESS &&
        waitFor(fd, POLLOUT,
                std::min(deadline, Clock::now() + std::chrono::seconds(1)))) {
      int error = 0;
      socklen_t length = sizeof(error);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      result = error == 0 ? 0 : -1;
    }
    if (result == 0) {
      ::fcntl(fd, F_SETFL, flags);
      setNoDelay(fd);
      return fd;
    }
    ::close(fd);
  }
  return -1;
}

/// The integer in variable `name`, or none where unset; fails where it is
/// not an integer in [least, most].
Expected<std::optional<long>> readInteger(const char *name, long least,
                                          long most) {
  const char *text = std::getenv(name);
  if (!text)
    return std::optional<long>();
  char *end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno != 0 || value < least ||
      value > most)
    return invalidArgument(std::string(name) + "='" + text +
                           "' is not an integer from " + std::to_string(least) +
                           " to " + std::to_string(most));
  return std::optional<long>(value);
}

} // namespace

Expected<TorchrunEnvironment> tessera::runtime::getTorchrunEnvironment() {
  TorchrunEnvironment environment;
  Expected<std::optional<long>> size = readInteger("WORLD_SIZE", 1, 1 << 20);
  if (!size.ok())
    return size.getStatus();
  if (!*size || **size == 1)
    return environment;
  environment.size = static_cast<int>(**size);
  const char *missing = nullptr;
  for (const char *name : {"RANK", "MASTER_ADDR", "MASTER_PORT"})
    if (!std::getenv(name) && !missing)
      missing = name;
  if (missing)
    return invalidArgument(
        std::string("WORLD_SIZE=") + std::to_string(environment.size) +
        " says a torchrun-style launcher started this process, but " + missing +
        " is not set (each rank needs RANK, WORLD_SIZE, MASTER_ADDR and "
        "MASTER_PORT)");
  Expected<std::optional<long>> rank =
      readInteger("RANK", 0, environment.size - 1);
  Expected<std::optional<long>> port = readInteger("MASTER_PORT", 1, 65535);
  Expected<std::optional<long>> localRank =
      readInteger("LOCAL_RANK", 0, environment.size - 1);
  Expected<std::optional<long>> localSize =
      readInteger("LOCAL_WORLD_SIZE", 1, environment.size);
  for (const auto *read : {&rank, &port, &localRank, &localSize})
    if (!read->ok())
      return read->getStatus();
  environment.rank = static_cast<int>(**rank);
  environment.port = static_cast<int>(**port);
  environment.localRank = static_cast<int>(localRank->value_or(**rank));
  environment.localSize = static_cast<int>(localSize->value_or(**size));
  environment.host = std::getenv("MASTER_ADDR");
  return environment;
}

Expected<std::unique_ptr<Rendezvous>>
Rendezvous::connect(const std::string &host, int port, int rank, int size,
                    double timeoutSeconds) {
  std::unique_ptr<Rendezvous> rendezvous(
      new Rendezvous(rank, size, timeoutSeconds));
  if (size <= 1)
    return rendezvous;
  Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  std::string address = host + ":" + std::to_string(port);

  if (rank != 0) {
    Expected<addrinfo *> list = resolve(host, port);
    if (!list.ok())
      return list.getStatus();
    int fd = -1;
    while ((fd = tryConnect(*list, deadline)) < 0 &&
           getMillisecondsLeft(deadline) > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::freeaddrinfo(*list);
    if (fd < 0)
      return timeoutError(
          "no rendezvous with rank 0 at " + address + " within " +
          std::to_string(static_cast<int64_t>(timeoutSeconds)) +
          " s (--comm-timeout): is rank 0 running, and are MASTER_ADDR and "
          "MASTER_PORT the same on every rank?");
    rendezvous->sockets = {fd};
    Handshake hello{kMagic, rank, size};
    uint32_t answer = 1;
    Status status = sendAll(fd, &hello, sizeof(hello), deadline, "rank 0");
    // Rank 0 answers once every rank came, or at its own deadline, which
    // may be a little after this rank's.
    if (status.ok())
      status = receiveAll(fd, &answer, sizeof(answer),
                          deadline + std::chrono::seconds(5), "rank 0");
    if (!status.ok())
      return status;
    if (answer != 0)
      return communicationError("the rendezvous at " + address +
                                " failed at rank 0 (see its error)");
    return rendezvous;
  }

  // Rank 0 listens on every interface of the address's family.
  Expected<addrinfo *> list = resolve("", port);
  if (!list.ok())
    return list.getStatus();
  int listener = -1;
  std::string why = "no address to listen on";
  for (addrinfo *at = *list; at && listener < 0; at = at->ai_next) {
    int fd = ::socket(at->ai_family, at->ai_socktype, at->ai_protocol);
    if (fd < 0)
      continue;
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::bind(fd, at->ai_addr, at->ai_addrlen) == 0 &&
        ::listen(fd, size) == 0) {
      listener = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(*list);
  if (listener < 0)
    return communicationError(
        "rank 0 cannot listen at port " + std::to_string(port) +
        " for the rendezvous: " + why +
        " (does another job use it? choose another MASTER_PORT)");
  rendezvous->sockets.assign(size, -1);
  Status status = Status::success();
  for (int joined = 1; joined < size && status.ok();) {
    if (!waitFor(listener, POLLIN, deadline)) {
      std::string missing;
      for (int other = 1; other < size; ++other)
        if (rendezvous->sockets[other] < 0)
          missing += (missing.empty() ? "" : ", ") + std::to_string(other);
      status = timeoutError(
          std::to_string(joined) + " of " + std::to_string(size) +
          " ranks came to the rendezvous at port " + std::to_string(port) +
          " within " + std::to_string(static_cast<int64_t>(timeoutSeconds)) +
          " s (--comm-timeout); missing: rank" +
          (size - joined > 1 ? "s " : " ") + missing);
      break;
    }
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0)
      continue;
    setNoDelay(fd);
    Handshake hello{};
    if (!receiveAll(fd, &hello, sizeof(hello), deadline, "a new rank").ok() ||
        hello.magic != kMagic) {
      // Not a rank of this job (a port scanner, another protocol): ignored.
      ::close(fd);
      continue;
    }
    if (hello.size != size || hello.rank <= 0 || hello.rank >= size ||
        rendezvous->sockets[hello.rank] >= 0) {
      status = invalidArgument(
          "rank " + std::to_string(hello.rank) +
          " came to the rendezvous as one of " + std::to_string(hello.size) +
          " ranks, expected a rank from 1 to " + std::to_string(size - 1) +
          " not yet there, of " + std::to_string(size) +
          ": do all ranks have the same WORLD_SIZE and distinct RANKs?");
      uint32_t refused = 1;
      // Best effort: the refused rank is told to look at rank 0's error.
      (void)sendAll(fd, &refused, sizeof(refused), deadline,
                    describe(hello.rank));
      ::close(fd);
      break;
    }
    rendezvous->sockets[hello.rank] = fd;
    ++joined;
  }
  ::close(listener);
  uint32_t answer = status.ok() ? 0 : 1;
  for (int other = 1; other < size; ++other)
    if (int fd = rendezvous->sockets[other]; fd >= 0)
      if (Status sent =
              sendAll(fd, &answer, sizeof(answer), deadline, describe(other));
          !sent.ok() && status.ok())
        status = sent;
  if (!status.ok())
    return status;
  return rendezvous;
}

Rendezvous::~Rendezvous() {
  for (int fd : sockets)
    if (fd >= 0)
      ::close(fd);
}

Status Rendezvous::allGather(const std::vector<uint8_t> &mine,
                             std::vector<std::vector<uint8_t>> &all) {
  all.assign(size, {});
  all[rank] = mine;
  if (size == 1)
    return Status::success();
  Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  if (rank != 0) {
    if (Status status = sendMessage(sockets[0], mine, deadline, "rank 0");
        !status.ok())
      return status;
    for (std::vector<uint8_t> &each : all)
      if (Status status = receiveMessage(sockets[0], each, deadline, "rank 0");
          !status.ok())
        return status;
    return Status::success();
  }
  for (int other = 1; other < size; ++other)
    if (Status status = receiveMessage(sockets[other], all[other], deadline,
                                       describe(other));
        !status.ok())
      return status;
  for (int other = 1; other < size; ++other)
    for (const std::vector<uint8_t> &each : all)
      if (Status status =
              sendMessage(sockets[other], each, deadline, describe(other));
          !status.ok())
        return status;
  return Status::success();
}

Status Rendezvous::allReduceMin(int value, int &least) {
  std::vector<uint8_t> mine(sizeof(value));
  std::memcpy(mine.data(), &value, sizeof(value));
  std::vector<std::vector<uint8_t>> all;
  if (Status status = allGather(mine, all); !status.ok())
    return status;
  least = value;
  for (const std::vector<uint8_t> &each : all) {
    if (each.size() != sizeof(int))
      return communicationError("a rank sent a malformed value in the "
                                "rendezvous");
    int other;
    std::memcpy(&other, each.data(), sizeof(other));
    least = std::min(least, other);
  }
  return Status::success();
}
