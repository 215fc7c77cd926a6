//===- Models.cpp - Generators of nn IR for standard models ---------------===//

#include "tessera/Models/Models.h"
#include "tessera/Search/ShardingTemplates.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace tessera;

static llvm::Error fieldError(StringRef field, const llvm::Twine &message) {
  return llvm::createStringError("--" + field + " " + message);
}

static llvm::Error checkPositive(StringRef field, int64_t value) {
  if (value < 1)
    return fieldError(field, "must be at least 1, got " + llvm::Twine(value));
  return llvm::Error::success();
}

static llvm::Error checkSharding(StringRef sharding) {
  if (sharding != "none" && sharding != "megatron" && sharding != "megatron-sp")
    return fieldError("sharding", "must be none, megatron or megatron-sp, "
                                  "got '" +
                                      sharding + "'");
  return llvm::Error::success();
}

static llvm::Error checkAttention(StringRef attention) {
  if (attention != "fused" && attention != "unfused")
    return fieldError("attention",
                      "must be fused or unfused, got '" + attention + "'");
  return llvm::Error::success();
}

static llvm::Error checkDtype(StringRef dtype) {
  if (dtype != "f32" && dtype != "bf16" && dtype != "f16" && dtype != "f64")
    return fieldError("dtype",
                      "must be f32, bf16, f16 or f64, got '" + dtype + "'");
  return llvm::Error::success();
}

static llvm::Error checkHeads(int64_t heads, int64_t hidden) {
  if (hidden % heads != 0)
    return fieldError(
        "heads",
        llvm::formatv("({0}) must divide --hidden ({1})", heads, hidden).str());
  return llvm::Error::success();
}

/// The expert slots per token (experts x capacity / group) of a validated
/// MoE configuration, in double (a size check's bound); 1 without experts.
static double getRoutedSlots(const MoeConfig &c, int64_t seq) {
  if (c.experts == 0)
    return 1;
  int64_t group = c.getGroupSize(seq);
  return double(c.experts) * getExpertCapacity(c, group) / group;
}

/// The options the transformer generators share.
static llvm::Error checkAnnotationsAndTypes(StringRef sharding,
                                            StringRef contextParallel,
                                            StringRef attention, double dropout,
                                            StringRef dtype) {
  if (llvm::Error error = checkSharding(sharding))
    return error;
  if (contextParallel != "none" && contextParallel != "ring" &&
      contextParallel != "ulysses" && contextParallel != "all-gather")
    return fieldError("context-parallel",
                      "must be none, ring, ulysses or all-gather, got '" +
                          contextParallel + "'");
  if (contextParallel == "ring" && dropout > 0)
    return fieldError("context-parallel",
                      "ring does not drop attention probabilities yet: give "
                      "--dropout 0, or ulysses or all-gather");
  if (contextParallel != "none" && sharding == "none")
    return fieldError("context-parallel",
                      "adds a \"cp\" axis to a megatron sharding: give "
                      "--sharding megatron or megatron-sp");
  if (contextParallel != "none" && attention != "fused")
    return fieldError("context-parallel",
                      "partitions the fused attention: give "
                      "--attention fused");
  if (llvm::Error error = checkAttention(attention))
    return error;
  return checkDtype(dtype);
}

/// What the generators build at most: layers (a 1T-parameter model has
/// about 100-200), and elements in the parameters or in any one activation
/// (2^50, a thousand times a 1T model's parameters).
static constexpr int64_t kMaxLayers = 100000;
static constexpr double kMaxElements = 1125899906842624.0; // 2^50

/// Refuses a model too large to build, before any count can overflow:
/// `parameters` and `largestActivation` are computed in double.
static llvm::Error checkModelSize(int64_t layers, double parameters,
                                  double largestActivation) {
  if (layers > kMaxLayers)
    return fieldError("layers", llvm::formatv("must be at most {0}, got {1}",
                                              kMaxLayers, layers)
                                    .str());
  for (auto [what, count] :
       {std::pair<StringRef, double>{"parameters", parameters},
        {"elements in one activation", largestActivation}})
    if (count > kMaxElements)
      return llvm::createStringError(
          llvm::formatv("the model would have {0:e2} {1}, over the "
                        "generators' limit of 2^50 ({2:e2})",
                        count, what, kMaxElements)
              .str());
  return llvm::Error::success();
}

/// A real option's value as the user would write it (%g).
static std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// A dropout rate in [0, 1) (the negation catches NaN).
static llvm::Error checkDropout(double rate) {
  if (!(rate >= 0 && rate < 1))
    return fieldError("dropout",
                      "must be in [0, 1), got " + formatNumber(rate));
  return llvm::Error::success();
}

/// The experts of a transformer: a positive top-k no larger than the
/// experts, a positive capacity factor, a loss weight of at least 0, groups
/// dividing the sequence; not with context parallelism.
static llvm::Error checkMoe(const MoeConfig &moe, int64_t seq,
                            StringRef contextParallel) {
  if (moe.experts < 0)
    return fieldError("experts", "must be at least 0 (0 for the dense MLP), "
                                 "got " +
                                     llvm::Twine(moe.experts));
  if (moe.experts == 0)
    return llvm::Error::success();
  if (moe.topK < 1 || moe.topK > moe.experts)
    return fieldError("top-k", llvm::formatv("must be in [1, {0}] (the "
                                             "experts), got {1}",
                                             moe.experts, moe.topK)
                                   .str());
  // The negations catch NaN too.
  if (!(moe.capacityFactor > 0) || std::isinf(moe.capacityFactor))
    return fieldError("capacity-factor", "must be positive, got " +
                                             formatNumber(moe.capacityFactor));
  if (!(moe.auxLossCoef >= 0) || std::isinf(moe.auxLossCoef))
    return fieldError("aux-loss-coef", "must be at least 0, got " +
                                           formatNumber(moe.auxLossCoef));
  if (moe.groupSize < 0 || (moe.groupSize && seq % moe.groupSize != 0))
    return fieldError("moe-group-size",
                      llvm::formatv("must divide --seq ({0}) (or be 0 for "
                                    "the sequence), got {1}",
                                    seq, moe.groupSize)
                          .str());
  // TODO(issue 23): experts with context parallelism, whose split sequence
  // each group's routing needs whole.
  if (contextParallel != "none")
    return fieldError("experts", "are not split with context parallelism "
                                 "yet: give --context-parallel none");
  return llvm::Error::success();
}

