//===- ElementwiseChecks.cpp - The checks of the elementwise ops ----------===//
//
// The map ops, clamp, compare, select, cast, constants, iota and broadcast.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "tessera/runtime/Ops.h"

using namespace tessera::runtime;
using namespace tessera::runtime::detail;

bool tessera::runtime::checkMap(KernelCall &c) {
  Expected<const OpInfo *> op = findOp(c.getOp());
  if (!op.ok() || (*op)->kind != OpKind::Map)
    return c.fail("has no array math");
  size_t arity = (*op)->mapArity;
  if (!c.expectArity(arity, 1))
    return false;
  for (size_t i = 0; i < arity; ++i)
    if (!c.expectF32(c.in(i), arity == 1 ? "input"
                              : i == 0   ? "lhs"
                                         : "rhs") ||
        !c.expectShape(c.in(i), c.in(0).shape, i == 0 ? "input" : "rhs"))
      return false;
  return c.expectF32(c.out(0), "result") &&
         c.expectShape(c.out(0), c.in(0).shape, "result");
}

bool tessera::runtime::checkClamp(KernelCall &c) {
  std::optional<double> min = c.getFloat("min"), max = c.getFloat("max");
  return min && max && c.expectArity(1, 1) && c.expectF32(c.in(0), "input") &&
         c.expectF32(c.out(0), "result") &&
         c.expectShape(c.out(0), c.in(0).shape, "result");
}

bool tessera::runtime::checkSelect(KernelCall &c) {
  if (!c.expectArity(3, 1) || !c.expectDType(c.in(0), DType::I1, "condition"))
    return false;
  const Tensor &onTrue = c.in(1);
  std::pair<const Tensor *, const char *> others[] = {{&c.in(2), "on_false"},
                                                      {&c.out(0), "result"}};
  for (const auto &[tensor, role] : others)
    if (!c.expectDType(*tensor, onTrue.dtype, role) ||
        !c.expectShape(*tensor, onTrue.shape, role))
      return false;
  return c.expectShape(c.in(0), onTrue.shape, "condition");
}

bool tessera::runtime::checkCompare(KernelCall &c) {
  if (!c.expectArity(2, 1))
    return false;
  std::optional<int64_t> predicate = c.getInt("predicate");
  if (!predicate)
    return false;
  if (*predicate < 0 || *predicate > 5)
    return c.fail("predicate ", *predicate,
                  " is not one of eq, ne, lt, le, gt, ge (0 to 5)");
  const Tensor &lhs = c.in(0), &rhs = c.in(1);
  if (isFloat(lhs.dtype) && !c.expectF32(lhs, "lhs"))
    return false;
  return c.expectDType(rhs, lhs.dtype, "rhs") &&
         c.expectShape(rhs, lhs.shape, "rhs") &&
         c.expectDType(c.out(0), DType::I1, "result") &&
         c.expectShape(c.out(0), lhs.shape, "result");
}

/// The element types a cast converts between (16-bit floats arrive widened
/// to f32).
static bool isCastable(DType dtype) {
  return dtype == DType::F32 || dtype == DType::I32 || dtype == DType::I64 ||
         dtype == DType::I1;
}

bool tessera::runtime::checkCast(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return false;
  const Tensor &input = c.in(0), &result = c.out(0);
  if (!isCastable(input.dtype) || !isCastable(result.dtype))
    return c.fail(
        "the kernels cast between f32, bf16, f16, i32, i64 and i1, got ",
        getDTypeName(input.dtype), " to ", getDTypeName(result.dtype));
  return true;
}

bool tessera::runtime::checkConstant(KernelCall &c) {
  if (!c.expectArity(0, 1))
    return false;
  const std::string *value = c.getBytes("value");
  if (!value)
    return false;
  const Tensor &result = c.out(0);
  size_t elementBytes = getDTypeBytes(result.dtype);
  if (value->size() != elementBytes && value->size() != result.getBytes())
    return c.fail("value has ", value->size(), " bytes, expected ",
                  elementBytes, " (a splat) or ", result.getBytes(), " (",
                  result.getNumElements(), " ",
                  getDTypeName(result.dtype), " elements)");
  return true;
}

bool tessera::runtime::checkPieceIndex(KernelCall &c, int64_t input) {
  if (static_cast<int64_t>(c.getNumInputs()) <= input)
    return true;
  const Tensor &piece = c.in(input);
  return c.expectDType(piece, DType::I64, "piece") &&
         c.expectShape(piece, {1}, "piece");
}

bool tessera::runtime::checkIota(KernelCall &c) {
  if (!(c.getNumInputs() == 1 ? c.expectArity(1, 1) : c.expectArity(0, 1)))
    return false;
  const Tensor &result = c.out(0);
  std::optional<int64_t> dim = c.getInt("dim");
  if (!dim)
    return false;
  if (*dim < 0 || *dim >= result.getRank())
    return c.fail("expects dim in [0, ", result.getRank(), "), got ", *dim);
  if (result.dtype != DType::F32 && !c.expectIndex(result, "result"))
    return false;
  return checkPieceIndex(c, 0);
}

bool tessera::runtime::checkBroadcast(KernelCall &c) {
  if (!c.expectArity(1, 1))
    return false;
  const std::vector<int64_t> *dims = c.getList("dims");
  if (!dims)
    return false;
  const Tensor &input = c.in(0), &result = c.out(0);
  if (!c.expectDType(result, input.dtype, "result"))
    return false;
  if (static_cast<int64_t>(dims->size()) != input.getRank())
    return c.fail("expects one dim per operand dim (", input.getRank(),
                  "), got ", ListText{*dims});
  for (size_t index = 0; index < dims->size(); ++index) {
    int64_t dim = (*dims)[index];
    if (dim < 0 || dim >= result.getRank())
      return c.fail("dim ", dim, " is out of range for result rank ",
                    result.getRank());
    if (index > 0 && dim <= (*dims)[index - 1])
      return c.fail("expects increasing dims, got ", ListText{*dims});
    int64_t inSize = input.shape[index];
    if (inSize != 1 && inSize != result.shape[dim])
      return c.fail("operand dim ", index, " of size ", inSize,
                    " cannot broadcast to size ", result.shape[dim],
                    " of result dim ", dim);
  }
  return true;
}

bool tessera::runtime::checkFused(KernelCall &c) {
  if (!c.expectVariadicArity(0, c.getAttrs().fusedResults.size()))
    return false;
  DecodedFusedProgram program;
  if (std::string error = decodeFusedProgram(c.getAttrs(), c.getInputs(),
                                             c.getOutputs(), program);
      !error.empty())
    return c.fail(error);
  return true;
}
