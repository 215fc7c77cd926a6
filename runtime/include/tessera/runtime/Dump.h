//===- Dump.h - A file of tensors (inputs, results) ---------------*- C++
//-*-===//
//
// `tessera-run --inputs` reads global inputs in this format and
// `--dump-outputs` writes global results in it; `tessera verify` compares
// two such files. Layout: "TSRT", u32 version, u64 count, then per tensor
// u32 dtype, u32 rank, i64 dims[rank] and the raw little-endian elements.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_DUMP_H
#define TESSERA_RUNTIME_DUMP_H

#include "tessera/runtime/Tensor.h"

#include <string>
#include <vector>

namespace tessera::runtime {

std::string writeTensors(const std::string &path,
                         const std::vector<OwnedTensor> &tensors);
/// Returns an error naming the file and what is wrong, or "".
std::string readTensors(const std::string &path,
                        std::vector<OwnedTensor> &tensors);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_DUMP_H