llvm::Error tessera::validate(const GptConfig &c) {
  for (auto [field, value] : {std::pair<StringRef, int64_t>{"layers", c.layers},
                              {"hidden", c.hidden},
                              {"heads", c.heads},
                              {"seq", c.seq},
                              {"vocab", c.vocab},
                              {"batch", c.batch}})
    if (llvm::Error error = checkPositive(field, value))
      return error;
  if (llvm::Error error = checkHeads(c.heads, c.hidden))
    return error;
  if (llvm::Error error = checkMoe(c.moe, c.seq, c.contextParallel))
    return error;
  double l = c.layers, h = c.hidden, tokens = double(c.batch) * c.seq,
         experts = std::max<double>(c.moe.experts, 1),
         slots = getRoutedSlots(c.moe, c.seq);
  if (llvm::Error error = checkModelSize(
          c.layers,
          4 * l * h * h + 8 * l * h + experts * l * (8 * h * h + 5 * h) +
              (double(c.vocab) + c.seq) * h + 2 * h,
          tokens * std::max({double(c.vocab), 4 * h * slots,
                             c.heads * double(c.seq), slots * c.seq})))
    return error;
  if (llvm::Error error = checkDropout(c.dropout))
    return error;
  return checkAnnotationsAndTypes(c.sharding, c.contextParallel, c.attention,
                                  c.dropout, c.dtype);
}

llvm::Error tessera::validate(const MlpConfig &c) {
  for (auto [field, value] : {std::pair<StringRef, int64_t>{"layers", c.layers},
                              {"input", c.input},
                              {"hidden", c.hidden},
                              {"output", c.output},
                              {"batch", c.batch}})
    if (llvm::Error error = checkPositive(field, value))
      return error;
  double widest = std::max({c.input, c.hidden, c.output});
  if (llvm::Error error = checkModelSize(
          c.layers, (widest + 1) * widest * c.layers, widest * c.batch))
    return error;
  if (llvm::Error error = checkSharding(c.sharding))
    return error;
  return checkDtype(c.dtype);
}

llvm::Error tessera::validate(const CtrConfig &c) {
  for (auto [field, value] :
       {std::pair<StringRef, int64_t>{"features", c.features},
        {"buckets", c.buckets},
        {"hidden", c.hidden},
        {"batch", c.batch}})
    if (llvm::Error error = checkPositive(field, value))
      return error;
  // The ids are drawn as floats: every bucket must be one.
  if (c.buckets > (int64_t(1) << 24))
    return fieldError(
        "buckets", llvm::formatv("must be at most 2^24, got {0}", c.buckets));
  return checkModelSize(1, double(c.buckets) * c.hidden,
                        double(c.batch) * c.features * c.hidden);
}

llvm::Error tessera::validate(const LlamaConfig &c) {
  for (auto [field, value] : {std::pair<StringRef, int64_t>{"layers", c.layers},
                              {"hidden", c.hidden},
                              {"heads", c.heads},
                              {"kv-heads", c.kvHeads},
                              {"seq", c.seq},
                              {"vocab", c.vocab},
                              {"batch", c.batch}})
    if (llvm::Error error = checkPositive(field, value))
      return error;
  if (c.ffnHidden < 0)
    return fieldError("ffn-hidden",
                      "must be at least 1 (or 0 for Llama's rule), got " +
                          llvm::Twine(c.ffnHidden));
  if (llvm::Error error = checkHeads(c.heads, c.hidden))
    return error;
  if (c.heads % c.kvHeads != 0)
    return fieldError(
        "kv-heads",
        llvm::formatv("({0}) must divide --heads ({1})", c.kvHeads, c.heads)
            .str());
  if ((c.hidden / c.heads) % 2 != 0)
    return fieldError("heads",
                      llvm::formatv("must leave an even head dim for the "
                                    "rotary halves, got {0}",
                                    c.hidden / c.heads)
                          .str());
  // The negations catch NaN too.
  if (!(c.ropeTheta > 1))
    return fieldError("rope-theta", "must be greater than 1, got " +
                                        formatNumber(c.ropeTheta));
  if (!(c.normEps > 0))
    return fieldError("norm-eps",
                      "must be positive, got " + formatNumber(c.normEps));
  if (llvm::Error error = checkMoe(c.moe, c.seq, c.contextParallel))
    return error;
  double l = c.layers, h = c.hidden, f = c.ffnHidden ? c.ffnHidden : 8 * h / 3,
         kv = double(c.kvHeads) * (c.hidden / c.heads),
         tokens = double(c.batch) * c.seq,
         experts = std::max<double>(c.moe.experts, 1),
         slots = getRoutedSlots(c.moe, c.seq);
  if (llvm::Error error = checkModelSize(
          c.layers,
          l * (2 * h + 2 * h * h + 2 * h * kv + experts * 3 * h * f) +
              2 * double(c.vocab) * h + h,
          tokens * std::max({double(c.vocab), f * slots,
                             c.heads * double(c.seq), slots * c.seq})))
    return error;
  if (llvm::Error error = checkDropout(c.dropout))
    return error;
  return checkAnnotationsAndTypes(c.sharding, c.contextParallel, c.attention,
                                  c.dropout, c.dtype);
}

int64_t tessera::getExpertCapacity(const MoeConfig &c, int64_t tokens) {
  double slots = std::ceil(c.capacityFactor * c.topK * tokens / c.experts);
  return std::max<int64_t>(1, std::min<double>(slots, tokens));
}

int64_t tessera::getLlamaFfnHidden(int64_t hidden) {
  const int64_t multiple = 256;
  int64_t width = 2 * (4 * hidden) / 3;
  return (width + multiple - 1) / multiple * multiple;
}

/// The SwiGLU width `c` builds with.
static int64_t getFfnHidden(const LlamaConfig &c) {
  return c.ffnHidden ? c.ffnHidden : getLlamaFfnHidden(c.hidden);
}

int64_t tessera::getParameterCount(const LlamaConfig &c) {
  int64_t h = c.hidden, kv = c.kvHeads * (c.hidden / c.heads),
          f = getFfnHidden(c);
  int64_t mlp = 3 * h * f;
  if (int64_t e = c.moe.experts)
    mlp = e * mlp + h * e;
  return c.layers * (2 * h + 2 * h * h + 2 * h * kv + mlp) + 2 * c.vocab * h +
         h;
}

