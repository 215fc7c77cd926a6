//===- FusedMath.cpp - Plans of nn.fused for the CUDA backend -------------===//

#include "FusedMath.h"

#include "tessera/runtime/Ops.h"

#include <cstring>

using namespace tessera::runtime;
using namespace tessera::runtime::cuda;

std::optional<MapOp> tessera::runtime::cuda::findMapOp(const std::string &op) {
  Expected<const OpInfo *> info = findOp(op);
  if (!info.ok() || (*info)->kind != OpKind::Map)
    return std::nullopt;
  return (*info)->mapOp;
}

Status tessera::runtime::cuda::planFused(
    const KernelAttrs &attrs, const std::vector<const Tensor *> &inputs,
    const std::vector<Tensor *> &outputs, FusedProgram &program) {
  const std::vector<int64_t> &shape = outputs[0]->shape;
  if (attrs.fusedSteps.size() > kFusedMaxSteps ||
      inputs.size() > kFusedMaxInputs || shape.size() > kMaxRank ||
      outputs.size() > kFusedMaxValues)
    return Status(StatusCode::Unavailable,
                  "nn.fused: the CUDA backend takes at most " +
                      std::to_string(kFusedMaxSteps) + " steps, " +
                      std::to_string(kFusedMaxInputs) + " inputs and " +
                      std::to_string(kMaxRank) + " dims");
  program = FusedProgram();
  program.rank = shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    program.shape[d] = shape[d];
  program.numInputs = inputs.size();
  program.numSteps = attrs.fusedSteps.size();
  program.numOutputs = outputs.size();
  for (size_t k = 0; k < inputs.size(); ++k) {
    FusedInput &input = program.inputs[k];
    input.data = inputs[k]->data;
    input.dtype = inputs[k]->dtype;
    input.direct = inputs[k]->shape == shape;
  }
  int numBroadcasts = 0;
  for (size_t s = 0; s < attrs.fusedSteps.size(); ++s) {
    const FusedStep &step = attrs.fusedSteps[s];
    FusedCode &code = program.steps[s];
    code.dtype = step.dtype;
    for (int j = 0; j < 3; ++j)
      code.operands[j] =
          j < static_cast<int>(step.operands.size()) ? step.operands[j] : -1;
    if (std::optional<MapOp> map = findMapOp(step.op)) {
      code.kind = FusedKind::Map;
      code.map = *map;
    } else if (step.op == "nn.clamp") {
      code.kind = FusedKind::Clamp;
      code.a = *step.attrs.getFloat("min");
      code.b = *step.attrs.getFloat("max");
    } else if (step.op == "nn.select") {
      code.kind = FusedKind::Select;
    } else if (step.op == "nn.compare") {
      code.kind = FusedKind::Compare;
      code.predicate = *step.attrs.getInt("predicate");
    } else if (step.op == "nn.cast") {
      code.kind = FusedKind::Cast;
    } else if (step.op == "nn.constant") {
      code.kind = FusedKind::Constant;
      const std::string &bytes = *step.attrs.getBytes("value");
      if (step.dtype == DType::F32) {
        std::memcpy(&code.a, bytes.data(), 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, bytes.data(), 2);
        code.a = halfToFloat(step.dtype, bits);
      }
    } else {
      // A broadcast (the checks accepted nothing else): its input's
      // strides over the result's dims.
      code.kind = FusedKind::Broadcast;
      if (numBroadcasts == kFusedMaxBroadcasts)
        return Status(StatusCode::Unavailable,
                      "nn.fused: the CUDA backend takes at most " +
                          std::to_string(kFusedMaxBroadcasts) + " broadcasts");
      code.broadcast = numBroadcasts;
      FusedBroadcast &read = program.broadcasts[numBroadcasts++];
      read.input = step.operands[0];
      const std::vector<int64_t> &inShape = inputs[read.input]->shape;
      const std::vector<int64_t> &dims = *step.attrs.getList("dims");
      int64_t stride = 1;
      for (int64_t i = inShape.size() - 1; i >= 0; --i) {
        if (inShape[i] != 1)
          read.strides[dims[i]] = stride;
        stride *= inShape[i];
      }
    }
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    program.outputs[k] = outputs[k]->data;
    program.outputTypes[k] = outputs[k]->dtype;
    program.results[k] = attrs.fusedResults[k];
  }
  return Status::success();
}
