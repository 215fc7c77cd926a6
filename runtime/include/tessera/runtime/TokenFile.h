//===- TokenFile.h - Token files and the batches a run reads ----*- C++ -*-===//
//
// A token file is what `tessera data pack` writes and `tessera-run --data`
// reads: a flat array of token ids, as Megatron-LM's and nanoGPT's .bin
// files, behind a 24-byte header (all little-endian):
//
//   bytes  0-7   "TSRTOK1\0"
//   bytes  8-11  u32: bytes per token id, 2 (uint16) or 4 (uint32)
//   bytes 12-15  u32: the vocabulary; every id is below it
//   bytes 16-23  u64: the number of token ids that follow
//
// A run cuts the ids into samples of seq + 1 tokens (a model's inputs and,
// shifted by one, its labels) and reads `batch` samples per step, in an
// order shuffled per epoch by the seed: step t's batch depends only on the
// seed and t, so a resumed run reads what an uninterrupted one would.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TOKENFILE_H
#define TESSERA_RUNTIME_TOKENFILE_H

#include "tessera/runtime/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessera::runtime {

inline constexpr char kTokenFileMagic[8] = {'T', 'S', 'R', 'T',
                                            'O', 'K', '1', '\0'};
inline constexpr int64_t kTokenFileHeaderBytes = 24;

/// Gives the ids of a token file being written, a chunk at a time: it
/// appends the next ids to `ids` (empty when called) and leaves `ids` empty
/// once there are no more.
using TokenSource = std::function<Status(std::vector<uint32_t> &ids)>;

/// Writes the ids `source` gives (each below `vocab`) as a token file at
/// `path`, in uint16 when the vocabulary fits, else uint32; through a
/// staging file renamed into place. Memory holds one chunk at a time: the
/// header's count is written once the ids are. Returns the number of ids.
Expected<int64_t> writeTokenFile(const std::string &path, uint32_t vocab,
                                 const TokenSource &source);

/// Writes `tokens` (each below `vocab`) as a token file at `path`.
Status writeTokenFile(const std::string &path,
                      const std::vector<uint32_t> &tokens, uint32_t vocab);

/// A token file, read with positioned reads of the samples a rank needs
/// (no mapping: a file truncated while a run reads it is an error naming
/// the file, not a SIGBUS).
class TokenFile {
public:
  /// Opens and checks `path`: its header, and a size that holds its ids.
  static Expected<std::unique_ptr<TokenFile>> open(const std::string &path);
  ~TokenFile();
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;

  const std::string &getPath() const { return path; }
  int64_t getNumTokens() const { return numTokens; }
  uint32_t getVocab() const { return vocab; }
  int getBytesPerToken() const { return width; }
  /// Reads the `count` ids from index `first` into `ids`. Fails with a data
  /// error naming the file when they are not all in it (`first` or `count`
  /// out of range, or the file cut short since it was opened) or cannot be
  /// read. Safe to call from several threads.
  Status read(int64_t first, int64_t count, uint32_t *ids) const;

private:
  TokenFile() = default;
  std::string path;
  int descriptor = -1;
  int64_t numTokens = 0;
  uint32_t vocab = 0;
  int width = 2;
};

/// Where each step's samples start: samples of `seq + 1` ids, `batch` per
/// step, in a shuffled order per epoch (Fisher-Yates, keyed by the seed and
/// the epoch).
class TokenBatches {
public:
  /// Fails when the file holds fewer than `batch` samples.
  static Expected<TokenBatches> create(const TokenFile &file, int64_t batch,
                                       int64_t seq, uint64_t seed);

  int64_t getNumSamples() const { return numSamples; }
  /// The index of the first id of row `row` of step `step`'s (from 1)
  /// global batch.
  int64_t getSampleStart(int64_t step, int64_t row);

private:
  TokenBatches(int64_t batch, int64_t seq, uint64_t seed, int64_t numSamples)
      : batch(batch), seq(seq), seed(seed), numSamples(numSamples) {}
  int64_t batch, seq;
  uint64_t seed;
  int64_t numSamples;
  /// The epoch whose order `order` holds (-1: none yet).
  int64_t epoch = -1;
  std::vector<int64_t> order;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TOKENFILE_H
