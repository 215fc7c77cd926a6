//===- PlanLoaderFuzzer.cpp - libFuzzer harness of the plan loader --------===//
//
// Any byte string goes through what tessera-run does with a plan file before
// it executes anything: parse, then validate. Neither may crash, hang or
// read out of bounds; a plan that validates must be one the executor can
// index safely. Build and run with scripts/fuzz-plan-loader.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Plan.h"

#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Protobuf logs every malformed string field; the fuzzer makes millions.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tessera::plan::Plan plan;
  if (!plan.ParseFromArray(data, static_cast<int>(size)))
    return 0;
  if (!tessera::runtime::validatePlan(plan).ok())
    return 0;
  // A valid plan: every buffer a program names is in range and its arena
  // view fits; touch them as the executor would.
  for (const auto &program : plan.programs())
    for (const auto &instruction : program.instructions())
      for (int64_t id : instruction.frees())
        (void)program.buffers(id).arena_offset_bytes();
  return 0;
}