int64_t tessera::getParameterCount(const GptConfig &c) {
  int64_t l = c.layers, h = c.hidden, mlp = 8 * h * h + 5 * h;
  if (int64_t e = c.moe.experts)
    mlp = e * mlp + h * e;
  return l * (4 * h * h + 8 * h + mlp) + (c.vocab + c.seq) * h + 2 * h;
}

/// The widths of the layers' inputs and outputs: input, hidden..., output.
static SmallVector<int64_t> getMlpWidths(const MlpConfig &c) {
  SmallVector<int64_t> widths{c.input};
  widths.append(c.layers - 1, c.hidden);
  widths.push_back(c.output);
  return widths;
}

int64_t tessera::getParameterCount(const MlpConfig &c) {
  SmallVector<int64_t> widths = getMlpWidths(c);
  int64_t count = 0;
  for (int64_t layer = 0; layer < c.layers; ++layer)
    count += (widths[layer] + 1) * widths[layer + 1];
  return count;
}

int64_t tessera::getParameterCount(const CtrConfig &c) {
  return c.buckets * c.hidden + c.hidden + 1;
}

int64_t tessera::countParameters(ModuleOp module) {
  int64_t count = 0;
  module.walk([&](func::FuncOp function) {
    for (unsigned i = 0; i < function.getNumArguments(); ++i)
      if (function.getArgAttr(i, nn::kParamAttrName))
        count +=
            cast<ShapedType>(function.getArgumentTypes()[i]).getNumElements();
  });
  return count;
}

namespace {
/// Builds one function: collects its data and parameter arguments first,
/// then emits the body with helpers for the layers the models share.
class FunctionBuilder {
public:
  FunctionBuilder(MLIRContext *context, StringRef dtype)
      : builder(context), loc(builder.getUnknownLoc()),
        elementType(parseDtype(context, dtype)) {}

  Type getElementType() const { return elementType; }

  RankedTensorType tensor(ArrayRef<int64_t> shape,
                          Type element = nullptr) const {
    return RankedTensorType::get(shape, element ? element : elementType);
  }

  /// Declares an argument; returns its index. `param` names a trainable one.
  unsigned addArgument(Type type, StringRef param = {}) {
    argTypes.push_back(type);
    paramNames.push_back(param.str());
    return argTypes.size() - 1;
  }

  /// With a positive `rate`, declares the step counter (nn.state "step",
  /// which the runtime sets each step and an AdamW update reads too) that
  /// dropout draws its masks for; call before begin.
  void setDropout(double rate) {
    dropoutRate = rate;
    if (rate > 0)
      stepArgument =
          addArgument(RankedTensorType::get({}, builder.getI64Type()));
  }

  /// The step counter dropout draws for; null without dropout.
  Value getDropoutStep() { return stepArgument ? arg(*stepArgument) : Value(); }
  double getDropoutRate() const { return dropoutRate; }
  /// A seed no other dropout of the model has.
  int64_t takeSeed() { return nextSeed++; }

  /// Dropout of `x` (the identity without dropout).
  Value dropout(Value x) {
    if (!stepArgument)
      return x;
    return nn::DropoutOp::create(builder, loc, x, arg(*stepArgument),
                                 /*piece=*/Value(),
                                 builder.getF32FloatAttr(dropoutRate),
                                 builder.getI64IntegerAttr(takeSeed()),
                                 /*global_shape=*/nullptr);
  }

  /// Creates `@name` in `module` with the declared arguments and positions
  /// the builder in its body.
  void begin(ModuleOp module, StringRef name, TypeRange results) {
    builder.setInsertionPointToEnd(module.getBody());
    function = func::FuncOp::create(builder, loc, name,
                                    builder.getFunctionType(argTypes, results));
    for (auto [index, param] : llvm::enumerate(paramNames))
      if (!param.empty())
        function.setArgAttr(index, nn::kParamAttrName,
                            builder.getStringAttr(param));
    if (stepArgument)
      function.setArgAttr(*stepArgument, nn::kStateAttrName,
                          builder.getStringAttr("step"));
    builder.setInsertionPointToStart(function.addEntryBlock());
  }

  Value arg(unsigned index) { return function.getArgument(index); }
  func::FuncOp getFunction() const { return function; }

  void finish(ValueRange results) {
    func::ReturnOp::create(builder, loc, results);
  }

  /// x · w + b over the last dim of x: [..., in] x [in, out] + [out].
  Value linear(Value x, Value w, Value b) {
    int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
    Value y =
        nn::DotOp::create(builder, loc, x, w, builder.getDenseI64ArrayAttr({}),
                          builder.getDenseI64ArrayAttr({}),
                          builder.getDenseI64ArrayAttr({rank - 1}),
                          builder.getDenseI64ArrayAttr({0}));
    return nn::AddOp::create(builder, loc, y, broadcastTo(b, y, {rank - 1}));
  }

  /// Broadcasts `value` to the type of `like`, its dims landing on `dims`.
  Value broadcastTo(Value value, Value like, ArrayRef<int64_t> dims) {
    return nn::BroadcastOp::create(builder, loc, like.getType(), value,
                                   builder.getDenseI64ArrayAttr(dims));
  }

  Value splat(RankedTensorType type, double value) {
    Attribute element = builder.getFloatAttr(type.getElementType(), value);
    return nn::ConstantOp::create(builder, loc,
                                  DenseElementsAttr::get(type, element));
  }

  Value reshape(Value value, ArrayRef<int64_t> shape) {
    return nn::ReshapeOp::create(builder, loc, tensor(shape), value);
  }

  Value transpose(Value value, ArrayRef<int64_t> permutation) {
    return nn::TransposeOp::create(builder, loc, value,
                                   builder.getDenseI64ArrayAttr(permutation));
  }

  OpBuilder builder;
  Location loc;

private:
  static Type parseDtype(MLIRContext *context, StringRef dtype) {
    Builder b(context);
    if (dtype == "bf16")
      return b.getBF16Type();
    if (dtype == "f16")
      return b.getF16Type();
    if (dtype == "f64")
      return b.getF64Type();
    return b.getF32Type();
  }

