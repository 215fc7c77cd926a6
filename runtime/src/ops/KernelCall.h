//===- KernelCall.h - One kernel invocation and its checks ------*- C++ -*-===//
//
// What every backend's kernels and the backend-neutral checks see of one
// launch: the op, its attributes and its tensors, with `expect*` checks that
// record the first failure as a message starting with the op's name.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_OPS_KERNELCALL_H
#define TESSERA_RUNTIME_OPS_KERNELCALL_H

#include "tessera/runtime/Kernels.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::runtime::detail {

/// Streams an integer list or a shape as `[2, 8, 64]`.
struct ListText {
  const std::vector<int64_t> &values;
};

inline std::ostream &operator<<(std::ostream &os, ListText list) {
  return os << formatShape(list.values);
}

/// Streams "1 input" or "2 inputs".
struct CountText {
  size_t count;
  const char *noun;
};

inline std::ostream &operator<<(std::ostream &os, CountText text) {
  return os << text.count << " " << text.noun << (text.count == 1 ? "" : "s");
}

/// The arguments streamed into one string.
template <typename... Args> std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// One kernel invocation: the op (every message starts with its name), its
/// attributes and its tensors. The `expect*` checks record the first failure
/// and return false, so a kernel chains them with `&&` and returns on the
/// first one that fails; the caller answers the recorded message.
class KernelCall {
public:
  KernelCall(const std::string &op, const KernelAttrs &attrs,
             const std::vector<const Tensor *> &inputs,
             const std::vector<Tensor *> &outputs)
      : op(op), attrs(attrs), inputs(inputs), outputs(outputs) {}

  const std::string &getOp() const { return op; }
  const KernelAttrs &getAttrs() const { return attrs; }
  const std::vector<const Tensor *> &getInputs() const { return inputs; }
  const std::vector<Tensor *> &getOutputs() const { return outputs; }
  const Tensor &in(size_t index) const { return *inputs[index]; }
  Tensor &out(size_t index) const { return *outputs[index]; }
  size_t getNumInputs() const { return inputs.size(); }
  const std::string &getMessage() const { return message; }

  /// Records `<op>: <args...>` (keeping an earlier failure); returns false.
  template <typename... Args> bool fail(const Args &...args) {
    if (message.empty())
      message = concat(op, ": ", args...);
    return false;
  }

  /// As fail, for what only the data shows (a label outside the
  /// vocabulary): the plan was fine, the inputs were not.
  template <typename... Args> bool failOnData(const Args &...args) {
    dataError = message.empty();
    return fail(args...);
  }
  bool isDataError() const { return dataError; }

  /// The recorded failure as a status: what only the data shows (a label
  /// outside the vocabulary, a step below 1) is a data error, the rest
  /// arguments that do not fit.
  Status getStatus() const {
    if (message.empty())
      return Status::success();
    return Status(dataError ? StatusCode::DataError
                            : StatusCode::InvalidArgument,
                  message);
  }

  /// Checks the numbers of tensors and that each has memory for its shape.
  bool expectArity(size_t numInputs, size_t numOutputs) {
    if (inputs.size() != numInputs || outputs.size() != numOutputs)
      return fail("expects ", CountText{numInputs, "input"}, " and ",
                  CountText{numOutputs, "output"}, ", got ", inputs.size(),
                  " and ", outputs.size());
    return expectMemory();
  }

  /// As expectArity, for variadic ops taking at least `minInputs`.
  bool expectVariadicArity(size_t minInputs, size_t numOutputs) {
    if (inputs.size() < minInputs || outputs.size() != numOutputs)
      return fail("expects at least ", CountText{minInputs, "input"}, " and ",
                  CountText{numOutputs, "output"}, ", got ", inputs.size(),
                  " and ", outputs.size());
    return expectMemory();
  }

  /// Float ops compute in f32 only; other float types get a message naming
  /// the backend's limit rather than the op's (the dialect allows them).
  bool expectF32(const Tensor &tensor, const char *role) {
    if (tensor.dtype == DType::F32)
      return true;
    if (isFloat(tensor.dtype))
      return fail("the kernels compute f32 (bf16 and f16 widened), got ",
                  getDTypeName(tensor.dtype));
    return fail("expects a float ", role, ", got ", getDTypeName(tensor.dtype));
  }

  bool expectDType(const Tensor &tensor, DType dtype, const char *role) {
    if (tensor.dtype == dtype)
      return true;
    return fail("expects ", role, " of element type ", getDTypeName(dtype),
                ", got ", getDTypeName(tensor.dtype));
  }

  /// Indices and labels are i32 or i64.
  bool expectIndex(const Tensor &tensor, const char *role) {
    if (tensor.dtype == DType::I32 || tensor.dtype == DType::I64)
      return true;
    return fail("expects ", role, " of element type i32 or i64, got ",
                getDTypeName(tensor.dtype));
  }

  bool expectShape(const Tensor &tensor, const std::vector<int64_t> &shape,
                   const char *role) {
    if (tensor.shape == shape)
      return true;
    return fail("expects ", role, " of shape ", ListText{shape}, ", got ",
                ListText{tensor.shape});
  }

  /// Checks that `dims` are distinct dims of a tensor of rank `rank`.
  bool expectDims(const std::vector<int64_t> &dims, int64_t rank,
                  const char *what) {
    std::vector<bool> seen(rank, false);
    for (int64_t dim : dims) {
      if (dim < 0 || dim >= rank)
        return fail(what, " ", dim, " is out of range for rank ", rank);
      if (seen[dim])
        return fail(what, " ", dim, " appears twice");
      seen[dim] = true;
    }
    return true;
  }

  std::optional<int64_t> getInt(const char *name) {
    std::optional<int64_t> value = attrs.getInt(name);
    if (!value)
      fail("missing integer attribute '", name, "'");
    return value;
  }

  /// The attribute getters have no defaults: a plan carries every
  /// attribute of an op, defaults included (the exporter writes what the op
  /// holds), so the op definition is their one source.
  std::optional<double> getFloat(const char *name) {
    std::optional<double> value = attrs.getFloat(name);
    if (!value)
      fail("missing float attribute '", name, "'");
    return value;
  }

  const std::vector<int64_t> *getList(const char *name) {
    const std::vector<int64_t> *value = attrs.getList(name);
    if (!value)
      fail("missing integer-list attribute '", name, "'");
    return value;
  }

  const std::string *getBytes(const char *name) {
    const std::string *value = attrs.getBytes(name);
    if (!value)
      fail("missing bytes attribute '", name, "'");
    return value;
  }

private:
  bool expectMemory() {
    auto check = [&](const Tensor *tensor, const char *kind, size_t index) {
      if (!tensor)
        return fail(kind, " #", index, " is null");
      for (int64_t size : tensor->shape)
        if (size < 0)
          return fail(kind, " #", index, " has a negative size in shape ",
                      ListText{tensor->shape});
      if (!tensor->data && tensor->getNumElements() > 0)
        return fail(kind, " #", index, " has no memory");
      return true;
    };
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!check(inputs[i], "input", i))
        return false;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (!check(outputs[i], "output", i))
        return false;
    return true;
  }

  const std::string &op;
  const KernelAttrs &attrs;
  const std::vector<const Tensor *> &inputs;
  const std::vector<Tensor *> &outputs;
  bool dataError = false;
  std::string message;
};
} // namespace tessera::runtime::detail

#endif // TESSERA_RUNTIME_OPS_KERNELCALL_H
