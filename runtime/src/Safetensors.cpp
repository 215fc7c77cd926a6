//===- Safetensors.cpp - Reading and writing safetensors files ------------===//

#include "tessera/runtime/Safetensors.h"
#include "tessera/runtime/AtomicFile.h"

#include "Json.h"
#include "MappingGuard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>
#include <set>

using namespace tessera;
using namespace tessera::runtime;

namespace {

/// The largest header, or index, the runtime reads: the reference
/// implementation's bound on a header (a JSON value takes more memory than
/// its text, so the text is bounded).
constexpr uint64_t kMaxJsonBytes = 100'000'000;

/// The safetensors dtypes the runtime has; BOOL takes a byte, as i1 does.
const std::pair<const char *, DType> kDTypeNames[] = {
    {"F32", DType::F32},   {"F64", DType::F64}, {"F16", DType::F16},
    {"BF16", DType::BF16}, {"I32", DType::I32}, {"I64", DType::I64},
    {"BOOL", DType::I1}};

std::optional<DType> parseDType(const std::string &name) {
  for (const auto &[text, dtype] : kDTypeNames)
    if (name == text)
      return dtype;
  return std::nullopt;
}

const char *getSafetensorsName(DType dtype) {
  for (const auto &[text, known] : kDTypeNames)
    if (known == dtype)
      return text;
  return nullptr;
}

/// A JSON number that is an index or a size: the reader gives doubles, which
/// hold every integer below 2^53 exactly.
std::optional<uint64_t> getIndex(const JsonValue &value) {
  if (value.kind != JsonValue::Kind::Number)
    return std::nullopt;
  double number = value.number;
  if (!(number >= 0 && number < 9007199254740992.0) ||
      number != std::floor(number))
    return std::nullopt;
  return static_cast<uint64_t>(number);
}

/// A JSON list of such numbers.
std::optional<std::vector<uint64_t>> getIndices(const JsonValue &value) {
  if (value.kind != JsonValue::Kind::Array)
    return std::nullopt;
  std::vector<uint64_t> indices;
  for (const JsonValue &item : value.array) {
    std::optional<uint64_t> index = getIndex(item);
    if (!index)
      return std::nullopt;
    indices.push_back(*index);
  }
  return indices;
}

/// Reads the header entry `name` into `entry`. The data section starts at
/// `data`, byte `dataOffset` of the file, and holds `dataBytes`.
Status parseEntry(const std::string &name, const JsonValue &value,
                  const uint8_t *data, uint64_t dataOffset, uint64_t dataBytes,
                  SafetensorsFile::Entry &entry) {
  auto fail = [&](const std::string &message) {
    return dataError("tensor '" + name + "': " + message);
  };
  if (!value.isObject())
    return fail("expected an object with dtype, shape and data_offsets");
  auto indicesOf = [&](const char *key) {
    const JsonValue *field = value.find(key);
    return field ? getIndices(*field) : std::nullopt;
  };
  const JsonValue *dtypeField = value.find("dtype");
  if (!dtypeField || dtypeField->kind != JsonValue::Kind::String)
    return fail("expected a string \"dtype\"");
  const std::string &dtypeName = dtypeField->string;
  std::optional<DType> dtype = parseDType(dtypeName);
  if (!dtype)
    return fail("unsupported dtype '" + dtypeName +
                "' (expected F32, F64, F16, BF16, I32, I64 or BOOL)");
  std::optional<std::vector<uint64_t>> dims = indicesOf("shape");
  if (!dims)
    return fail("expected \"shape\" to be a list of non-negative integers");
  std::optional<std::vector<uint64_t>> offsets = indicesOf("data_offsets");
  if (!offsets || offsets->size() != 2)
    return fail("expected \"data_offsets\" to be two non-negative integers");

  uint64_t begin = (*offsets)[0], end = (*offsets)[1];
  std::string span =
      "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end || end > dataBytes)
    return fail("data_offsets " + span + " are not a range within the " +
                std::to_string(dataBytes) + " bytes of data");
  std::vector<int64_t> shape(dims->begin(), dims->end());
  int64_t elementBytes = getDTypeBytes(*dtype);
  std::optional<int64_t> count = getCheckedNumElements(shape);
  if (!count || *count > std::numeric_limits<int64_t>::max() / elementBytes)
    return fail("shape " + formatShape(shape) + " is too large");
  uint64_t bytes = *count * elementBytes;
  if (end - begin != bytes)
    return fail("data_offsets " + span + " hold " +
                std::to_string(end - begin) + " bytes, but shape " +
                formatShape(shape) + " of " + dtypeName + " needs " +
                std::to_string(bytes));
  // The mapping starts on a page, so the file offset gives the alignment.
  if ((dataOffset + begin) % elementBytes != 0)
    return fail("data at byte " + std::to_string(dataOffset + begin) +
                " of the file is not aligned to its " +
                std::to_string(elementBytes) + "-byte elements");
  entry = {name, *dtype, std::move(shape), data + begin};
  return Status::success();
}

/// The header's "__metadata__": an object of strings.
Status parseMetadata(const JsonValue &value,
                     std::map<std::string, std::string> &metadata) {
  if (value.isObject()) {
    for (const auto &[key, item] : value.members) {
      if (item.kind != JsonValue::Kind::String)
        break;
      metadata[key] = item.string;
    }
    if (metadata.size() == value.members.size())
      return Status::success();
  }
  return dataError("expected \"__metadata__\" to be an object of strings");
}

} // namespace

