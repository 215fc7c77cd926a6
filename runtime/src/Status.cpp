//===- Status.cpp - The result of every fallible runtime call -------------===//

#include "tessera/runtime/Status.h"

using namespace tessera::runtime;

const char *tessera::runtime::getStatusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok:
    return "ok";
  case StatusCode::InvalidArgument:
    return "invalid argument";
  case StatusCode::InvalidPlan:
    return "invalid plan";
  case StatusCode::DataError:
    return "data error";
  case StatusCode::Communication:
    return "communication error";
  case StatusCode::Timeout:
    return "timeout";
  case StatusCode::Device:
    return "device error";
  case StatusCode::Unavailable:
    return "unavailable";
  }
  return "unknown";
}
