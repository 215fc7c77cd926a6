//===- TrainingFilesFuzzer.cpp - libFuzzer harness of the training files --===//
//
// Any byte string goes through what tessera-run does with a safetensors
// file (--load-weights: its header checked, each tensor viewed and
// converted), a sharded safetensors checkpoint's index (its JSON read,
// each file it names checked to stay in its directory) and a token file
// (--data: its header checked, its ids cut into samples and every id
// read). None may crash, read out of bounds or allocate past what the file
// holds. Build and run with
// scripts/fuzz-training-files.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Safetensors.h"
#include "tessera/runtime/TokenFile.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

using namespace tessera::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path =
      "/tmp/tessera-training-fuzz-" + std::to_string(getpid());
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file || std::fwrite(data, 1, size, file) != size)
    std::abort();
  std::fclose(file);

  if (Expected<SafetensorsFile> weights = openSafetensors(path); weights.ok())
    for (const SafetensorsFile::Entry &entry : weights->getEntries()) {
      Tensor view = weights->view(entry);
      (void)convertTo(view, isFloat(view.dtype) ? DType::F32 : DType::I64);
    }

  // The same bytes as a sharded checkpoint's index, beside the file above:
  // a weight map may name it (and must name nothing outside).
  static const std::string index = path + ".safetensors.index.json";
  std::FILE *indexFile = std::fopen(index.c_str(), "wb");
  if (!indexFile || std::fwrite(data, 1, size, indexFile) != size)
    std::abort();
  std::fclose(indexFile);
  if (Expected<SafetensorsCheckpoint> checkpoint =
          openSafetensorsCheckpoint(index);
      checkpoint.ok())
    for (const std::string &name : checkpoint->getNames())
      (void)checkpoint->view(*checkpoint->find(name));

  if (Expected<std::unique_ptr<TokenFile>> tokens = TokenFile::open(path);
      tokens.ok()) {
    const TokenFile &ids = **tokens;
    std::vector<uint32_t> all(ids.getNumTokens());
    if (!ids.read(0, ids.getNumTokens(), all.data()).ok())
      std::abort();
    if (Expected<TokenBatches> batches = TokenBatches::create(ids, 2, 3, 7);
        batches.ok())
      for (int64_t step = 1; step <= 3; ++step)
        for (int64_t row = 0; row < 2; ++row) {
          int64_t start = batches->getSampleStart(step, row);
          if (start < 0 || start + 4 > ids.getNumTokens())
            std::abort();
        }
  }
  return 0;
}
