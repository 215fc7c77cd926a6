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

template <typename... Args> std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

bool isFloatValue(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

/// One step, resolved: what it computes and from which values.
struct Step {
  enum class Kind { Math, Clamp, Select, Compare, Cast, Constant, Broadcast };
  Kind kind;
  const ArrayMath *math = nullptr;
  std::vector<int64_t> operands;
  DType dtype;
  float lo = 0, hi = 0;  // Clamp.
  int64_t predicate = 0; // Compare.
  float value = 0;       // Constant.
  // Broadcast: the input's stride (in elements) along each result dim.
  std::vector<int64_t> strides;
};

/// The program of one nn.fused kernel, checked against its tensors.
class Program {
public:
  Program(const KernelAttrs &attrs, const std::vector<const Tensor *> &inputs,
          const std::vector<Tensor *> &outputs)
      : attrs(attrs), inputs(inputs), outputs(outputs) {}

  /// Resolves and checks every step and result; "" or what is wrong.
  std::string check();
  /// Computes the outputs, tile by tile.
  void run();

private:
  int64_t getNumInputs() const { return inputs.size(); }
  /// The element type of value `id`: an input's (16-bit floats arrive as
  /// f32) or a step's.
  DType getValueType(int64_t id) const {
    return id < getNumInputs() ? inputs[id]->dtype
                               : steps[id - getNumInputs()].dtype;
  }
  std::string checkStep(size_t index, const FusedStep &step);
  std::string checkOperands(size_t index, const FusedStep &step, Step &s);
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
  std::vector<int64_t> shape;
  std::vector<Step> steps;
  /// Per step, the f32 output it writes in place, if any (-1: its tile is
  /// a row of `scratch`): one that no input overlaps, so that writing it
  /// early changes nothing a later step reads.
  std::vector<int64_t> directOutput;
  /// Per value, its row of scratch (-1: none, it is read where it lies).
  std::vector<int64_t> slot;
};
} // namespace

std::string Program::checkOperands(size_t index, const FusedStep &step,
                                   Step &s) {
  int64_t limit = getNumInputs() + index;
  for (int64_t operand : step.operands) {
    if (operand < 0 || operand >= limit)
      return concat("step ", index, " ('", step.op, "') reads value ", operand,
                    ", expected < ", limit);
    if (operand < getNumInputs() && s.kind != Step::Kind::Broadcast &&
        inputs[operand]->shape != shape)
      return concat("step ", index, " ('", step.op, "') reads input ", operand,
                    " of shape ", formatShape(inputs[operand]->shape),
                    " without a broadcast to ", formatShape(shape));
  }
  return "";
}

