//===- Threads.h - The CPU kernels' threads ---------------------*- C++ -*-===//
//
// Large elementwise, row, attention and GEMM kernels split their work over
// a small pool of threads; OpenBLAS itself runs on one thread, each GEMM
// piece a call of its own. Each element is computed by one thread in the
// same way whatever the count, so a run's results do not depend on it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_THREADS_H
#define TESSERA_RUNTIME_THREADS_H

namespace tessera::runtime {

/// The threads the CPU kernels use from now on, at least 1 (and OpenBLAS
/// one).
void setKernelThreads(int threads);
int getKernelThreads();

/// The cores this rank may use: those of its CPU affinity, shared with the
/// other `localRanks` ranks of its node where they all may use the same
/// ones; one less where `progressThread` (MPI's, which polls while
/// collectives are in flight), and at least 1.
int getDefaultKernelThreads(int localRanks, bool progressThread);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_THREADS_H
