//===- Checkpoint.cpp - tessera-run's checkpoints -------------------------===//

#include "tessera/runtime/training/Checkpoint.h"

#include "tessera/runtime/AtomicFile.h"
#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/Plan.h"

#include <google/protobuf/text_format.h>
#include <xxhash.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

using namespace tessera;
using namespace tessera::runtime;

namespace {

/// The arguments a checkpoint holds: parameters and optimizer state.
std::vector<int> getCheckpointed(const plan::Program &program) {
  std::vector<int> indices;
  for (int i = 0; i < program.arguments_size(); ++i)
    if (program.arguments(i).role() == plan::PARAM ||
        program.arguments(i).role() == plan::OPTIMIZER_STATE)
      indices.push_back(i);
  return indices;
}

/// "ckpt/" as "ckpt", whose siblings "ckpt.partial" and "ckpt.old" hold a
/// save's staging and the checkpoint it replaces.
std::string withoutTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}

std::string getShardPath(const std::string &dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".tensors";
}
std::string getShardIndexPath(const std::string &dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".txt";
}

/// "dp=2 tp=2"; "-" for one device.
std::string formatMesh(const Mesh &mesh) {
  std::string text;
  for (size_t axis = 0; axis < mesh.getAxisNames().size(); ++axis)
    text += (axis ? " " : "") + mesh.getAxisNames()[axis] + "=" +
            std::to_string(mesh.getAxisSizes()[axis]);
  return text.empty() ? "-" : text;
}

/// How an argument's global tensor lies over the ranks, as one line: the
/// axes of its dims, its flat axes and its members.
std::string formatLayout(const plan::Argument &argument) {
  plan::Argument layout;
  *layout.mutable_dim_axes() = argument.dim_axes();
  *layout.mutable_flat_axes() = argument.flat_axes();
  *layout.mutable_members() = argument.members();
  *layout.mutable_padded_shape() = argument.padded_shape();
  std::string text = layout.ShortDebugString();
  return text.empty() ? "-" : text;
}

/// "<name> <dtype> <global dims...> @ <layout>": what a checkpoint records
/// of an argument, and what a load must find.
std::string describeArgument(const plan::Argument &argument) {
  std::string text =
      argument.name() + " " + getDTypeName(getDType(argument.dtype()));
  for (int64_t size : argument.global_shape())
    text += " " + std::to_string(size);
  return text + " @ " + formatLayout(argument);
}

/// XXH3-64 of a file's bytes.
Expected<uint64_t> getFileChecksum(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return dataError("cannot read '" + path + "'");
  XXH3_state_t *state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<char> buffer(1 << 20);
  while (file) {
    file.read(buffer.data(), buffer.size());
    XXH3_64bits_update(state, buffer.data(), file.gcount());
  }
  uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

/// A checksum as the index files write it: 16 lowercase hex digits.
std::string formatChecksum(uint64_t checksum) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, checksum);
  return hex;
}

/// The checksum formatChecksum wrote; none for any other text.
std::optional<uint64_t> parseChecksum(const std::string &text) {
  if (text.size() != 16 ||
      text.find_first_not_of("0123456789abcdef") != std::string::npos)
    return std::nullopt;
  return std::strtoull(text.c_str(), nullptr, 16);
}

/// The most bytes a checkpoint's index file (index.txt, rank-<N>.txt) may
/// hold: a line per rank of the largest mesh, or a line per tensor, is far
/// less; a larger file is damaged, and is not read into memory.
constexpr std::streamoff kMaxIndexFileBytes = std::streamoff(1) << 28;

/// The whole text of one of a checkpoint's index files.
Expected<std::string> readIndexFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    return dataError("cannot read '" + path + "'");
  std::streamoff size = file.tellg();
  if (size < 0 || size > kMaxIndexFileBytes)
    return dataError("'" + path + "' holds " + std::to_string(size) +
                     " bytes, more than a checkpoint index file holds (" +
                     std::to_string(kMaxIndexFileBytes) + ")");
  std::string text(static_cast<size_t>(size), '\0');
  file.seekg(0);
  if (!file.read(text.data(), size))
    return dataError("cannot read '" + path + "'");
  return text;
}

/// The lines of `text` as std::getline reads them: a last line without its
/// newline is a line, a newline at the end starts none.
std::vector<std::string> splitLines(const std::string &text) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

/// `text` (whole lines) followed by the line that seals it: "xxh3 " and the
/// XXH3-64 of every byte before that line.
std::string sealText(const std::string &text) {
  return text + "xxh3 " +
         formatChecksum(XXH3_64bits(text.data(), text.size())) + "\n";
}

