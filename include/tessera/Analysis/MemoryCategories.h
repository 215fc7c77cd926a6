//===- MemoryCategories.h - What a program's values hold --------*- C++ -*-===//

#ifndef TESSERA_ANALYSIS_MEMORYCATEGORIES_H
#define TESSERA_ANALYSIS_MEMORYCATEGORIES_H

#include "tessera/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace tessera {

/// What the values of a (partitioned or single-device) train step or model
/// hold, for its memory breakdown: parameter and optimizer-state arguments,
/// the results that update them, the gradients optimizer updates read, and
/// through collectives and constraints the values these are copies of; the
/// other collective results and their reshaped or sliced pieces are
/// communication buffers. Values missing from the map are activations.
llvm::DenseMap<mlir::Value, MemoryCategory>
getMemoryCategories(mlir::func::FuncOp function);

/// Whether `op`, an nn.reshape or nn.transpose, only adds, drops or moves
/// dims of one element: its result has its operand's bytes in their order.
bool isUnitDimView(mlir::Operation *op);

} // namespace tessera

#endif // TESSERA_ANALYSIS_MEMORYCATEGORIES_H
