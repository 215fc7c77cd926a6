//===- FusedMath.h - nn.fused on the CUDA backend ---------------*- C++ -*-===//
//
// A fused kernel's expression program as plain data that a CUDA kernel
// takes by value (about 3 KB of parameters), and the evaluation of one
// element of it, which nvcc compiles for the GPU and any C++ compiler for
// the host: each thread computes its elements' values step by step with
// ElementMath.h's functions, the same the unfused kernels use, so a fused
// program computes what its ops compute on the GPU. CudaOnHostTest runs it
// on a CPU against the CPU backend.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_FUSEDMATH_H
#define TESSERA_RUNTIME_CUDA_FUSEDMATH_H

#include "ElementMath.h"
#include "Layouts.h"
#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/Status.h"

#include <optional>
#include <string>

namespace tessera::runtime::cuda {

/// The most steps, inputs and broadcasts of a fused kernel
/// (--tessera-fuse-elementwise makes no more); a result is a step or an
/// input.
constexpr int kFusedMaxSteps = 64;
constexpr int kFusedMaxInputs = 16;
constexpr int kFusedMaxBroadcasts = 16;
constexpr int kFusedMaxValues = kFusedMaxInputs + kFusedMaxSteps;

enum class FusedKind : uint8_t {
  Map,
  Clamp,
  Select,
  Compare,
  Cast,
  Constant,
  Broadcast
};

struct FusedCode {
  FusedKind kind;
  MapOp map;        // Map
  DType dtype;      // what the value is rounded to
  int8_t predicate; // Compare
  int8_t operands[3];
  int8_t broadcast; // Broadcast: its FusedBroadcast
  float a, b;       // Clamp: bounds; Constant: a
};

struct FusedInput {
  const void *data;
  DType dtype;
  /// Of the result's shape, so that steps read it at each element's index
  /// (otherwise only broadcasts read it).
  bool direct;
};

/// A broadcast step's read of `input`: along result dim d it advances by
/// strides[d] elements (0 where it repeats).
struct FusedBroadcast {
  int input;
  int64_t strides[kMaxRank];
};

struct FusedProgram {
  int rank;
  int64_t shape[kMaxRank];
  int numInputs, numSteps, numOutputs;
  FusedInput inputs[kFusedMaxInputs];
  FusedBroadcast broadcasts[kFusedMaxBroadcasts];
  FusedCode steps[kFusedMaxSteps];
  void *outputs[kFusedMaxValues];
  DType outputTypes[kFusedMaxValues];
  int8_t results[kFusedMaxValues];
};

/// The MapOp of an elementwise nn op ("nn.add", ...), if it has one.
std::optional<MapOp> findMapOp(const std::string &op);

/// The program of nn.fused for `attrs` on these tensors (of any float type
/// or i1: 16-bit floats are read and written as they are), which the CPU
/// kernel's checks have accepted. Unavailable when the program is larger
/// than the limits above or has more than kMaxRank dims.
Status planFused(const KernelAttrs &attrs,
                 const std::vector<const Tensor *> &inputs,
                 const std::vector<Tensor *> &outputs, FusedProgram &program);

/// One element of a value as f32 (i1: 0 or 1), read as nn.cast reads it.
TESSERA_HOST_DEVICE inline float loadFused(DType dtype, const void *data,
                                           int64_t index) {
  Scalar scalar = loadScalar(dtype, data, index);
  return scalar.isFloat ? scalar.f : static_cast<float>(scalar.i);
}

/// Computes element `i` of every output of `p`.
TESSERA_HOST_DEVICE inline void evaluateFused(const FusedProgram &p,
                                              int64_t i) {
  float v[kFusedMaxValues];
  for (int k = 0; k < p.numInputs; ++k)
    if (p.inputs[k].direct)
      v[k] = loadFused(p.inputs[k].dtype, p.inputs[k].data, i);
  for (int s = 0; s < p.numSteps; ++s) {
    const FusedCode &c = p.steps[s];
    float a = c.operands[0] >= 0 ? v[c.operands[0]] : 0.0f;
    float b = c.operands[1] >= 0 ? v[c.operands[1]] : 0.0f;
    float y = 0.0f;
    switch (c.kind) {
    case FusedKind::Map:
      y = applyMap(c.map, a, b);
      break;
    case FusedKind::Clamp:
      y = applyClamp(a, c.a, c.b);
      break;
    case FusedKind::Select:
      y = a != 0.0f ? b : v[c.operands[2]];
      break;
    case FusedKind::Compare:
      y = applyPredicate<float>(c.predicate, a, b) ? 1.0f : 0.0f;
      break;
    case FusedKind::Cast:
      y = a;
      break;
    case FusedKind::Constant:
      y = c.a;
      break;
    case FusedKind::Broadcast: {
      const FusedBroadcast &read = p.broadcasts[c.broadcast];
      const FusedInput &input = p.inputs[read.input];
      int64_t rest = i, offset = 0;
      for (int d = p.rank - 1; d >= 0; --d) {
        offset += rest % p.shape[d] * read.strides[d];
        rest /= p.shape[d];
      }
      y = loadFused(input.dtype, input.data, offset);
      break;
    }
    }
    if (c.dtype == DType::BF16 || c.dtype == DType::F16)
      y = widenHalf(c.dtype, narrowToHalf(c.dtype, y));
    v[p.numInputs + s] = y;
  }
  for (int k = 0; k < p.numOutputs; ++k)
    storeScalar(p.outputTypes[k], p.outputs[k], i,
                Scalar{true, v[p.results[k]], 0});
}

} // namespace tessera::runtime::cuda

#endif // TESSERA_RUNTIME_CUDA_FUSEDMATH_H
