//===- Random.h - The counter-based generator of random ops ------*- C++
//-*-===//
//
// Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
// as easy as 1, 2, 3", SC 2011) and how nn.random_uniform and nn.dropout
// number their elements: by their row-major index in the global tensor, so
// that a device's piece draws what one device draws there. The CPU kernels
// and the CUDA kernels (nvcc) compile this same code.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_RANDOM_H
#define TESSERA_RUNTIME_RANDOM_H

#include <cstdint>
#include <string>
#include <vector>

#ifdef __CUDACC__
#define TESSERA_RANDOM_HOST_DEVICE __host__ __device__
#else
#define TESSERA_RANDOM_HOST_DEVICE
#endif

namespace tessera::runtime::random {

struct Block {
  uint32_t words[4];
};

/// Philox-4x32 with ten rounds: four 32-bit words for a 128-bit counter and
/// a 64-bit key.
TESSERA_RANDOM_HOST_DEVICE inline Block philox4x32(Block counter, uint32_t key0,
                                                   uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    uint64_t product0 = static_cast<uint64_t>(0xD2511F53u) * counter.words[0];
    uint64_t product1 = static_cast<uint64_t>(0xCD9E8D57u) * counter.words[2];
    auto hi0 = static_cast<uint32_t>(product0 >> 32);
    auto lo0 = static_cast<uint32_t>(product0);
    auto hi1 = static_cast<uint32_t>(product1 >> 32);
    auto lo1 = static_cast<uint32_t>(product1);
    counter = {{hi1 ^ counter.words[1] ^ key0, lo1,
                hi0 ^ counter.words[3] ^ key1, lo0}};
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  return counter;
}

/// The four numbers' block of global indices 4 group .. 4 group + 3 for
/// `seed` and `step`: the counter is (group, step), the key the seed.
TESSERA_RANDOM_HOST_DEVICE inline Block drawBlock(uint64_t seed, uint64_t step,
                                                  uint64_t group) {
  return philox4x32(
      {{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
        static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/// A word's number in [0, 1): its top 24 bits scaled by 2^-24 (exact in
/// f32).
TESSERA_RANDOM_HOST_DEVICE inline float toUniform(uint32_t word) {
  return static_cast<float>(word >> 8) * 0x1p-24f;
}

/// The number at global index `index`: word `index mod 4` of its group's
/// block.
TESSERA_RANDOM_HOST_DEVICE inline float uniformAt(uint64_t seed, uint64_t step,
                                                  uint64_t index) {
  return toUniform(drawBlock(seed, step, index >> 2).words[index & 3]);
}

/// Where a piece of a tensor sits in the global one.
struct PiecePlace {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  int64_t shape[kMaxRank] = {};        // the piece's
  int64_t globalShape[kMaxRank] = {};  // the tensor's
  int64_t globalStride[kMaxRank] = {}; // row-major, of the global tensor
  int64_t offset[kMaxRank] = {};       // of the piece's first element

  /// Places the piece at `index` along each dim; returns the first dim
  /// where that piece lies outside the tensor, or -1.
  TESSERA_RANDOM_HOST_DEVICE int setPieceIndex(const int64_t *index) {
    for (int dim = 0; dim < rank; ++dim) {
      if (index[dim] < 0 || (index[dim] + 1) * shape[dim] > globalShape[dim])
        return dim;
      offset[dim] = index[dim] * shape[dim];
    }
    return -1;
  }

  /// The global row-major index of the piece's element `i`.
  TESSERA_RANDOM_HOST_DEVICE uint64_t getGlobalIndex(int64_t i) const {
    uint64_t global = 0;
    for (int dim = rank - 1; dim >= 0; --dim) {
      int64_t coordinate = i % shape[dim];
      i /= shape[dim];
      global += static_cast<uint64_t>(coordinate + offset[dim]) *
                static_cast<uint64_t>(globalStride[dim]);
    }
    return global;
  }
};

/// A dropout's draw: its rate, its key and the place of the piece it
/// drops from.
struct Dropout {
  float rate = 0.0f;
  uint64_t seed = 0, step = 0;
  PiecePlace place;

  /// The factor of the piece's element `i` (row-major): 1 without dropout
  /// (rate 0), else 1 / (1 - rate) where its number is at least the rate
  /// (kept) and 0 where it is below (dropped).
  TESSERA_RANDOM_HOST_DEVICE float getScale(int64_t i) const {
    if (rate <= 0.0f)
      return 1.0f;
    return uniformAt(seed, step, place.getGlobalIndex(i)) >= rate
               ? 1.0f / (1.0f - rate)
               : 0.0f;
  }

  /// getScale of the `count` elements from `first` on, which lie in one
  /// row of the last dim (consecutive global indices): a block serves four.
  void getRowScales(int64_t first, int64_t count, float *scales) const {
    if (rate <= 0.0f) {
      for (int64_t i = 0; i < count; ++i)
        scales[i] = 1.0f;
      return;
    }
    uint64_t index = place.getGlobalIndex(first);
    float kept = 1.0f / (1.0f - rate);
    Block block = drawBlock(seed, step, index >> 2);
    for (int64_t i = 0; i < count; ++i, ++index) {
      if (i > 0 && (index & 3) == 0)
        block = drawBlock(seed, step, index >> 2);
      scales[i] = toUniform(block.words[index & 3]) >= rate ? kept : 0.0f;
    }
  }
};

/// The place of a piece of `shape` in a tensor of `globalShape` (empty: the
/// piece is the whole tensor), at offset zero until setPieceIndex. Returns
/// an empty string or why they do not fit.
inline std::string makePiecePlace(const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &globalShape,
                                  PiecePlace &place) {
  int rank = static_cast<int>(shape.size());
  if (rank > PiecePlace::kMaxRank)
    return "expects a tensor of rank at most " +
           std::to_string(PiecePlace::kMaxRank) + ", got " +
           std::to_string(rank);
  const std::vector<int64_t> &global =
      globalShape.empty() ? shape : globalShape;
  if (static_cast<int>(global.size()) != rank)
    return "expects a global_shape of rank " + std::to_string(rank) + ", got " +
           std::to_string(global.size());
  place.rank = rank;
  int64_t stride = 1;
  for (int dim = rank - 1; dim >= 0; --dim) {
    if (shape[dim] == 0 ? global[dim] != 0 : global[dim] % shape[dim] != 0)
      return "global_shape dim " + std::to_string(dim) + " of size " +
             std::to_string(global[dim]) + " is not a whole number of " +
             "pieces of size " + std::to_string(shape[dim]);
    place.shape[dim] = shape[dim];
    place.globalShape[dim] = global[dim];
    place.globalStride[dim] = stride;
    place.offset[dim] = 0;
    stride *= global[dim];
  }
  return "";
}

} // namespace tessera::runtime::random

#endif // TESSERA_RUNTIME_RANDOM_H