  Type elementType;
  SmallVector<Type> argTypes;
  SmallVector<std::string> paramNames;
  func::FuncOp function;
  double dropoutRate = 0;
  std::optional<unsigned> stepArgument;
  int64_t nextSeed = 0;
};
} // namespace

/// Causal attention of q [b, heads, s, d] over k and v [b, kv, s, d]
/// scaled by 1/√d: one nn.attention when `fused`, else the scores, the
/// mask, the softmax and the weighted sum as separate ops, with each kv
/// head repeated for its query heads first (Hugging Face's repeat_kv). The
/// model's dropout drops probabilities (nn.attention's own, or nn.dropout
/// of them: the same mask).
static Value buildCausalAttention(FunctionBuilder &fb, Value q, Value k,
                                  Value v, bool fused) {
  OpBuilder &bld = fb.builder;
  Location loc = fb.loc;
  auto qType = cast<RankedTensorType>(q.getType());
  int64_t b = qType.getDimSize(0), a = qType.getDimSize(1),
          s = qType.getDimSize(2), d = qType.getDimSize(3),
          kv = cast<RankedTensorType>(k.getType()).getDimSize(1);
  double scale = 1.0 / std::sqrt(d);
  if (fused) {
    Value step = fb.getDropoutStep();
    return nn::AttentionOp::create(
        bld, loc, qType, q, k, v, step, /*piece=*/Value(),
        bld.getBoolAttr(true), bld.getF32FloatAttr(scale),
        bld.getF32FloatAttr(fb.getDropoutRate()),
        bld.getI64IntegerAttr(step ? fb.takeSeed() : 0),
        /*global_shape=*/nullptr);
  }
  auto dims = [&](ArrayRef<int64_t> values) {
    return bld.getDenseI64ArrayAttr(values);
  };
  auto repeat = [&](Value z) -> Value {
    if (kv == a)
      return z;
    Value wide = nn::BroadcastOp::create(
        bld, loc, fb.tensor({b, kv, a / kv, s, d}), z, dims({0, 1, 3, 4}));
    return fb.reshape(wide, {b, a, s, d});
  };
  Value scores = nn::DotOp::create(bld, loc, q, repeat(k), dims({0, 1}),
                                   dims({0, 1}), dims({3}), dims({3}));
  scores = nn::MulOp::create(bld, loc, scores,
                             fb.splat(fb.tensor({b, a, s, s}), scale));
  scores = nn::CausalMaskOp::create(bld, loc, scores);
  Value probs = fb.dropout(nn::SoftmaxOp::create(bld, loc, scores, 3));
  return nn::DotOp::create(bld, loc, probs, repeat(v), dims({0, 1}),
                           dims({0, 1}), dims({3}), dims({2}));
}

/// `shape` with a leading dim of `experts`, or as it is without experts.
static SmallVector<int64_t> stackExperts(int64_t experts,
                                         ArrayRef<int64_t> shape) {
  SmallVector<int64_t> stacked;
  if (experts)
    stacked.push_back(experts);
  llvm::append_range(stacked, shape);
  return stacked;
}

namespace {
/// A mixture-of-experts layer's parameters: the router and the experts'
/// stacked weights, as the model declares them.
struct MoeLayer {
  Value router;
  /// [experts, groups, capacity, hidden] -> the same: the experts' MLP.
  std::function<Value(Value)> experts;
};
} // namespace

/// The mixture of experts of `x` [b, s, h] (MoeConfig), routed in groups
/// of tokens of a sequence. Returns the layer's output and its load-balancing
/// loss (unweighted, a scalar).
static std::pair<Value, Value> buildMoe(FunctionBuilder &fb, Value x,
                                        const MoeLayer &layer,
                                        const MoeConfig &config) {
  OpBuilder &bld = fb.builder;
  Location loc = fb.loc;
  auto dims = [&](ArrayRef<int64_t> values) {
    return bld.getDenseI64ArrayAttr(values);
  };
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
  int64_t sequences = shape[0], seq = shape[1], h = shape[2];
  // Groups of tokens [b, s, h]: the sequences, or pieces of them.
  int64_t s = config.getGroupSize(seq), b = sequences * (seq / s),
          e = config.experts, k = config.topK, c = getExpertCapacity(config, s);
  if (s != seq)
    x = fb.reshape(x, {b, s, h});
  // The router's probabilities [b, s, e] and each token's top k.
  Value logits = nn::DotOp::create(bld, loc, x, layer.router, dims({}),
                                   dims({}), dims({2}), dims({0}));
  Value probs = nn::SoftmaxOp::create(bld, loc, logits, 2);
  auto topK = nn::TopKOp::create(
      bld, loc,
      TypeRange{fb.tensor({b, s, k}), fb.tensor({b, s, k}, bld.getI64Type())},
      probs, bld.getI64IntegerAttr(k));
  // The gates: the picked probabilities renormalized over the picks (zero
  // elsewhere through the mask).
  Value picked = nn::ReduceSumOp::create(bld, loc, topK.getValues(), dims({2}));
  Value gates =
      nn::DivOp::create(bld, loc, probs, fb.broadcastTo(picked, probs, {0, 1}));
  Value mask = nn::MoeDispatchOp::create(bld, loc, fb.tensor({b, s, e, c}),
                                         topK.getIndices());
  Value combine =
      nn::MulOp::create(bld, loc, mask, fb.broadcastTo(gates, mask, {0, 1, 2}));
  // Dispatch: [b, s, e, c] x [b, s, h] -> [b, e, c, h], the experts major.
  Value dispatched = nn::DotOp::create(bld, loc, mask, x, dims({0}), dims({0}),
                                       dims({1}), dims({1}));
  Value outputs =
      layer.experts(fb.transpose(dispatched, {1, 0, 2, 3})); // [e, b, c, h]
  // Combine: [b, s, e, c] x [b, e, c, h] -> [b, s, h].
  Value y =
      nn::DotOp::create(bld, loc, combine, fb.transpose(outputs, {1, 0, 2, 3}),
                        dims({0}), dims({0}), dims({2, 3}), dims({1, 2}));
  // Switch's load-balancing loss, as Hugging Face's Mixtral sums it over
  // the choices, in each group as GShard computes it, then averaged over the
  // groups: e · Σ_e (Σ_k mean_t choice_k(t) = e) · mean_t p_e(t). Per group,
  // the batch's loss is a mean over sequences: microbatches and data
  // parallelism sum it exactly.
  Value chosen = nn::OneHotOp::create(bld, loc, fb.tensor({b, s, k, e}),
                                      topK.getIndices());
  Value shares = nn::ReduceSumOp::create(
      bld, loc, nn::ReduceMeanOp::create(bld, loc, chosen, dims({1})),
      dims({1}));
  Value meanProbs = nn::ReduceMeanOp::create(bld, loc, probs, dims({1}));
  Value balance = nn::ReduceSumOp::create(
      bld, loc, nn::MulOp::create(bld, loc, shares, meanProbs), dims({1}));
  balance = nn::ReduceMeanOp::create(bld, loc, balance, dims({0}));
  balance = nn::MulOp::create(bld, loc, balance, fb.splat(fb.tensor({}), e));
  if (s != seq)
    y = fb.reshape(y, {sequences, seq, h});
  return {y, balance};
}

