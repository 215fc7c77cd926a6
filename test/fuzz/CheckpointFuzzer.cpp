//===- CheckpointFuzzer.cpp - libFuzzer harness of the checkpoint loader --===//
//
// Any byte string, cut at "\n@@\n" into a checkpoint directory's files (its
// index.txt, then rank-0.txt, rank-0.tensors, rank-1.txt, rank-1.tensors),
// goes through what tessera-run --load-checkpoint does with it on rank 0 of
// each plan in $TESSERA_FUZZ_PLANS (a directory of plans: saved on the same
// mesh it loads by name; on another mesh or in other layouts it reshards,
// taking units' flat buffers apart). Loading may fail with a message, never
// crash, read out of bounds or allocate past what the files hold. A v3
// index is sealed by checksums, so that a mutated one stops at them: each
// input is loaded as it is, and again with its rank files sealed in a new
// index (writeCheckpointIndex, on the plans' mesh of the most devices), so
// that mutated rank files behind a v3 index are read too; a v2 index (the
// seeds hold both) reaches them unsealed. Build and run with
// scripts/fuzz-checkpoint.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/training/Checkpoint.h"

#include "tessera/runtime/Plan.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace tessera;
using namespace tessera::runtime;

namespace {

struct LoadedPlan {
  plan::Plan plan;
  Mesh mesh;
};

std::vector<LoadedPlan> &getPlans() {
  static std::vector<LoadedPlan> plans;
  return plans;
}

/// The mesh of the plans' that has the most devices: the one a resealed
/// input's index records.
const Mesh &getLargestMesh() {
  const Mesh *largest = &getPlans().front().mesh;
  for (const LoadedPlan &loaded : getPlans())
    if (loaded.mesh.getNumDevices() > largest->getNumDevices())
      largest = &loaded.mesh;
  return *largest;
}

/// Loads the checkpoint in `directory` on rank 0 of each plan, its
/// arguments' pieces allocated as tessera-run does.
void loadIntoEveryPlan(const std::string &directory) {
  for (const LoadedPlan &loaded : getPlans()) {
    const plan::Program *program = nullptr;
    for (const plan::Program &each : loaded.plan.programs())
      for (int64_t rank : each.ranks())
        if (rank == 0)
          program = &each;
    if (!program)
      continue;
    std::vector<OwnedTensor> locals;
    for (const plan::Argument &argument : program->arguments()) {
      const plan::Buffer &buffer = program->buffers(argument.buffer());
      locals.emplace_back(
          getDType(buffer.dtype()),
          std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()));
    }
    int64_t step = 0;
    (void)loadCheckpoint(directory, loaded.plan, *program, loaded.mesh, locals,
                         0, step);
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  google::protobuf::SetLogHandler(nullptr);
  const char *directory = std::getenv("TESSERA_FUZZ_PLANS");
  if (!directory) {
    std::fprintf(stderr, "set TESSERA_FUZZ_PLANS to a directory of plans\n");
    std::exit(1);
  }
  for (const auto &entry : std::filesystem::directory_iterator(directory)) {
    Expected<plan::Plan> plan = loadPlan(entry.path().string());
    if (!plan.ok()) {
      std::fprintf(stderr, "%s\n", plan.message().c_str());
      std::exit(1);
    }
    Mesh mesh = getMesh(*plan);
    getPlans().push_back({plan.take(), mesh});
  }
  if (getPlans().empty()) {
    std::fprintf(stderr, "'%s' holds no plans\n", directory);
    std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string directory = [] {
    std::string made =
        "/tmp/tessera-checkpoint-fuzz-" + std::to_string(getpid());
    mkdir(made.c_str(), 0700);
    return made;
  }();
  const char *names[] = {"index.txt", "rank-0.txt", "rank-0.tensors",
                         "rank-1.txt", "rank-1.tensors"};
  std::string input(reinterpret_cast<const char *>(data), size);
  size_t begin = 0;
  for (const char *name : names) {
    size_t end = input.find("\n@@\n", begin);
    std::ofstream file(directory + "/" + name,
                       std::ios::binary | std::ios::trunc);
    if (begin <= input.size())
      file << input.substr(begin, end == std::string::npos ? std::string::npos
                                                           : end - begin);
    begin = end == std::string::npos ? input.size() + 1 : end + 4;
  }
  loadIntoEveryPlan(directory);
  if (Status sealed = writeCheckpointIndex(directory, getLargestMesh(),
                                           /*step=*/1);
      sealed.ok())
    loadIntoEveryPlan(directory);
  return 0;
}
