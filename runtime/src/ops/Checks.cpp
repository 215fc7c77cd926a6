//===- Checks.cpp - The op table's checks, by op --------------------------===//

#include "Checks.h"

#include "tessera/runtime/Ops.h"

#include <cstring>

using namespace tessera::runtime;

CheckFn tessera::runtime::getCheck(OpId op) {
  static constexpr CheckFn checks[] = {
#define TESSERA_OP(Id, Name) check##Id,
#define TESSERA_MAP_OP(Id, Name, Arity) checkMap,
#include "tessera/runtime/Ops.def"
  };
  static_assert(sizeof(checks) / sizeof(checks[0]) == kNumOps);
  return checks[static_cast<size_t>(op)];
}

const KernelAttrs &tessera::runtime::widenConstantValue(
    OpId op, const KernelAttrs &attrs, const std::vector<Tensor *> &outputs,
    KernelAttrs &wideAttrs) {
  if (op != OpId::Constant || outputs.empty() || !outputs[0] ||
      !isHalf(outputs[0]->dtype))
    return attrs;
  wideAttrs = attrs;
  if (const std::string *raw = attrs.getBytes("value")) {
    std::string wide(raw->size() / 2 * 4, '\0');
    for (size_t i = 0; i < raw->size() / 2; ++i) {
      uint16_t bits;
      std::memcpy(&bits, raw->data() + 2 * i, 2);
      float value = halfToFloat(outputs[0]->dtype, bits);
      std::memcpy(&wide[4 * i], &value, 4);
    }
    wideAttrs.bytes["value"] = wide;
  }
  return wideAttrs;
}

Status tessera::runtime::checkOp(const OpInfo &op, const KernelAttrs &attrs,
                                 const std::vector<const Tensor *> &inputs,
                                 const std::vector<Tensor *> &outputs) {
  // 16-bit floats are computed in f32: check views of them as f32 (the
  // element count is what matters; no element is read).
  std::vector<Tensor> views;
  views.reserve(inputs.size() + outputs.size());
  auto widen = [&](const Tensor *tensor) -> Tensor * {
    if (!tensor)
      return nullptr;
    views.push_back(*tensor);
    if (isHalf(tensor->dtype))
      views.back().dtype = DType::F32;
    return &views.back();
  };
  std::vector<const Tensor *> ins;
  std::vector<Tensor *> outs;
  for (const Tensor *input : inputs)
    ins.push_back(widen(input));
  for (Tensor *output : outputs)
    outs.push_back(widen(output));
  KernelAttrs wideAttrs;
  std::string name = op.name;
  KernelCall call(name, widenConstantValue(op.id, attrs, outputs, wideAttrs),
                  ins, outs);
  getCheck(op.id)(call);
  return call.getStatus();
}

Status tessera::runtime::checkKernel(const std::string &op,
                                     const KernelAttrs &attrs,
                                     const std::vector<const Tensor *> &inputs,
                                     const std::vector<Tensor *> &outputs) {
  Expected<const OpInfo *> info = findOp(op);
  if (!info.ok())
    return info.getStatus();
  return checkOp(**info, attrs, inputs, outputs);
}