/// The loss: the cross-entropy plus the weighted load-balancing losses of
/// the MoE layers.
static Value addBalanceLoss(FunctionBuilder &fb, Value loss,
                            ArrayRef<Value> balances, double weight) {
  for (Value balance : balances)
    loss =
        nn::AddOp::create(fb.builder, fb.loc, loss,
                          nn::MulOp::create(fb.builder, fb.loc, balance,
                                            fb.splat(fb.tensor({}), weight)));
  return loss;
}

OwningOpRef<ModuleOp> tessera::buildGpt(MLIRContext *context,
                                        const GptConfig &c) {
  context->loadDialect<nn::NNDialect, func::FuncDialect, dist::DistDialect>();
  assert(!validate(c) && "invalid GPT configuration");
  int64_t b = c.batch, s = c.seq, h = c.hidden, a = c.heads, d = h / a;
  FunctionBuilder fb(context, c.dtype);
  Type i32 = fb.builder.getI32Type();
  unsigned tokens = fb.addArgument(fb.tensor({b, s}, i32));
  unsigned labels = fb.addArgument(fb.tensor({b, s}, i32));
  unsigned wte = fb.addArgument(fb.tensor({c.vocab, h}), "wte");
  unsigned wpe = fb.addArgument(fb.tensor({s, h}), "wpe");
  struct Block {
    unsigned ln1g, ln1b, wq, bq, wk, bk, wv, bv, wo, bo, ln2g, ln2b, w1, b1, w2,
        b2, router;
  };
  // With experts every MLP weight gets a leading experts dim.
  int64_t e = c.moe.experts;
  auto stacked = [&](ArrayRef<int64_t> shape) {
    return stackExperts(e, shape);
  };
  StringRef mlp = e ? "moe." : "mlp.";
  SmallVector<Block> blocks;
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    std::string p = llvm::formatv("blocks.{0}.", layer).str();
    auto add = [&](ArrayRef<int64_t> shape, StringRef name) {
      return fb.addArgument(fb.tensor(shape), p + name.str());
    };
    Block blk;
    blk.ln1g = add({h}, "ln1.gamma");
    blk.ln1b = add({h}, "ln1.beta");
    blk.wq = add({h, h}, "attn.wq");
    blk.bq = add({h}, "attn.bq");
    blk.wk = add({h, h}, "attn.wk");
    blk.bk = add({h}, "attn.bk");
    blk.wv = add({h, h}, "attn.wv");
    blk.bv = add({h}, "attn.bv");
    blk.wo = add({h, h}, "attn.wo");
    blk.bo = add({h}, "attn.bo");
    blk.ln2g = add({h}, "ln2.gamma");
    blk.ln2b = add({h}, "ln2.beta");
    if (e)
      blk.router = add({h, e}, "moe.router");
    blk.w1 = add(stacked({h, 4 * h}), mlp.str() + "w1");
    blk.b1 = add(stacked({4 * h}), mlp.str() + "b1");
    blk.w2 = add(stacked({4 * h, h}), mlp.str() + "w2");
    blk.b2 = add(stacked({h}), mlp.str() + "b2");
    blocks.push_back(blk);
  }
  unsigned lnfg = fb.addArgument(fb.tensor({h}), "ln_f.gamma");
  unsigned lnfb = fb.addArgument(fb.tensor({h}), "ln_f.beta");
  fb.setDropout(c.dropout);

  OwningOpRef<ModuleOp> module = ModuleOp::create(fb.loc);
  fb.begin(*module, "gpt", {fb.tensor({})});
  OpBuilder &bld = fb.builder;
  Location loc = fb.loc;
  auto dims = [&](ArrayRef<int64_t> values) {
    return bld.getDenseI64ArrayAttr(values);
  };

  Value x = nn::EmbeddingOp::create(bld, loc, fb.arg(wte), fb.arg(tokens));
  x = nn::AddOp::create(bld, loc, x, fb.broadcastTo(fb.arg(wpe), x, {1, 2}));
  x = fb.dropout(x);
  bool fused = c.attention == "fused";
  SmallVector<Value> balances;
  for (const Block &blk : blocks) {
    // Attention: heads split the hidden dim, [b, s, h] -> [b, a, s, d].
    Value hIn =
        nn::LayerNormOp::create(bld, loc, x, fb.arg(blk.ln1g), fb.arg(blk.ln1b),
                                bld.getF32FloatAttr(1e-5f));
    auto heads = [&](unsigned w, unsigned bias) {
      Value proj = fb.linear(hIn, fb.arg(w), fb.arg(bias));
      return fb.transpose(fb.reshape(proj, {b, s, a, d}), {0, 2, 1, 3});
    };
    Value q = heads(blk.wq, blk.bq);
    Value k = heads(blk.wk, blk.bk);
    Value v = heads(blk.wv, blk.bv);
    Value context = buildCausalAttention(fb, q, k, v, fused);
    context = fb.reshape(fb.transpose(context, {0, 2, 1, 3}), {b, s, h});
    x = nn::AddOp::create(
        bld, loc, x,
        fb.dropout(fb.linear(context, fb.arg(blk.wo), fb.arg(blk.bo))));

    // MLP.
    Value hMlp =
        nn::LayerNormOp::create(bld, loc, x, fb.arg(blk.ln2g), fb.arg(blk.ln2b),
                                bld.getF32FloatAttr(1e-5f));
    if (!e) {
      Value up = nn::GeluOp::create(
          bld, loc, fb.linear(hMlp, fb.arg(blk.w1), fb.arg(blk.b1)));
      x = nn::AddOp::create(
          bld, loc, x,
          fb.dropout(fb.linear(up, fb.arg(blk.w2), fb.arg(blk.b2))));
      continue;
    }
    // Each expert is the MLP: [e, g, c, h] x [e, h, 4h] + [e, 4h], GELU,
    // x [e, 4h, h] + [e, h].
    auto experts = [&](Value in) -> Value {
      auto expertLinear = [&](Value z, unsigned w, unsigned bias) -> Value {
        Value y = nn::DotOp::create(bld, loc, z, fb.arg(w), dims({0}),
                                    dims({0}), dims({3}), dims({1}));
        return nn::AddOp::create(bld, loc, y,
                                 fb.broadcastTo(fb.arg(bias), y, {0, 3}));
      };
      Value up = nn::GeluOp::create(bld, loc, expertLinear(in, blk.w1, blk.b1));
      return expertLinear(up, blk.w2, blk.b2);
    };
    auto [y, balance] =
        buildMoe(fb, hMlp, MoeLayer{fb.arg(blk.router), experts}, c.moe);
    balances.push_back(balance);
    x = nn::AddOp::create(bld, loc, x, fb.dropout(y));
  }
  x = nn::LayerNormOp::create(bld, loc, x, fb.arg(lnfg), fb.arg(lnfb),
                              bld.getF32FloatAttr(1e-5f));
  // The LM head is the token embedding: [b, s, h] x [V, h] -> [b, s, V].
  Value logits = nn::DotOp::create(bld, loc, x, fb.arg(wte), dims({}), dims({}),
                                   dims({2}), dims({1}));
  Value losses = nn::CrossEntropyOp::create(bld, loc, logits, fb.arg(labels));
  Value loss = nn::ReduceMeanOp::create(bld, loc, losses, dims({0, 1}));
  fb.finish(addBalanceLoss(fb, loss, balances, c.moe.auxLossCoef));
  if (c.sharding != "none")
    annotateMegatron(*module, 1, 1, c.vocabParallel);
  if (c.sharding != "none" && e)
    annotateExpertParallel(*module, 1);
  if (c.contextParallel != "none")
    annotateContextParallel(*module, c.contextParallel);
  if (c.sharding == "megatron-sp")
    annotateSequenceParallel(*module);
  return module;
}

