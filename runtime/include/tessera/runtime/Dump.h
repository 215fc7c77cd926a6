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

#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <cstdio>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Writes a tensor file one tensor at a time, so that a writer holds one
/// tensor at most (the importer's weights): the count is written on close.
class TensorFileWriter {
public:
  TensorFileWriter() = default;
  TensorFileWriter(const TensorFileWriter &) = delete;
  TensorFileWriter &operator=(const TensorFileWriter &) = delete;
  ~TensorFileWriter() {
    if (file)
      std::fclose(file);
  }
  /// Fails with a data error naming the file when it cannot be written.
  Status open(const std::string &path);
  Status write(DType dtype, const std::vector<int64_t> &shape, const void *data,
               size_t bytes);
  Status close();

private:
  std::string path;
  std::FILE *file = nullptr;
  uint64_t count = 0;
};

/// Fails with a data error naming the file when it cannot be written.
Status writeTensors(const std::string &path,
                    const std::vector<OwnedTensor> &tensors);
/// The tensors of a file, or a data error naming the file and what is wrong.
Expected<std::vector<OwnedTensor>> readTensors(const std::string &path);
/// The same of the `bytes` bytes of `in`, named `path` in errors.
Expected<std::vector<OwnedTensor>> readTensors(std::istream &in, int64_t bytes,
                                               const std::string &path);
/// Reads the tensor file `path` into `into`, whose dtypes and shapes must be
/// the file's, in order (no allocation: a checkpoint loads into the
/// arguments it replaces). `seen`, where given, sees every byte of the file
/// in order (a checksum computed in the same pass).
Status readTensorsInto(
    const std::string &path, const std::vector<Tensor> &into,
    const std::function<void(const void *, size_t)> &seen = nullptr);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_DUMP_H
