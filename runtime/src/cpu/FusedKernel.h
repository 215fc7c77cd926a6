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

#include "tessera/runtime/Kernels.h"

#include <string>
#include <vector>

namespace tessera::runtime::cpu {

/// Checks nn.fused's program (`attrs.fusedSteps`, `attrs.fusedResults`)
/// against its f32 and i1 tensors (16-bit floats arrive widened to f32) and,
/// unless `checkOnly`, computes the outputs, which may alias inputs. Returns
/// what is wrong ("" when nothing is), for the kernel to prefix with its op.
std::string runFusedProgram(const KernelAttrs &attrs,
                            const std::vector<const Tensor *> &inputs,
                            const std::vector<Tensor *> &outputs,
                            bool checkOnly);

} // namespace tessera::runtime::cpu

#endif // TESSERA_RUNTIME_CPU_FUSEDKERNEL_H
