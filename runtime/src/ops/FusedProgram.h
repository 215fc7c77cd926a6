//===- FusedProgram.h - nn.fused's expression program, decoded --*- C++ -*-===//
//
// A fused kernel's program (plan.proto's FusedStep: an op name, operands and
// attributes per step) decoded once into steps every backend evaluates,
// and checked against the kernel's tensors: the one place that knows which
// ops fuse and what each step needs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_OPS_FUSEDPROGRAM_H
#define TESSERA_RUNTIME_OPS_FUSEDPROGRAM_H

#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/OpIds.h"

#include <string>
#include <vector>

namespace tessera::runtime {

/// One step, decoded: what it computes and from which values. Values are
/// numbered from 0: the kernel's inputs, then the steps.
struct FusedStepCode {
  enum class Kind { Math, Clamp, Select, Compare, Cast, Constant, Broadcast };
  Kind kind = Kind::Math;
  /// Math: the map op and its number of operands.
  MapOp mapOp = MapOp();
  int arity = 0;
  std::vector<int64_t> operands;
  /// The element type the step's result is rounded to.
  DType dtype = DType::F32;
  float lo = 0, hi = 0;  // Clamp.
  int64_t predicate = 0; // Compare.
  float value = 0;       // Constant.
  /// Broadcast: the input's stride (in elements) along each result dim.
  std::vector<int64_t> strides;
};

struct DecodedFusedProgram {
  /// The shape every step computes (the outputs').
  std::vector<int64_t> shape;
  std::vector<FusedStepCode> steps;
};

/// Decodes and checks nn.fused's program (`attrs.fusedSteps`,
/// `attrs.fusedResults`) against its f32 and i1 tensors (16-bit floats
/// arrive widened to f32); returns what is wrong ("" when nothing is), for
/// the caller to prefix with the op.
std::string decodeFusedProgram(const KernelAttrs &attrs,
                               const std::vector<const Tensor *> &inputs,
                               const std::vector<Tensor *> &outputs,
                               DecodedFusedProgram &program);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_OPS_FUSEDPROGRAM_H
