//===- AtomicFile.cpp - Files written whole or not at all -----------------===//

#include "tessera/runtime/AtomicFile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace tessera::runtime;

/// "cannot write <what> '<path>': <the last error>".
static Status failure(const std::string &what, const std::string &path) {
  return dataError("cannot write " + (what.empty() ? "" : what + " ") + "'" +
                   path + "': " + std::strerror(errno));
}

bool tessera::runtime::writeAll(int descriptor, const void *data,
                                size_t bytes) {
  const char *next = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t written = ::write(descriptor, next, bytes);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return false;
    next += written;
    bytes -= written;
  }
  return true;
}

/// Flushes the file at `path` to disk.
static bool syncFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool synced = ::fsync(fd) == 0;
  return ::close(fd) == 0 && synced;
}

Status tessera::runtime::writeFileAtomically(
    const std::string &path,
    const std::function<Status(const std::string &staging)> &write,
    const std::string &what) {
  std::string staging = path + ".tmp";
  if (Status status = write(staging); !status.ok()) {
    std::remove(staging.c_str());
    return status;
  }
  if (!syncFile(staging) || std::rename(staging.c_str(), path.c_str()) != 0) {
    Status status = failure(what, path);
    std::remove(staging.c_str());
    return status;
  }
  return Status::success();
}

Status
tessera::runtime::writeFileAtomically(const std::string &path,
                                      const std::vector<std::string_view> &pieces,
                                      const std::string &what) {
  return writeFileAtomically(
      path,
      [&](const std::string &staging) {
        int fd = ::open(staging.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
          return failure(what, staging);
        bool ok = true;
        for (std::string_view piece : pieces)
          ok = ok && writeAll(fd, piece.data(), piece.size());
        if (!ok) {
          Status status = failure(what, staging);
          ::close(fd);
          return status;
        }
        if (::close(fd) != 0)
          return failure(what, staging);
        return Status::success();
      },
      what);
}