/// What `text` (the contents of `path`) holds before its sealing line, once
/// that line's checksum is found to be the XXH3-64 of those bytes.
Expected<std::string> unsealText(const std::string &text,
                                 const std::string &path) {
  // The last line begins after the newline before the final one.
  bool ended = !text.empty() && text.back() == '\n';
  size_t previous =
      text.size() < 2 ? std::string::npos : text.rfind('\n', text.size() - 2);
  size_t begin = previous == std::string::npos ? 0 : previous + 1;
  std::string last =
      ended ? text.substr(begin, text.size() - 1 - begin) : std::string();
  std::optional<uint64_t> recorded = last.rfind("xxh3 ", 0) == 0
                                         ? parseChecksum(last.substr(5))
                                         : std::nullopt;
  if (!recorded)
    return dataError("'" + path +
                     "' is damaged: it does not end with the line of its "
                     "checksum ('xxh3 ' and 16 hex digits)");
  if (XXH3_64bits(text.data(), begin) != *recorded)
    return dataError("'" + path +
                     "' is damaged: its contents do not match the checksum "
                     "on its last line");
  return text.substr(0, begin);
}

/// Flushes a file or directory to the disk.
Status sync(const std::string &path, bool directory = false) {
  int fd = ::open(path.c_str(), O_RDONLY | (directory ? O_DIRECTORY : 0));
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0)
      ::close(fd);
    return dataError("cannot sync '" + path + "' to the disk");
  }
  ::close(fd);
  return Status::success();
}

/// Every rank learns whether any failed: the first failing rank keeps its
/// error, the others get one naming it; a rank that never comes, a timeout
/// after `timeoutSeconds`.
Status agree(Status status, const Job &job, double timeoutSeconds) {
  int size = job.getSize(), rank = job.getRank(), first = 0;
  int mine = status.ok() ? size : rank;
  if (Status agreed =
          job.allReduceMin(mine, first, timeoutSeconds,
                           "a rank stopped while saving the checkpoint");
      !agreed.ok())
    return agreed;
  if (first == size || first == rank)
    return status;
  return dataError("rank " + std::to_string(first) +
                   " could not save its part of the checkpoint");
}

/// The first line of a checkpoint's index.txt, and of a rank's index file,
/// in format `version`.
std::string getIndexHeader(int version) {
  return "tessera checkpoint v" + std::to_string(version);
}
std::string getShardIndexHeader(int version) {
  return "tessera checkpoint shard v" + std::to_string(version);
}

/// The format a save writes. v3 is v2 with index.txt sealed: it records the
/// XXH3-64 of each rank's index file (which records that of the rank's
/// tensors file) and ends with that of its own text, so that every name,
/// dtype, shape, layout, the step, the mesh and the format itself are
/// checked before anything of them is trusted.
constexpr int kSavedFormat = 3;

/// Writes rank `rank`'s files into `dir`: its tensors, then its index.
Status writeShardFiles(const std::string &dir, const plan::Program &program,
                       const std::vector<OwnedTensor> &locals, int rank) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error && !std::filesystem::is_directory(dir))
    return dataError("cannot make the checkpoint directory '" + dir +
                     "': " + error.message());
  std::vector<int> indices = getCheckpointed(program);
  std::string tensors = getShardPath(dir, rank);
  TensorFileWriter writer;
  if (Status status = writer.open(tensors); !status.ok())
    return status;
  for (int i : indices) {
    const Tensor &piece = locals[i].view;
    if (Status status = writer.write(piece.dtype, piece.shape, piece.data,
                                     piece.getBytes());
        !status.ok())
      return status;
  }
  if (Status status = writer.close(); !status.ok())
    return status;
  if (Status status = sync(tensors); !status.ok())
    return status;
  Expected<uint64_t> checksum = getFileChecksum(tensors);
  if (!checksum.ok())
    return checksum.getStatus();
  std::string text = getShardIndexHeader(kSavedFormat) + "\nxxh3 " +
                     formatChecksum(*checksum) + "\n";
  for (int i : indices)
    text += describeArgument(program.arguments(i)) + "\n";
  return writeFileAtomically(getShardIndexPath(dir, rank), {text},
                             "checkpoint index");
}

/// Writes `dir`'s index.txt, sealing the rank files of every rank of
/// `mesh` already there.
Status writeIndexFile(const std::string &dir, const Mesh &mesh, int64_t step) {
  std::string text = getIndexHeader(kSavedFormat) + "\nstep " +
                     std::to_string(step) + "\nmesh " + formatMesh(mesh) + "\n";
  for (int64_t rank = 0; rank < mesh.getNumDevices(); ++rank) {
    Expected<uint64_t> checksum =
        getFileChecksum(getShardIndexPath(dir, static_cast<int>(rank)));
    if (!checksum.ok())
      return checksum.getStatus();
    text +=
        "rank " + std::to_string(rank) + " " + formatChecksum(*checksum) + "\n";
  }
  return writeFileAtomically(dir + "/index.txt", {sealText(text)},
                             "checkpoint index");
}

