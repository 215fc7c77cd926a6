//===- FusedKernel.h - nn.fused on the CPU ----------------------*- C++ -*-===//
//
// A fused kernel's expression program (plan.proto's FusedStep) evaluated in
// tiles of a few hundred elements: each step computes its tile with the
// function its op's own kernel uses (ArrayMath.h), so the tiles stay in the
// cache and memory sees each input read and each output written once.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_FUSEDKERNEL_H
#define TESSERA_RUNTIME_CPU_FUSEDKERNEL_H

#include "../ops/FusedProgram.h"

#include "tessera/runtime/Kernels.h"

#include <string>
#include <vector>

namespace tessera::runtime::cpu {

/// Computes nn.fused's outputs, which may alias inputs, from its f32 and
/// i1 tensors (16-bit floats arrive widened to f32) by its decoded
/// program (decodeFusedProgram's, for these tensors).
void runFusedProgram(const KernelAttrs &attrs,
                     const std::vector<const Tensor *> &inputs,
                     const std::vector<Tensor *> &outputs,
                     const DecodedFusedProgram &program);

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_FUSEDKERNEL_H
