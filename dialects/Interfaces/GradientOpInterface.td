//===- GradientOpInterface.td - reverse-mode derivatives ---*- tablegen -*-===//

#ifndef TESSERA_INTERFACES_GRADIENTOPINTERFACE
#define TESSERA_INTERFACES_GRADIENTOPINTERFACE

include "mlir/IR/OpBase.td"

def GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::tessera";
  let description = [{
    The reverse-mode derivative (vector-Jacobian product) of an op, built
    from nn ops: given the gradients flowing into the op's results, it emits
    the ops that compute the gradients of its operands. `--tessera-autodiff`
    calls it for every op on the path from the parameters to the loss.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits, at the builder's insertion point, the gradients of the op's
        operands given `resultGradients` (one per result; null where no
        gradient flows). Fills `operandGradients` with one value per operand,
        null for an operand that is not differentiable (integer indices,
        conditions). Fails with an error at the op when the op has no
        derivative (optimizer updates).
      }],
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGradients,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>,
  ];
}

#endif // TESSERA_INTERFACES_GRADIENTOPINTERFACE
