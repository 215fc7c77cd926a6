//===- Checkpoint.cpp - tessera-run's checkpoints -------------------------===//

#include "Checkpoint.h"

#include "tessera/runtime/Dump.h"
#include "tessera/runtime/MpiWait.h"
#include "tessera/runtime/Plan.h"

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

/// The v2 format: this rank's tensors by name, checked against its index
/// and checksum.
Status loadByName(const std::string &dir, const plan::Program &program,
                  std::vector<OwnedTensor> &locals, int rank) {
  std::string indexPath = getShardIndexPath(dir, rank);
  std::ifstream index(indexPath);
  std::string header, line;
  if (!std::getline(index, header) || header != "tessera checkpoint shard v2" ||
      !std::getline(index, line) || line.rfind("xxh3 ", 0) != 0)
    return dataError("'" + indexPath +
                     "' is not a Tessera checkpoint shard's "
                     "index");
  uint64_t recorded = std::strtoull(line.c_str() + 5, nullptr, 16);
  std::vector<std::string> entries;
  while (std::getline(index, line))
    entries.push_back(line);
  std::string tensorsPath = getShardPath(dir, rank);
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
  std::vector<OwnedTensor> shard = read.take();
  if (shard.size() != entries.size())
    return dataError("'" + tensorsPath + "' holds " +
                     std::to_string(shard.size()) + " tensors, its index " +
                     std::to_string(entries.size()));
  std::map<std::string, size_t> byName;
  for (size_t k = 0; k < entries.size(); ++k)
    byName[entries[k].substr(0, entries[k].find(' '))] = k;
  std::vector<int> indices = getCheckpointed(program);
  for (int i : indices) {
    const plan::Argument &argument = program.arguments(i);
    auto it = byName.find(argument.name());
    if (it == byName.end())
      return dataError("the checkpoint in '" + dir + "' has no '" +
                       argument.name() + "' for rank " + std::to_string(rank));
    std::string want = describeArgument(argument);
    if (entries[it->second] != want)
      return dataError("checkpoint tensor '" + entries[it->second] +
                       "' is not this plan's '" + want + "'");
    const Tensor &have = shard[it->second].view, &piece = locals[i].view;
    if (have.dtype != piece.dtype || have.shape != piece.shape)
      return dataError("checkpoint tensor '" + argument.name() +
                       "' does not match this plan's piece of it");
    locals[i] = std::move(shard[it->second]);
    byName.erase(it);
  }
  if (!byName.empty())
    return dataError("the checkpoint in '" + dir + "' holds '" +
                     byName.begin()->first + "' for rank " +
                     std::to_string(rank) + ", which this plan does not have");
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
    if (meshLine != "mesh " + formatMesh(mesh))
      return dataError("the checkpoint in '" + dir + "' was saved on " +
                       (meshLine.rfind("mesh ", 0) == 0
                            ? "mesh " + meshLine.substr(5)
                            : std::string("an unknown mesh")) +
                       ", this plan runs on mesh " + formatMesh(mesh) +
                       " (resharding a checkpoint is not supported yet)");
  }
  if (Status status = v1 ? loadByPosition(dir, program, locals, rank)
                         : loadByName(dir, program, locals, rank);
      !status.ok())
    return status;
  step = saved;
  return Status::success();
}