/// Hugging Face's rotary embedding of `x` [b, heads, s, d] with the angle
/// tables `cos` and `sin` [s, d]: x·cos + rotate_half(x)·sin, where
/// rotate_half(x) = concat(-x[..., d/2:], x[..., :d/2]).
static Value applyRotary(FunctionBuilder &fb, Value x, Value cos, Value sin) {
  OpBuilder &bld = fb.builder;
  auto type = cast<RankedTensorType>(x.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t half = shape[3] / 2;
  auto slice = [&](int64_t from, int64_t to) {
    return nn::SliceOp::create(
        bld, fb.loc, x, bld.getDenseI64ArrayAttr({0, 0, 0, from}),
        bld.getDenseI64ArrayAttr({shape[0], shape[1], shape[2], to}));
  };
  Value low = slice(0, half), high = slice(half, shape[3]);
  Value rotated = nn::ConcatOp::create(
      bld, fb.loc, ValueRange{nn::NegOp::create(bld, fb.loc, high), low}, 3);
  Value cosTerm =
      nn::MulOp::create(bld, fb.loc, x, fb.broadcastTo(cos, x, {2, 3}));
  Value sinTerm =
      nn::MulOp::create(bld, fb.loc, rotated, fb.broadcastTo(sin, x, {2, 3}));
  return nn::AddOp::create(bld, fb.loc, cosTerm, sinTerm);
}

OwningOpRef<ModuleOp> tessera::buildLlama(MLIRContext *context,
                                          const LlamaConfig &c) {
  context->loadDialect<nn::NNDialect, func::FuncDialect, dist::DistDialect>();
  assert(!validate(c) && "invalid Llama configuration");
  int64_t b = c.batch, s = c.seq, h = c.hidden, a = c.heads, kv = c.kvHeads,
          d = h / a, f = getFfnHidden(c);
  FunctionBuilder fb(context, c.dtype);
  Type i32 = fb.builder.getI32Type();
  unsigned tokens = fb.addArgument(fb.tensor({b, s}, i32));
  unsigned labels = fb.addArgument(fb.tensor({b, s}, i32));
  unsigned embeddings =
      fb.addArgument(fb.tensor({c.vocab, h}), "tok_embeddings");
  struct Block {
    unsigned attentionNorm, wq, wk, wv, wo, ffnNorm, w1, w2, w3, gate;
  };
  // With experts (Mixtral) every MLP weight gets a leading experts dim.
  int64_t e = c.moe.experts;
  auto stacked = [&](ArrayRef<int64_t> shape) {
    return stackExperts(e, shape);
  };
  StringRef mlp = e ? "feed_forward.experts." : "feed_forward.";
  SmallVector<Block> blocks;
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    std::string p = llvm::formatv("layers.{0}.", layer).str();
    auto add = [&](ArrayRef<int64_t> shape, StringRef name) {
      return fb.addArgument(fb.tensor(shape), p + name.str());
    };
    Block blk;
    blk.attentionNorm = add({h}, "attention_norm");
    blk.wq = add({h, a * d}, "attention.wq");
    blk.wk = add({h, kv * d}, "attention.wk");
    blk.wv = add({h, kv * d}, "attention.wv");
    blk.wo = add({a * d, h}, "attention.wo");
    blk.ffnNorm = add({h}, "ffn_norm");
    if (e)
      blk.gate = add({h, e}, "feed_forward.gate");
    blk.w1 = add(stacked({h, f}), mlp.str() + "w1");
    blk.w2 = add(stacked({f, h}), mlp.str() + "w2");
    blk.w3 = add(stacked({h, f}), mlp.str() + "w3");
    blocks.push_back(blk);
  }
  unsigned norm = fb.addArgument(fb.tensor({h}), "norm");
  unsigned head = fb.addArgument(fb.tensor({h, c.vocab}), "output");
  fb.setDropout(c.dropout);

  OwningOpRef<ModuleOp> module = ModuleOp::create(fb.loc);
  fb.begin(*module, "llama", {fb.tensor({})});
  OpBuilder &bld = fb.builder;
  Location loc = fb.loc;
  auto dims = [&](ArrayRef<int64_t> values) {
    return bld.getDenseI64ArrayAttr(values);
  };
  FloatAttr eps = bld.getF32FloatAttr(c.normEps);
  auto project = [&](Value x, unsigned w) {
    int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
    return nn::DotOp::create(bld, loc, x, fb.arg(w), dims({}), dims({}),
                             dims({rank - 1}), dims({0}));
  };
  // The rotary angles [s, d] of position p and pair j < d/2, in f32 (a
  // 16-bit position is not exact past 256): p · theta^(-2j/d), the pairs
  // repeated over both halves. Each block computes its own, so that a
  // pipeline stage needs nothing from another.
  auto rotaryTables = [&]() {
    Type f32 = bld.getF32Type();
    RankedTensorType pairs = RankedTensorType::get({s, d / 2}, f32);
    Value positions = nn::IotaOp::create(bld, loc, pairs, 0);
    Value exponents = nn::IotaOp::create(bld, loc, pairs, 1);
    Value frequencies = nn::ExpOp::create(
        bld, loc,
        nn::MulOp::create(
            bld, loc, exponents,
            fb.splat(pairs, -2.0 * std::log(c.ropeTheta) / double(d))));
    Value angles = nn::MulOp::create(bld, loc, positions, frequencies);
    angles = nn::ConcatOp::create(bld, loc, ValueRange{angles, angles}, 1);
    auto asModelType = [&](Value table) -> Value {
      if (fb.getElementType() == f32)
        return table;
      return nn::CastOp::create(bld, loc, fb.tensor({s, d}), table);
    };
    return std::pair(asModelType(nn::CosOp::create(bld, loc, angles)),
                     asModelType(nn::SinOp::create(bld, loc, angles)));
  };

  Value x = fb.dropout(
      nn::EmbeddingOp::create(bld, loc, fb.arg(embeddings), fb.arg(tokens)));
  bool fused = c.attention == "fused";
  SmallVector<Value> balances;
  for (const Block &blk : blocks) {
    // Attention: [b, s, h] -> [b, heads, s, d].
    Value y =
        nn::RmsNormOp::create(bld, loc, x, fb.arg(blk.attentionNorm), eps);
    auto heads = [&](unsigned w, int64_t count) {
      return fb.transpose(fb.reshape(project(y, w), {b, s, count, d}),
                          {0, 2, 1, 3});
    };
    auto [cos, sin] = rotaryTables();
    Value q = applyRotary(fb, heads(blk.wq, a), cos, sin);
    Value k = applyRotary(fb, heads(blk.wk, kv), cos, sin);
    Value v = heads(blk.wv, kv);
    // Grouped-query attention: each kv head serves heads / kv query heads.
    Value context = buildCausalAttention(fb, q, k, v, fused);
    context = fb.reshape(fb.transpose(context, {0, 2, 1, 3}), {b, s, h});
    x = nn::AddOp::create(bld, loc, x, fb.dropout(project(context, blk.wo)));

    // SwiGLU MLP, or Mixtral's experts of it: [e, g, c, h] x [e, h, f].
    y = nn::RmsNormOp::create(bld, loc, x, fb.arg(blk.ffnNorm), eps);
    auto swiGlu = [&](Value in, auto project) -> Value {
      Value gate = nn::SiluOp::create(bld, loc, project(in, blk.w1));
      Value up = nn::MulOp::create(bld, loc, gate, project(in, blk.w3));
      return project(up, blk.w2);
    };
    if (!e) {
      x = nn::AddOp::create(bld, loc, x, fb.dropout(swiGlu(y, project)));
      continue;
    }
    auto expertProject = [&](Value z, unsigned w) -> Value {
      return nn::DotOp::create(bld, loc, z, fb.arg(w), dims({0}), dims({0}),
                               dims({3}), dims({1}));
    };
    auto experts = [&](Value in) { return swiGlu(in, expertProject); };
    auto [moe, balance] =
        buildMoe(fb, y, MoeLayer{fb.arg(blk.gate), experts}, c.moe);
    balances.push_back(balance);
    x = nn::AddOp::create(bld, loc, x, fb.dropout(moe));
  }
  x = nn::RmsNormOp::create(bld, loc, x, fb.arg(norm), eps);
  Value logits = project(x, head);
  Value losses = nn::CrossEntropyOp::create(bld, loc, logits, fb.arg(labels));
  Value loss = nn::ReduceMeanOp::create(bld, loc, losses, dims({0, 1}));
  fb.finish(addBalanceLoss(fb, loss, balances, c.moe.auxLossCoef));
  if (c.sharding != "none")
    annotateMegatron(*module, 1, 1, c.vocabParallel);
  if (c.sharding != "none" && e)
    annotateExpertParallel(*module, 1);
  if (c.contextParallel != "none")
    annotateContextParallel(*module, c.contextParallel);
  if (c.sharding == "megatron-sp")
    annotateSequenceParallel(*module);
  return module;
}