SafetensorsFile::SafetensorsFile(SafetensorsFile &&other) noexcept
    : path(std::move(other.path)), fileDevice(other.fileDevice),
      fileInode(other.fileInode),
      mapping(std::exchange(other.mapping, nullptr)),
      mappedBytes(std::exchange(other.mappedBytes, 0)),
      entries(std::move(other.entries)), metadata(std::move(other.metadata)) {}

SafetensorsFile &SafetensorsFile::operator=(SafetensorsFile &&other) noexcept {
  if (this != &other) {
    unmap();
    path = std::move(other.path);
    fileDevice = other.fileDevice;
    fileInode = other.fileInode;
    mapping = std::exchange(other.mapping, nullptr);
    mappedBytes = std::exchange(other.mappedBytes, 0);
    entries = std::move(other.entries);
    metadata = std::move(other.metadata);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (mapping) {
    unguardMapping(mapping);
    ::munmap(mapping, mappedBytes);
  }
  mapping = nullptr;
  mappedBytes = 0;
}

std::vector<std::string> SafetensorsFile::getNames() const {
  std::vector<std::string> names;
  for (const Entry &entry : entries)
    names.push_back(entry.name);
  return names;
}

const SafetensorsFile::Entry *
SafetensorsFile::find(const std::string &name) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), name,
                             [](const Entry &entry, const std::string &key) {
                               return entry.name < key;
                             });
  return it != entries.end() && it->name == name ? &*it : nullptr;
}

Tensor SafetensorsFile::view(const Entry &entry) const {
  return Tensor{entry.dtype, entry.shape, const_cast<void *>(entry.data)};
}

Status SafetensorsFile::checkIntact() const {
  struct stat info;
  bool shrunk = ::stat(path.c_str(), &info) == 0 &&
                static_cast<uint64_t>(info.st_dev) == fileDevice &&
                static_cast<uint64_t>(info.st_ino) == fileInode &&
                static_cast<uint64_t>(info.st_size) < mappedBytes;
  if (!shrunk && !(mapping && isMappingDamaged(mapping)))
    return Status::success();
  return dataError(
      "safetensors file '" + path + "': " +
      (shrunk ? "it was cut short to " + std::to_string(info.st_size) +
                    " bytes while it was read (it held " +
                    std::to_string(mappedBytes) + ")"
              : std::string("a page of it could not be read (was it cut "
                            "short while it was read?)")));
}

Status SafetensorsFile::mapFile(const std::string &filePath) {
  path = filePath;
  std::string where = "safetensors file '" + path + "': ";
  int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0)
    return dataError(where + "cannot open: " + std::strerror(errno));
  struct stat info;
  std::string problem;
  if (::fstat(descriptor, &info) != 0)
    problem = std::string("cannot open: ") + std::strerror(errno);
  else if (S_ISDIR(info.st_mode))
    problem = "it is a directory";
  else if (!S_ISREG(info.st_mode) || info.st_size < 8)
    problem = "not a regular file of at least the 8-byte header length";
  void *mapped = MAP_FAILED;
  if (problem.empty()) {
    mapped =
        ::mmap(nullptr, info.st_size, PROT_READ, MAP_PRIVATE, descriptor, 0);
    if (mapped == MAP_FAILED)
      problem = std::string("cannot map: ") + std::strerror(errno);
  }
  ::close(descriptor);
  if (!problem.empty())
    return dataError(where + problem);
  mapping = mapped;
  mappedBytes = info.st_size;
  fileDevice = info.st_dev;
  fileInode = info.st_ino;
  // Unguarded (past kMaxGuardedMappings files at once), a page the file
  // loses is a SIGBUS, as it was before the guard.
  guardMapping(mapping, mappedBytes);
  return Status::success();
}

