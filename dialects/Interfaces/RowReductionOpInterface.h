//===- RowReductionOpInterface.h - Reductions over rows ---------*- C++ -*-===//

#ifndef TESSERA_INTERFACES_ROWREDUCTIONOPINTERFACE_H
#define TESSERA_INTERFACES_ROWREDUCTIONOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>

namespace tessera {

/// What a RowReductionOpInterface op reduces: each row of `input` along
/// `dim`.
struct RowReduction {
  mlir::Value input;
  int64_t dim;
};

/// The layout a value of a row reduction's decomposition takes, of those of
/// the op's input and result.
enum class RowLayout {
  /// Shaped as the input (the shifted input, its exponentials, the one-hot
  /// of labels): the input's layout.
  Input,
  /// One value per row (the max, the sums, their log): the input's layout
  /// without the reduced dim.
  Row,
  /// The value that replaces the op's result, and its cast to the result's
  /// type: the result's layout.
  Result,
};

} // namespace tessera

#include "dialects/Interfaces/RowReductionOpInterface.h.inc"

#endif // TESSERA_INTERFACES_ROWREDUCTIONOPINTERFACE_H
