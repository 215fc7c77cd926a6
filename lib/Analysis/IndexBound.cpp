//===- IndexBound.cpp - The range of integer data -------------------------===//

#include "tessera/Analysis/IndexBound.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace tessera;

/// The whole size of a dim that an nn.OffsetOpInterface op holds `local`
/// positions of: times the devices its piece index counts over.
static int64_t getWholeSize(Operation *op, int64_t local) {
  auto offset = dyn_cast<nn::OffsetOpInterface>(op);
  Value piece = offset ? offset.getPiece() : Value();
  auto index = piece ? piece.getDefiningOp<dist::AxisIndexOp>() : nullptr;
  if (!index)
    return local;
  auto mesh = SymbolTable::lookupNearestSymbolFrom<dist::MeshOp>(
      index, index.getMeshAttr());
  if (!mesh)
    return local;
  MeshShape shape(mesh);
  for (Attribute group : index.getGroups())
    for (Attribute axis : cast<ArrayAttr>(group))
      local *= shape.getAxisSize(cast<StringAttr>(axis));
  return local;
}

int64_t tessera::getIndexBound(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    if (auto function =
            dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()))
      if (auto bound = function.getArgAttrOfType<IntegerAttr>(
              arg.getArgNumber(), dist::DistDialect::kIndexBoundAttrName))
        return bound.getInt();
  for (OpOperand &use : value.getUses()) {
    if (auto lookup = dyn_cast<nn::EmbeddingOp>(use.getOwner());
        lookup && use.getOperandNumber() == 1)
      return getWholeSize(lookup, lookup.getTable().getType().getDimSize(0));
    if (auto loss = dyn_cast<nn::CrossEntropyOp>(use.getOwner());
        loss && use.getOperandNumber() == 1)
      return loss.getLogits().getType().getShape().back();
    // Labels of a cross-entropy over a split vocabulary
    // (--tessera-decompose-split-reductions).
    if (auto hot = dyn_cast<nn::OneHotOp>(use.getOwner()))
      return getWholeSize(hot, hot.getType().getShape().back());
    // A pipeline stage may read token ids only in the backward.
    if (auto scatter = dyn_cast<nn::EmbeddingGradOp>(use.getOwner());
        scatter && use.getOperandNumber() == 1)
      return getWholeSize(scatter, scatter.getVocab());
    // Through what moves the ids without changing them: a pipeline stage's
    // microbatch slices, a device's piece of replicated ids, a wait, the
    // chunks of a sequence in zigzag order (--tessera-zigzag-context).
    Operation *owner = use.getOwner();
    if (isa<nn::SliceOp, nn::ConcatOp, nn::ReshapeOp, nn::TransposeOp,
            dist::AllSliceOp, dist::AllGatherOp, dist::AllToAllOp,
            dist::CollectivePermuteOp, dist::BroadcastOp, dist::WaitOp,
            dist::MicrobatchSliceOp>(owner))
      if (int64_t bound = getIndexBound(owner->getResult(0)))
        return bound;
  }
  return 0;
}
