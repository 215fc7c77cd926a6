//===- Dump.cpp - A file of tensors (inputs, results) ---------------------===//

#include "tessera/runtime/Dump.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <istream>

using namespace tessera::runtime;

static constexpr char kMagic[4] = {'T', 'S', 'R', 'T'};
static constexpr uint32_t kVersion = 1;

Status TensorFileWriter::open(const std::string &name) {
  path = name;
  count = 0;
  file = std::fopen(path.c_str(), "wb");
  if (!file)
    return dataError("cannot write '" + path + "'");
  // The count so far (none); close() writes the final one over it.
  if (std::fwrite(kMagic, 4, 1, file) != 1 ||
      std::fwrite(&kVersion, 4, 1, file) != 1 ||
      std::fwrite(&count, 8, 1, file) != 1)
    return dataError("cannot write '" + path + "'");
  return Status::success();
}

Status TensorFileWriter::write(DType dtype, const std::vector<int64_t> &shape,
                               const void *data, size_t bytes) {
  uint32_t code = static_cast<uint32_t>(dtype);
  uint32_t rank = shape.size();
  if (!file || std::fwrite(&code, 4, 1, file) != 1 ||
      std::fwrite(&rank, 4, 1, file) != 1 ||
      (rank && std::fwrite(shape.data(), 8, rank, file) != rank) ||
      (bytes && std::fwrite(data, 1, bytes, file) != bytes))
    return dataError("cannot write '" + path + "'");
  ++count;
  return Status::success();
}

Status TensorFileWriter::close() {
  if (!file)
    return dataError("cannot write '" + path + "'");
  bool written = std::fseek(file, 8, SEEK_SET) == 0 &&
                 std::fwrite(&count, 8, 1, file) == 1;
  written &= std::fclose(file) == 0;
  file = nullptr;
  return written ? Status::success() : dataError("cannot write '" + path + "'");
}

Status tessera::runtime::writeTensors(const std::string &path,
                                      const std::vector<OwnedTensor> &tensors) {
  TensorFileWriter writer;
  if (Status status = writer.open(path); !status.ok())
    return status;
  for (const OwnedTensor &tensor : tensors)
    if (Status status = writer.write(tensor.view.dtype, tensor.view.shape,
                                     tensor.view.data, tensor.view.getBytes());
        !status.ok())
      return status;
  return writer.close();
}

Expected<std::vector<OwnedTensor>>
tessera::runtime::readTensors(const std::string &path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    return dataError("cannot open '" + path + "'");
  int64_t fileBytes = file.tellg();
  file.seekg(0);
  return readTensors(file, fileBytes, path);
}