/// Rank 0 puts `staging` in place of `dir`. Where the file system can, the
/// two directories trade places in one atomic rename (RENAME_EXCHANGE), so
/// that `dir` always holds a whole checkpoint; elsewhere `dir` moves to
/// `old` first, and one of the two always does.
Status swapIn(const std::string &staging, const std::string &dir,
              const std::string &old) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (Status status = sync(staging, /*directory=*/true); !status.ok())
    return status;
  fs::remove_all(old, error);
  if (!fs::exists(dir)) {
    fs::rename(staging, dir, error);
  } else if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, dir.c_str(),
                         RENAME_EXCHANGE) == 0) {
    // The staging directory now holds the previous checkpoint.
    fs::remove_all(staging, error);
    error.clear();
  } else if (errno == EINVAL || errno == ENOSYS) {
    fs::rename(dir, old, error);
    if (!error)
      fs::rename(staging, dir, error);
    if (!error)
      fs::remove_all(old, error);
  } else {
    error = std::error_code(errno, std::generic_category());
  }
  if (error)
    return dataError("cannot put the checkpoint in place of '" + dir +
                     "': " + error.message());
  fs::path parent = fs::absolute(dir).parent_path();
  return sync(parent.string(), /*directory=*/true);
}

/// The mesh formatMesh wrote ("dp=2 tp=2", "-" for one device).
Expected<Mesh> parseMesh(const std::string &text) {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::istringstream words(text == "-" ? "" : text);
  int64_t devices = 1;
  for (std::string word; words >> word;) {
    size_t equals = word.find('=');
    char *end = nullptr;
    errno = 0;
    long long size = equals == std::string::npos
                         ? 0
                         : std::strtoll(word.c_str() + equals + 1, &end, 10);
    if (equals == std::string::npos || equals == 0 || *end != '\0' ||
        errno == ERANGE || size < 1 || size > kMaxDevices / devices)
      return dataError("the checkpoint's mesh '" + text +
                       "' is not a list of axis=size");
    devices *= size;
    names.push_back(word.substr(0, equals));
    sizes.push_back(size);
  }
  return Mesh(names, sizes);
}

/// A checkpoint's index.txt: its format, the step it reached, the mesh it
/// was saved on and, from v3, the XXH3-64 of each saved rank's index file.
struct CheckpointIndex {
  std::string path;
  int format = kSavedFormat;
  int64_t step = 0;
  /// The mesh as recorded ("dp=2 tp=2") and as read.
  std::string meshText;
  Mesh mesh;
  std::vector<uint64_t> shardIndexChecksums;
};

/// The format an index.txt's first line names; 0 for none this runtime
/// knows.
int getIndexFormat(const std::string &header) {
  for (int version = 1; version <= kSavedFormat; ++version)
    if (header == getIndexHeader(version))
      return version;
  return 0;
}

/// The step an index.txt's second line records.
Expected<int64_t> parseStepLine(const std::string &line,
                                const std::string &dir) {
  if (line.rfind("step ", 0) != 0)
    return dataError("'" + dir + "' holds no Tessera checkpoint index");
  char *end = nullptr;
  errno = 0;
  long long step = std::strtoll(line.c_str() + 5, &end, 10);
  if (*end != '\0' || end == line.c_str() + 5 || errno == ERANGE)
    return dataError("the checkpoint in '" + dir + "' has no step number");
  if (step < 0)
    return dataError("the checkpoint in '" + dir + "' is at step " +
                     std::to_string(step) + "; steps count from 0");
  return static_cast<int64_t>(step);
}

/// The checksums of a v3 index's rank lines ("rank <N> <checksum>", one
/// per device of its mesh, in rank order). A rank is a number, never a
/// file's name: every path a load opens is the checkpoint directory's.
Status parseRankLines(const std::vector<std::string> &lines,
                      CheckpointIndex &index) {
  int64_t ranks = static_cast<int64_t>(lines.size()) - 3;
  if (ranks != index.mesh.getNumDevices())
    return dataError("'" + index.path + "' records checksums for " +
                     std::to_string(std::max<int64_t>(ranks, 0)) +
                     " ranks, its mesh '" + index.meshText + "' has " +
                     std::to_string(index.mesh.getNumDevices()));
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const std::string &line = lines[3 + rank];
    std::string prefix = "rank " + std::to_string(rank) + " ";
    std::optional<uint64_t> checksum =
        line.rfind(prefix, 0) == 0 ? parseChecksum(line.substr(prefix.size()))
                                   : std::nullopt;
    if (!checksum)
      return dataError("'" + index.path + "' line " + std::to_string(4 + rank) +
                       " is '" + line + "', not '" + prefix + "<checksum>'");
    index.shardIndexChecksums.push_back(*checksum);
  }
  return Status::success();
}

