//===- MappingGuard.cpp - File mappings that survive a lost page ----------===//

#include "MappingGuard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

using namespace tessera::runtime;

namespace {

/// One guarded mapping: [begin, end), or free where begin is 0.
struct GuardedMapping {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> damaged{false};
};

GuardedMapping guarded[kMaxGuardedMappings];
/// Serializes guardMapping and unguardMapping (the handler takes no lock).
std::mutex guardedLock;
/// The SIGBUS action before ours, and the page size, set once.
struct sigaction previousAction;
uintptr_t pageBytes = 4096;

/// Hands a SIGBUS that is not ours to the action installed before.
void forwardBusError(int signal, siginfo_t *info, void *context) {
  if (previousAction.sa_flags & SA_SIGINFO) {
    previousAction.sa_sigaction(signal, info, context);
    return;
  }
  if (previousAction.sa_handler != SIG_DFL &&
      previousAction.sa_handler != SIG_IGN) {
    previousAction.sa_handler(signal);
    return;
  }
  // The default action: restored, it ends the process when the faulting
  // read runs again (a SIGBUS sent rather than faulted is sent again).
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGBUS, &fallback, nullptr);
  if (info->si_code <= 0)
    raise(signal);
}

/// Maps zeros over the faulting page of a guarded mapping, which is marked
/// damaged, so that the read goes on; else forwards the signal.
void handleBusError(int signal, siginfo_t *info, void *context) {
  if (info->si_code == BUS_ADRERR) {
    auto address = reinterpret_cast<uintptr_t>(info->si_addr);
    for (GuardedMapping &mapping : guarded) {
      uintptr_t begin = mapping.begin.load(std::memory_order_acquire);
      if (!begin || address < begin ||
          address >= mapping.end.load(std::memory_order_acquire))
        continue;
      void *page = reinterpret_cast<void *>(address & ~(pageBytes - 1));
      if (mmap(page, pageBytes, PROT_READ,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        break;
      mapping.damaged.store(true, std::memory_order_release);
      return;
    }
  }
  forwardBusError(signal, info, context);
}

/// Installs the handler once; whether it is installed.
bool installHandler() {
  static bool installed = [] {
    long size = sysconf(_SC_PAGESIZE);
    if (size > 0)
      pageBytes = static_cast<uintptr_t>(size);
    struct sigaction action = {};
    action.sa_sigaction = handleBusError;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGBUS, &action, &previousAction) == 0;
  }();
  return installed;
}

GuardedMapping *findGuarded(const void *begin) {
  auto key = reinterpret_cast<uintptr_t>(begin);
  for (GuardedMapping &mapping : guarded)
    if (key && mapping.begin.load(std::memory_order_acquire) == key)
      return &mapping;
  return nullptr;
}

} // namespace

bool tessera::runtime::guardMapping(const void *begin, size_t bytes) {
  std::lock_guard<std::mutex> lock(guardedLock);
  if (!begin || !installHandler())
    return false;
  for (GuardedMapping &mapping : guarded) {
    if (mapping.begin.load(std::memory_order_relaxed))
      continue;
    auto start = reinterpret_cast<uintptr_t>(begin);
    mapping.damaged.store(false, std::memory_order_relaxed);
    mapping.end.store(start + bytes, std::memory_order_relaxed);
    mapping.begin.store(start, std::memory_order_release);
    return true;
  }
  return false;
}

void tessera::runtime::unguardMapping(const void *begin) {
  std::lock_guard<std::mutex> lock(guardedLock);
  if (GuardedMapping *mapping = findGuarded(begin)) {
    mapping->begin.store(0, std::memory_order_release);
    mapping->end.store(0, std::memory_order_release);
  }
}

bool tessera::runtime::isMappingDamaged(const void *begin) {
  GuardedMapping *mapping = findGuarded(begin);
  return mapping && mapping->damaged.load(std::memory_order_acquire);
}
