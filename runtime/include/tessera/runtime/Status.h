//===- Status.h - The result of every fallible runtime call -----*- C++ -*-===//
//
// Every runtime call that can fail returns a Status (or an Expected<T> where
// it also yields a value), in the spirit of IREE's iree_status_t: both are
// [[nodiscard]], so a dropped error is a compiler warning rather than a silent
// success, as an empty std::string used to be.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_STATUS_H
#define TESSERA_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace tessera::runtime {

/// What kind of failure a status reports, so that a caller can react to a
/// class of errors (a tool exits with a different code on a timeout, say)
/// without matching message texts.
enum class StatusCode {
  Ok,
  /// The caller passed something unusable: wrong arity, shapes or dtypes.
  InvalidArgument,
  /// The plan is malformed, or asks for something this runtime lacks.
  InvalidPlan,
  /// A file or the data in it: cannot open, wrong magic, a label outside
  /// the vocabulary.
  DataError,
  /// A collective or a transfer failed.
  Communication,
  /// A wait ran past its timeout.
  Timeout,
  /// The device failed: out of memory, a CUDA or cuBLAS error.
  Device,
  /// The build or the machine lacks what was asked for (no CUDA backend,
  /// no such GPU).
  Unavailable,
};

/// The name of a code, e.g. "invalid plan".
const char *getStatusCodeName(StatusCode code);

/// Success, or a failure with a code and a lowercase message that names what
/// failed and why.
class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  Status(StatusCode code, std::string message)
      : code(code), text(std::move(message)) {
    assert(code != StatusCode::Ok && "a failure needs a code");
  }

  static Status success() { return Status(); }

  bool ok() const { return code == StatusCode::Ok; }
  StatusCode getCode() const { return code; }
  /// The message of a failure; empty on success.
  const std::string &message() const { return text; }

  /// The same failure with `prefix` in front of its message (an executor
  /// adds "instruction 3: "); success stays success.
  Status withPrefix(const std::string &prefix) const {
    if (ok())
      return *this;
    return Status(code, prefix + text);
  }

private:
  StatusCode code = StatusCode::Ok;
  std::string text;
};

/// A value, or the failure that prevented it. An Expected made from a
/// successful status is a programming error.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value(std::move(value)) {}
  Expected(Status status) : status(std::move(status)) {
    assert(!this->status.ok() && "an Expected without a value needs an error");
  }

  bool ok() const { return value.has_value(); }
  const Status &getStatus() const { return status; }
  /// The failure's message; empty with a value.
  const std::string &message() const { return status.message(); }

  T &operator*() {
    assert(ok());
    return *value;
  }
  const T &operator*() const {
    assert(ok());
    return *value;
  }
  T *operator->() { return &**this; }
  const T *operator->() const { return &**this; }
  /// Moves the value out (the Expected keeps a moved-from value).
  T take() { return std::move(**this); }

private:
  std::optional<T> value;
  Status status;
};

/// Shorthands for the failures the runtime reports most.
inline Status invalidArgument(std::string message) {
  return Status(StatusCode::InvalidArgument, std::move(message));
}
inline Status invalidPlan(std::string message) {
  return Status(StatusCode::InvalidPlan, std::move(message));
}
inline Status dataError(std::string message) {
  return Status(StatusCode::DataError, std::move(message));
}
inline Status communicationError(std::string message) {
  return Status(StatusCode::Communication, std::move(message));
}
inline Status timeoutError(std::string message) {
  return Status(StatusCode::Timeout, std::move(message));
}
inline Status deviceError(std::string message) {
  return Status(StatusCode::Device, std::move(message));
}
inline Status unavailable(std::string message) {
  return Status(StatusCode::Unavailable, std::move(message));
}

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_STATUS_H
