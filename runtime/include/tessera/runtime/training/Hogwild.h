//===- Hogwild.h - tessera-run --hogwild: lock-free SGD in threads --*- C++
//-*-===//
//
// Hogwild (Niu et al. 2011) on a parameter-server plan compiled with
// --train sgd: THREADS threads of one process each run the workers' program
// (the forward and backward of a batch of its own) and apply their SGD
// step themselves to one shared copy of the parameters, without locks:
// each element a gradient touches is read and written in place, and an
// update that races with another may be lost, which sparse gradients make
// rare. --locked takes a lock around each thread's read of the parameters
// and around each update instead; one thread is plain SGD. The servers'
// program is not run: it names each parameter's learning rate (nn.sgd's).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAINING_HOGWILD_H
#define TESSERA_RUNTIME_TRAINING_HOGWILD_H

#include "plan.pb.h"

#include <cstdint>
#include <string>

namespace tessera::runtime {

struct HogwildOptions {
  int threads = 1;
  bool locked = false;
  int64_t steps = 1;
  uint64_t seed = 0;
  std::string dumpLosses;
  /// Each step's loss and when it ended, as JSON lines.
  std::string metrics;
};

/// Runs `options.steps` steps of `plan` (a parameter-server plan of SGD) on
/// `options.threads` threads, the steps dealt out in order; returns the
/// exit code.
int runHogwild(const plan::Plan &plan, const HogwildOptions &options);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_HOGWILD_H