Status SafetensorsFile::readHeader() {
  std::string where = "safetensors file '" + path + "': ";
  const auto *bytes = static_cast<const uint8_t *>(mapping);
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = headerBytes << 8 | bytes[i];
  if (headerBytes > mappedBytes - 8)
    return dataError(where + "header length " + std::to_string(headerBytes) +
                     " runs past the end of the file (" +
                     std::to_string(mappedBytes) + " bytes)");
  if (headerBytes > kMaxJsonBytes)
    return dataError(where + "header length " + std::to_string(headerBytes) +
                     " is over the format's limit of " +
                     std::to_string(kMaxJsonBytes) + " bytes");
  std::string_view json(reinterpret_cast<const char *>(bytes + 8), headerBytes);
  if (json.empty() || json[0] != '{')
    return dataError(where + "header is not a JSON object");
  Expected<JsonValue> header = parseJson(json);
  if (!header.ok())
    return dataError(where + "header is not valid JSON: " + header.message());

  uint64_t dataOffset = 8 + headerBytes, dataBytes = mappedBytes - dataOffset;
  for (const auto &[name, value] : header->members) {
    Status status = Status::success();
    if (name == "__metadata__") {
      status = parseMetadata(value, metadata);
    } else {
      entries.emplace_back();
      status = parseEntry(name, value, bytes + dataOffset, dataOffset,
                          dataBytes, entries.back());
    }
    if (!status.ok())
      return status.withPrefix(where);
  }
  // The reader refused duplicate names; the entries go by name.
  std::sort(entries.begin(), entries.end(),
            [](const auto &a, const auto &b) { return a.name < b.name; });
  return checkOverlaps().withPrefix(where);
}

Status SafetensorsFile::checkOverlaps() const {
  // By where they start, a tensor overlaps an earlier one when it starts
  // before the furthest end so far; an empty tensor overlaps nothing.
  auto start = [](const Entry *entry) {
    return static_cast<const uint8_t *>(entry->data);
  };
  auto end = [&](const Entry *entry) {
    return start(entry) +
           getNumElements(entry->shape) * getDTypeBytes(entry->dtype);
  };
  std::vector<const Entry *> byStart;
  for (const Entry &entry : entries)
    if (end(&entry) != start(&entry))
      byStart.push_back(&entry);
  std::stable_sort(
      byStart.begin(), byStart.end(),
      [&](const Entry *a, const Entry *b) { return start(a) < start(b); });
  const Entry *furthest = nullptr;
  for (const Entry *entry : byStart) {
    if (furthest && start(entry) < end(furthest))
      return dataError("tensors '" + furthest->name + "' and '" + entry->name +
                       "' overlap in the data");
    if (!furthest || end(entry) > end(furthest))
      furthest = entry;
  }
  return Status::success();
}

Expected<SafetensorsFile> runtime::openSafetensors(const std::string &path) {
  SafetensorsFile file;
  if (Status status = file.mapFile(path); !status.ok())
    return status;
  // A file cut short while its header is read reads zeros there: that,
  // rather than what the zeros look like, is the error.
  Status read = file.readHeader();
  if (Status intact = file.checkIntact(); !intact.ok())
    return intact;
  if (!read.ok())
    return read;
  return Expected<SafetensorsFile>(std::move(file));
}

