//===- PlannerInternal.h - What the planner's parts share --------*- C++
//-*-===//
//
// The plan search is in parts (see docs/design.md): the model's shape, the
// stage costs, the estimate, the plan space, the search loop and the
// measured layouts. This header declares what more than one of them reads;
// it is private to lib/Search.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_SEARCH_PLANNERINTERNAL_H
#define TESSERA_LIB_SEARCH_PLANNERINTERNAL_H

#include "tessera/Analysis/StageCuts.h"
#include "tessera/Search/Planner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <tuple>

namespace tessera::planner {

/// The ops of `function`'s body in program order, and each one's position.
llvm::SmallVector<mlir::Operation *>
getBodyOps(mlir::func::FuncOp function,
           llvm::DenseMap<mlir::Operation *, int64_t> &position);

/// Whether `op` is one of the model's: no annotation or collective (the
/// dist dialect's). Partitioning keeps the model's ops in their order.
bool isModelOp(mlir::Operation *op);

/// The model's ops of `function`'s body in program order.
llvm::SmallVector<mlir::Operation *> getModelOps(mlir::func::FuncOp function);

/// The divisors of `n`, ascending, in O(√n).
llvm::SmallVector<int64_t> getDivisors(int64_t n);

/// The bytes of a ranked tensor value.
double getValueBytes(mlir::Value value);

/// The key that orders and merges a partition's collectives.
using CollectiveKey = std::tuple<CollectiveKind, double, int64_t, int64_t>;
inline CollectiveKey getCollectiveKey(const CollectiveUse &use) {
  return {use.kind, use.bytes, use.group.size, use.group.stride};
}

/// The items the pipeline pass may cut a decoder between: each repeated
/// block's two halves (cut where one value crosses inside it: after the
/// attention's residual add), the ops before the first block with the
/// first half, and those after the last block (the head and the loss).
struct DecoderItems {
  /// The body's ops in program order, and the position of each item's
  /// first; empty where a block does not cut in two.
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::SmallVector<int64_t> starts;

  explicit DecoderItems(mlir::func::FuncOp function);
  size_t size() const { return starts.size(); }
  /// The position one past item `item`'s last op.
  int64_t getEnd(size_t item) const {
    return item + 1 < starts.size() ? starts[item + 1] : ops.size();
  }
};

/// The pipeline pass's cut of a GPT into `stages` stages for `shape`. The
/// search asks for the same few cuts for every plan, and a cut is a dynamic
/// program over the items: they are kept.
const StageCuts &getStageCuts(const ModelShape &model,
                              const StageCutShape &shape, int64_t stages);

/// Bytes per element of activations and per parameter of the model state.
struct PrecisionBytes {
  double activation, weight, gradient, optimizer;
  const char *dtype;
  /// What AdamW's update reads and writes per parameter (see
  /// getOptimizerSeconds): the weight (the f32 master in mixed precision,
  /// and its bf16 copy written), the gradient and two moments read, the
  /// weight and moments written.
  double optimizerUpdate;
};

PrecisionBytes getPrecisionBytes(Precision precision);

} // namespace tessera::planner

#endif // TESSERA_LIB_SEARCH_PLANNERINTERNAL_H