OwningOpRef<ModuleOp> tessera::buildMlp(MLIRContext *context,
                                        const MlpConfig &c) {
  context->loadDialect<nn::NNDialect, func::FuncDialect, dist::DistDialect>();
  assert(!validate(c) && "invalid MLP configuration");
  FunctionBuilder fb(context, c.dtype);
  SmallVector<int64_t> widths = getMlpWidths(c);
  unsigned input = fb.addArgument(fb.tensor({c.batch, c.input}));
  unsigned target = fb.addArgument(fb.tensor({c.batch, c.output}));
  SmallVector<std::pair<unsigned, unsigned>> layers;
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    std::string p = llvm::formatv("layers.{0}.", layer).str();
    unsigned w =
        fb.addArgument(fb.tensor({widths[layer], widths[layer + 1]}), p + "w");
    unsigned bias = fb.addArgument(fb.tensor({widths[layer + 1]}), p + "b");
    layers.push_back({w, bias});
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fb.loc);
  fb.begin(*module, "mlp", {fb.tensor({})});
  OpBuilder &bld = fb.builder;
  Location loc = fb.loc;
  Value x = fb.arg(input);
  for (auto [index, layer] : llvm::enumerate(layers)) {
    x = fb.linear(x, fb.arg(layer.first), fb.arg(layer.second));
    if (index + 1 < layers.size())
      x = nn::ReluOp::create(bld, loc, x);
  }
  Value diff = nn::SubOp::create(bld, loc, x, fb.arg(target));
  Value squared = nn::MulOp::create(bld, loc, diff, diff);
  Value loss = nn::ReduceMeanOp::create(bld, loc, squared,
                                        bld.getDenseI64ArrayAttr({0, 1}));
  fb.finish(loss);
  if (c.sharding == "megatron")
    annotateMegatron(*module, 1, 1);
  return module;
}