Status SafetensorsCheckpoint::checkIntact() const {
  for (const SafetensorsFile &file : files)
    if (Status status = file.checkIntact(); !status.ok())
      return status;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Conversion
//===----------------------------------------------------------------------===//

namespace {

/// Element `i` of a float tensor, widened.
double getFloat(const Tensor &tensor, int64_t i) {
  if (isHalf(tensor.dtype))
    return halfToFloat(tensor.dtype, tensor.as<uint16_t>()[i]);
  return tensor.dtype == DType::F64 ? tensor.as<double>()[i]
                                    : tensor.as<float>()[i];
}

/// Stores `value` rounded to nearest even; f16 and bf16 round through f32.
void setFloat(const Tensor &tensor, int64_t i, double value) {
  if (isHalf(tensor.dtype))
    tensor.as<uint16_t>()[i] =
        floatToHalf(tensor.dtype, static_cast<float>(value));
  else if (tensor.dtype == DType::F64)
    tensor.as<double>()[i] = value;
  else
    tensor.as<float>()[i] = static_cast<float>(value);
}

/// Element `i` of an integer tensor; an i1 is a byte.
int64_t getInteger(const Tensor &tensor, int64_t i) {
  if (tensor.dtype == DType::I64)
    return tensor.as<int64_t>()[i];
  return tensor.dtype == DType::I32 ? tensor.as<int32_t>()[i]
                                    : tensor.as<uint8_t>()[i];
}

/// Stores `value`, which the caller checked to be in range.
void setInteger(const Tensor &tensor, int64_t i, int64_t value) {
  if (tensor.dtype == DType::I64)
    tensor.as<int64_t>()[i] = value;
  else if (tensor.dtype == DType::I32)
    tensor.as<int32_t>()[i] = static_cast<int32_t>(value);
  else
    tensor.as<uint8_t>()[i] = static_cast<uint8_t>(value);
}

/// The values an integer dtype holds.
std::pair<int64_t, int64_t> getIntegerRange(DType dtype) {
  if (dtype == DType::I1)
    return {0, 1};
  if (dtype == DType::I32)
    return {std::numeric_limits<int32_t>::min(),
            std::numeric_limits<int32_t>::max()};
  return {std::numeric_limits<int64_t>::min(),
          std::numeric_limits<int64_t>::max()};
}

} // namespace

Expected<OwnedTensor> runtime::convertTo(const Tensor &from, DType to) {
  Expected<OwnedTensor> allocated = OwnedTensor::allocate(
      to, from.shape, std::string("a tensor converted to ") + getDTypeName(to));
  if (!allocated.ok())
    return allocated.getStatus();
  OwnedTensor result = allocated.take();
  int64_t count = from.getNumElements();
  if (from.dtype == to) {
    if (count > 0)
      std::memcpy(result.view.data, from.data, from.getBytes());
    return result;
  }
  if (isFloat(from.dtype) != isFloat(to))
    return invalidArgument(
        std::string("cannot convert ") + getDTypeName(from.dtype) + " to " +
        getDTypeName(to) + ": only float to float or integer to integer");
  if (isFloat(to)) {
    for (int64_t i = 0; i < count; ++i)
      setFloat(result.view, i, getFloat(from, i));
    return result;
  }
  auto [low, high] = getIntegerRange(to);
  for (int64_t i = 0; i < count; ++i) {
    int64_t value = getInteger(from, i);
    if (value < low || value > high)
      return dataError("element " + std::to_string(i) + " is " +
                       std::to_string(value) + ", out of the range of " +
                       getDTypeName(to));
    setInteger(result.view, i, value);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

Status runtime::writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + quoteJson(key) + ":" +
                quoteJson(value);
    header += "}";
  }
  std::set<std::string> seen;
  for (const auto &named : tensors) {
    const std::string &name = named.first;
    const Tensor *tensor = named.second;
    auto fail = [&](const std::string &message) {
      return invalidArgument("cannot write tensor '" + name + "' to '" + path +
                             "': " + message);
    };
    if (name == "__metadata__")
      return fail("the name is reserved for the header's metadata");
    if (!seen.insert(name).second)
      return fail("another tensor has the same name");
    if (!tensor)
      return fail("the tensor is null");
    std::optional<int64_t> count = getCheckedNumElements(tensor->shape);
    if (!count || *count > std::numeric_limits<int64_t>::max() / 8)
      return fail("shape " + formatShape(tensor->shape) + " is invalid");
    if (!tensor->data && *count > 0)
      return fail("the tensor has no data");
  }
  // As the reference writer does, the data holds the tensors of larger
  // elements first, so that each is aligned to its elements (the header
  // keeps the given order).
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return getDTypeBytes(tensors[a].second->dtype) >
           getDTypeBytes(tensors[b].second->dtype);
  });
  std::vector<uint64_t> begins(tensors.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    begins[i] = offset;
    offset += tensors[i].second->getBytes();
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor &tensor = *tensors[i].second;
    std::string dims;
    for (int64_t size : tensor.shape)
      dims += (dims.empty() ? "" : ",") + std::to_string(size);
    header += (header.size() > 1 ? "," : "") + quoteJson(tensors[i].first) +
              ":{\"dtype\":\"" + getSafetensorsName(tensor.dtype) +
              "\",\"shape\":[" + dims + "],\"data_offsets\":[" +
              std::to_string(begins[i]) + "," +
              std::to_string(begins[i] + tensor.getBytes()) + "]}";
  }
  header += "}";
  // Padded with spaces, as the reference writer does, to start the data on
  // 8 bytes.
  header.append((8 - header.size() % 8) % 8, ' ');

  char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<char>(uint64_t(header.size()) >> (8 * i));
  std::vector<std::string_view> pieces = {{length, 8}, header};
  for (size_t i : order)
    pieces.emplace_back(tensors[i].second->as<const char>(),
                        tensors[i].second->getBytes());
  return writeFileAtomically(path, pieces, "safetensors file");
}

