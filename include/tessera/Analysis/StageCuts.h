//===- StageCuts.h - Layers, repeated blocks and stage cuts -----*- C++ -*-===//

#ifndef TESSERA_ANALYSIS_STAGECUTS_H
#define TESSERA_ANALYSIS_STAGECUTS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mlir {
class Operation;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace tessera {

/// The layer boundaries of `ops` (one block's ops in program order): the
/// positions i (0 first) before which at most one value that an op of
/// `ops` made before i is read at i or later, as one value (the residual
/// stream) crosses between layers. Reads by ops outside `ops` do not count,
/// nor scalars (a layer's load-balancing loss, added to the loss at the
/// end).
llvm::SmallVector<int64_t>
getLayerBoundaries(llvm::ArrayRef<mlir::Operation *> ops);

/// The ops of `ops` (in program order) that read the data: an argument of
/// `function` that is not a parameter (nn.param), or what such an op makes;
/// not what parameters and constants alone make.
llvm::SmallVector<mlir::Operation *>
getDataOps(mlir::func::FuncOp function, llvm::ArrayRef<mlir::Operation *> ops);

/// The repeated blocks among `ops` (ops that read the data, getDataOps, in
/// program order): their layers, found as the structure repeats, each as
/// its ops. The ops at one position of two blocks have the same name and
/// result types. Empty when no run of layers repeats.
llvm::SmallVector<llvm::SmallVector<mlir::Operation *>>
findRepeatedBlocks(llvm::ArrayRef<mlir::Operation *> ops);

/// The layers full recomputation (--tessera-recompute) remakes among `ops`
/// (ops that read the data, getDataOps, in program order): the repeated
/// blocks, or where nothing repeats, each run of ops between the layer
/// boundaries. The pass splits them further at pipeline cuts.
llvm::SmallVector<llvm::SmallVector<mlir::Operation *>>
getRecomputedLayers(llvm::ArrayRef<mlir::Operation *> ops);

/// findRepeatedBlocks of the data ops of `function`'s body.
llvm::SmallVector<llvm::SmallVector<mlir::Operation *>>
findRepeatedBlocks(mlir::func::FuncOp function);

struct StageCuts {
  /// The first item of each stage; stage i holds items [starts[i],
  /// starts[i+1]).
  llvm::SmallVector<int64_t> starts;
  /// The largest stage's cost: the pipeline's pace.
  double maxStageCost = 0;
};

/// Cuts a sequence of item costs (layers, with the embedding and the head
/// folded into the first and last) into `stages` contiguous non-empty
/// stages minimizing the most expensive stage, by dynamic programming over
/// prefix sums: O(items^2 * stages). `stages` must be at most the items.
StageCuts balanceStages(llvm::ArrayRef<double> costs, int64_t stages);

} // namespace tessera

#endif // TESSERA_ANALYSIS_STAGECUTS_H
