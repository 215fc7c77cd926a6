//===- TrainStep.h - The parts of a train step passes ask for ---*- C++ -*-===//
//
// A train step (--tessera-train-step) is one function: the forward pass, the
// backward pass and the optimizer updates. Passes that treat them apart
// (ZeRO, recomputation, the overlap schedule) find them here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_TRAINSTEP_H
#define TESSERA_ANALYSIS_TRAINSTEP_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace tessera {

/// The module's model: its one function with a body (the last, where there
/// are several); null where there is none.
mlir::func::FuncOp getModelFunction(mlir::ModuleOp module);

/// The ops the function's outputs that update no argument (the loss) depend
/// on: the forward pass of a train step, in program order.
llvm::SetVector<mlir::Operation *> getForwardOps(mlir::func::FuncOp function);

/// The `nn.param` name of the parameter `value` reads: the argument itself
/// or its nn.cast (mixed precision); empty for anything else.
llvm::StringRef getParamName(mlir::Value value);

/// The unit a parameter belongs to, as FSDP wraps a transformer: its name
/// up to the first numbered component ("blocks.3.attn.wq" -> "blocks.3"),
/// or without its last component ("ln_f.gamma" -> "ln_f", "wte" -> "wte").
llvm::StringRef getParameterUnit(llvm::StringRef name);

/// Whether a unit is one of a numbered sequence ("blocks.3"): a repeated
/// layer, not the embedding or the head.
bool isNumberedUnit(llvm::StringRef unit);

/// The unit's flat buffer (a train step argument with `dist.members`, the
/// ZeRO pass's packing) that `value` is, or reads a member of through its
/// cast, gather and views; null for anything else.
mlir::BlockArgument getFlatBuffer(mlir::Value value);

/// Whether `param` is a mixed-precision master weight: an f32 argument that
/// an optimizer update reads and the model reads only through casts to a
/// 16-bit float type. The ZeRO paper counts it in the optimizer state.
bool isMasterWeight(mlir::BlockArgument param);

/// The attention cores of a forward pass (its ops in program order): each
/// nn.softmax with the chain that makes its input from a product (nn.dot
/// of queries and keys, through one-input ops and ops whose other inputs
/// are constants: scaling, masks), and the products that read its
/// probabilities. What selective recomputation remakes.
llvm::SmallVector<llvm::SetVector<mlir::Operation *>>
getAttentionCores(const llvm::SetVector<mlir::Operation *> &forward);

} // namespace tessera

#endif // TESSERA_ANALYSIS_TRAINSTEP_H
