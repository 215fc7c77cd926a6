//===- TrainStep.cpp - One optimizer step (--tessera-train-step) ----------===//

#include "tessera/Transforms/Autodiff/Autodiff.h"
#include "tessera/Transforms/Passes.h"

#include "dialects/NN/IR/NNOps.h"

#include "llvm/ADT/SetVector.h"

namespace tessera {
#define GEN_PASS_DEF_TRAINSTEPPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-train-step"

using namespace mlir;
using namespace tessera;

namespace {

struct OptimizerOptions {
  bool adamw;
  double lr, beta1, beta2, epsilon, weightDecay;
  bool mixed;
  LrScheduleKind schedule;
  int64_t warmupSteps, decaySteps;
  double minLr;
  bool lossScale;
  double initialLossScale;
};

nn::LrSchedule getSchedule(LrScheduleKind kind) {
  switch (kind) {
  case LrScheduleKind::Constant:
    return nn::LrSchedule::constant;
  case LrScheduleKind::Linear:
    return nn::LrSchedule::linear;
  case LrScheduleKind::Cosine:
    return nn::LrSchedule::cosine;
  }
  llvm_unreachable("unknown schedule");
}

/// Makes every 16-bit float parameter an f32 master weight, cast down where
/// the model reads it.
LogicalResult useMasterWeights(func::FuncOp function,
                               ArrayRef<unsigned> params) {
  OpBuilder builder = OpBuilder::atBlockBegin(&function.getBody().front());
  bool any = false;
  for (unsigned index : params) {
    BlockArgument arg = function.getArgument(index);
    auto type = cast<RankedTensorType>(arg.getType());
    if (!type.getElementType().isBF16() && !type.getElementType().isF16())
      continue;
    any = true;
    arg.setType(type.clone(builder.getF32Type()));
    auto compute = nn::CastOp::create(builder, arg.getLoc(), type, arg);
    arg.replaceAllUsesExcept(compute, compute);
  }
  if (!any)
    return function.emitError("precision=mixed needs a model with bf16 or "
                              "f16 parameters (tessera model --dtype bf16)");
  function.setType(builder.getFunctionType(function.front().getArgumentTypes(),
                                           function.getResultTypes()));
  return success();
}

LogicalResult buildTrainStep(func::FuncOp function,
                             const OptimizerOptions &options) {
  SmallVector<unsigned> params;
  for (BlockArgument arg : function.getArguments())
    if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      params.push_back(arg.getArgNumber());
  DictionaryAttr lossAttrs = function.getResultAttrDict(0);
  if (options.mixed && failed(useMasterWeights(function, params)))
    return failure();
  MLIRContext *context = function.getContext();
  Location loc = function.getLoc();
  // Optimizer state becomes new arguments.
  auto addState = [&](Type type, const Twine &name) {
    unsigned index = function.getNumArguments();
    NamedAttribute attr(StringAttr::get(context, nn::kStateAttrName),
                        StringAttr::get(context, name));
    (void)function.insertArgument(index, type,
                                  DictionaryAttr::get(context, {attr}), loc);
    return index;
  };
  // Dynamic loss scaling differentiates the loss times S = initial ·
  // 2^log2, whose log2 the clipping pass updates from the gradients' norm.
  Value unscaledLoss, lossScale;
  if (options.lossScale) {
    auto scalar = RankedTensorType::get({}, Float32Type::get(context));
    BlockArgument log2 =
        function.getArgument(addState(scalar, nn::kLossScaleLog2Name));
    addState(scalar, nn::kLossScaleGoodStepsName);
    auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
    unscaledLoss = returnOp.getOperand(0);
    auto lossType = cast<RankedTensorType>(unscaledLoss.getType());
    // PyTorch's GradScaler starts at 2^16; an f16 loss's gradient seed
    // holds at most 2^15.
    double initial = options.initialLossScale > 0 ? options.initialLossScale
                     : lossType.getElementType().isF16() ? 32768.0
                                                         : 65536.0;
    OpBuilder entry = OpBuilder::atBlockBegin(&function.getBody().front());
    auto constant = [&](double value) {
      return nn::ConstantOp::create(
          entry, loc,
          DenseElementsAttr::get(
              scalar, entry.getF32FloatAttr(static_cast<float>(value))));
    };
    lossScale = nn::PowOp::create(
        entry, loc, constant(2.0),
        nn::AddOp::create(entry, loc, log2, constant(std::log2(initial))));
    OpBuilder atReturn(returnOp);
    Value scale = lossScale;
    if (lossType != scalar)
      scale = nn::CastOp::create(atReturn, loc, lossType, scale);
    returnOp->setOperand(0,
                         nn::MulOp::create(atReturn, loc, unscaledLoss, scale));
  }
  if (failed(differentiate(function)))
    return failure();

  auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
  Value loss = unscaledLoss ? unscaledLoss : returnOp.getOperand(0);
  SmallVector<Value> gradients(returnOp.getOperands().drop_front());
  OpBuilder builder(returnOp);
  auto f32 = [&](double value) {
    return builder.getF32FloatAttr(static_cast<float>(value));
  };

  SmallVector<Value> results;
  SmallVector<int64_t> updates;
  if (!options.adamw) {
    for (auto [param, gradient] : llvm::zip(params, gradients)) {
      results.push_back(
          nn::SgdOp::create(builder, loc, function.getArgument(param), gradient,
                            f32(options.lr), f32(options.weightDecay)));
      updates.push_back(param);
    }
  } else {
    // The moments and the step counter.
    SmallVector<unsigned> moments, squares;
    for (unsigned param : params) {
      Type type = function.getArgument(param).getType();
      StringRef name =
          function.getArgAttrOfType<StringAttr>(param, nn::kParamAttrName)
              .getValue();
      moments.push_back(addState(type, name + ".adam_m"));
      squares.push_back(addState(type, name + ".adam_v"));
    }
    // The model's own step counter (its random ops' key), or a new one.
    std::optional<unsigned> step;
    for (BlockArgument arg : function.getArguments())
      if (auto state = function.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), nn::kStateAttrName);
          state && state.getValue() == "step")
        step = arg.getArgNumber();
    if (!step)
      step = addState(RankedTensorType::get({}, builder.getI64Type()), "step");
    SmallVector<Value> newParams, newMoments, newSquares;
    for (auto [index, param] : llvm::enumerate(params)) {
      // A master weight's gradient is the 16-bit gradient cast up: the
      // update reads the 16-bit one (the ZeRO paper's 2 bytes per
      // parameter, reduced and kept in 16 bits), as fused mixed-precision
      // optimizers do.
      Value gradient = gradients[index];
      if (auto up = gradient.getDefiningOp<nn::CastOp>();
          options.mixed && up && up->hasOneUse() &&
          isa<BFloat16Type, Float16Type>(
              up.getInput().getType().getElementType()))
        gradient = up.getInput();
      auto update = nn::AdamWOp::create(
          builder, loc, function.getArgument(param), gradient,
          function.getArgument(moments[index]),
          function.getArgument(squares[index]), function.getArgument(*step),
          /*grad_norm=*/Value(), lossScale, f32(options.lr), f32(options.beta1),
          f32(options.beta2), f32(options.epsilon), f32(options.weightDecay),
          nn::LrScheduleAttr::get(context, getSchedule(options.schedule)),
          builder.getI64IntegerAttr(options.warmupSteps),
          builder.getI64IntegerAttr(options.decaySteps), f32(options.minLr),
          f32(0.0));
      newParams.push_back(update.getNewParam());
      newMoments.push_back(update.getNewM());
      newSquares.push_back(update.getNewV());
    }
    llvm::append_range(results, newParams);
    llvm::append_range(results, newMoments);
    llvm::append_range(results, newSquares);
    llvm::append_range(updates, params);
    llvm::append_range(updates, moments);
    llvm::append_range(updates, squares);
  }
  results.push_back(loss);
  Operation *scaledLoss =
      unscaledLoss ? returnOp.getOperand(0).getDefiningOp() : nullptr;
  func::ReturnOp::create(builder, returnOp.getLoc(), results);
  returnOp.erase();
  // The scaled loss's value (its gradient was all that was wanted).
  if (scaledLoss && scaledLoss->use_empty())
    scaledLoss->erase();
  // The 16-bit gradients' casts up that no update reads any more.
  llvm::SetVector<Operation *> casts;
  for (Value gradient : gradients)
    if (auto up = gradient.getDefiningOp<nn::CastOp>(); up && up->use_empty())
      casts.insert(up);
  for (Operation *op : casts)
    op->erase();

