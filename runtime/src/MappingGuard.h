//===- MappingGuard.h - File mappings that survive a lost page --*- C++ -*-===//
//
// A read-only mapping of a file faults with SIGBUS where the file has lost a
// page since it was mapped (cut short by another process, or its storage
// failed): without a guard the rank dies. A guarded mapping does not. The
// first guard installs a process-wide SIGBUS handler that maps a page of
// zeros over the faulting page of a guarded mapping and marks that mapping
// damaged; the read goes on, on any thread, and the mapping's owner asks
// isMappingDamaged once it has read what it needs and reports an error
// naming the file. A SIGBUS anywhere else goes to the handler installed
// before (by default the process ends with SIGBUS, as without the guard).
//
// The handler calls only mmap, sigaction and raise, and reads only atomics,
// so it may run on any thread at any time. A mapping must be unguarded
// before it is unmapped, and must not be read while it is being unguarded.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_SRC_MAPPINGGUARD_H
#define TESSERA_RUNTIME_SRC_MAPPINGGUARD_H

#include <cstddef>

namespace tessera::runtime {

/// How many mappings may be guarded at once (each file of a sharded
/// checkpoint is one).
inline constexpr int kMaxGuardedMappings = 4096;

/// Guards the `bytes` mapped at `begin` (page-aligned). Returns false, and
/// leaves the mapping unguarded, when kMaxGuardedMappings are guarded
/// already or the handler cannot be installed.
bool guardMapping(const void *begin, size_t bytes);

/// Stops guarding the mapping at `begin`; one not guarded is ignored.
void unguardMapping(const void *begin);

/// Whether a read of the guarded mapping at `begin` found a page gone
/// (that page now reads as zeros).
bool isMappingDamaged(const void *begin);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_SRC_MAPPINGGUARD_H
