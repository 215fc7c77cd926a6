//===- FusedKernel.cpp - nn.fused on the CPU ------------------------------===//

#include "FusedKernel.h"

#include "ArrayMath.h"
#include "ThreadPool.h"

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace tessera::runtime;
using namespace tessera::runtime::cpu;

namespace {
/// Elements per tile: with a few dozen values of a program, the tiles fit in
/// a core's L1 and L2 caches.
constexpr int64_t kTileElements = 512;
/// The fewest tiles a thread takes: fewer cost more to hand out than they
/// save.
constexpr int64_t kTilesPerThread = 64;

using Step = FusedStepCode;

/// The program of one nn.fused kernel, decoded and checked.
class Program {
public:
  Program(const KernelAttrs &attrs, const std::vector<const Tensor *> &inputs,
          const std::vector<Tensor *> &outputs,
          const DecodedFusedProgram &decoded)
      : attrs(attrs), inputs(inputs), outputs(outputs), shape(decoded.shape),
        steps(decoded.steps) {}

  /// Computes the outputs, tile by tile.
  void run();

private:
  int64_t getNumInputs() const { return inputs.size(); }
  /// Gives each value computed into scratch a row of it (`slot`), reusing
  /// the rows of values no later step reads: a program's live tiles stay
  /// in a core's L1 cache. Constants get rows of their own, filled once per
  /// thread. Returns the number of rows.
  int64_t assignSlots();
  /// Computes the outputs' elements [start, start + count), with each
  /// value's tile in `tiles` and rows of `scratch` to hold them.
  void computeTile(int64_t start, int64_t count, float *scratch,
                   std::vector<const float *> &tiles);

  const KernelAttrs &attrs;
  const std::vector<const Tensor *> &inputs;
  const std::vector<Tensor *> &outputs;
  const std::vector<int64_t> &shape;
  const std::vector<Step> &steps;
  /// Per step, the f32 output it writes in place, if any (-1: its tile is
  /// a row of `scratch`): one that no input overlaps, so that writing it
  /// early changes nothing a later step reads.
  std::vector<int64_t> directOutput;
  /// Per value, its row of scratch (-1: none, it is read where it lies).
  std::vector<int64_t> slot;
};
} // namespace




/// Reads `count` elements of a broadcast input from the result's element
/// `start` on: along result dim d, the input advances by strides[d].
template <typename T>
static void readBroadcast(const T *input, const std::vector<int64_t> &shape,
                          const std::vector<int64_t> &strides, int64_t start,
                          int64_t count, float *tile) {
  int64_t rank = shape.size();
  if (rank == 0) {
    tile[0] = static_cast<float>(input[0]);
    return;
  }
  std::vector<int64_t> index(rank);
  int64_t offset = 0;
  for (int64_t d = rank - 1, rest = start; d >= 0; --d) {
    index[d] = rest % shape[d];
    rest /= shape[d];
    offset += index[d] * strides[d];
  }
  int64_t last = rank - 1, stride = strides[last];
  for (int64_t i = 0; i < count;) {
    int64_t run = std::min(count - i, shape[last] - index[last]);
    // A row of the input, or one of its elements repeated (a bias, a
    // per-row statistic).
    if (stride == 1)
      std::copy_n(input + offset, run, tile + i);
    else if (stride == 0)
      std::fill_n(tile + i, run, static_cast<float>(input[offset]));
    else
      for (int64_t j = 0; j < run; ++j)
        tile[i + j] = static_cast<float>(input[offset + j * stride]);
    i += run;
    index[last] += run;
    offset += run * stride;
    // Carry into the outer dims.
    for (int64_t d = last; d > 0 && index[d] == shape[d]; --d) {
      offset -= shape[d] * strides[d];
      index[d] = 0;
      ++index[d - 1];
      offset += strides[d - 1];
    }
  }
}

/// Rounds each element to the 16-bit float `dtype`, as a kernel's result
/// narrowed to it would be.
static void roundTo(DType dtype, float *tile, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    tile[i] = halfToFloat(dtype, floatToHalf(dtype, tile[i]));
}