  SmallVector<Type> resultTypes;
  for (Value value : results)
    resultTypes.push_back(value.getType());
  function.setType(
      builder.getFunctionType(function.getArgumentTypes(), resultTypes));
  SmallVector<DictionaryAttr> resultAttrs;
  for (int64_t index : updates)
    resultAttrs.push_back(DictionaryAttr::get(
        context, {NamedAttribute(StringAttr::get(context, nn::kUpdatesAttrName),
                                 builder.getI64IntegerAttr(index))}));
  resultAttrs.push_back(lossAttrs ? lossAttrs : DictionaryAttr::get(context));
  function.setAllResultAttrs(resultAttrs);
  return success();
}

struct TrainStepPass : tessera::impl::TrainStepPassBase<TrainStepPass> {
  using TrainStepPassBase::TrainStepPassBase;

  void runOnOperation() override {
    if (optimizer == Optimizer::None) {
      getOperation().emitError("a train step needs an optimizer");
      return signalPassFailure();
    }
    OptimizerOptions options{optimizer == Optimizer::AdamW,
                             lr,
                             beta1,
                             beta2,
                             epsilon,
                             weightDecay,
                             precision == TrainPrecision::Mixed,
                             schedule,
                             warmupSteps,
                             decaySteps,
                             minLr,
                             lossScale,
                             initialLossScale};
    if (!options.adamw && lossScale) {
      getOperation().emitError("dynamic loss scaling needs an AdamW train "
                               "step (the clipping pass skips its steps)");
      return signalPassFailure();
    }
    if (!options.adamw &&
        (schedule != LrScheduleKind::Constant || warmupSteps != 0)) {
      getOperation().emitError("a learning-rate schedule reads the step "
                               "counter of an AdamW train step; SGD has none");
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && failed(buildTrainStep(function, options)))
        return signalPassFailure();
  }
};

} // namespace
