//===- RandomKernels.cpp - The CPU's random-number kernels ----------------===//
//
// nn.random_uniform and nn.dropout: Philox numbers by each element's
// global index.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "tessera/runtime/Random.h"

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

bool getRandomDraw(KernelCall &c, size_t stepInput, size_t numOutputs,
                   const std::vector<int64_t> &shape, uint64_t &seed,
                   uint64_t &step, random::PiecePlace &place) {
  if (!c.expectVariadicArity(stepInput + 1, numOutputs) ||
      c.getNumInputs() > stepInput + 2)
    return c.fail("expects the step and at most a piece index after it, got ",
                  c.getNumInputs() - stepInput, " inputs");
  std::optional<int64_t> seedAttr = c.getInt("seed");
  if (!seedAttr || !c.expectIndex(c.in(stepInput), "step") ||
      !c.expectShape(c.in(stepInput), {}, "step"))
    return false;
  std::vector<int64_t> globalShape;
  const Tensor *piece = nullptr;
  if (c.getNumInputs() == stepInput + 2) {
    piece = &c.in(stepInput + 1);
    const std::vector<int64_t> *global = c.getList("global_shape");
    if (!global || !c.expectDType(*piece, DType::I64, "piece") ||
        !c.expectShape(*piece, {static_cast<int64_t>(shape.size())}, "piece"))
      return false;
    globalShape = *global;
  }
  if (std::string error = random::makePiecePlace(shape, globalShape, place);
      !error.empty())
    return c.fail(error);
  // The piece index is data, known when the kernel runs.
  if (piece && !c.isCheckOnly())
    if (int dim = place.setPieceIndex(piece->as<int64_t>()); dim >= 0)
      return c.failOnData("piece ", piece->as<int64_t>()[dim], " of size ",
                          shape[dim], " lies outside dim ", dim, " of size ",
                          globalShape[dim]);
  seed = static_cast<uint64_t>(*seedAttr);
  if (!c.isCheckOnly())
    step = static_cast<uint64_t>(readIndex(c.in(stepInput), 0));
  return true;
}

/// nn.random_uniform: numbers in [0, 1) by the element's global index.
void runRandomUniform(KernelCall &c) {
  if (!c.expectVariadicArity(1, 1) || !c.expectF32(c.out(0), "result"))
    return;
  Tensor &result = c.out(0);
  uint64_t seed = 0, step = 0;
  random::PiecePlace place;
  if (!getRandomDraw(c, 0, 1, result.shape, seed, step, place) ||
      c.isCheckOnly())
    return;
  float *y = result.as<float>();
  for (int64_t i = 0, e = result.getNumElements(); i < e; ++i)
    y[i] = random::uniformAt(seed, step, place.getGlobalIndex(i));
}

/// nn.dropout: x / (1 - rate) where the element's number is at least rate.
void runDropout(KernelCall &c) {
  if (!c.expectVariadicArity(2, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return;
  std::optional<double> rate = c.getFloat("rate");
  random::Dropout drop;
  if (!rate ||
      !getRandomDraw(c, 1, 1, c.in(0).shape, drop.seed, drop.step,
                     drop.place) ||
      c.isCheckOnly())
    return;
  drop.rate = static_cast<float>(*rate);
  const float *x = c.in(0).as<float>();
  float *y = c.out(0).as<float>();
  // A row of the last dim at a time.
  int64_t width = c.in(0).shape.empty() ? 1 : c.in(0).shape.back();
  std::vector<float> scales(width);
  for (int64_t row = 0, e = c.in(0).getNumElements(); row < e; row += width) {
    drop.getRowScales(row, width, scales.data());
    for (int64_t i = 0; i < width; ++i)
      y[row + i] = x[row + i] * scales[i];
  }
}

} // namespace tessera::runtime::cpu
