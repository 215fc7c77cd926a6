//===- GeluGradient.h - The GELU gradient as an nn.fused program -*- C++
//-*-===//
//
// Shared by the CPU and GPU elementwise benchmarks.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_BENCH_RUNTIME_GELUGRADIENT_H
#define TESSERA_BENCH_RUNTIME_GELUGRADIENT_H

#include "tessera/runtime/Kernels.h"

#include <vector>

/// The GELU gradient dy · gelu'(x) as the train step computes it
/// (NNGradients.cpp): 23 ops. Values are numbered as in an nn.fused
/// program: x and dy, then one per step.
inline std::vector<tessera::runtime::FusedStep> makeGeluGradient() {
  using namespace tessera::runtime;
  auto constant = [](float value) {
    FusedStep step{"nn.constant", {}, {}, DType::F32};
    step.attrs.bytes["value"] =
        std::string(reinterpret_cast<const char *>(&value), sizeof(float));
    return step;
  };
  auto op = [](const char *name, std::vector<int64_t> operands) {
    return FusedStep{name, std::move(operands), {}, DType::F32};
  };
  const float a = 0.044715f, c = 0.7978845608028654f;
  return {
      op("nn.mul", {0, 0}),   // 2: x²
      op("nn.mul", {2, 0}),   // 3: x³
      constant(a),            // 4
      op("nn.mul", {3, 4}),   // 5
      op("nn.add", {0, 5}),   // 6
      constant(c),            // 7
      op("nn.mul", {6, 7}),   // 8: u
      op("nn.tanh", {8}),     // 9: t
      constant(1.0f),         // 10
      op("nn.add", {10, 9}),  // 11
      constant(0.5f),         // 12
      op("nn.mul", {11, 12}), // 13: left
      op("nn.mul", {9, 9}),   // 14
      op("nn.sub", {10, 14}), // 15: sech²
      constant(3 * a),        // 16
      op("nn.mul", {2, 16}),  // 17
      op("nn.add", {10, 17}), // 18
      op("nn.mul", {18, 7}),  // 19: du
      op("nn.mul", {0, 12}),  // 20
      op("nn.mul", {15, 19}), // 21
      op("nn.mul", {20, 21}), // 22: right
      op("nn.add", {13, 22}), // 23
      op("nn.mul", {1, 23}),  // 24: dy · gelu'(x)
  };
}

#endif // TESSERA_BENCH_RUNTIME_GELUGRADIENT_H