/// Reads `dir`'s index.txt. A v3 index is checked against its own checksum
/// before any of it is read; a v2 index (saved before v3) has none, and
/// holds its three lines only. A v1 index (tensors by position, without a
/// checksum of anything) is refused: nothing in it can be checked.
Expected<CheckpointIndex> readCheckpointIndex(const std::string &dir) {
  CheckpointIndex index;
  index.path = dir + "/index.txt";
  if (!std::filesystem::is_regular_file(index.path))
    return dataError("'" + dir + "' holds no Tessera checkpoint index");
  Expected<std::string> text = readIndexFile(index.path);
  if (!text.ok())
    return text.getStatus();
  std::string body = *text;
  index.format = getIndexFormat(body.substr(0, body.find('\n')));
  if (index.format == 0)
    return dataError("'" + dir + "' holds no Tessera checkpoint index");
  if (index.format == 1)
    return dataError("'" + index.path +
                     "' is of format v1, which has no checksum to check its "
                     "tensors by: only v2 and v3 checkpoints load");
  if (index.format >= 3) {
    Expected<std::string> unsealed = unsealText(*text, index.path);
    if (!unsealed.ok())
      return unsealed.getStatus();
    body = unsealed.take();
  }
  std::vector<std::string> lines = splitLines(body);
  lines.resize(std::max<size_t>(lines.size(), 3));
  Expected<int64_t> step = parseStepLine(lines[1], dir);
  if (!step.ok())
    return step.getStatus();
  index.step = *step;
  if (lines[2].rfind("mesh ", 0) != 0)
    return dataError("the checkpoint in '" + dir +
                     "' does not say which mesh it was saved on");
  index.meshText = lines[2].substr(5);
  Expected<Mesh> mesh = parseMesh(index.meshText);
  if (!mesh.ok())
    return mesh.getStatus();
  index.mesh = mesh.take();
  if (index.format >= 3) {
    if (Status status = parseRankLines(lines, index); !status.ok())
      return status;
  } else if (lines.size() != 3) {
    // A v3 index relabelled v2 keeps its rank lines: a v2 index has none.
    return dataError("'" + index.path + "' holds " +
                     std::to_string(lines.size()) +
                     " lines, not the 3 of a v2 checkpoint index");
  }
  return index;
}

/// One saved rank's files: its index's entries (describeArgument's lines)
/// and its tensors, in the same order.
struct Shard {
  std::vector<std::string> entries;
  std::vector<OwnedTensor> tensors;
  /// The XXH3-64 its index records of its tensors file.
  uint64_t checksum = 0;
};

/// The error of a tensors file whose bytes are not its index's checksum.
Status getDamagedError(const std::string &dir, int64_t rank) {
  return dataError("'" + getShardPath(dir, static_cast<int>(rank)) +
                   "' is damaged: its contents do not match the checksum "
                   "in '" +
                   getShardIndexPath(dir, static_cast<int>(rank)) + "'");
}

/// Reads saved rank `rank`'s index file: from v3, checked against the
/// checksum `index` records of it before any of it is read; in every
/// format, of the format `index` names.
Expected<Shard> readShardIndex(const std::string &dir,
                               const CheckpointIndex &index, int64_t rank) {
  std::string path = getShardIndexPath(dir, static_cast<int>(rank));
  if (index.format >= 3 &&
      rank >= static_cast<int64_t>(index.shardIndexChecksums.size()))
    return dataError("'" + index.path + "' records no checksum of '" + path +
                     "'");
  Expected<std::string> text = readIndexFile(path);
  if (!text.ok())
    return text.getStatus();
  if (index.format >= 3 && XXH3_64bits(text->data(), text->size()) !=
                               index.shardIndexChecksums[rank])
    return dataError("'" + path +
                     "' is damaged: its contents do not match the checksum "
                     "in '" +
                     index.path + "'");
  std::vector<std::string> lines = splitLines(*text);
  std::optional<uint64_t> checksum =
      lines.size() >= 2 && lines[1].rfind("xxh3 ", 0) == 0
          ? parseChecksum(lines[1].substr(5))
          : std::nullopt;
  if (lines.empty() || lines[0] != getShardIndexHeader(index.format) ||
      !checksum)
    return dataError("'" + path + "' is not a Tessera checkpoint shard's " +
                     "index of format v" + std::to_string(index.format) +
                     ", which '" + index.path + "' names");
  Shard shard;
  shard.checksum = *checksum;
  shard.entries.assign(lines.begin() + 2, lines.end());
  return shard;
}

/// Reads saved rank `rank`'s shard, its tensors checked against its
/// index's checksum.
Expected<Shard> readShard(const std::string &dir, const CheckpointIndex &index,
                          int64_t rank) {
  Expected<Shard> read = readShardIndex(dir, index, rank);
  if (!read.ok())
    return read.getStatus();
  Shard shard = read.take();
  std::string tensorsPath = getShardPath(dir, static_cast<int>(rank));
  Expected<uint64_t> checksum = getFileChecksum(tensorsPath);
  if (!checksum.ok())
    return checksum.getStatus();
  if (*checksum != shard.checksum)
    return getDamagedError(dir, rank);
  Expected<std::vector<OwnedTensor>> tensors = readTensors(tensorsPath);
  if (!tensors.ok())
    return tensors.getStatus();
  shard.tensors = tensors.take();
  if (shard.tensors.size() != shard.entries.size())
    return dataError(
        "'" + tensorsPath + "' holds " + std::to_string(shard.tensors.size()) +
        " tensors, its index " + std::to_string(shard.entries.size()));
  return shard;
}

