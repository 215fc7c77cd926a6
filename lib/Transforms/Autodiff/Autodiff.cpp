//===- Autodiff.cpp - Reverse-mode differentiation (--tessera-autodiff) ---===//
//
// Walks a loss function backwards from its result, asking each op for the
// gradients of its operands, and returns the gradient of every parameter
// after the loss. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Autodiff/Autodiff.h"
#include "tessera/Transforms/Passes.h"

#include "dialects/Interfaces/GradientOpInterface.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace tessera {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-autodiff"

using namespace mlir;
using namespace tessera;

static bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

static Value makeSplat(OpBuilder &builder, Location loc, Type type,
                       double value) {
  auto tensor = cast<RankedTensorType>(type);
  Attribute element = builder.getFloatAttr(tensor.getElementType(), value);
  return nn::ConstantOp::create(builder, loc,
                                DenseElementsAttr::get(tensor, element));
}

LogicalResult tessera::differentiate(func::FuncOp function) {
  auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
  if (returnOp.getNumOperands() != 1 ||
      !isFloatTensor(returnOp.getOperand(0)) ||
      cast<RankedTensorType>(returnOp.getOperand(0).getType()).getRank() != 0)
    return function.emitError("expects a function that returns one scalar "
                              "float loss, got ")
           << returnOp.getNumOperands() << " results";
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : function.getArguments())
    if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      params.push_back(arg);
  if (params.empty())
    return function.emitError("has no 'nn.param' argument to differentiate");

  // The values a parameter reaches: only they get gradients.
  llvm::SetVector<Value> active(params.begin(), params.end());
  SmallVector<Operation *> forward;
  for (Operation &op : function.getBody().front().without_terminator()) {
    forward.push_back(&op);
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.contains(v); }))
      for (Value result : op.getResults())
        if (isFloatTensor(result))
          active.insert(result);
  }

  Value loss = returnOp.getOperand(0);
  OpBuilder builder(returnOp);
  DenseMap<Value, Value> adjoints;
  if (active.contains(loss))
    adjoints[loss] = makeSplat(builder, loss.getLoc(), loss.getType(), 1.0);
  for (Operation *op : llvm::reverse(forward)) {
    if (!llvm::any_of(op->getResults(),
                      [&](Value r) { return adjoints.count(r); }))
      continue;
    auto gradientOp = dyn_cast<GradientOpInterface>(op);
    if (!gradientOp)
      return op->emitError("cannot differentiate through '")
             << op->getName() << "': it has no gradient";
    SmallVector<Value> resultGradients;
    for (Value result : op->getResults()) {
      Value adjoint = adjoints.lookup(result);
      if (!adjoint && isFloatTensor(result))
        adjoint = makeSplat(builder, op->getLoc(), result.getType(), 0.0);
      resultGradients.push_back(adjoint);
    }
    SmallVector<Value> operandGradients;
    if (failed(gradientOp.buildGradients(builder, resultGradients,
                                         operandGradients)))
      return failure();
    for (auto [operand, gradient] :
         llvm::zip(op->getOperands(), operandGradients)) {
      if (!gradient || !active.contains(operand))
        continue;
      Value &adjoint = adjoints[operand];
      adjoint =
          adjoint ? nn::AddOp::create(builder, op->getLoc(), adjoint, gradient)
                  : gradient;
    }
  }

  SmallVector<Value> results = {loss};
  for (BlockArgument param : params) {
    Value adjoint = adjoints.lookup(param);
    results.push_back(
        adjoint ? adjoint
                : makeSplat(builder, param.getLoc(), param.getType(), 0.0));
  }
  func::ReturnOp::create(builder, returnOp.getLoc(), results);
  returnOp.erase();

  // Drop what the derivatives built but no gradient needs.
  llvm::SmallPtrSet<Operation *, 16> original(forward.begin(), forward.end());
  // In reverse order, an op's users are gone by the time it is visited.
  SmallVector<Operation *> ops;
  for (Operation &op : function.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && isPure(op) && !original.contains(op))
      op->erase();

  SmallVector<Type> resultTypes;
  for (Value value : results)
    resultTypes.push_back(value.getType());
  function.setType(
      builder.getFunctionType(function.getArgumentTypes(), resultTypes));
  for (auto [index, param] : llvm::enumerate(params))
    function.setResultAttr(
        index + 1, nn::kGradOfAttrName,
        function.getArgAttr(param.getArgNumber(), nn::kParamAttrName));
  return success();
}

namespace {
struct AutodiffPass : tessera::impl::AutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && failed(differentiate(function)))
        return signalPassFailure();
  }
};
} // namespace
