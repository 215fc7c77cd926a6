//===- Checkpoint.cpp - tessera-run's checkpoints -------------------------===//

#include "Checkpoint.h"

#include "tessera/runtime/Dump.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/MpiWait.h"
#include "tessera/runtime/Plan.h"

#include <google/protobuf/text_format.h>
#include <mpi.h>
#include <xxhash.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
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
Status agree(Status status, int rank, double timeoutSeconds) {
  int size = 1, first = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mine = status.ok() ? size : rank;
  if (Status agreed =
          allReduceMinWithin(mine, first, timeoutSeconds,
                             "a rank stopped while saving the checkpoint");
      !agreed.ok())
    return agreed;
  if (first == size || first == rank)
    return status;
  return dataError("rank " + std::to_string(first) +
                   " could not save its part of the checkpoint");
}

/// Writes this rank's files into `staging`.
Status writeShard(const std::string &staging, const plan::Program &program,
                  const Mesh &mesh, const std::vector<OwnedTensor> &locals,
                  int rank, int64_t step) {
  std::error_code error;
  std::filesystem::create_directories(staging, error);
  if (error && !std::filesystem::is_directory(staging))
    return dataError("cannot make the checkpoint directory '" + staging +
                     "': " + error.message());
  std::vector<int> indices = getCheckpointed(program);
  std::vector<OwnedTensor> shard;
  for (int i : indices)
    shard.push_back(locals[i]);
  std::string tensors = getShardPath(staging, rank);
  if (Status status = writeTensors(tensors, shard); !status.ok())
    return status;
  Expected<uint64_t> checksum = getFileChecksum(tensors);
  if (!checksum.ok())
    return checksum.getStatus();
  std::string index = getShardIndexPath(staging, rank);
  {
    std::ofstream file(index);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, *checksum);
    file << "tessera checkpoint shard v2\nxxh3 " << hex << "\n";
    for (int i : indices)
      file << describeArgument(program.arguments(i)) << "\n";
    if (!file)
      return dataError("cannot write '" + index + "'");
  }
  if (rank == 0) {
    std::string top = staging + "/index.txt";
    std::ofstream file(top);
    file << "tessera checkpoint v2\nstep " << step << "\nmesh "
         << formatMesh(mesh) << "\n";
    if (!file)
      return dataError("cannot write '" + top + "'");
    if (Status status = sync(top); !status.ok())
      return status;
  }
  for (const std::string &path : {tensors, index})
    if (Status status = sync(path); !status.ok())
      return status;
  return Status::success();
}

/// Rank 0 puts `staging` in place of `dir`: `dir` moves to `old` first, so
/// that one of them always holds a whole checkpoint.
Status swapIn(const std::string &staging, const std::string &dir,
              const std::string &old) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (Status status = sync(staging, /*directory=*/true); !status.ok())
    return status;
  fs::remove_all(old, error);
  if (fs::exists(dir))
    fs::rename(dir, old, error);
  if (!error)
    fs::rename(staging, dir, error);
  if (error)
    return dataError("cannot put the checkpoint in place of '" + dir +
                     "': " + error.message());
  fs::remove_all(old, error);
  fs::path parent = fs::absolute(dir).parent_path();
  return sync(parent.string(), /*directory=*/true);
}

/// The v1 format (a rank's tensors in the order of its program's
/// arguments, unnamed): read by position, as it was written.
Status loadByPosition(const std::string &dir, const plan::Program &program,
                      std::vector<OwnedTensor> &locals, int rank) {
  Expected<std::vector<OwnedTensor>> read =
      readTensors(getShardPath(dir, rank));
  if (!read.ok())
    return read.getStatus();
  std::vector<OwnedTensor> shard = read.take();
  std::vector<int> indices = getCheckpointed(program);
  if (shard.size() != indices.size())
    return dataError("the checkpoint holds " + std::to_string(shard.size()) +
                     " tensors for this rank, the plan has " +
                     std::to_string(indices.size()) +
                     " parameters and state tensors");
  for (size_t k = 0; k < indices.size(); ++k) {
    const Tensor &have = shard[k].view, &want = locals[indices[k]].view;
    if (have.dtype != want.dtype || have.shape != want.shape)
      return dataError("checkpoint tensor '" +
                       program.arguments(indices[k]).name() +
                       "' does not match this plan's piece of it");
    locals[indices[k]] = std::move(shard[k]);
  }
  return Status::success();
}