/// The name an index entry gives its tensor.
std::string getEntryName(const std::string &entry) {
  return entry.substr(0, entry.find(' '));
}

/// Whether a saved rank's index (`shard`) records exactly this plan's
/// checkpointed arguments in this plan's layouts: then its tensors are this
/// rank's pieces, loaded by name alone.
bool holdsPlanLayouts(const Shard &shard, const plan::Program &program) {
  std::multiset<std::string> entries(shard.entries.begin(),
                                     shard.entries.end()),
      wanted;
  for (int i : getCheckpointed(program))
    wanted.insert(describeArgument(program.arguments(i)));
  return entries == wanted;
}

/// A checkpoint on the mesh it was saved on: this rank's tensors by name,
/// checked against its index (`shard`, read and checked) and checksum.
/// The tensors are read straight into the arguments they replace, and the
/// checksum is computed in the same pass.
Status loadByName(const std::string &dir, const Shard &shard,
                  const plan::Program &program,
                  std::vector<OwnedTensor> &locals, int rank) {
  std::map<std::string, size_t> byName;
  for (size_t k = 0; k < shard.entries.size(); ++k)
    byName[getEntryName(shard.entries[k])] = k;
  std::vector<Tensor> into(shard.entries.size());
  for (int i : getCheckpointed(program)) {
    const plan::Argument &argument = program.arguments(i);
    auto it = byName.find(argument.name());
    if (it == byName.end())
      return dataError("the checkpoint in '" + dir + "' has no '" +
                       argument.name() + "' for rank " + std::to_string(rank));
    std::string want = describeArgument(argument);
    if (shard.entries[it->second] != want)
      return dataError("checkpoint tensor '" + shard.entries[it->second] +
                       "' is not this plan's '" + want + "'");
    into[it->second] = locals[i].view;
    byName.erase(it);
  }
  if (!byName.empty())
    return dataError("the checkpoint in '" + dir + "' holds '" +
                     byName.begin()->first + "' for rank " +
                     std::to_string(rank) + ", which this plan does not have");
  std::string tensorsPath = getShardPath(dir, rank);
  XXH3_state_t *state = XXH3_createState();
  XXH3_64bits_reset(state);
  Status status =
      readTensorsInto(tensorsPath, into, [&](const void *data, size_t bytes) {
        XXH3_64bits_update(state, data, bytes);
      });
  uint64_t checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (!status.ok())
    return status.withPrefix("'" + getShardIndexPath(dir, rank) +
                             "' does not describe its tensors file: ");
  return checksum == shard.checksum ? Status::success()
                                    : getDamagedError(dir, rank);
}

/// "f32 [64, 256]".
std::string describeTensor(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(getDTypeName(dtype)) + " " + formatShape(shape);
}

/// The global shape an index entry records ("<name> <dtype> <dims...> @").
Expected<std::vector<int64_t>> getEntryShape(const std::string &entry) {
  std::istringstream words(entry.substr(0, entry.find(" @ ")));
  std::string name, dtype, word;
  words >> name >> dtype;
  std::vector<int64_t> shape;
  while (words >> word) {
    char *end = nullptr;
    errno = 0;
    long long size = std::strtoll(word.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || size < 0)
      return dataError("checkpoint tensor '" + entry +
                       "' has no global shape this runtime reads");
    shape.push_back(size);
  }
  return shape;
}

/// The indices in `saved` of the axes that split a saved tensor (`entry`,
/// its index line) laid out as `layout`: its flat axes, then its dims'.
Expected<std::vector<int64_t>> getSplitAxes(const std::string &entry,
                                            const PieceLayout &layout,
                                            const Mesh &saved) {
  std::vector<std::string> split = layout.flatAxes;
  for (const std::vector<std::string> &axes : layout.dimAxes)
    split.insert(split.end(), axes.begin(), axes.end());
  int64_t pieces = 1;
  std::vector<int64_t> indices;
  for (const std::string &axis : split) {
    int64_t index = saved.getAxisIndex(axis);
    if (index < 0 ||
        __builtin_mul_overflow(pieces, saved.getAxisSizes()[index], &pieces) ||
        pieces > saved.getNumDevices() ||
        std::find(indices.begin(), indices.end(), index) != indices.end())
      return dataError("checkpoint tensor '" + entry +
                       "' is split over axes its mesh lacks or repeats");
    indices.push_back(index);
  }
  return indices;
}

