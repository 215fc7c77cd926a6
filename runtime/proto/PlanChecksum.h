//===- PlanChecksum.h - A plan's checksum -----------------------*- C++ -*-===//
//
// The exporter stores it in Plan.checksum; the loader recomputes it, so that
// a plan damaged on its way between machines (a flipped bit that still
// parses) is refused instead of run.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_PROTO_PLANCHECKSUM_H
#define TESSERA_RUNTIME_PROTO_PLANCHECKSUM_H

#include "plan.pb.h"

#include <cstdint>

namespace tessera::plan {

/// XXH3-64 of `plan`'s deterministic serialization with its checksum unset
/// (the plan is left as it was).
uint64_t computeChecksum(Plan &plan);

} // namespace tessera::plan

#endif // TESSERA_RUNTIME_PROTO_PLANCHECKSUM_H
