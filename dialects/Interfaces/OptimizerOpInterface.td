//===- OptimizerOpInterface.td - optimizer update steps ---*- tablegen -*-===//

#ifndef TESSERA_INTERFACES_OPTIMIZEROPINTERFACE
#define TESSERA_INTERFACES_OPTIMIZEROPINTERFACE

include "mlir/IR/OpBase.td"

def OptimizerOpInterface : OpInterface<"OptimizerOpInterface"> {
  let cppNamespace = "::tessera";
  let description = [{
    An optimizer's update of one parameter (`nn.sgd`, `nn.adamw`): it reads
    the parameter, its gradient and the optimizer's state for it, and its
    results are the new parameter followed by the new state, in the order of
    `getState`. The passes that treat the update of a train step apart read
    this interface, not op names: ZeRO shards the state and the gradient,
    the pipeline pass runs updates once per step after the last microbatch,
    and the memory model counts gradients and optimizer state.

    Ops implementing it have `param` and `grad` operands.
  }];

  let methods = [
    InterfaceMethod<"Returns the parameter the op updates.",
      "::mlir::Value", "getParameter", (ins), [{ return $_op.getParam(); }]>,
    InterfaceMethod<"Returns the parameter's gradient operand.",
      "::mlir::OpOperand &", "getGradientOperand", (ins),
      [{ return $_op.getGradMutable(); }]>,
    InterfaceMethod<[{
        Returns the optimizer state the op reads for the parameter, each of
        the parameter's shape (AdamW's moments; none for SGD). The op's
        result `i + 1` is the new value of state `i`.
      }],
      "::llvm::SmallVector<::mlir::Value>", "getState", (ins)>,
  ];

  let extraClassDeclaration = [{
    /// The gradient of the parameter.
    ::mlir::Value getGradient() { return getGradientOperand().get(); }
  }];
}

#endif // TESSERA_INTERFACES_OPTIMIZEROPINTERFACE