/// A checkpoint saved on another mesh (`index.mesh`, `saved`) or in other
/// layouts, loaded by global offsets:
/// each saved tensor's global value is put together from every saved
/// rank's piece by the layout the checkpoint records of it (a unit's flat
/// buffer is then taken apart into its members), and this rank takes its
/// piece of each argument under this plan's layout (packing a unit's
/// members into its flat buffer first). Every rank reads every shard.
Status loadResharded(const std::string &dir, const CheckpointIndex &index,
                     const plan::Plan &plan, const plan::Program &program,
                     const Mesh &mesh, std::vector<OwnedTensor> &locals,
                     int rank) {
  const Mesh &saved = index.mesh;
  // Per saved tensor (its index entry: name, dtype, global shape and
  // layout, the same on every rank; two units of a block with TP share
  // their name): the saved ranks holding a piece, where in their shard,
  // and the layout recorded of it.
  struct SavedPiece {
    int64_t rank;
    size_t index;
    plan::Argument layout;
  };
  std::map<std::string, std::vector<SavedPiece>> pieces;
  for (int64_t savedRank = 0; savedRank < saved.getNumDevices(); ++savedRank) {
    Expected<Shard> read = readShardIndex(dir, index, savedRank);
    if (!read.ok())
      return read.getStatus();
    for (size_t k = 0; k < read->entries.size(); ++k) {
      const std::string &entry = read->entries[k];
      size_t at = entry.find(" @ ");
      SavedPiece piece{savedRank, k, {}};
      if (at == std::string::npos ||
          (entry.substr(at + 3) != "-" &&
           !google::protobuf::TextFormat::ParseFromString(entry.substr(at + 3),
                                                          &piece.layout)))
        return dataError("checkpoint tensor '" + entry +
                         "' has no layout this runtime reads");
      pieces[entry].push_back(std::move(piece));
    }
  }
  // The tensors this rank's program reads; the others must be another
  // pipeline stage's.
  std::set<std::string> mine, planned;
  for (const plan::Program &each : plan.programs())
    for (int i : getCheckpointed(each)) {
      const plan::Argument &argument = each.arguments(i);
      std::set<std::string> &names = &each == &program ? mine : planned;
      names.insert(argument.name());
      for (const plan::Member &member : argument.members())
        names.insert(member.name());
    }
  planned.insert(mine.begin(), mine.end());
  for (auto it = pieces.begin(); it != pieces.end();) {
    std::vector<std::string> names = {getEntryName(it->first)};
    for (const plan::Member &member : it->second.front().layout.members())
      names.push_back(member.name());
    auto isIn = [&](const std::set<std::string> &set) {
      return std::any_of(
          names.begin(), names.end(),
          [&](const std::string &name) { return set.count(name) > 0; });
    };
    if (!isIn(planned))
      return dataError("the checkpoint in '" + dir + "' holds '" +
                       names.front() + "', which this plan does not have");
    it = isIn(mine) ? std::next(it) : pieces.erase(it);
  }
  // Of each piece, one saved rank's copy (a piece replicated over some axes
  // is saved by each rank of them), from as few files as may be: then only
  // those are read.
  std::map<int64_t, Shard> shards;
  for (auto &[entry, found] : pieces) {
    Expected<std::vector<int64_t>> splitIndices =
        getSplitAxes(entry, getLayout(found.front().layout), saved);
    if (!splitIndices.ok())
      return splitIndices.getStatus();
    std::map<std::vector<int64_t>, std::vector<SavedPiece>> byPiece;
    for (SavedPiece &saving : found) {
      std::vector<int64_t> coordinates = saved.getCoordinates(saving.rank), key;
      for (int64_t index : *splitIndices)
        key.push_back(coordinates[index]);
      byPiece[key].push_back(std::move(saving));
    }
    found.clear();
    for (auto &[key, copies] : byPiece) {
      auto chosen = std::find_if(
          copies.begin(), copies.end(),
          [&](const SavedPiece &copy) { return shards.count(copy.rank) > 0; });
      found.push_back(
          std::move(chosen == copies.end() ? copies.front() : *chosen));
      shards.try_emplace(found.back().rank);
    }
  }
  for (auto &[savedRank, shard] : shards) {
    Expected<Shard> read = readShard(dir, index, savedRank);
    if (!read.ok())
      return read.getStatus();
    shard = read.take();
  }
  // The saved tensors' global values by name, a unit's by its members'.
  std::map<std::string, OwnedTensor> globals;
  auto keep = [&](const std::string &name, OwnedTensor global) {
    if (!globals.emplace(name, std::move(global)).second)
      return dataError("the checkpoint in '" + dir + "' holds '" + name +
                       "' twice, in different layouts");
    return Status::success();
  };
  for (auto &[first, found] : pieces) {
    std::string head = first.substr(0, first.find(" @ "));
    std::string name = getEntryName(first);
    Expected<std::vector<int64_t>> shape = getEntryShape(first);
    if (!shape.ok())
      return shape.getStatus();
    // The layout (the same for every piece: it is part of the entry) and
    // the axes that split the tensor into `needed` pieces.
    PieceLayout layout = getLayout(found.front().layout);
    Expected<std::vector<int64_t>> splitIndices =
        getSplitAxes(first, layout, saved);
    if (!splitIndices.ok())
      return splitIndices.getStatus();
    int64_t needed = 1;
    for (int64_t index : *splitIndices)
      needed *= saved.getAxisSizes()[index];
    // Each element of the global tensor is in one of its `needed` pieces: a
    // shape of more elements than that many of the largest piece is not
    // theirs (and is not allocated).
    int64_t largest = 0;
    for (const SavedPiece &saving : found)
      largest = std::max(
          largest,
          shards[saving.rank].tensors[saving.index].view.getNumElements());
    std::optional<int64_t> elements = getCheckedNumElements(*shape);
    if (!elements || *elements / needed > largest)
      return dataError("checkpoint tensor '" + head + "' is larger than its " +
                       std::to_string(needed) + " pieces of at most " +
                       std::to_string(largest) + " elements hold");
    if (layout.dimAxes.size() != shape->size() ||
        (!layout.paddedShape.empty() &&
         layout.paddedShape.size() != shape->size()))
      return dataError("checkpoint tensor '" + first +
                       "' has a layout of another rank");
    // Padded, the pieces tile the padded shape, which must cover the
    // tensor and (as above) fit in the pieces.
    if (!layout.paddedShape.empty()) {
      std::optional<int64_t> padded = getCheckedNumElements(layout.paddedShape);
      bool covers = padded && *padded / needed <= largest;
      for (size_t d = 0; covers && d < shape->size(); ++d)
        covers = layout.paddedShape[d] >= (*shape)[d];
      if (!covers)
        return dataError("checkpoint tensor '" + first +
                         "' has a padded shape that is not its pieces'");
    }
    Expected<OwnedTensor> allocated = OwnedTensor::allocate(
        shards[found.front().rank].tensors[found.front().index].view.dtype,
        *shape, "checkpoint tensor '" + first + "'");
    if (!allocated.ok())
      return allocated.getStatus();
    OwnedTensor global = allocated.take();
    // The split axes' coordinates of the pieces found: together they must
    // cover every piece of the saved layout.
    std::set<std::vector<int64_t>> covered;
    for (const SavedPiece &saving : found) {
      std::vector<int64_t> coordinates = saved.getCoordinates(saving.rank), key;
      for (int64_t index : *splitIndices)
        key.push_back(coordinates[index]);
      // The piece must be the one its layout gives that rank, since it is
      // written into the global tensor by that layout.
      OwnedTensor expected =
          takeLocalPiece(global.view, layout, saved, saving.rank);
      const Tensor &piece = shards[saving.rank].tensors[saving.index].view;
      if (piece.dtype != expected.view.dtype ||
          piece.shape != expected.view.shape)
        return dataError("checkpoint tensor '" + name + "' of saved rank " +
                         std::to_string(saving.rank) +
                         " does not match its recorded layout");
      placeLocalPiece(piece, global.view, layout, saved, saving.rank);
      covered.insert(key);
    }
    if (static_cast<int64_t>(covered.size()) != needed)
      return dataError("the checkpoint in '" + dir + "' holds " +
                       std::to_string(covered.size()) + " of the " +
                       std::to_string(needed) + " pieces of '" + name + "'");
    const plan::Argument &unit = found.front().layout;
    if (unit.members().empty()) {
      if (Status kept = keep(name, std::move(global)); !kept.ok())
        return kept;
      continue;
    }
    plan::Argument withShape = unit;
    *withShape.mutable_global_shape() = {shape->begin(), shape->end()};
    Expected<std::vector<OwnedTensor>> members =
        unpackMembers(withShape, global.view, saved);
    if (!members.ok())
      return members.getStatus().withPrefix("checkpoint tensor '" + head +
                                            "': ");
    for (int m = 0; m < unit.members_size(); ++m)
      if (Status kept = keep(unit.members(m).name(), std::move((*members)[m]));
          !kept.ok())
        return kept;
  }
  shards.clear();
  // This plan's pieces, each tensor matched by name, dtype and global shape.
  auto take = [&](const std::string &name, DType dtype,
                  const std::vector<int64_t> &shape) -> Expected<OwnedTensor> {
    auto found = globals.find(name);
    if (found == globals.end())
      return dataError("the checkpoint in '" + dir + "' has no '" + name + "'");
    const Tensor &have = found->second.view;
    if (have.dtype != dtype || have.shape != shape)
      return dataError("checkpoint tensor '" + name + "' is " +
                       describeTensor(have.dtype, have.shape) +
                       ", this plan's " + describeTensor(dtype, shape));
    OwnedTensor taken = std::move(found->second);
    globals.erase(found);
    return taken;
  };
  for (int i : getCheckpointed(program)) {
    const plan::Argument &argument = program.arguments(i);
    DType dtype = getDType(argument.dtype());
    OwnedTensor packed;
    if (argument.members().empty()) {
      Expected<OwnedTensor> global = take(
          argument.name(), dtype,
          {argument.global_shape().begin(), argument.global_shape().end()});
      if (!global.ok())
        return global.getStatus();
      packed = global.take();
    } else {
      std::vector<OwnedTensor> members;
      for (const plan::Member &member : argument.members()) {
        Expected<OwnedTensor> global =
            take(member.name(), dtype,
                 {member.global_shape().begin(), member.global_shape().end()});
        if (!global.ok())
          return global.getStatus();
        members.push_back(global.take());
      }
      std::vector<const Tensor *> views;
      for (const OwnedTensor &member : members)
        views.push_back(&member.view);
      packed = packMembers(argument, views, mesh);
    }
    OwnedTensor mine =
        takeLocalPiece(packed.view, getLayout(argument), mesh, rank);
    if (mine.view.dtype != locals[i].view.dtype ||
        mine.view.shape != locals[i].view.shape)
      return dataError("checkpoint tensor '" + argument.name() +
                       "' does not match this plan's piece of it");
    locals[i] = std::move(mine);
  }
  // What is left belongs to other pipeline stages' programs, or to none.
  for (const plan::Program &each : plan.programs())
    for (int i : getCheckpointed(each)) {
      const plan::Argument &argument = each.arguments(i);
      globals.erase(argument.name());
      for (const plan::Member &member : argument.members())
        globals.erase(member.name());
    }
  if (!globals.empty())
    return dataError("the checkpoint in '" + dir + "' holds '" +
                     globals.begin()->first +
                     "', which this plan does not have");
  return Status::success();
}

} // namespace