void Program::computeTile(int64_t start, int64_t count, float *scratch,
                          std::vector<const float *> &tiles) {
  int64_t numInputs = getNumInputs();
  for (int64_t id = 0; id < numInputs; ++id) {
    const Tensor &input = *inputs[id];
    if (input.shape != shape)
      continue; // Read through a broadcast.
    if (input.dtype == DType::F32) {
      tiles[id] = input.as<const float>() + start;
      continue;
    }
    float *tile = scratch + slot[id] * kTileElements;
    const uint8_t *bytes = input.as<const uint8_t>() + start;
    for (int64_t i = 0; i < count; ++i)
      tile[i] = bytes[i] != 0 ? 1.0f : 0.0f;
    tiles[id] = tile;
  }
  for (size_t index = 0; index < steps.size(); ++index) {
    const Step &s = steps[index];
    int64_t id = numInputs + index;
    float *y = directOutput[index] >= 0
                   ? outputs[directOutput[index]]->as<float>() + start
                   : scratch + slot[id] * kTileElements;
    tiles[id] = y;
    // A constant's row was filled when the thread began.
    if (s.kind == Step::Kind::Constant)
      continue;
    auto operand = [&](size_t i) { return tiles[s.operands[i]]; };
    switch (s.kind) {
    case Step::Kind::Math:
      getArrayMath(s.mapOp).fn(operand(0), operand(s.arity - 1), y, count);
      break;
    case Step::Kind::Clamp: {
      const float *x = operand(0);
      for (int64_t i = 0; i < count; ++i)
        y[i] = clampElement(x[i], s.lo, s.hi);
      break;
    }
    case Step::Kind::Select: {
      const float *c = operand(0), *t = operand(1), *f = operand(2);
      for (int64_t i = 0; i < count; ++i)
        y[i] = c[i] != 0.0f ? t[i] : f[i];
      break;
    }
    case Step::Kind::Compare: {
      const float *a = operand(0), *b = operand(1);
      for (int64_t i = 0; i < count; ++i)
        y[i] = comparePredicate(s.predicate, a[i], b[i]) ? 1.0f : 0.0f;
      break;
    }
    case Step::Kind::Cast:
      std::copy_n(operand(0), count, y);
      break;
    case Step::Kind::Constant:
      break;
    case Step::Kind::Broadcast: {
      const Tensor &input = *inputs[s.operands[0]];
      if (input.dtype == DType::I1)
        readBroadcast(input.as<const uint8_t>(), shape, s.strides, start, count,
                      y);
      else
        readBroadcast(input.as<const float>(), shape, s.strides, start, count,
                      y);
      break;
    }
    }
    if (s.dtype == DType::BF16 || s.dtype == DType::F16)
      roundTo(s.dtype, y, count);
    else if (s.kind == Step::Kind::Broadcast && s.dtype == DType::I1)
      for (int64_t i = 0; i < count; ++i)
        y[i] = y[i] != 0.0f ? 1.0f : 0.0f;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const float *value = tiles[attrs.fusedResults[i]];
    Tensor &output = *outputs[i];
    if (output.dtype == DType::F32) {
      float *y = output.as<float>() + start;
      if (y != value)
        std::copy_n(value, count, y);
      continue;
    }
    uint8_t *y = output.as<uint8_t>() + start;
    for (int64_t j = 0; j < count; ++j)
      y[j] = value[j] != 0.0f ? 1 : 0;
  }
}

/// Whether the bytes of `a` and `b` overlap.
static bool overlap(const Tensor &a, const Tensor &b) {
  auto *x = static_cast<const uint8_t *>(a.data);
  auto *y = static_cast<const uint8_t *>(b.data);
  return x < y + b.getBytes() && y < x + a.getBytes();
}

int64_t Program::assignSlots() {
  int64_t numInputs = getNumInputs(), numValues = numInputs + steps.size();
  // The last step that reads each value; results are read at the end.
  std::vector<int64_t> lastUse(numValues, -1);
  for (size_t index = 0; index < steps.size(); ++index)
    for (int64_t operand : steps[index].operands)
      lastUse[operand] = index;
  for (int64_t result : attrs.fusedResults)
    lastUse[result] = steps.size();
  slot.assign(numValues, -1);
  int64_t numSlots = 0;
  std::vector<int64_t> free;
  auto take = [&](int64_t id) {
    if (free.empty()) {
      slot[id] = numSlots++;
    } else {
      slot[id] = free.back();
      free.pop_back();
    }
  };
  // Inputs of the fused shape that are not f32 (i1) are widened into a
  // row; constants keep theirs.
  for (int64_t id = 0; id < numInputs; ++id)
    if (inputs[id]->shape == shape && inputs[id]->dtype != DType::F32)
      take(id);
  for (size_t index = 0; index < steps.size(); ++index)
    if (steps[index].kind == Step::Kind::Constant)
      take(numInputs + index);
  for (size_t index = 0; index < steps.size(); ++index) {
    int64_t id = numInputs + index;
    if (directOutput[index] < 0 && slot[id] < 0)
      take(id);
    // Rows whose values are read for the last time here are free for the
    // next step (not this one: a step never writes a row it reads).
    for (int64_t operand : steps[index].operands)
      if (lastUse[operand] == static_cast<int64_t>(index) &&
          slot[operand] >= 0 &&
          (operand < numInputs ||
           steps[operand - numInputs].kind != Step::Kind::Constant)) {
        free.push_back(slot[operand]);
        lastUse[operand] = -1; // Freed once, when read twice here.
      }
  }
  return numSlots;
}

void Program::run() {
  directOutput.assign(steps.size(), -1);
  for (size_t i = 0; i < outputs.size(); ++i) {
    int64_t step = attrs.fusedResults[i] - getNumInputs();
    if (step < 0 || directOutput[step] >= 0 ||
        steps[step].kind == Step::Kind::Constant ||
        outputs[i]->dtype != DType::F32 ||
        std::any_of(inputs.begin(), inputs.end(), [&](const Tensor *input) {
          return overlap(*input, *outputs[i]);
        }))
      continue;
    directOutput[step] = i;
  }
  int64_t numValues = getNumInputs() + steps.size();
  int64_t numSlots = assignSlots();
  int64_t total = getNumElements(shape);
  int64_t numTiles = (total + kTileElements - 1) / kTileElements;
  parallelFor(numTiles, kTilesPerThread, [&](int64_t begin, int64_t end) {
    // The rows of a thread's last fused kernel stay for its next one.
    thread_local std::vector<float> scratch;
    scratch.resize(std::max<size_t>(scratch.size(), numSlots * kTileElements));
    for (size_t index = 0; index < steps.size(); ++index)
      if (steps[index].kind == Step::Kind::Constant)
        std::fill_n(scratch.data() +
                        slot[getNumInputs() + index] * kTileElements,
                    kTileElements, steps[index].value);
    std::vector<const float *> tiles(numValues, nullptr);
    for (int64_t tile = begin; tile < end; ++tile) {
      int64_t start = tile * kTileElements;
      computeTile(start, std::min(kTileElements, total - start), scratch.data(),
                  tiles);
    }
  });
}

void tessera::runtime::cpu::runFusedProgram(
    const KernelAttrs &attrs, const std::vector<const Tensor *> &inputs,
    const std::vector<Tensor *> &outputs, const DecodedFusedProgram &program) {
  Program(attrs, inputs, outputs, program).run();
}
