//===- HostMemory.cpp - A run's host memory, checked up front -------------===//

#include "tessera/runtime/HostMemory.h"

#include "tessera/runtime/Plan.h"
#include "tessera/runtime/Tensor.h"

#include <optional>
#include <set>
#include <utility>

#include <sys/resource.h>
#include <unistd.h>

using namespace tessera;
using namespace tessera::runtime;

/// Sums and products of a plan's sizes saturate: a plan's numbers may
/// overflow, and a saturated need is still refused.
static uint64_t addSaturating(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

static uint64_t multiplySaturating(uint64_t a, uint64_t b) {
  uint64_t product;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

/// Lowers `limit` to `bytes` where that is less, naming `source`.
static void lowerLimit(HostMemoryLimit &limit, uint64_t bytes,
                       std::string source) {
  if (bytes < limit.bytes) {
    limit.bytes = bytes;
    limit.source = std::move(source);
  }
}

HostMemoryLimit tessera::runtime::getHostMemoryLimit(int64_t processesSharing) {
  HostMemoryLimit limit;
  long pages = ::sysconf(_SC_PHYS_PAGES), pageBytes = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageBytes > 0) {
    uint64_t machineBytes = multiplySaturating(
        static_cast<uint64_t>(pages), static_cast<uint64_t>(pageBytes));
    if (processesSharing > 1)
      lowerLimit(limit, machineBytes / static_cast<uint64_t>(processesSharing),
                 "this rank's share of this machine's memory (" +
                     formatBytes(machineBytes) + " over " +
                     std::to_string(processesSharing) + " ranks)");
    else
      lowerLimit(limit, machineBytes, "this machine's memory");
  }
  struct rlimit resource;
  if (::getrlimit(RLIMIT_AS, &resource) == 0 &&
      resource.rlim_cur != RLIM_INFINITY)
    lowerLimit(limit, resource.rlim_cur, "the address-space limit (ulimit -v)");
  if (::getrlimit(RLIMIT_DATA, &resource) == 0 &&
      resource.rlim_cur != RLIM_INFINITY)
    lowerLimit(limit, resource.rlim_cur, "the data-segment limit (ulimit -d)");
  return limit;
}

/// The bytes of a tensor of `shape` and `dtype`; UINT64_MAX where that
/// overflows or a size is negative.
static uint64_t
getTensorBytes(const google::protobuf::RepeatedField<int64_t> &shape,
               plan::DType dtype) {
  std::optional<int64_t> elements =
      getCheckedNumElements({shape.begin(), shape.end()});
  if (!elements)
    return UINT64_MAX;
  return multiplySaturating(static_cast<uint64_t>(*elements),
                            getDTypeBytes(getDType(dtype)));
}

static uint64_t getBufferBytes(const plan::Buffer &buffer) {
  return getTensorBytes(buffer.shape(), buffer.dtype());
}

/// A buffer as a message names it: its debug name, else its id.
static std::string getBufferName(const plan::Buffer &buffer) {
  if (!buffer.debug_name().empty())
    return "'" + buffer.debug_name() + "'";
  return "buffer " + std::to_string(buffer.id());
}

PlannedAllocation
tessera::runtime::getArenaAllocation(const plan::Program &program) {
  // A view shares its root's bytes and is not counted.
  const plan::Buffer *largest = nullptr;
  uint64_t largestBytes = 0;
  for (const plan::Buffer &buffer : program.buffers()) {
    uint64_t bytes = getBufferBytes(buffer);
    if (!buffer.has_view_of() && (!largest || bytes > largestBytes)) {
      largest = &buffer;
      largestBytes = bytes;
    }
  }
  std::string description = "the arena";
  if (largest)
    description += " (its largest buffer " + getBufferName(*largest) +
                   " holds " + formatBytes(largestBytes) + ")";
  // 64 bytes of slack past the memory plan's arena, which the executor
  // allocates: see Executor::runStep.
  uint64_t arenaBytes = program.arena_bytes() > 0
                            ? static_cast<uint64_t>(program.arena_bytes())
                            : 0;
  return {description, addSaturating(arenaBytes, 64)};
}

/// This rank's piece of every argument, alive from the arguments' making
/// to the end of the run.
static void addLocalPieces(const plan::Program &program,
                           HostMemoryPhase &phase) {
  for (const plan::Argument &argument : program.arguments())
    phase.allocations.push_back(
        {"the local piece of argument '" + argument.name() + "'",
         getBufferBytes(program.buffers(argument.buffer()))});
}

/// Whether `tensor`'s global value is a view of a mapped file: a parameter
/// (or a weight stash, which starts as its parameter) of --load-weights.
static bool isMapped(const plan::Argument &tensor, const HostMemoryUse &use) {
  return use.parametersMapped &&
         (tensor.role() == plan::PARAM || tensor.role() == plan::WEIGHT_STASH);
}

/// Every step tensor's global value, made (or read) whole before this
/// rank's piece is cut from it (but a mapped parameter's), and the largest
/// unit's packed flat buffer (one is alive at a time).
static void addGlobalValues(const plan::Program &program,
                            const HostMemoryUse &use, HostMemoryPhase &phase) {
  std::set<int64_t> made;
  PlannedAllocation largestPacked;
  for (int i = 0; i < program.arguments_size(); ++i) {
    const plan::Argument &argument = program.arguments(i);
    for (const auto &[source, tensor] : getStepTensors(argument, i))
      if (!isMapped(tensor, use) && made.insert(source).second)
        phase.allocations.push_back(
            {"the global value of '" + tensor.name() + "'",
             getTensorBytes(tensor.global_shape(), tensor.dtype())});
    if (argument.members().empty())
      continue;
    uint64_t packedBytes =
        getTensorBytes(argument.global_shape(), argument.dtype());
    if (packedBytes > largestPacked.bytes)
      largestPacked = {"the packed global value of argument '" +
                           argument.name() + "'",
                       packedBytes};
  }
  if (largestPacked.bytes > 0)
    phase.allocations.push_back(largestPacked);
}

/// The host copies of the results, and, with the arena on the host, the
/// updates the executor keeps between steps outside the arena (those the
/// memory plan did not write over their argument).
static void addResults(const plan::Program &program, const HostMemoryUse &use,
                       HostMemoryPhase &phase) {
  for (int i = 0; i < program.results_size(); ++i) {
    const plan::Result &result = program.results(i);
    const plan::Buffer &buffer = program.buffers(result.buffer());
    phase.allocations.push_back(
        {"result #" + std::to_string(i), getBufferBytes(buffer)});
    if (!use.arenaOnHost || !result.has_updates_argument())
      continue;
    const plan::Argument &argument =
        program.arguments(result.updates_argument());
    if (program.buffers(argument.buffer()).arena_offset_bytes() !=
        buffer.arena_offset_bytes())
      phase.allocations.push_back(
          {"the kept update of argument '" + argument.name() + "'",
           getBufferBytes(buffer)});
  }
}

static void sumPhase(HostMemoryPhase &phase) {
  phase.totalBytes = 0;
  for (const PlannedAllocation &allocation : phase.allocations)
    phase.totalBytes = addSaturating(phase.totalBytes, allocation.bytes);
}

std::vector<HostMemoryPhase>
tessera::runtime::getHostMemoryPhases(const plan::Program &program,
                                      const HostMemoryUse &use) {
  HostMemoryPhase making, running;
  making.name = "making the program's arguments";
  running.name = "running the program";
  addGlobalValues(program, use, making);
  addLocalPieces(program, making);
  addLocalPieces(program, running);
  if (use.arenaOnHost)
    running.allocations.push_back(getArenaAllocation(program));
  addResults(program, use, running);
  sumPhase(making);
  sumPhase(running);
  return {making, running};
}

Status tessera::runtime::checkHostMemory(const plan::Program &program,
                                         const HostMemoryUse &use,
                                         const HostMemoryLimit &limit) {
  for (const HostMemoryPhase &phase : getHostMemoryPhases(program, use)) {
    if (phase.totalBytes <= limit.bytes)
      continue;
    const PlannedAllocation *largest = &phase.allocations.front();
    for (const PlannedAllocation &allocation : phase.allocations)
      if (allocation.bytes > largest->bytes)
        largest = &allocation;
    return deviceError(
        phase.name + " needs " +
        (phase.totalBytes == UINT64_MAX ? std::string("2^64 bytes or more")
                                        : formatBytes(phase.totalBytes)) +
        " of host memory, more than the " + formatBytes(limit.bytes) + " of " +
        limit.source + ": the largest is " + largest->description + ", " +
        (largest->bytes == UINT64_MAX ? std::string("2^64 bytes or more")
                                      : formatBytes(largest->bytes)));
  }
  return Status::success();
}
