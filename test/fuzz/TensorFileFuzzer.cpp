//===- TensorFileFuzzer.cpp - libFuzzer harness of the tensor-file reader -===//
//
// Any byte string goes through what tessera-run does with an --inputs or
// --weights file and a checkpoint's tensors: parse the header and each
// tensor, allocating only what the bytes left can hold. Neither may crash,
// read out of bounds or allocate past the input; what parses must write
// back to the same bytes. Build and run with scripts/fuzz-tensor-file.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Dump.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::istringstream in(
      std::string(reinterpret_cast<const char *>(data), size));
  tessera::runtime::Expected<std::vector<tessera::runtime::OwnedTensor>>
      tensors = tessera::runtime::readTensors(in, size, "input");
  if (!tensors.ok())
    return 0;
  // Written back, a file that parsed is its own bytes (up to trailing
  // bytes the reader leaves).
  static const std::string path =
      "/tmp/tessera-tensor-fuzz-" + std::to_string(getpid());
  if (!tessera::runtime::writeTensors(path, tensors.take()).ok())
    std::abort();
  std::ifstream file(path, std::ios::binary);
  std::string written((std::istreambuf_iterator<char>(file)),
                      std::istreambuf_iterator<char>());
  if (written.size() > size ||
      written.compare(0, written.size(),
                      std::string(reinterpret_cast<const char *>(data),
                                  written.size())) != 0)
    std::abort();
  return 0;
}
