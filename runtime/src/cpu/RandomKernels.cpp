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

bool getRandomDraw(KernelCall &c, size_t stepInput,
                   const std::vector<int64_t> &shape, uint64_t &seed,
                   uint64_t &step, random::PiecePlace &place) {
  std::vector<int64_t> globalShape;
  const Tensor *piece = nullptr;
  if (c.getNumInputs() == stepInput + 2) {
    piece = &c.in(stepInput + 1);
    globalShape = *c.getList("global_shape");
  }
  random::makePiecePlace(shape, globalShape, place);
  if (piece)
    if (int dim = place.setPieceIndex(piece->as<int64_t>()); dim >= 0)
      return c.failOnData("piece ", piece->as<int64_t>()[dim], " of size ",
                          shape[dim], " lies outside dim ", dim, " of size ",
                          globalShape[dim]);
  seed = static_cast<uint64_t>(*c.getInt("seed"));
  step = static_cast<uint64_t>(readIndex(c.in(stepInput), 0));
  return true;
}

/// nn.random_uniform: numbers in [0, 1) by the element's global index.
void runRandomUniform(KernelCall &c) {
  Tensor &result = c.out(0);
  uint64_t seed = 0, step = 0;
  random::PiecePlace place;
  if (!getRandomDraw(c, 0, result.shape, seed, step, place))
    return;
  float *y = result.as<float>();
  for (int64_t i = 0, e = result.getNumElements(); i < e; ++i)
    y[i] = random::uniformAt(seed, step, place.getGlobalIndex(i));
}

/// nn.dropout: x / (1 - rate) where the element's number is at least rate.
void runDropout(KernelCall &c) {
  std::optional<double> rate = c.getFloat("rate");
  random::Dropout drop;
  if (!getRandomDraw(c, 1, c.in(0).shape, drop.seed, drop.step, drop.place))
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
