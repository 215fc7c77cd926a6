//===- PadContext.h - What an op whose attributes follow padding may ask --===//
//
// An op whose attributes change with the padding of its tensors
// (ShardingRuleOpInterface::pad: a constant's value, a slice's limits, a
// concat's inputs) reaches --tessera-pad through this class, which the pass
// implements: nn ops may not depend on the dist dialect or on the sharding
// analysis.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_INTERFACES_PADCONTEXT_H
#define TESSERA_INTERFACES_PADCONTEXT_H

#include "mlir/IR/Builders.h"

#include <cstdint>

namespace tessera {

/// What the padding of an operand's dim must hold for an op to read it
/// (ShardingRuleOpInterface::getPaddingFill): anything, zeros (a sum reads
/// it), or the lowest value (a maximum reads it).
enum class PaddingFill : uint8_t { None, Zero, Lowest };

/// What an op whose attributes follow the padding of its tensors may ask of
/// --tessera-pad. Every value already has its padded type; every call that
/// builds IR inserts at the point of the builder passed to `pad`, and lays
/// what it builds out as the function's shardings want.
class PadContext {
public:
  virtual ~PadContext();

  /// Whether `value` was grown by padding.
  virtual bool isPadded(mlir::Value value) const = 0;
  /// The shape of `value` before padding: its type's shape when it is not
  /// padded.
  virtual llvm::SmallVector<int64_t>
  getUnpaddedShape(mlir::Value value) const = 0;

  /// Zeros of `type`, laid out as `like` without its pending sums and whole
  /// on `wholeDim`: the padding an op appends to `like` on that dim.
  virtual mlir::Value createZeros(mlir::Location loc,
                                  mlir::RankedTensorType type, mlir::Value like,
                                  int64_t wholeDim) = 0;
  /// `value` without its padding on `dim`, whole on that dim.
  virtual mlir::Value cutPadding(mlir::Value value, int64_t dim) = 0;
  /// For the result of a one-result op that computes it without padding on
  /// `dims`: retypes `result` to its unpadded size on `dims` (the op's
  /// sharding then leaves them whole), and grows it back after the op, laid
  /// out as before, with zeros on `dims`, the grown value replacing it for
  /// its users.
  virtual void regrow(mlir::OpResult result, llvm::ArrayRef<int64_t> dims) = 0;
};

} // namespace tessera

#endif // TESSERA_INTERFACES_PADCONTEXT_H