namespace {
/// Where tensor `index` of `dtype` and `shape` goes: its data's bytes, or an
/// error that stops the read.
using PlaceTensor = std::function<Expected<void *>(
    uint64_t index, DType dtype, const std::vector<int64_t> &shape)>;

/// Reads a tensor file of `fileBytes` bytes from `file`, each tensor's data
/// into where `place` says. `count` is the file's tensor count, for `place`
/// to check. `seen`, where given, sees every byte of the file in order.
Status readTensorFile(std::istream &file, int64_t fileBytes,
                      const std::string &path,
                      const std::function<Status(uint64_t count)> &checkCount,
                      const PlaceTensor &place,
                      const std::function<void(const void *, size_t)> &seen) {
  // What a header claims is checked against the bytes left before anything
  // of that size is allocated.
  auto get = [&](void *data, size_t bytes) {
    if (!file.read(static_cast<char *>(data), bytes))
      return false;
    if (seen)
      seen(data, bytes);
    return true;
  };
  auto bad = [&](const std::string &what) {
    return dataError("'" + path + "' is not a tensor file: " + what);
  };
  char magic[4];
  uint32_t version;
  uint64_t count;
  if (!get(magic, 4) || std::memcmp(magic, kMagic, 4) != 0)
    return bad("wrong magic");
  if (!get(&version, 4) || version != kVersion)
    return bad("unknown version");
  if (!get(&count, 8) || count > (1 << 20))
    return bad("bad tensor count");
  if (Status status = checkCount(count); !status.ok())
    return status;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t dtype, rank;
    if (!get(&dtype, 4) || dtype > static_cast<uint32_t>(DType::I1) ||
        !get(&rank, 4) || rank > 16)
      return bad("bad header of tensor " + std::to_string(i));
    std::vector<int64_t> shape(rank);
    if (!get(shape.data(), rank * 8))
      return bad("truncated shape of tensor " + std::to_string(i));
    int64_t elements = 1;
    for (int64_t size : shape) {
      if (size < 0 || (size > 0 && elements > (int64_t(1) << 36) / size))
        return bad("bad shape of tensor " + std::to_string(i));
      elements *= size;
    }
    int64_t left = fileBytes - static_cast<int64_t>(file.tellg());
    int64_t claimed = elements * static_cast<int64_t>(
                                     getDTypeBytes(static_cast<DType>(dtype)));
    if (claimed > left)
      return bad("tensor " + std::to_string(i) + " claims " +
                 std::to_string(claimed) + " bytes of data, the file has " +
                 std::to_string(left) + " left");
    Expected<void *> data = place(i, static_cast<DType>(dtype), shape);
    if (!data.ok())
      return data.getStatus();
    // In pieces, so that `seen` reads each while it is in the cache.
    constexpr int64_t kPiece = 8 << 20;
    for (int64_t at = 0; at < claimed; at += kPiece)
      if (!get(static_cast<char *>(*data) + at, std::min(kPiece, claimed - at)))
        return bad("truncated data of tensor " + std::to_string(i));
  }
  if (seen) {
    // Whatever follows the tensors counts too.
    std::vector<char> rest(1 << 16);
    while (file.read(rest.data(), rest.size()) || file.gcount() > 0)
      seen(rest.data(), file.gcount());
  }
  return Status::success();
}
} // namespace

Expected<std::vector<OwnedTensor>>
tessera::runtime::readTensors(std::istream &file, int64_t fileBytes,
                              const std::string &path) {
  std::vector<OwnedTensor> tensors;
  Status status = readTensorFile(
      file, fileBytes, path, [](uint64_t) { return Status::success(); },
      [&](uint64_t index, DType dtype,
          const std::vector<int64_t> &shape) -> Expected<void *> {
        Expected<OwnedTensor> allocated = OwnedTensor::allocate(
            dtype, shape,
            "tensor #" + std::to_string(index) + " of '" + path + "'");
        if (!allocated.ok())
          return allocated.getStatus();
        tensors.push_back(allocated.take());
        return tensors.back().view.data;
      },
      nullptr);
  if (!status.ok())
    return status;
  return tensors;
}

Status tessera::runtime::readTensorsInto(
    const std::string &path, const std::vector<Tensor> &into,
    const std::function<void(const void *, size_t)> &seen) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    return dataError("cannot open '" + path + "'");
  int64_t fileBytes = file.tellg();
  file.seekg(0);
  return readTensorFile(
      file, fileBytes, path,
      [&](uint64_t count) {
        return count == into.size()
                   ? Status::success()
                   : dataError("'" + path + "' holds " + std::to_string(count) +
                               " tensors, not " + std::to_string(into.size()));
      },
      [&](uint64_t index, DType dtype,
          const std::vector<int64_t> &shape) -> Expected<void *> {
        const Tensor &target = into[index];
        if (dtype != target.dtype || shape != target.shape)
          return dataError(
              "tensor " + std::to_string(index) + " of '" + path + "' is " +
              getDTypeName(dtype) + " " + formatShape(shape) + ", not " +
              getDTypeName(target.dtype) + " " + formatShape(target.shape));
        return target.data;
      },
      seen);
}