Status runtime::saveCheckpoint(const std::string &given,
                               const plan::Program &program, const Mesh &mesh,
                               const std::vector<OwnedTensor> &locals,
                               const Job &job, int64_t step,
                               double timeoutSeconds) {
  int rank = job.getRank();
  std::string dir = withoutTrailingSlashes(given);
  std::string staging = dir + ".partial", old = dir + ".old";
  // What an interrupted save left is cleared before anyone writes.
  if (rank == 0) {
    std::error_code error;
    std::filesystem::remove_all(staging, error);
  }
  int ignored = 0;
  if (Status cleared =
          job.allReduceMin(0, ignored, timeoutSeconds,
                           "a rank stopped before saving the checkpoint");
      !cleared.ok())
    return cleared;
  Status written = agree(writeShardFiles(staging, program, locals, rank), job,
                         timeoutSeconds);
  if (!written.ok())
    return written;
  // Once every rank's files are written, rank 0 seals them in the index and
  // swaps the whole in.
  Status swapped = Status::success();
  if (rank == 0) {
    swapped = writeIndexFile(staging, mesh, step);
    if (swapped.ok())
      swapped = swapIn(staging, dir, old);
  }
  return agree(swapped, job, timeoutSeconds);
}

Status runtime::writeCheckpointShard(const std::string &dir,
                                     const plan::Program &program,
                                     const std::vector<OwnedTensor> &locals,
                                     int rank) {
  return writeShardFiles(dir, program, locals, rank);
}

