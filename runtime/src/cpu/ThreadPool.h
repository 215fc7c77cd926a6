//===- ThreadPool.h - Splitting a CPU kernel over threads -------*- C++ -*-===//

#ifndef TESSERA_RUNTIME_CPU_THREADPOOL_H
#define TESSERA_RUNTIME_CPU_THREADPOOL_H

#include <cstdint>
#include <functional>

namespace tessera::runtime::cpu {

/// Runs fn(begin, end) over [0, count) in contiguous chunks of at least
/// `grain` (fewer chunks than getKernelThreads() where count is small), the
/// calling thread taking the first, and returns when all are done. Within
/// a chunk the calling thread runs alone: a nested call runs whole.
void parallelFor(int64_t count, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn);

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_THREADPOOL_H
