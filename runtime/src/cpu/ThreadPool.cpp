//===- ThreadPool.cpp - The CPU kernels' threads --------------------------===//
//
// N - 1 workers poll briefly, then wait on a condition variable; a parallel
// region hands each a chunk (chunk k to worker k, chunk 0 to the caller)
// and waits for them, polling briefly too.
// The split depends only on the count, the grain and the thread count.
//
//===----------------------------------------------------------------------===//

#include "ThreadPool.h"

#include "tessera/runtime/Threads.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

using namespace tessera::runtime;

// OpenBLAS's pthreads build stops its worker threads with this (and starts
// them again when a call wants more than one); weak, since other builds
// lack it.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace {
/// How long a worker, between regions, and the caller, at the end of one,
/// poll before they block. A GPT step runs hundreds of kernels of tens of
/// microseconds: a wake-up through the condition variable for each cost
/// about as much as the split saved (the 2-layer, hidden-128 GPT ran no
/// faster on two threads than on one).
constexpr std::chrono::microseconds kSpin{50};

/// Polls `ready` for up to kSpin; whether it came true.
template <typename Ready> bool spinUntil(Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int polls = 1;; ++polls) {
    if (ready())
      return true;
    // The clock only now and then: reading it costs more than a poll.
    if (polls % 64 == 0 && std::chrono::steady_clock::now() > deadline)
      return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

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
    // A sequence lock: the generation is odd while the region's work is
    // written, so that a worker reading the last region's work then sees
    // that it changed (with the generation unchanged during the writes, a
    // worker with no chunk in the last region read this one's function and
    // chunk count as the last region's, and ran a chunk of it twice and
    // before its time: ThreadPoolTest.ManyShortRegionsRunEachChunkOnce).
    generation.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    job.store(&fn, std::memory_order_relaxed);
    jobChunks.store(chunks, std::memory_order_relaxed);
    pending.store(chunks - 1, std::memory_order_relaxed);
    {
      // Under the lock, so that a worker about to block sees it.
      std::lock_guard<std::mutex> guard(mutex);
      generation.fetch_add(1, std::memory_order_release);
    }
    start.notify_all();
    fn(0);
    auto finished = [&] {
      return pending.load(std::memory_order_acquire) == 0;
    };
    if (!spinUntil(finished)) {
      std::unique_lock<std::mutex> lock(mutex);
      done.wait(lock, finished);
    }
  }

private:
  void work(int k) {
    uint64_t seen = 0;
    while (true) {
      auto started = [&] {
        return stopping.load(std::memory_order_acquire) ||
               generation.load(std::memory_order_acquire) != seen;
      };
      if (!spinUntil(started)) {
        std::unique_lock<std::mutex> lock(mutex);
        start.wait(lock, started);
      }
      if (stopping.load(std::memory_order_acquire))
        return;
      // The region's work, read as a sequence lock: a worker with no chunk
      // in the last region may read only now, while the caller already
      // sets up the next (the generation odd); then it reads again.
      uint64_t current = generation.load(std::memory_order_acquire);
      if (current % 2 != 0)
        continue;
      const std::function<void(int)> *fn = job.load(std::memory_order_relaxed);
      int chunks = jobChunks.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (generation.load(std::memory_order_relaxed) != current)
        continue;
      seen = current;
      if (k >= chunks)
        continue;
      (*fn)(k);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> guard(mutex);
        done.notify_one();
      }
    }
  }

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable start, done;
  /// The region's work, written while `generation` is odd and published
  /// when it is even again; the caller sets up the next region only once
  /// every chunk of this one is done.
  std::atomic<const std::function<void(int)> *> job{nullptr};
  std::atomic<int> jobChunks{0}, pending{0};
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stopping{false};
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
  // spin between calls on the cores the pool's kernels need. They spin
  // from the start, too (a process began with OPENBLAS_NUM_THREADS=2 ran
  // its first three steps at 2.5 times the time of the later ones): where
  // OpenBLAS has them (its pthreads build), they stop.
  openblas_set_num_threads(1);
  if (blas_thread_shutdown_)
    blas_thread_shutdown_();
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
