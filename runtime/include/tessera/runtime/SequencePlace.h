//===- SequencePlace.h - Where causal attention's rows sit ------*- C++ -*-===//
//
// The positions of the rows an attention kernel holds along the sequence,
// which a causal mask compares: shared by the CPU and CUDA kernels (host
// and device code).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_SEQUENCEPLACE_H
#define TESSERA_RUNTIME_SEQUENCEPLACE_H

#include <cstdint>

#ifdef __CUDACC__
#define TESSERA_SEQUENCE_HOST_DEVICE __host__ __device__
#else
#define TESSERA_SEQUENCE_HOST_DEVICE
#endif

namespace tessera::runtime {

/// `rows` consecutive rows of a stored sequence, held as runs of
/// consecutive positions:
/// - in natural order, one run from position `start`;
/// - in zigzag order (nn.attention's `zigzag = n`: ring attention's causal
///   load balance), the sequence of `2n` chunks is stored as chunks 0,
///   2n - 1, 1, 2n - 2, ...; the rows are stored chunks `firstChunk` on,
///   a run each.
struct SequencePlace {
  int64_t rows = 0;
  int64_t start = 0;
  int64_t zigzag = 0;
  /// Zigzag order: the rows of a chunk, and the first one held.
  int64_t chunkRows = 0, firstChunk = 0;

  /// Rows `first` to `first + rows` of a sequence of `length` stored in
  /// zigzag order of `2 zigzag` chunks, or in natural order from `first`
  /// where `zigzag` is 0. The chunks must hold whole runs: 2 zigzag
  /// divides the length, and the chunk's rows divide `first` and `rows`.
  TESSERA_SEQUENCE_HOST_DEVICE static SequencePlace
  get(int64_t first, int64_t rows, int64_t length, int64_t zigzag) {
    SequencePlace place;
    place.rows = rows;
    place.start = first;
    if (zigzag > 0) {
      place.zigzag = zigzag;
      place.chunkRows = length / (2 * zigzag);
      place.firstChunk = first / place.chunkRows;
    }
    return place;
  }

  TESSERA_SEQUENCE_HOST_DEVICE int64_t getRunRows() const {
    return zigzag > 0 ? chunkRows : rows;
  }
  TESSERA_SEQUENCE_HOST_DEVICE int64_t getRuns() const {
    return zigzag > 0 ? rows / chunkRows : 1;
  }
  /// The position of run `run`'s first row.
  TESSERA_SEQUENCE_HOST_DEVICE int64_t getRunPosition(int64_t run) const {
    if (zigzag == 0)
      return start;
    int64_t stored = firstChunk + run;
    int64_t chunk = stored % 2 == 0 ? stored / 2 : 2 * zigzag - 1 - stored / 2;
    return chunk * chunkRows;
  }
  /// The position of row `row`.
  TESSERA_SEQUENCE_HOST_DEVICE int64_t getPosition(int64_t row) const {
    int64_t runRows = getRunRows();
    return getRunPosition(row / runRows) + row % runRows;
  }
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_SEQUENCEPLACE_H