OwningOpRef<ModuleOp> tessera::buildCtr(MLIRContext *context,
                                        const CtrConfig &c) {
  context->loadDialect<nn::NNDialect, func::FuncDialect, dist::DistDialect>();
  assert(!validate(c) && "invalid CTR configuration");
  FunctionBuilder fb(context, "f32");
  Type i64 = IntegerType::get(context, 64);
  unsigned trueTable = fb.addArgument(fb.tensor({c.buckets, c.hidden}));
  unsigned trueWeights = fb.addArgument(fb.tensor({c.hidden}));
  unsigned step = fb.addArgument(RankedTensorType::get({}, i64));
  unsigned table =
      fb.addArgument(fb.tensor({c.buckets, c.hidden}), "embedding");
  unsigned weights = fb.addArgument(fb.tensor({c.hidden}), "weights");
  unsigned bias = fb.addArgument(fb.tensor({}), "bias");

  OwningOpRef<ModuleOp> module = ModuleOp::create(fb.loc);
  OpBuilder &bld = fb.builder;
  Location loc = fb.loc;
  bld.setInsertionPointToStart(module->getBody());
  auto mesh =
      dist::MeshOp::create(bld, loc, "mesh", bld.getStrArrayAttr({"dp"}),
                           bld.getDenseI64ArrayAttr({1}));
  fb.begin(*module, "ctr", {fb.tensor({})});
  fb.getFunction().setArgAttr(step, nn::kStateAttrName,
                              bld.getStringAttr("step"));
  // Each draw splits its batch over "dp": the examples are data parallel.
  auto meshName = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  auto random = [&](ArrayRef<int64_t> shape, int64_t seed) -> Value {
    Value drawn = nn::RandomUniformOp::create(
        bld, loc, fb.tensor(shape), fb.arg(step), /*piece=*/Value(),
        bld.getI64IntegerAttr(seed), /*global_shape=*/nullptr);
    SmallVector<dist::DimShardingAttr> dims;
    for (size_t dim = 0; dim < shape.size(); ++dim)
      dims.push_back(dist::DimShardingAttr::get(
          context,
          dim == 0 ? ArrayRef<StringAttr>{bld.getStringAttr("dp")}
                   : ArrayRef<StringAttr>{},
          /*isOpen=*/false, std::nullopt));
    return dist::ShardingConstraintOp::create(
        bld, loc, drawn, dist::ShardingAttr::get(meshName, dims));
  };
  // The batch: ids uniform over the buckets.
  Value u = random({c.batch, c.features}, 1);
  Value scaled = nn::MulOp::create(
      bld, loc, u, fb.splat(fb.tensor({c.batch, c.features}), c.buckets));
  scaled = nn::MinOp::create(
      bld, loc, scaled,
      fb.splat(fb.tensor({c.batch, c.features}), c.buckets - 1));
  Value ids = nn::CastOp::create(
      bld, loc, RankedTensorType::get({c.batch, c.features}, bld.getI32Type()),
      scaled);
  // A model's logits: the bag of its rows, dotted with its weights.
  auto logits = [&](Value rows, Value w) -> Value {
    Value looked = nn::EmbeddingOp::create(bld, loc, rows, ids);
    Value bag = nn::ReduceSumOp::create(bld, loc, looked,
                                        bld.getDenseI64ArrayAttr({1}));
    return nn::DotOp::create(bld, loc, bag, w, bld.getDenseI64ArrayAttr({}),
                             bld.getDenseI64ArrayAttr({}),
                             bld.getDenseI64ArrayAttr({1}),
                             bld.getDenseI64ArrayAttr({0}));
  };
  RankedTensorType perExample = fb.tensor({c.batch});
  Value trueLogits = nn::MulOp::create(
      bld, loc, logits(fb.arg(trueTable), fb.arg(trueWeights)),
      fb.splat(perExample, c.sharpness));
  // Clicks drawn from the generating model.
  Value clicked = nn::CompareOp::create(
      bld, loc, nn::ComparePredicate::lt, random({c.batch}, 2),
      nn::SigmoidOp::create(bld, loc, trueLogits));
  Value clicks = nn::SelectOp::create(
      bld, loc, clicked, fb.splat(perExample, 1.0), fb.splat(perExample, 0.0));
  Value z = nn::AddOp::create(bld, loc, logits(fb.arg(table), fb.arg(weights)),
                              fb.broadcastTo(fb.arg(bias), clicks, {}));
  // The mean log-loss of logits against the clicks, computed stably:
  // max(z, 0) - z·y + log(1 + exp(-|z|)).
  auto logLoss = [&](Value logit) -> Value {
    Value positive =
        nn::MaxOp::create(bld, loc, logit, fb.splat(perExample, 0.0));
    Value agreed = nn::MulOp::create(bld, loc, logit, clicks);
    Value tail = nn::LogOp::create(
        bld, loc,
        nn::AddOp::create(
            bld, loc, fb.splat(perExample, 1.0),
            nn::ExpOp::create(
                bld, loc,
                nn::NegOp::create(bld, loc,
                                  nn::AbsOp::create(bld, loc, logit)))));
    Value each = nn::AddOp::create(
        bld, loc, nn::SubOp::create(bld, loc, positive, agreed), tail);
    return nn::ReduceMeanOp::create(bld, loc, each,
                                    bld.getDenseI64ArrayAttr({0}));
  };
  fb.finish(
      nn::SubOp::create(bld, loc, logLoss(z), logLoss(trueLogits)).getResult());
  return module;
}
