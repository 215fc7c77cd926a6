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
#include <string>

namespace tessera::plan {

/// XXH3-64 of `plan`'s deterministic serialization with its checksum unset
/// (the plan is left as it was).
uint64_t computeChecksum(Plan &plan);

/// The bytes of a plan file: binary with maps (kernel attributes) in key
/// order, so that one program always gives the same bytes (replays and
/// bisections compare plans by them), or protobuf text. Empty if it cannot
/// be serialized.
std::string serializePlan(const Plan &plan, bool text = false);

} // namespace tessera::plan

#endif // TESSERA_RUNTIME_PROTO_PLANCHECKSUM_H
