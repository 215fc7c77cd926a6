//===- Layouts.h - nn ops that lay a tensor's elements out again -*- C++
//-*-===//
//
// The reshapes and transposes that the passes build to move a tensor between
// its layout and a stack of per-device pieces: a bucket's gathered members
// (--tessera-schedule), a unit's rows of TP pieces (--tessera-zero).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_LAYOUTS_H
#define TESSERA_TRANSFORMS_LAYOUTS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace tessera {

/// `value` in `shape` (its elements in the same order), reshaped only where
/// the shapes differ.
mlir::Value reshapeTo(mlir::OpBuilder &builder, mlir::Location loc,
                      mlir::Value value, llvm::ArrayRef<int64_t> shape);

/// `rows`, [n, m]: row r the r-th piece (of shape `piece`) of a tensor split
/// n ways on dim `dim`, laid out as that tensor again: the rows moved next
/// to `dim` and merged into it.
mlir::Value unstackRows(mlir::OpBuilder &builder, mlir::Location loc,
                        mlir::Value rows, llvm::ArrayRef<int64_t> piece,
                        int64_t dim);

/// The inverse: `value` split `n` ways on dim `dim`, its pieces as the rows
/// of an [n, m] tensor.
mlir::Value stackRows(mlir::OpBuilder &builder, mlir::Location loc,
                      mlir::Value value, int64_t dim, int64_t n);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_LAYOUTS_H
