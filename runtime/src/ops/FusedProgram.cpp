//===- FusedProgram.cpp - nn.fused's expression program, decoded ----------===//

#include "FusedProgram.h"

#include "KernelCall.h"

#include "tessera/runtime/Ops.h"

#include <cstring>

using namespace tessera::runtime;
using detail::concat;

namespace {
using Step = FusedStepCode;

bool isFloatValue(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

/// Decodes one kernel's program, step by step.
class Decoder {
public:
  Decoder(const KernelAttrs &attrs, const std::vector<const Tensor *> &inputs,
          const std::vector<Tensor *> &outputs,
          DecodedFusedProgram &program)
      : attrs(attrs), inputs(inputs), outputs(outputs), shape(program.shape),
        steps(program.steps) {}

  /// Decodes and checks every step and result; "" or what is wrong.
  std::string check();

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

  const KernelAttrs &attrs;
  const std::vector<const Tensor *> &inputs;
  const std::vector<Tensor *> &outputs;
  std::vector<int64_t> &shape;
  std::vector<Step> &steps;
};
} // namespace

std::string Decoder::checkOperands(size_t index, const FusedStep &step,
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

std::string Decoder::checkStep(size_t index, const FusedStep &step) {
  Step &s = steps.emplace_back();
  s.dtype = step.dtype;
  s.operands = step.operands;
  size_t arity = 1;
  std::string at = concat("step ", index, " ('", step.op, "')");
  Expected<const OpInfo *> found = findOp(step.op);
  const OpInfo *op = found.ok() ? *found : nullptr;
  if (op && op->kind == OpKind::Map) {
    s.kind = Step::Kind::Math;
    s.mapOp = op->mapOp;
    arity = s.arity = op->mapArity;
  } else if (op && op->id == OpId::Clamp) {
    s.kind = Step::Kind::Clamp;
    std::optional<double> lo = step.attrs.getFloat("min"),
                          hi = step.attrs.getFloat("max");
    if (!lo || !hi)
      return at + " expects float attributes 'min' and 'max'";
    s.lo = *lo;
    s.hi = *hi;
  } else if (op && op->id == OpId::Select) {
    s.kind = Step::Kind::Select;
    arity = 3;
  } else if (op && op->id == OpId::Compare) {
    s.kind = Step::Kind::Compare;
    arity = 2;
    std::optional<int64_t> predicate = step.attrs.getInt("predicate");
    if (!predicate || *predicate < 0 || *predicate > 5)
      return at + " expects an integer attribute 'predicate' in [0, 5]";
    s.predicate = *predicate;
  } else if (op && op->id == OpId::Cast) {
    s.kind = Step::Kind::Cast;
  } else if (op && op->id == OpId::Constant) {
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
  } else if (op && op->id == OpId::Broadcast) {
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

std::string Decoder::check() {
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

std::string tessera::runtime::decodeFusedProgram(
    const KernelAttrs &attrs, const std::vector<const Tensor *> &inputs,
    const std::vector<Tensor *> &outputs, DecodedFusedProgram &program) {
  program = DecodedFusedProgram();
  return Decoder(attrs, inputs, outputs, program).check();
}
