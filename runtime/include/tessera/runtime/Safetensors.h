//===- Safetensors.h - Reading and writing safetensors files ----*- C++ -*-===//
//
// The safetensors format (huggingface/safetensors) holds named tensors: an
// 8-byte little-endian header length N, N bytes of a UTF-8 JSON object that
// maps each name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// counted from the byte after the header) and an optional "__metadata__" of
// strings, then the raw little-endian data. A file is opened by mapping it
// read-only, so that a tensor is a view over the mapped bytes until it is
// converted or copied; every range, shape and dtype in the header is checked
// before a view is handed out. The mapping is guarded: where the file loses
// a page while it is mapped (another process cut it short), reading a view
// gives zeros there rather than a SIGBUS, and checkIntact, asked once the
// views are read, reports it as an error naming the file. A write goes to
// `<path>.tmp`, is synced and renamed over `<path>`, so that a reader never
// sees half a file.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_SAFETENSORS_H
#define TESSERA_RUNTIME_SAFETENSORS_H

#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// An open safetensors file: its validated header and its mapped bytes,
/// unmapped when the file is destroyed. Movable, not copyable.
class SafetensorsFile {
public:
  /// One tensor of the file; `data` points into the mapping.
  struct Entry {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const void *data = nullptr;
  };

  SafetensorsFile(SafetensorsFile &&other) noexcept;
  SafetensorsFile &operator=(SafetensorsFile &&other) noexcept;
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;
  ~SafetensorsFile();

  /// The tensors, sorted by name.
  const std::vector<Entry> &getEntries() const { return entries; }
  /// The tensor names, sorted.
  std::vector<std::string> getNames() const;
  /// The tensor named `name`, or null.
  const Entry *find(const std::string &name) const;
  /// The header's "__metadata__" (empty without one).
  const std::map<std::string, std::string> &getMetadata() const {
    return metadata;
  }
  /// A non-owning view of `entry`'s bytes, valid while this file lives. The
  /// mapping is read-only: writing through the view faults.
  Tensor view(const Entry &entry) const;
  /// Fails with a data error naming the file when it has been cut short
  /// since it was opened, or a page of it could not be read: the views then
  /// read zeros where it is gone. Ask after reading the views.
  Status checkIntact() const;

private:
  friend Expected<SafetensorsFile> openSafetensors(const std::string &path);
  SafetensorsFile() = default;
  /// Opens `filePath`, maps it whole and guards the mapping.
  Status mapFile(const std::string &filePath);
  /// Reads and checks the header into `entries` and `metadata`.
  Status readHeader();
  /// Fails when two tensors' bytes overlap.
  Status checkOverlaps() const;
  /// Unmaps the file (and stops guarding the mapping).
  void unmap();

  std::string path;
  /// The mapped file's identity, to tell whether the file at `path` is
  /// still it (a file renamed over `path` leaves the mapped one whole).
  uint64_t fileDevice = 0, fileInode = 0;
  void *mapping = nullptr;
  size_t mappedBytes = 0;
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

/// Maps and validates the safetensors file at `path`. Fails with a data error
/// naming the file (and the tensor, where one is at fault) when the file
/// cannot be read, the header is malformed, a dtype is one the runtime lacks
/// (U8, I8, F8_*, ...), or a tensor's bytes are out of the file, do not match
/// its shape, overlap another's or are misaligned for its dtype.
Expected<SafetensorsFile> openSafetensors(const std::string &path);

/// The tensors of a safetensors checkpoint: one file, or Hugging Face's
/// sharded form, an index (`<name>.safetensors.index.json`, whose
/// "weight_map" names the file of each tensor, next to it) and its files.
class SafetensorsCheckpoint {
public:
  /// The tensor named `name`, or null.
  const SafetensorsFile::Entry *find(const std::string &name) const;
  /// The tensor names, sorted.
  std::vector<std::string> getNames() const;
  /// A non-owning view of `entry`'s bytes, valid while this lives.
  Tensor view(const SafetensorsFile::Entry &entry) const {
    return files.front().view(entry);
  }
  /// SafetensorsFile::checkIntact of each file: ask after reading the views.
  Status checkIntact() const;

private:
  friend Expected<SafetensorsCheckpoint>
  openSafetensorsCheckpoint(const std::string &path);
  std::vector<SafetensorsFile> files;
  std::map<std::string, const SafetensorsFile::Entry *> entries;
};

/// Opens `path`: a safetensors file, or (ending in ".index.json") a sharded
/// checkpoint's index and every file it names. Fails as openSafetensors
/// does for each file, and when the index is malformed, names a tensor its
/// file lacks, or two files hold one name.
Expected<SafetensorsCheckpoint>
openSafetensorsCheckpoint(const std::string &path);

/// Writes `tensors` as Hugging Face's sharded checkpoint: `indexPath`
/// (`<name>.safetensors.index.json`) and next to it
/// `<name>-00001-of-0000N.safetensors`..., each tensor whole in one file,
/// a file closed once it holds `maxShardBytes` (at least one tensor each).
Status writeSafetensorsShards(
    const std::string &indexPath,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    int64_t maxShardBytes,
    const std::map<std::string, std::string> &metadata = {});

/// A copy of `from` in `to`: between float dtypes (f32, f64, f16, bf16) with
/// rounding to nearest even, or between integer dtypes (i1, i32, i64), where
/// a value out of the range of `to` is a data error. Float to integer and back
/// are invalid arguments. The same dtype gives a plain copy.
Expected<OwnedTensor> convertTo(const Tensor &from, DType to);

/// Writes `tensors` to `path` as safetensors, the header in the given order,
/// and `metadata` as the header's "__metadata__". The data is packed without
/// gaps, larger elements first (stable, as the reference writer does), so
/// that every tensor is aligned to its elements.
/// Fails with an invalid argument on a duplicate or reserved name or a null
/// tensor, and with a data error naming the file when it cannot be written.
Status writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    const std::map<std::string, std::string> &metadata = {});

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_SAFETENSORS_H