//===----------------------------------------------------------------------===//
// Sharded checkpoints (Hugging Face's index)
//===----------------------------------------------------------------------===//

const SafetensorsFile::Entry *
SafetensorsCheckpoint::find(const std::string &name) const {
  auto it = entries.find(name);
  return it == entries.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsCheckpoint::getNames() const {
  std::vector<std::string> names;
  for (const auto &entry : entries)
    names.push_back(entry.first);
  return names;
}

namespace {

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The directory part of `path`, with its slash ("" for none).
std::string getDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

/// Appends what is left of the file open as `descriptor` to `text`, at
/// most kMaxJsonBytes; the failure's message is the reason alone.
Status readAll(int descriptor, std::string &text) {
  char chunk[1 << 16];
  for (;;) {
    ssize_t got = ::read(descriptor, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return dataError(std::strerror(errno));
    if (got == 0)
      return Status::success();
    text.append(chunk, got);
    if (text.size() > kMaxJsonBytes)
      return dataError("it is over " + std::to_string(kMaxJsonBytes) +
                       " bytes");
  }
}

/// The whole file at `path`; a data error "cannot read the <what> '<path>':
/// <why>" when it is a directory or cannot be read.
Expected<std::string> readWholeFile(const std::string &path,
                                    const std::string &what) {
  auto fail = [&](const std::string &reason) {
    return dataError("cannot read the " + what + " '" + path + "': " + reason);
  };
  int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0)
    return fail(std::strerror(errno));
  struct stat info;
  std::string problem;
  if (::fstat(descriptor, &info) != 0)
    problem = std::strerror(errno);
  else if (S_ISDIR(info.st_mode))
    problem = "it is a directory";
  else if (!S_ISREG(info.st_mode))
    problem = "it is not a regular file";
  else if (static_cast<uint64_t>(info.st_size) > kMaxJsonBytes)
    problem = "it is over " + std::to_string(kMaxJsonBytes) + " bytes";
  if (!problem.empty()) {
    ::close(descriptor);
    return fail(problem);
  }
  std::string text;
  Status read = readAll(descriptor, text);
  ::close(descriptor);
  if (!read.ok())
    return fail(read.message());
  return text;
}

/// Whether `name`, a file of `directory`, leads (symbolic links followed)
/// to a file inside `directory`'s own real path: an index's weight map may
/// name files beside it, never reach out through a link.
bool staysInDirectory(const std::string &directory, const std::string &name) {
  std::error_code error;
  std::filesystem::path real = std::filesystem::canonical(
      std::filesystem::path(directory.empty() ? "." : directory), error);
  if (error)
    return false;
  std::filesystem::path target =
      std::filesystem::weakly_canonical(real / name, error);
  if (error)
    return false;
  auto [realEnd, targetEnd] =
      std::mismatch(real.begin(), real.end(), target.begin(), target.end());
  return realEnd == real.end() && targetEnd != target.end();
}

/// Opens, into `files`, the safetensors files that the sharded checkpoint's
/// index at `path` names, each once, in the order of the files' names, and
/// checks that each holds the tensors the index gives it.
Status openIndexedFiles(const std::string &path,
                        std::vector<SafetensorsFile> &files) {
  auto fail = [&](const std::string &message) {
    return dataError("safetensors index '" + path + "': " + message);
  };
  Expected<std::string> json = readWholeFile(path, "safetensors index");
  if (!json.ok())
    return json.getStatus();
  Expected<JsonValue> index = parseJson(*json);
  if (!index.ok())
    return fail("not valid JSON: " + index.message());
  if (!index->isObject())
    return fail("not a JSON object");
  const JsonValue *map = index->find("weight_map");
  if (!map || !map->isObject())
    return fail("no \"weight_map\" object naming each tensor's file");
  std::map<std::string, std::vector<std::string>> byFile;
  for (const auto &[name, file] : map->members) {
    if (file.kind != JsonValue::Kind::String || file.string.empty() ||
        file.string.find('/') != std::string::npos)
      return fail("tensor '" + name +
                  "' is mapped to no file name of this directory");
    byFile[file.string].push_back(name);
  }
  std::string directory = getDirectory(path);
  for (const auto &[file, names] : byFile) {
    if (!staysInDirectory(directory, file))
      return fail("the weight map names '" + file +
                  "', which leads outside the index's directory");
    Expected<SafetensorsFile> opened = openSafetensors(directory + file);
    if (!opened.ok())
      return opened.getStatus();
    for (const std::string &name : names)
      if (!opened->find(name))
        return fail("tensor '" + name + "' is not in '" + file +
                    "', which the weight map names");
    files.push_back(opened.take());
  }
  return Status::success();
}

} // namespace

Expected<SafetensorsCheckpoint>
runtime::openSafetensorsCheckpoint(const std::string &path) {
  SafetensorsCheckpoint checkpoint;
  if (endsWith(path, ".index.json")) {
    if (Status status = openIndexedFiles(path, checkpoint.files); !status.ok())
      return status;
  } else {
    Expected<SafetensorsFile> file = openSafetensors(path);
    if (!file.ok())
      return file.getStatus();
    checkpoint.files.push_back(file.take());
  }
  for (const SafetensorsFile &file : checkpoint.files)
    for (const SafetensorsFile::Entry &entry : file.getEntries())
      if (!checkpoint.entries.emplace(entry.name, &entry).second)
        return dataError("safetensors checkpoint '" + path + "' holds '" +
                         entry.name + "' in two files");
  return checkpoint;
}

Status runtime::writeSafetensorsShards(
    const std::string &indexPath,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    int64_t maxShardBytes, const std::map<std::string, std::string> &metadata) {
  if (!endsWith(indexPath, ".safetensors.index.json"))
    return invalidArgument("a sharded safetensors checkpoint's index is named "
                           "<name>.safetensors.index.json, got '" +
                           indexPath + "'");
  if (maxShardBytes < 1)
    return invalidArgument("a shard holds at least one byte");
  // The tensors in order, a shard closed once it holds maxShardBytes.
  std::vector<std::vector<std::pair<std::string, const Tensor *>>> shards(1);
  int64_t bytes = 0, total = 0;
  for (const auto &tensor : tensors) {
    int64_t size = tensor.second ? tensor.second->getBytes() : 0;
    if (!shards.back().empty() && bytes + size > maxShardBytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(tensor);
    bytes += size;
    total += size;
  }
  std::string base = indexPath.substr(
      0, indexPath.size() - std::string(".safetensors.index.json").size());
  size_t slash = base.rfind('/');
  std::string stem = slash == std::string::npos ? base : base.substr(slash + 1);
  std::string weightMap;
  for (size_t k = 0; k < shards.size(); ++k) {
    char suffix[40];
    std::snprintf(suffix, sizeof suffix, "-%05zu-of-%05zu.safetensors", k + 1,
                  shards.size());
    if (Status status = writeSafetensors(base + suffix, shards[k], metadata);
        !status.ok())
      return status;
    for (const auto &tensor : shards[k])
      weightMap += (weightMap.empty() ? "" : ",\n    ") +
                   quoteJson(tensor.first) + ": " + quoteJson(stem + suffix);
  }
  std::string index = "{\n  \"metadata\": {\"total_size\": " +
                      std::to_string(total) + "},\n  \"weight_map\": {\n    " +
                      weightMap + "\n  }\n}\n";
  return writeFileAtomically(indexPath, {index});
}
