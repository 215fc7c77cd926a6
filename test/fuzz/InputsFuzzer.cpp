//===- InputsFuzzer.cpp - libFuzzer harness of the planner's JSON inputs --===//
//
// Any byte string goes through what the compiler does with a machine file
// (tessera plan --machine, compile --auto) and with the inputs of tessera
// report (a merged trace, a scaling curve): the nesting guard, the JSON
// parse, the machine file's checked fields, the trace's units and the
// curve's points, and the curve's plot. None may crash, hang or read out
// of bounds, and a machine that parses must hold only finite, positive
// peaks and bandwidths. Build and run with scripts/fuzz-inputs.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/Analysis/MachineModel.h"
#include "tessera/Export/Report.h"
#include "tessera/Search/PlanReport.h"
#include "tessera/Support/Nesting.h"

#include "llvm/Support/JSON.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

using namespace tessera;

/// Fails the run on a machine whose numbers would price plans wrongly.
static void checkMachine(const MachineModel &machine) {
  auto positive = [](double value) {
    return std::isfinite(value) && value > 0;
  };
  for (const auto &[dtype, peak] : machine.peakFlopsPerSecond)
    if (!positive(peak))
      std::abort();
  if (!positive(machine.memoryBytes) ||
      !positive(machine.memoryBandwidthBytesPerSecond))
    std::abort();
  for (const auto &level : machine.levels)
    if (!positive(level.bandwidthBytesPerSecond) ||
        !std::isfinite(level.latencySeconds) || level.latencySeconds < 0)
      std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  if (llvm::Expected<MachineModel> machine = parseMachineModel(text))
    checkMachine(*machine);
  else
    llvm::consumeError(machine.takeError());

  // The report reads its inputs as tessera report does: refused past the
  // nesting limit before llvm::json (which recurses) sees them.
  if (findNestingOverflow(text, kMaxNestingDepth))
    return 0;
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json) {
    llvm::consumeError(json.takeError());
    return 0;
  }
  if (auto units = getTracedSchedule(*json); !units)
    llvm::consumeError(units.takeError());
  if (llvm::Expected<ScalingCurve> curve = parseScalingCurve(*json))
    (void)getScalingSvg(*curve, "model", "machine");
  else
    llvm::consumeError(curve.takeError());
  return 0;
}
