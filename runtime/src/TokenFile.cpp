//===- TokenFile.cpp - Token files and the batches a run reads ------------===//

#include "tessera/runtime/TokenFile.h"
#include "tessera/runtime/AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace tessera::runtime;

namespace {

/// How many ids a writer takes from a vector at a time.
constexpr size_t kWriteChunkIds = size_t(1) << 20;

void putLittle(uint8_t *out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t getLittle(const uint8_t *in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

/// SplitMix64: the shuffle's generator, keyed by the seed and the epoch.
uint64_t splitMix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// "cannot write the token file '<path>': <the last error>".
Status cannotWrite(const std::string &path) {
  return dataError("cannot write the token file '" + path +
                   "': " + std::strerror(errno));
}

/// Reads `bytes` at `offset` into `into`, resuming after a partial read or
/// a signal. Returns how many it read, fewer only where the file ends, or
/// -1 on an error (errno says which).
ssize_t readAt(int descriptor, uint8_t *into, size_t bytes, uint64_t offset) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t got = ::pread(descriptor, into + done, bytes - done,
                          static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return -1;
    if (got == 0)
      break;
    done += got;
  }
  return static_cast<ssize_t>(done);
}

/// A token file's header: magic, bytes per id, vocabulary and count.
void encodeHeader(uint8_t *header, int width, uint32_t vocab, uint64_t count) {
  std::memcpy(header, kTokenFileMagic, sizeof kTokenFileMagic);
  putLittle(header + 8, width, 4);
  putLittle(header + 12, vocab, 4);
  putLittle(header + 16, count, 8);
}

/// Writes a token file to `descriptor` (the staging file `staging`): a
/// header with a count of zero, the ids `source` gives chunk by chunk,
/// then the header again with the count, which only the end tells.
Status writeIds(int descriptor, const std::string &staging, uint32_t vocab,
                const TokenSource &source, int64_t &count) {
  int width = vocab <= 65536 ? 2 : 4;
  uint8_t header[kTokenFileHeaderBytes];
  encodeHeader(header, width, vocab, 0);
  if (!writeAll(descriptor, header, sizeof header))
    return cannotWrite(staging);
  std::vector<uint32_t> ids;
  std::vector<uint8_t> bytes;
  for (;;) {
    ids.clear();
    if (Status status = source(ids); !status.ok())
      return status;
    if (ids.empty())
      break;
    bytes.resize(ids.size() * width);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= vocab)
        return invalidArgument("token id " + std::to_string(ids[i]) +
                               " at position " + std::to_string(count + i) +
                               " is not below the vocabulary " +
                               std::to_string(vocab));
      putLittle(bytes.data() + i * width, ids[i], width);
    }
    if (!writeAll(descriptor, bytes.data(), bytes.size()))
      return cannotWrite(staging);
    count += static_cast<int64_t>(ids.size());
  }
  putLittle(header + 16, count, 8);
  if (::pwrite(descriptor, header + 16, 8, 16) != 8)
    return cannotWrite(staging);
  return Status::success();
}

} // namespace

