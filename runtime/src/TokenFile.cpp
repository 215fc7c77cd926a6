//===- TokenFile.cpp - Token files and the batches a run reads
//-------------===//

#include "tessera/runtime/TokenFile.h"
#include "tessera/runtime/AtomicFile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace tessera::runtime;

namespace {

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

} // namespace

Status tessera::runtime::writeTokenFile(const std::string &path,
                                        const std::vector<uint32_t> &tokens,
                                        uint32_t vocab) {
  int width = vocab <= 65536 ? 2 : 4;
  std::vector<uint8_t> bytes(kTokenFileHeaderBytes + tokens.size() * width);
  std::memcpy(bytes.data(), kTokenFileMagic, sizeof kTokenFileMagic);
  putLittle(bytes.data() + 8, width, 4);
  putLittle(bytes.data() + 12, vocab, 4);
  putLittle(bytes.data() + 16, tokens.size(), 8);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab)
      return invalidArgument("token id " + std::to_string(tokens[i]) +
                             " at position " + std::to_string(i) +
                             " is not below the vocabulary " +
                             std::to_string(vocab));
    putLittle(bytes.data() + kTokenFileHeaderBytes + i * width, tokens[i],
              width);
  }
  return writeFileAtomically(
      path, {{reinterpret_cast<const char *>(bytes.data()), bytes.size()}});
}

Expected<std::unique_ptr<TokenFile>> TokenFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return dataError("cannot read the token file '" + path +
                     "': " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0 || info.st_size < kTokenFileHeaderBytes) {
    ::close(fd);
    return dataError("'" + path +
                     "' is not a token file: it is shorter than "
                     "the 24-byte header (write one with tessera data pack)");
  }
  std::unique_ptr<TokenFile> file(new TokenFile());
  file->path = path;
  file->mappedBytes = static_cast<size_t>(info.st_size);
  file->mapping =
      ::mmap(nullptr, file->mappedBytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (file->mapping == MAP_FAILED) {
    file->mapping = nullptr;
    return dataError("cannot map the token file '" + path +
                     "': " + std::strerror(errno));
  }
  const auto *bytes = static_cast<const uint8_t *>(file->mapping);
  if (std::memcmp(bytes, kTokenFileMagic, sizeof kTokenFileMagic) != 0)
    return dataError("'" + path +
                     "' is not a token file: it does not start "
                     "with \"TSRTOK1\" (write one with tessera data pack)");
  uint64_t width = getLittle(bytes + 8, 4);
  file->vocab = static_cast<uint32_t>(getLittle(bytes + 12, 4));
  uint64_t count = getLittle(bytes + 16, 8);
  if (width != 2 && width != 4)
    return dataError("token file '" + path + "': its header gives " +
                     std::to_string(width) +
                     " bytes per token id; the format has 2 or 4");
  if (file->vocab == 0 || (width == 2 && file->vocab > 65536))
    return dataError("token file '" + path + "': its vocabulary of " +
                     std::to_string(file->vocab) + " ids does not fit " +
                     std::to_string(width) + "-byte ids");
  uint64_t data = file->mappedBytes - kTokenFileHeaderBytes;
  if (count > data / width || count * width != data)
    return dataError("token file '" + path + "': its header gives " +
                     std::to_string(count) + " token ids (" +
                     std::to_string(count * width) + " bytes), it holds " +
                     std::to_string(data) + " bytes of them" +
                     (count * width > data ? " (truncated?)" : ""));
  file->width = static_cast<int>(width);
  file->numTokens = static_cast<int64_t>(count);
  file->ids = bytes + kTokenFileHeaderBytes;
  return file;
}

TokenFile::~TokenFile() {
  if (mapping)
    ::munmap(mapping, mappedBytes);
}

uint32_t TokenFile::at(int64_t index) const {
  return static_cast<uint32_t>(getLittle(ids + index * width, width));
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