std::string Program::checkStep(size_t index, const FusedStep &step) {
  Step &s = steps.emplace_back();
  s.dtype = step.dtype;
  s.operands = step.operands;
  size_t arity = 1;
  std::string at = concat("step ", index, " ('", step.op, "')");
  if ((s.math = findArrayMath(step.op))) {
    s.kind = Step::Kind::Math;
    arity = s.math->arity;
  } else if (step.op == "nn.clamp") {
    s.kind = Step::Kind::Clamp;
    std::optional<double> lo = step.attrs.getFloat("min"),
                          hi = step.attrs.getFloat("max");
    if (!lo || !hi)
      return at + " expects float attributes 'min' and 'max'";
    s.lo = *lo;
    s.hi = *hi;
  } else if (step.op == "nn.select") {
    s.kind = Step::Kind::Select;
    arity = 3;
  } else if (step.op == "nn.compare") {
    s.kind = Step::Kind::Compare;
    arity = 2;
    std::optional<int64_t> predicate = step.attrs.getInt("predicate");
    if (!predicate || *predicate < 0 || *predicate > 5)
      return at + " expects an integer attribute 'predicate' in [0, 5]";
    s.predicate = *predicate;
  } else if (step.op == "nn.cast") {
    s.kind = Step::Kind::Cast;
  } else if (step.op == "nn.constant") {
    s.kind = Step::Kind::Constant;
    arity = 0;
    const std::string *bytes = step.attrs.getBytes("value");
    if (!bytes || !isFloatValue(s.dtype) ||
        bytes->size() != getDTypeBytes(s.dtype))
      return at + " expects a float splat 'value' of its element type";
    if (s.dtype == DType::F32) {
      std::memcpy(&s.value, bytes->data(), 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, bytes->data(), 2);
      s.value = halfToFloat(s.dtype, bits);
    }
  } else if (step.op == "nn.broadcast") {
    s.kind = Step::Kind::Broadcast;
  } else {
    return at + " is not an elementwise op that fuses";
  }
  if (step.operands.size() != arity)
    return concat(at, " expects ", arity, " operands, got ",
                  step.operands.size());
  if (std::string error = checkOperands(index, step, s); !error.empty())
    return error;

  // Element types: floats compute, i1 selects and results from compares.
  bool wantsFloat = s.kind != Step::Kind::Compare;
  if (s.kind != Step::Kind::Broadcast &&
      (wantsFloat != isFloatValue(s.dtype) ||
       (!wantsFloat && s.dtype != DType::I1)))
    return concat(at, " expects a ", wantsFloat ? "float" : "i1",
                  " result, got ", getDTypeName(s.dtype));
  for (size_t i = 0; i < arity; ++i) {
    DType type = getValueType(s.operands[i]);
    bool condition = s.kind == Step::Kind::Select && i == 0;
    bool anyType = s.kind == Step::Kind::Broadcast;
    if (!anyType && (condition ? type != DType::I1 : !isFloatValue(type)))
      return concat(at, " expects operand ", i, " of ",
                    condition ? "i1" : "float", " elements, got ",
                    getDTypeName(type));
  }
  if (s.kind != Step::Kind::Broadcast)
    return "";

  // A broadcast reads an input: its dim i is result dim dims[i], of the
  // result's size there or of size 1.
  if (s.operands[0] >= getNumInputs())
    return at + " expects to broadcast an input of the kernel";
  const Tensor &input = *inputs[s.operands[0]];
  if (input.dtype == DType::I1 ? s.dtype != DType::I1 : !isFloatValue(s.dtype))
    return concat(at, " expects the element type of its input, got ",
                  getDTypeName(s.dtype), " for ", getDTypeName(input.dtype));
  const std::vector<int64_t> *dims = step.attrs.getList("dims");
  if (!dims || dims->size() != input.shape.size())
    return concat(at, " expects an integer-list attribute 'dims' of ",
                  input.shape.size(), " dims");
  s.strides.assign(shape.size(), 0);
  int64_t stride = 1;
  for (int64_t i = input.getRank() - 1; i >= 0; --i) {
    int64_t dim = (*dims)[i];
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size()) ||
        (i + 1 < input.getRank() && dim >= (*dims)[i + 1]))
      return concat(at, " expects increasing dims below ", shape.size(),
                    ", got ", formatShape(*dims));
    if (input.shape[i] != shape[dim] && input.shape[i] != 1)
      return concat(at, " cannot broadcast input shape ",
                    formatShape(input.shape), " to ", formatShape(shape));
    if (input.shape[i] != 1)
      s.strides[dim] = stride;
    stride *= input.shape[i];
  }
  return "";
}

std::string Program::check() {
  if (outputs.empty() || attrs.fusedResults.size() != outputs.size())
    return concat("expects one output per fused result, got ", outputs.size(),
                  " and ", attrs.fusedResults.size());
  for (const Tensor *input : inputs)
    if (input->dtype != DType::F32 && input->dtype != DType::I1)
      return concat("expects f32 or i1 inputs, got ",
                    getDTypeName(input->dtype));
  shape = outputs[0]->shape;
  for (size_t i = 0; i < attrs.fusedSteps.size(); ++i)
    if (std::string error = checkStep(i, attrs.fusedSteps[i]); !error.empty())
      return error;
  int64_t numValues = getNumInputs() + steps.size();
  for (size_t i = 0; i < outputs.size(); ++i) {
    int64_t id = attrs.fusedResults[i];
    if (id < 0 || id >= numValues)
      return concat("result ", i, " is value ", id, ", expected < ", numValues);
    if (outputs[i]->shape != shape)
      return concat("expects output ", i, " of shape ", formatShape(shape),
                    ", got ", formatShape(outputs[i]->shape));
    if (id < getNumInputs() && inputs[id]->shape != shape)
      return concat("result ", i, " is input ", id, " of shape ",
                    formatShape(inputs[id]->shape), ", not ",
                    formatShape(shape));
    DType type = getValueType(id);
    // 16-bit floats arrive widened: a float result fits a float output.
    if (isFloatValue(type) ? outputs[i]->dtype != DType::F32
                           : outputs[i]->dtype != type)
      return concat("expects output ", i, " of element type ",
                    getDTypeName(isFloatValue(type) ? DType::F32 : type),
                    ", got ", getDTypeName(outputs[i]->dtype));
  }
  return "";
}

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
      s.math->fn(operand(0), operand(s.math->arity - 1), y, count);
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

std::string tessera::runtime::cpu::runFusedProgram(
    const KernelAttrs &attrs, const std::vector<const Tensor *> &inputs,
    const std::vector<Tensor *> &outputs, bool checkOnly) {
  Program program(attrs, inputs, outputs);
  if (std::string error = program.check(); !error.empty())
    return error;
  if (!checkOnly)
    program.run();
  return "";
}