Expected<int64_t> tessera::runtime::writeTokenFile(const std::string &path,
                                                   uint32_t vocab,
                                                   const TokenSource &source) {
  int64_t count = 0;
  Status status = writeFileAtomically(
      path,
      [&](const std::string &staging) {
        int descriptor = ::open(staging.c_str(),
                                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (descriptor < 0)
          return cannotWrite(staging);
        Status written = writeIds(descriptor, staging, vocab, source, count);
        if (::close(descriptor) != 0 && written.ok())
          return cannotWrite(staging);
        return written;
      },
      "the token file");
  if (!status.ok())
    return status;
  return count;
}

Status tessera::runtime::writeTokenFile(const std::string &path,
                                        const std::vector<uint32_t> &tokens,
                                        uint32_t vocab) {
  size_t next = 0;
  auto source = [&](std::vector<uint32_t> &ids) {
    size_t end = std::min(tokens.size(), next + kWriteChunkIds);
    ids.assign(tokens.begin() + next, tokens.begin() + end);
    next = end;
    return Status::success();
  };
  return writeTokenFile(path, vocab, source).getStatus();
}

Expected<std::unique_ptr<TokenFile>> TokenFile::open(const std::string &path) {
  std::unique_ptr<TokenFile> file(new TokenFile());
  file->path = path;
  auto cannotRead = [&](const std::string &reason) {
    return dataError("cannot read the token file '" + path + "': " + reason);
  };
  file->descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info;
  if (file->descriptor < 0 || ::fstat(file->descriptor, &info) != 0)
    return cannotRead(std::strerror(errno));
  if (S_ISDIR(info.st_mode))
    return cannotRead("it is a directory");
  if (!S_ISREG(info.st_mode))
    return cannotRead("it is not a regular file");
  uint8_t header[kTokenFileHeaderBytes];
  if (info.st_size < kTokenFileHeaderBytes ||
      readAt(file->descriptor, header, sizeof header, 0) !=
          kTokenFileHeaderBytes)
    return dataError("'" + path +
                     "' is not a token file: it is shorter than "
                     "the 24-byte header (write one with tessera data pack)");
  if (std::memcmp(header, kTokenFileMagic, sizeof kTokenFileMagic) != 0)
    return dataError("'" + path +
                     "' is not a token file: it does not start "
                     "with \"TSRTOK1\" (write one with tessera data pack)");
  uint64_t width = getLittle(header + 8, 4);
  file->vocab = static_cast<uint32_t>(getLittle(header + 12, 4));
  uint64_t count = getLittle(header + 16, 8);
  if (width != 2 && width != 4)
    return dataError("token file '" + path + "': its header gives " +
                     std::to_string(width) +
                     " bytes per token id; the format has 2 or 4");
  if (file->vocab == 0 || (width == 2 && file->vocab > 65536))
    return dataError("token file '" + path + "': its vocabulary of " +
                     std::to_string(file->vocab) + " ids does not fit " +
                     std::to_string(width) + "-byte ids");
  uint64_t data = static_cast<uint64_t>(info.st_size) - kTokenFileHeaderBytes;
  if (count > data / width || count * width != data)
    return dataError("token file '" + path + "': its header gives " +
                     std::to_string(count) + " token ids (" +
                     std::to_string(count * width) + " bytes), it holds " +
                     std::to_string(data) + " bytes of them" +
                     (count * width > data ? " (truncated?)" : ""));
  file->width = static_cast<int>(width);
  file->numTokens = static_cast<int64_t>(count);
  return file;
}

TokenFile::~TokenFile() {
  if (descriptor >= 0)
    ::close(descriptor);
}

Status TokenFile::read(int64_t first, int64_t count, uint32_t *ids) const {
  if (first < 0 || count < 0 || first > numTokens || count > numTokens - first)
    return invalidArgument(
        "token file '" + path + "': ids [" + std::to_string(first) + ", " +
        std::to_string(first + count) + ") are not within its " +
        std::to_string(numTokens) + " ids");
  std::vector<uint8_t> bytes(static_cast<size_t>(count) * width);
  uint64_t offset =
      kTokenFileHeaderBytes + static_cast<uint64_t>(first) * width;
  ssize_t got = readAt(descriptor, bytes.data(), bytes.size(), offset);
  if (got < 0)
    return dataError("cannot read the token file '" + path +
                     "': " + std::strerror(errno));
  if (static_cast<size_t>(got) != bytes.size()) {
    struct stat info;
    std::string now = ::fstat(descriptor, &info) == 0
                          ? std::to_string(info.st_size) + " bytes"
                          : std::string("fewer bytes");
    return dataError("token file '" + path + "' holds " + now +
                     ", short of the " + std::to_string(numTokens) +
                     " token ids it held when opened: it was cut short "
                     "while the run read it");
  }
  for (int64_t i = 0; i < count; ++i)
    ids[i] = static_cast<uint32_t>(getLittle(bytes.data() + i * width, width));
  return Status::success();
}

Expected<TokenBatches> TokenBatches::create(const TokenFile &file,
                                            int64_t batch, int64_t seq,
                                            uint64_t seed) {
  int64_t samples = file.getNumTokens() / (seq + 1);
  if (samples < batch)
    return dataError("token file '" + file.getPath() +
                     "' is too short: it "
                     "holds " +
                     std::to_string(file.getNumTokens()) +
                     " token ids, and a step reads " + std::to_string(batch) +
                     " samples of seq + 1 = " + std::to_string(seq + 1) +
                     " ids (" + std::to_string(batch * (seq + 1)) + ")");
  return TokenBatches(batch, seq, seed, samples);
}

int64_t TokenBatches::getSampleStart(int64_t step, int64_t row) {
  int64_t index = (step - 1) * batch + row;
  int64_t wanted = index / numSamples;
  if (wanted != epoch) {
    order.resize(numSamples);
    for (int64_t i = 0; i < numSamples; ++i)
      order[i] = i;
    uint64_t state =
        seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(wanted);
    for (int64_t i = numSamples - 1; i > 0; --i)
      std::swap(order[i], order[splitMix64(state) % (i + 1)]);
    epoch = wanted;
  }
  return order[index % numSamples] * (seq + 1);
}
