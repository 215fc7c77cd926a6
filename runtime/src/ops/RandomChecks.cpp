//===- RandomChecks.cpp - The checks of the random-number ops -------------===//

#include "Checks.h"

#include "tessera/runtime/Random.h"

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

bool tessera::runtime::checkRandomDraw(KernelCall &c, size_t stepInput,
                                       size_t numOutputs,
                                       const std::vector<int64_t> &shape) {
  if (!c.expectVariadicArity(stepInput + 1, numOutputs) ||
      c.getNumInputs() > stepInput + 2)
    return c.fail("expects the step and at most a piece index after it, got ",
                  c.getNumInputs() - stepInput, " inputs");
  std::optional<int64_t> seed = c.getInt("seed");
  if (!seed || !c.expectIndex(c.in(stepInput), "step") ||
      !c.expectShape(c.in(stepInput), {}, "step"))
    return false;
  std::vector<int64_t> globalShape;
  if (c.getNumInputs() == stepInput + 2) {
    const Tensor &piece = c.in(stepInput + 1);
    const std::vector<int64_t> *global = c.getList("global_shape");
    if (!global || !c.expectDType(piece, DType::I64, "piece") ||
        !c.expectShape(piece, {static_cast<int64_t>(shape.size())}, "piece"))
      return false;
    globalShape = *global;
  }
  random::PiecePlace place;
  if (std::string error = random::makePiecePlace(shape, globalShape, place);
      !error.empty())
    return c.fail(error);
  return true;
}

bool tessera::runtime::checkRandomUniform(KernelCall &c) {
  return c.expectVariadicArity(1, 1) && c.expectF32(c.out(0), "result") &&
         checkRandomDraw(c, 0, 1, c.out(0).shape);
}

bool tessera::runtime::checkDropout(KernelCall &c) {
  return c.expectVariadicArity(2, 1) && c.expectF32(c.in(0), "input") &&
         c.expectF32(c.out(0), "result") &&
         c.expectShape(c.out(0), c.in(0).shape, "result") &&
         c.getFloat("rate") && checkRandomDraw(c, 1, 1, c.in(0).shape);
}