Status runtime::writeCheckpointIndex(const std::string &dir, const Mesh &mesh,
                                     int64_t step) {
  return writeIndexFile(dir, mesh, step);
}

Status runtime::loadCheckpoint(const std::string &given, const plan::Plan &plan,
                               const plan::Program &program, const Mesh &mesh,
                               std::vector<OwnedTensor> &locals, int rank,
                               int64_t &step) {
  // A save interrupted between its two renames (on a file system without
  // RENAME_EXCHANGE) left the previous checkpoint in <dir>.old.
  std::string dir = given, old = withoutTrailingSlashes(given) + ".old";
  if (!std::filesystem::exists(given + "/index.txt") &&
      std::filesystem::exists(old + "/index.txt")) {
    if (rank == 0)
      std::fprintf(stderr,
                   "tessera-run: note: '%s' holds no checkpoint; loading the "
                   "previous one from '%s', left by an interrupted save\n",
                   given.c_str(), old.c_str());
    dir = old;
  }
  Expected<CheckpointIndex> index = readCheckpointIndex(dir);
  if (!index.ok())
    return index.getStatus();
  if (index->format < kSavedFormat && rank == 0)
    std::fprintf(stderr,
                 "tessera-run: note: '%s' is a v%d checkpoint: its tensors "
                 "are checked against their checksums, their names and "
                 "layouts are not (a save writes v%d, which checks both)\n",
                 dir.c_str(), index->format, kSavedFormat);
  // On the mesh it was saved on and in this plan's layouts, by name; else
  // (another mesh, another ZeRO stage, units) by global offsets.
  Status loaded;
  if (index->meshText == formatMesh(mesh)) {
    Expected<Shard> shard = readShardIndex(dir, *index, rank);
    if (!shard.ok())
      return shard.getStatus();
    loaded =
        holdsPlanLayouts(*shard, program)
            ? loadByName(dir, *shard, program, locals, rank)
            : loadResharded(dir, *index, plan, program, mesh, locals, rank);
  } else {
    loaded = loadResharded(dir, *index, plan, program, mesh, locals, rank);
  }
  if (!loaded.ok())
    return loaded;
  step = index->step;
  return Status::success();
}
