//===- IndexBound.h - The range of integer data -----------------*- C++ -*-===//
//
// Token ids and labels index a table or classes: what reads them tells the
// range their values lie in, which generated inputs must respect.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_INDEXBOUND_H
#define TESSERA_ANALYSIS_INDEXBOUND_H

#include "mlir/IR/Value.h"

namespace tessera {

/// The bound of the integer values of `value`, if an op indexes with them
/// (an nn.embedding's vocab, nn.cross_entropy's classes, an
/// nn.embedding_grad's vocab), through ops that move them unchanged
/// (slices, reshapes, transposes, collectives, waits); 0 when none does.
/// On a function argument, `dist.index_bound` (the bound before
/// --tessera-pad grew the table) comes first.
int64_t getIndexBound(mlir::Value value);

} // namespace tessera

#endif // TESSERA_ANALYSIS_INDEXBOUND_H
