//===- Data.h - tessera-run --data: a token file's batches ------*- C++ -*-===//
//
// With --data FILE (a token file, TokenFile.h), each step's inputs and labels
// are the next global batch of the file's samples: the step's first two
// integer data arguments, of one [batch, seq] shape, are a sample's first
// seq ids and its last seq (the inputs shifted by one). Each rank reads only
// the samples its pieces hold, one positioned read each, on a thread that
// reads the next step's while this one runs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAINING_DATA_H
#define TESSERA_RUNTIME_TRAINING_DATA_H

#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"
#include "tessera/runtime/TokenFile.h"

#include "plan.pb.h"

#include <future>
#include <memory>
#include <vector>

namespace tessera::runtime {

class DataFeed {
public:
  /// Reads `path` for this rank's `program` of `plan`: fails when the file
  /// is no token file, is too short for one step, or has a vocabulary
  /// larger than the model's, or when the plan takes no tokens and labels.
  static Expected<std::unique_ptr<DataFeed>>
  create(const std::string &path, const plan::Plan &plan,
         const plan::Program &program, const Mesh &mesh, int64_t rank,
         uint64_t seed);
  ~DataFeed();

  /// The global batch's tokens per step (batch x seq).
  int64_t getTokensPerStep() const { return batch * seq; }
  /// Starts reading step `step`'s pieces (from 1) on the reader thread.
  void prefetch(int64_t step);
  /// Puts step `step`'s pieces of the inputs and labels into `locals` (the
  /// program's arguments), waiting for their prefetch; fails on an id at or
  /// above the file's vocabulary.
  Status fill(int64_t step, std::vector<OwnedTensor> &locals);

private:
  /// One argument of this rank's program that the file feeds.
  struct Fed {
    int argument;
    /// 0 for the inputs, 1 for the labels.
    int64_t shift;
    DType dtype;
    /// Per element of the piece, its index in the global [batch, seq]
    /// tensor plus one (0: padding, which stays 0).
    OwnedTensor positions;
  };
  DataFeed(std::unique_ptr<TokenFile> file, TokenBatches batches, int64_t batch,
           int64_t seq)
      : file(std::move(file)), batches(std::move(batches)), batch(batch),
        seq(seq) {}
  /// One sample of a step's global batch: its seq + 1 ids from `start`.
  struct Sample {
    int64_t start = 0;
    /// Empty where this rank's pieces hold none of it.
    std::vector<uint32_t> ids;
  };
  /// Reads, into `samples` (one per row of the global batch), the samples
  /// of step `step` that this rank's pieces hold.
  Status readSamples(int64_t step, std::vector<Sample> &samples);
  Expected<std::vector<OwnedTensor>> read(int64_t step);

  std::unique_ptr<TokenFile> file;
  TokenBatches batches;
  int64_t batch, seq;
  std::vector<Fed> fed;
  int64_t prefetched = -1;
  std::future<Expected<std::vector<OwnedTensor>>> next;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_DATA_H
