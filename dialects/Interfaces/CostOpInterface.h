//===- CostOpInterface.h - FLOP and byte counts of ops ----------*- C++ -*-===//

#ifndef TESSERA_INTERFACES_COSTOPINTERFACE_H
#define TESSERA_INTERFACES_COSTOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

namespace tessera {

/// Returns the number of elements of a ranked tensor type (1 for scalars).
int64_t getNumElements(mlir::Type type);

/// Returns the bytes one element of `type` (or of its element type) occupies
/// in memory; i1 takes a byte.
int64_t getElementBytes(mlir::Type type);

/// Returns the bytes a value of a static tensor type (or scalar) occupies.
int64_t getTensorBytes(mlir::Type type);

/// Bytes of every operand read once plus every result written once.
int64_t getDefaultBytesAccessed(mlir::Operation *op);

} // namespace tessera

#include "dialects/Interfaces/CostOpInterface.h.inc"

#endif // TESSERA_INTERFACES_COSTOPINTERFACE_H
