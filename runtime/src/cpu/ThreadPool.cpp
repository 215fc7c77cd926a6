//===- ThreadPool.cpp - The CPU kernels' threads --------------------------===//
//
// N - 1 workers wait on a condition variable; a parallel region hands each
// a chunk (chunk k to worker k, chunk 0 to the caller) and waits for them.
// The split depends only on the count, the grain and the thread count.
//
//===----------------------------------------------------------------------===//

#include "ThreadPool.h"

#include "tessera/runtime/Threads.h"

#include <cblas.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

using namespace tessera::runtime;

namespace {
class Pool {
public:
  explicit Pool(int threads) {
    for (int k = 1; k < threads; ++k)
      workers.emplace_back([this, k] { work(k); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> guard(mutex);
      stopping = true;
    }
    start.notify_all();
    for (std::thread &worker : workers)
      worker.join();
  }
  int getThreads() const { return workers.size() + 1; }

  /// Runs `chunks` chunks of `fn`, chunk 0 on this thread.
  void run(int chunks, const std::function<void(int)> &fn) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      job = &fn;
      jobChunks = chunks;
      pending = chunks - 1;
      ++generation;
    }
    start.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
    job = nullptr;
  }

private:
  void work(int k) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      start.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping)
        return;
      seen = generation;
      if (k >= jobChunks)
        continue;
      const std::function<void(int)> *fn = job;
      lock.unlock();
      (*fn)(k);
      lock.lock();
      if (--pending == 0)
        done.notify_one();
    }
  }

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable start, done;
  const std::function<void(int)> *job = nullptr;
  int jobChunks = 0, pending = 0;
  uint64_t generation = 0;
  bool stopping = false;
};

std::unique_ptr<Pool> pool;
int kernelThreads = 1;
/// Set on the threads running a chunk: a nested region runs whole there.
thread_local bool inRegion = false;
} // namespace

void tessera::runtime::setKernelThreads(int threads) {
  threads = std::max(threads, 1);
  if (threads != kernelThreads || (threads > 1 && !pool)) {
    pool.reset();
    kernelThreads = threads;
    if (threads > 1)
      pool = std::make_unique<Pool>(threads);
  }
  // Always one: OpenBLAS starts with a thread per core. GEMMs split over
  // the pool instead (splitGemm in Kernels.cpp), since OpenBLAS's workers
  // spin between calls on the cores the pool's kernels need.
  openblas_set_num_threads(1);
}

int tessera::runtime::getKernelThreads() { return kernelThreads; }

int tessera::runtime::getDefaultKernelThreads(int localRanks,
                                              bool progressThread) {
  int cores = std::max<int>(std::thread::hardware_concurrency(), 1);
  int mine = cores;
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    mine = CPU_COUNT(&set);
#endif
  // Ranks that may all use every core share them.
  if (mine == cores)
    mine = cores / std::max(localRanks, 1);
  return std::max(mine - (progressThread ? 1 : 0), 1);
}

void tessera::runtime::cpu::parallelFor(
    int64_t count, int64_t grain,
    const std::function<void(int64_t, int64_t)> &fn) {
  int64_t chunks =
      std::min<int64_t>(kernelThreads, count / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || !pool || inRegion) {
    fn(0, count);
    return;
  }
  // Equal chunks, the first ones one element longer.
  std::function<void(int)> chunk = [&](int k) {
    int64_t base = count / chunks, extra = count % chunks;
    int64_t begin = k * base + std::min<int64_t>(k, extra);
    int64_t end = begin + base + (k < extra ? 1 : 0);
    inRegion = true;
    fn(begin, end);
    inRegion = false;
  };
  pool->run(chunks, chunk);
}
