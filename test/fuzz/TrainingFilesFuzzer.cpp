//===- TrainingFilesFuzzer.cpp - libFuzzer harness of the training files --===//
//
// Any byte string goes through what tessera-run does with a safetensors
// file (--load-weights: its header checked, each tensor viewed and
// converted) and a token file (--data: its header checked, its ids cut
// into samples and every id read). Neither may crash, read out of bounds
// or allocate past what the file holds. Build and run with
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
