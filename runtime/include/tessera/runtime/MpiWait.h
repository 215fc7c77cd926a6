//===- MpiWait.h - MPI waits that end --------------------------*- C++ -*-===//
//
// A rank that stops leaves its peers in MPI_Wait, MPI_Barrier or
// MPI_Allreduce forever. These run the nonblocking forms and poll them
// until a deadline (--comm-timeout), then fail with a timeout error.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_MPIWAIT_H
#define TESSERA_RUNTIME_MPIWAIT_H

#include "tessera/runtime/Status.h"

#include <mpi.h>

#include <string>

namespace tessera::runtime {

/// Polls the `count` nonblocking `requests` until all complete, as
/// MPI_Waitall does, or `timeoutSeconds` pass: then a timeout error,
/// `not finished after N s (--comm-timeout): ` and `why`.
Status waitForRequests(MPI_Request *requests, int count, double timeoutSeconds,
                       const char *why);

/// The least of every rank's `value` (MPI_Allreduce with MPI_MIN over
/// MPI_COMM_WORLD) into `least`, within `timeoutSeconds`.
Status allReduceMinWithin(int value, int &least, double timeoutSeconds,
                          const std::string &why);

/// Every rank of MPI_COMM_WORLD at this point, within `timeoutSeconds`.
Status barrierWithin(double timeoutSeconds, const std::string &why);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_MPIWAIT_H
