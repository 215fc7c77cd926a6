//===- DecomposeSplitReductions.cpp - Row reductions on pieces ------------===//
//
// nn.softmax, nn.log_softmax and nn.cross_entropy (RowReductionOpInterface)
// reduce over a dim that their rules keep whole. Where propagation left that
// dim split (the vocab dim of a tied LM head's logits, split with the
// table), the partitioner would gather it. This pass has each such op build
// the reductions and elementwise ops it is made of (dialects/NN/IR/
// NNDecompositions.cpp) and annotates each with its propagated sharding,
// so that they partition on pieces: the row's max and its sum of
// exponentials all-reduced over the dim's axes and, for cross-entropy, the
// label's logit picked by a one-hot of the device's classes. That is
// Megatron-LM's vocab-parallel cross-entropy, and the backward's softmax
// gets the same. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Interfaces/RowReductionOpInterface.h"
#include "dialects/NN/IR/NNDialect.h"

#include "mlir/IR/Builders.h"

namespace tessera {
#define GEN_PASS_DEF_DECOMPOSESPLITREDUCTIONSPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// Replaces `op`, whose input is laid out as `inputSharding` with the
/// reduced dim `dim` split, by the ops it is made of, each given the sharding
/// of its layout on `mesh`: the input's dims' axes, those without the reduced
/// dim for one value per row, and the op's own (where it has one) for the
/// result.
void decompose(RowReductionOpInterface op, int64_t dim,
               const TensorSharding &inputSharding, FlatSymbolRefAttr mesh) {
  TensorSharding whole = TensorSharding::getReplicated(inputSharding.getRank());
  for (auto [index, sharding] : llvm::enumerate(inputSharding.dims))
    whole.dims[index].axes = sharding.axes;
  TensorSharding row = whole;
  row.dims.erase(row.dims.begin() + dim);
  MLIRContext *context = op->getContext();
  Attribute inputAttr = ArrayAttr::get(context, {whole.toAttr(mesh)});
  Attribute rowAttr = ArrayAttr::get(context, {row.toAttr(mesh)});
  Attribute resultAttr = op->getAttr(dist::DistDialect::kShardingAttrName);
  auto annotate = [&](Value value, RowLayout layout) {
    Attribute attr;
    switch (layout) {
    case RowLayout::Input:
      attr = inputAttr;
      break;
    case RowLayout::Row:
      attr = rowAttr;
      break;
    case RowLayout::Result:
      attr = resultAttr;
      break;
    }
    if (attr)
      value.getDefiningOp()->setAttr(dist::DistDialect::kShardingAttrName,
                                     attr);
  };
  OpBuilder builder(op.getOperation());
  Value result = op.decomposeRowReduction(builder, annotate);
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
}

struct DecomposeSplitReductionsPass
    : tessera::impl::DecomposeSplitReductionsPassBase<
          DecomposeSplitReductionsPass> {
  void runOnOperation() override {
    if (failed(forEachMeshFunction(getOperation(), [&](func::FuncOp function,
                                                       dist::MeshOp mesh) {
          SmallVector<RowReductionOpInterface> ops;
          function.walk([&](RowReductionOpInterface op) {
            if (op.getRowReduction())
              ops.push_back(op);
          });
          MeshShape shape(mesh);
          for (RowReductionOpInterface op : ops) {
            auto [input, dim] = *op.getRowReduction();
            TensorSharding sharding = getPropagatedSharding(function, input);
            // Axes of one device (an annotation for a mesh resized to
            // them) split nothing.
            if (shape.getGroupSize(sharding.dims[dim].axes) == 1)
              continue;
            decompose(op, dim, sharding,
                      FlatSymbolRefAttr::get(mesh.getSymNameAttr()));
          }
          return success();
        })))
      signalPassFailure();
  }
};

} // namespace
