//===- HostMemory.h - A run's host memory, checked up front -----*- C++ -*-===//
//
// A plan states every byte a run allocates: its arena, its arguments' local
// pieces and the global tensors they are cut from, its results. A plan too
// big for the machine (a 175B model on one rank) used to end in
// std::bad_alloc somewhere in the run; here its needs are added up from the
// plan and compared, before anything is allocated, with what this process
// can get, so that the refusal names the largest buffer and the bytes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_HOSTMEMORY_H
#define TESSERA_RUNTIME_HOSTMEMORY_H

#include "tessera/runtime/Status.h"

#include "plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::runtime {

/// The most host memory this process can get, and what sets that bound.
struct HostMemoryLimit {
  /// UINT64_MAX where nothing bounds it.
  uint64_t bytes = UINT64_MAX;
  /// "this machine's memory" (or "this rank's share of this machine's
  /// memory (...)"), "the address-space limit (ulimit -v)" or "the
  /// data-segment limit (ulimit -d)"; empty where nothing bounds it.
  std::string source;
};

/// The smallest of this process's share of the machine's physical memory
/// (`processesSharing` processes, the ranks of a job on this node, share it
/// evenly), RLIMIT_AS and RLIMIT_DATA (those that are set). Linux promises
/// more than it has and kills a process when the memory is touched, so
/// physical memory is the bound even without a limit.
HostMemoryLimit getHostMemoryLimit(int64_t processesSharing = 1);

/// One allocation a run makes, known from the plan: what it holds, and its
/// bytes.
struct PlannedAllocation {
  std::string description;
  uint64_t bytes = 0;
};

/// The allocations of one phase of a run, which are alive at once.
struct HostMemoryPhase {
  /// "making the program's arguments" or "running the program".
  std::string name;
  std::vector<PlannedAllocation> allocations;
  /// Their sum, UINT64_MAX where it overflows.
  uint64_t totalBytes = 0;
};

/// Where a run puts what the plan sizes.
struct HostMemoryUse {
  /// The arena is in host memory (the CPU device), not on a GPU.
  bool arenaOnHost = true;
  /// The parameters' global values are views of a mapped file (tessera-run
  /// --load-weights), not allocations.
  bool parametersMapped = false;
};

/// The arena of `program` with the executor's slack, described with its
/// largest buffer: "the arena (its largest buffer 'w' holds 64 bytes)".
PlannedAllocation getArenaAllocation(const plan::Program &program);

/// What running `program` takes of host memory at its two peaks: while its
/// arguments are made (every step tensor's global value, but mapped
/// parameters, and the local pieces cut from them) and while it runs (the
/// local pieces, the host copies of its results, and with the arena on the
/// host, the arena and the updates the executor keeps between steps).
std::vector<HostMemoryPhase> getHostMemoryPhases(const plan::Program &program,
                                                 const HostMemoryUse &use);

/// Fails with a device error when a phase of getHostMemoryPhases needs more
/// than `limit`, naming the total, the limit and the phase's largest
/// allocation (the arena: with its largest buffer).
Status checkHostMemory(const plan::Program &program, const HostMemoryUse &use,
                       const HostMemoryLimit &limit = getHostMemoryLimit());

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_HOSTMEMORY_H
