//===- NNOps.h - nn dialect operations --------------------------*- C++ -*-===//

#ifndef TESSERA_NN_NNOPS_H
#define TESSERA_NN_NNOPS_H

#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/GradientOpInterface.h"
#include "dialects/Interfaces/OptimizerOpInterface.h"
#include "dialects/Interfaces/RowReductionOpInterface.h"
#include "dialects/Interfaces/SequenceOrderOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/NN/IR/NNEnums.h.inc"
#include "dialects/NN/IR/NNInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/NN/IR/NNOps.h.inc"

namespace tessera::nn {

/// The name of the function-argument attribute that marks a trainable
/// parameter and holds its name.
constexpr llvm::StringLiteral kParamAttrName = "nn.param";

/// The name of the function-result attribute that marks the gradient of a
/// parameter and holds the parameter's name; on a parameter server's
/// argument, the gradient it reads.
constexpr llvm::StringLiteral kGradOfAttrName = "nn.grad_of";

/// The function-argument attribute of a weight stash (PipeDream-2BW's
/// older version of a parameter, `--tessera-weight-stash`): the name of the
/// parameter it is a version of, and starts equal to.
constexpr llvm::StringLiteral kVersionOfAttrName = "nn.version_of";

/// The function-argument attribute of optimizer state: "<param>.adam_m",
/// "<param>.adam_v", or "step" for the step counter the runtime sets.
constexpr llvm::StringLiteral kStateAttrName = "nn.state";

/// Dynamic loss scaling's state (nn.state names): the scale's log2 over its
/// first value, and the steps since it last changed without an overflow.
constexpr llvm::StringLiteral kLossScaleLog2Name = "loss_scale.log2";
constexpr llvm::StringLiteral kLossScaleGoodStepsName = "loss_scale.good_steps";

/// The function-result attribute of a train step's new parameter or state:
/// the index of the argument it replaces in the next step.
constexpr llvm::StringLiteral kUpdatesAttrName = "nn.updates";

/// The function-result attribute of a train step's metric, which a run logs
/// each step: "grad_norm" (--tessera-clip-gradients).
constexpr llvm::StringLiteral kMetricAttrName = "nn.metric";

/// Whether `op` may be an op of an nn.fused body (see nn.fused): an
/// elementwise op whose values are f32, bf16, f16 or i1 (a float compare, a
/// select of floats, a cast between float types), a splat float constant or
/// a broadcast.
bool isFusible(mlir::Operation *op);

} // namespace tessera::nn

#endif // TESSERA_NN_NNOPS_H
