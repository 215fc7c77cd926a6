//===- Autodiff.h - Reverse-mode differentiation of loss functions -*- C++
//-*-===//

#ifndef TESSERA_TRANSFORMS_AUTODIFF_AUTODIFF_H
#define TESSERA_TRANSFORMS_AUTODIFF_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {

/// Rewrites a function that returns one scalar loss to return the loss and
/// then the gradient of each `nn.param` argument, in argument order (see
/// --tessera-autodiff). Emits an error and fails when it cannot.
mlir::LogicalResult differentiate(mlir::func::FuncOp function);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_AUTODIFF_AUTODIFF_H
