// A program of another project that loads a plan through an installed
// Tessera's runtime (find_package(Tessera)): prints its programs and ranks.
#include "tessera/runtime/Plan.h"

#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer PLAN\n");
    return 2;
  }
  tessera::runtime::Expected<tessera::plan::Plan> plan =
      tessera::runtime::loadPlan(argv[1]);
  if (!plan.ok()) {
    std::fprintf(stderr, "consumer: %s\n", plan.message().c_str());
    return 1;
  }
  std::printf("%d programs, %lld ranks\n", plan->programs_size(),
              static_cast<long long>(tessera::runtime::getMesh(*plan)
                                         .getNumDevices()));
  return 0;
}