/// One saved rank's files: its index's entries (describeArgument's lines)
/// and its tensors, in the same order.
struct Shard {
  std::vector<std::string> entries;
  std::vector<OwnedTensor> tensors;
};

/// Reads saved rank `rank`'s shard of the v2 checkpoint in `dir`, its
/// tensors checked against its index's checksum.
Expected<Shard> readShard(const std::string &dir, int64_t rank) {
  std::string indexPath = getShardIndexPath(dir, static_cast<int>(rank));
  std::ifstream index(indexPath);
  std::string header, line;
  if (!std::getline(index, header) || header != "tessera checkpoint shard v2" ||
      !std::getline(index, line) || line.rfind("xxh3 ", 0) != 0)
    return dataError("'" + indexPath +
                     "' is not a Tessera checkpoint shard's "
                     "index");
  uint64_t recorded = std::strtoull(line.c_str() + 5, nullptr, 16);
  Shard shard;
  while (std::getline(index, line))
    shard.entries.push_back(line);
  std::string tensorsPath = getShardPath(dir, static_cast<int>(rank));
  Expected<uint64_t> checksum = getFileChecksum(tensorsPath);
  if (!checksum.ok())
    return checksum.getStatus();
  if (*checksum != recorded)
    return dataError("'" + tensorsPath +
                     "' is damaged: its contents do not match the checksum "
                     "in '" +
                     indexPath + "'");
  Expected<std::vector<OwnedTensor>> read = readTensors(tensorsPath);
  if (!read.ok())
    return read.getStatus();
  shard.tensors = read.take();
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

/// The v2 format on the mesh it was saved on: this rank's tensors by name,
/// checked against its index and checksum.
Status loadByName(const std::string &dir, const plan::Program &program,
                  std::vector<OwnedTensor> &locals, int rank) {
  Expected<Shard> read = readShard(dir, rank);
  if (!read.ok())
    return read.getStatus();
  Shard shard = read.take();
  std::map<std::string, size_t> byName;
  for (size_t k = 0; k < shard.entries.size(); ++k)
    byName[getEntryName(shard.entries[k])] = k;
  std::vector<int> indices = getCheckpointed(program);
  for (int i : indices) {
    const plan::Argument &argument = program.arguments(i);
    auto it = byName.find(argument.name());
    if (it == byName.end())
      return dataError("the checkpoint in '" + dir + "' has no '" +
                       argument.name() + "' for rank " + std::to_string(rank));
    std::string want = describeArgument(argument);
    if (shard.entries[it->second] != want)
      return dataError("checkpoint tensor '" + shard.entries[it->second] +
                       "' is not this plan's '" + want + "'");
    const Tensor &have = shard.tensors[it->second].view,
                 &piece = locals[i].view;
    if (have.dtype != piece.dtype || have.shape != piece.shape)
      return dataError("checkpoint tensor '" + argument.name() +
                       "' does not match this plan's piece of it");
    locals[i] = std::move(shard.tensors[it->second]);
    byName.erase(it);
  }
  if (!byName.empty())
    return dataError("the checkpoint in '" + dir + "' holds '" +
                     byName.begin()->first + "' for rank " +
                     std::to_string(rank) + ", which this plan does not have");
  return Status::success();
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

/// A v2 checkpoint saved on `saved`, another mesh, loaded by global offsets:
/// each argument's global tensor is put together from every saved rank's
/// piece by the layout the checkpoint records of it, and this rank takes
/// its piece under this plan's layout. Every rank reads every shard.
Status loadResharded(const std::string &dir, const plan::Program &program,
                     const Mesh &saved, const Mesh &mesh,
                     std::vector<OwnedTensor> &locals, int rank) {
  // Per name: the saved ranks holding a piece, where in their shard, and
  // the layout recorded of it.
  struct SavedPiece {
    int64_t rank;
    size_t index;
    plan::Argument layout;
  };
  std::vector<Shard> shards;
  std::map<std::string, std::vector<SavedPiece>> pieces;
  bool units = false;
  for (int64_t savedRank = 0; savedRank < saved.getNumDevices(); ++savedRank) {
    Expected<Shard> read = readShard(dir, savedRank);
    if (!read.ok())
      return read.getStatus();
    shards.push_back(read.take());
    for (size_t k = 0; k < shards.back().entries.size(); ++k) {
      const std::string &entry = shards.back().entries[k];
      size_t at = entry.find(" @ ");
      SavedPiece piece{savedRank, k, {}};
      if (at == std::string::npos ||
          (entry.substr(at + 3) != "-" &&
           !google::protobuf::TextFormat::ParseFromString(entry.substr(at + 3),
                                                          &piece.layout)))
        return dataError("checkpoint tensor '" + entry +
                         "' has no layout this runtime reads");
      units = units || piece.layout.members_size() > 0;
      pieces[getEntryName(entry)].push_back(std::move(piece));
    }
  }
  std::vector<int> indices = getCheckpointed(program);
  for (int i : indices)
    units = units || program.arguments(i).members_size() > 0;
  if (units)
    return dataError("the checkpoint in '" + dir + "' (saved on mesh " +
                     formatMesh(saved) + ") or this plan (on mesh " +
                     formatMesh(mesh) +
                     ") stores units' flat buffers (--zero-units), which a "
                     "checkpoint is not resharded from or to yet: compile "
                     "both plans with --zero-units=false");
  for (int i : indices) {
    const plan::Argument &argument = program.arguments(i);
    auto found = pieces.find(argument.name());
    if (found == pieces.end())
      return dataError("the checkpoint in '" + dir + "' has no '" +
                       argument.name() + "'");
    std::string want = describeArgument(argument);
    std::string head = want.substr(0, want.find(" @ "));
    OwnedTensor global(
        getDType(argument.dtype()),
        {argument.global_shape().begin(), argument.global_shape().end()});
    // The split axes' coordinates of the pieces found: together they must
    // cover every piece of the saved layout.
    std::set<std::vector<int64_t>> covered;
    int64_t needed = 1;
    for (const SavedPiece &saving : found->second) {
      const std::string &entry = shards[saving.rank].entries[saving.index];
      if (entry.substr(0, entry.find(" @ ")) != head)
        return dataError("checkpoint tensor '" + entry +
                         "' is not this plan's '" + want + "'");
      PieceLayout layout = getLayout(saving.layout);
      std::vector<std::string> split = layout.flatAxes;
      for (const std::vector<std::string> &axes : layout.dimAxes)
        split.insert(split.end(), axes.begin(), axes.end());
      needed = 1;
      std::vector<int64_t> coordinates = saved.getCoordinates(saving.rank), key;
      for (const std::string &axis : split) {
        int64_t index = saved.getAxisIndex(axis);
        if (index < 0)
          return dataError("checkpoint tensor '" + entry +
                           "' is split over an axis its mesh lacks");
        needed *= saved.getAxisSizes()[index];
        key.push_back(coordinates[index]);
      }
      if (layout.dimAxes.size() != global.view.shape.size() ||
          (!layout.paddedShape.empty() &&
           layout.paddedShape.size() != global.view.shape.size()))
        return dataError("checkpoint tensor '" + entry +
                         "' has a layout of another rank");
      // The piece must be the one its layout gives that rank, since it is
      // written into the global tensor by that layout.
      OwnedTensor expected =
          takeLocalPiece(global.view, layout, saved, saving.rank);
      const Tensor &piece = shards[saving.rank].tensors[saving.index].view;
      if (piece.dtype != expected.view.dtype ||
          piece.shape != expected.view.shape)
        return dataError("checkpoint tensor '" + argument.name() +
                         "' of saved rank " + std::to_string(saving.rank) +
                         " does not match its recorded layout");
      placeLocalPiece(piece, global.view, layout, saved, saving.rank);
      covered.insert(key);
    }
    if (static_cast<int64_t>(covered.size()) != needed)
      return dataError("the checkpoint in '" + dir + "' holds " +
                       std::to_string(covered.size()) + " of the " +
                       std::to_string(needed) + " pieces of '" +
                       argument.name() + "'");
    OwnedTensor mine =
        takeLocalPiece(global.view, getLayout(argument), mesh, rank);
    if (mine.view.dtype != locals[i].view.dtype ||
        mine.view.shape != locals[i].view.shape)
      return dataError("checkpoint tensor '" + argument.name() +
                       "' does not match this plan's piece of it");
    locals[i] = std::move(mine);
    pieces.erase(found);
  }
  if (!pieces.empty())
    return dataError("the checkpoint in '" + dir + "' holds '" +
                     pieces.begin()->first +
                     "', which this plan does not have");
  return Status::success();
}

} // namespace

Status runtime::saveCheckpoint(const std::string &given,
                               const plan::Program &program, const Mesh &mesh,
                               const std::vector<OwnedTensor> &locals, int rank,
                               int64_t step, double timeoutSeconds) {
  std::string dir = withoutTrailingSlashes(given);
  std::string staging = dir + ".partial", old = dir + ".old";
  // What an interrupted save left is cleared before anyone writes.
  if (rank == 0) {
    std::error_code error;
    std::filesystem::remove_all(staging, error);
  }
  if (Status cleared = barrierWithin(
          timeoutSeconds, "a rank stopped before saving the checkpoint");
      !cleared.ok())
    return cleared;
  Status written = agree(writeShard(staging, program, mesh, locals, rank, step),
                         rank, timeoutSeconds);
  if (!written.ok())
    return written;
  return agree(rank == 0 ? swapIn(staging, dir, old) : Status::success(), rank,
               timeoutSeconds);
}

Status runtime::loadCheckpoint(const std::string &dir,
                               const plan::Program &program, const Mesh &mesh,
                               std::vector<OwnedTensor> &locals, int rank,
                               int64_t &step) {
  std::ifstream index(dir + "/index.txt");
  std::string format, stepLine, meshLine;
  std::getline(index, format);
  std::getline(index, stepLine);
  bool v1 = format == "tessera checkpoint v1";
  if ((!v1 && format != "tessera checkpoint v2") ||
      stepLine.rfind("step ", 0) != 0) {
    std::string old = withoutTrailingSlashes(dir) + ".old";
    return dataError(
        "'" + dir + "' holds no Tessera checkpoint index" +
        (std::filesystem::exists(old + "/index.txt")
             ? " ('" + old +
                   "' holds the previous checkpoint, left by a save that "
                   "was interrupted: move it back)"
             : std::string()));
  }
  char *end = nullptr;
  errno = 0;
  long long saved = std::strtoll(stepLine.c_str() + 5, &end, 10);
  if (*end != '\0' || end == stepLine.c_str() + 5 || errno == ERANGE)
    return dataError("the checkpoint in '" + dir + "' has no step number");
  if (saved < 0)
    return dataError("the checkpoint in '" + dir + "' is at step " +
                     std::to_string(saved) + "; steps count from 0");
  if (!v1) {
    std::getline(index, meshLine);
    if (meshLine.rfind("mesh ", 0) != 0)
      return dataError("the checkpoint in '" + dir +
                       "' does not say which mesh it was saved on");
  }
  // On another mesh, by global offsets.
  Status loaded;
  if (v1) {
    loaded = loadByPosition(dir, program, locals, rank);
  } else if (meshLine.substr(5) == formatMesh(mesh)) {
    loaded = loadByName(dir, program, locals, rank);
  } else {
    Expected<Mesh> saved = parseMesh(meshLine.substr(5));
    loaded = saved.ok()
                 ? loadResharded(dir, program, *saved, mesh, locals, rank)
                 : saved.getStatus();
  }
  if (!loaded.ok())
    return loaded;
  step = saved;
  return Status::success();
}
