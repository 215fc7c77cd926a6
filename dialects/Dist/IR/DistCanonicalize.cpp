//===- DistCanonicalize.cpp - the reshard optimizer's patterns ------------===//
//
// Collectives that the partitioner chains reshard by reshard: pairs that
// cancel are removed and runs over the same dim or kind merge into one
// collective over the union of the axes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/IR/DistOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace tessera::dist;

/// `outer` consumes `inner` on the same mesh; `inner` has no other use.
static bool isChain(Operation *inner, CollectiveOpInterface outer) {
  auto innerOp = dyn_cast_or_null<CollectiveOpInterface>(inner);
  return innerOp && innerOp.getMeshAttr() == outer.getMeshAttr() &&
         inner->hasOneUse();
}

/// `major ++ minor` as one axes attribute.
static ArrayAttr concatAxes(ArrayAttr major, ArrayAttr minor) {
  SmallVector<Attribute> axes(major.begin(), major.end());
  llvm::append_range(axes, minor);
  return ArrayAttr::get(major.getContext(), axes);
}

/// Whether replacing `gather`'s result by `value` keeps `value` alive no
/// longer than it lives anyway: the gather directly follows `slice`, or
/// `value` is read at or after the gather.
static bool isAliveAt(Value value, Operation *slice, Operation *gather) {
  if (slice->getNextNode() == gather)
    return true;
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    return user != slice && user->getBlock() == gather->getBlock() &&
           !user->isBeforeInBlock(gather);
  });
}

namespace {

/// all_gather(all_slice(x)) over the same axes and dim is x, unless reusing
/// x would keep it alive across ops that ran on the slice: that slice was
/// a trade of memory for communication (ZeRO-3 resharding a parameter to a
/// smaller group after the forward pass) and stays.
struct GatherOfSlice : OpRewritePattern<AllGatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllGatherOp op,
                                PatternRewriter &rewriter) const override {
    auto slice = op.getInput().getDefiningOp<AllSliceOp>();
    if (!slice || slice.getMeshAttr() != op.getMeshAttr() ||
        slice.getMeshAxes() != op.getMeshAxes() ||
        slice.getDim() != op.getDim() || slice->getBlock() != op->getBlock() ||
        !isAliveAt(slice.getInput(), slice, op))
      return failure();
    rewriter.replaceOp(op, slice.getInput());
    return success();
  }
};

/// all_gather(all_gather(x, minor), major) on one dim is one all_gather over
/// major ++ minor.
struct MergeGathers : OpRewritePattern<AllGatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllGatherOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<AllGatherOp>();
    if (!inner || !isChain(inner, op) || inner.getDim() != op.getDim())
      return failure();
    rewriter.replaceOpWithNewOp<AllGatherOp>(
        op, op.getType(), inner.getInput(), op.getMeshAttr(),
        concatAxes(op.getMeshAxes(), inner.getMeshAxes()), op.getDimAttr());
    return success();
  }
};

/// all_slice(all_gather(x)) over the same axes and dim is x.
struct SliceOfGather : OpRewritePattern<AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllSliceOp op,
                                PatternRewriter &rewriter) const override {
    auto gather = op.getInput().getDefiningOp<AllGatherOp>();
    if (!gather || gather.getMeshAttr() != op.getMeshAttr() ||
        gather.getMeshAxes() != op.getMeshAxes() ||
        gather.getDim() != op.getDim())
      return failure();
    rewriter.replaceOp(op, gather.getInput());
    return success();
  }
};

/// all_slice(all_slice(x, major), minor) on one dim is one all_slice over
/// major ++ minor.
struct MergeSlices : OpRewritePattern<AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllSliceOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<AllSliceOp>();
    if (!inner || !isChain(inner, op) || inner.getDim() != op.getDim())
      return failure();
    rewriter.replaceOpWithNewOp<AllSliceOp>(
        op, op.getType(), inner.getInput(), op.getMeshAttr(),
        concatAxes(inner.getMeshAxes(), op.getMeshAxes()), op.getDimAttr());
    return success();
  }
};

/// all_slice(all_reduce(x)) over the same axes is a reduce_scatter: each
/// device keeps only its piece of the combined tensor (the gradient of a
/// value gathered for a tensor-parallel region, sliced again for the ops
/// that run on a piece of the sequence).
struct SliceOfAllReduce : OpRewritePattern<AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllSliceOp op,
                                PatternRewriter &rewriter) const override {
    auto reduce = op.getInput().getDefiningOp<AllReduceOp>();
    if (!reduce || !isChain(reduce, op) ||
        reduce.getMeshAxes() != op.getMeshAxes())
      return failure();
    rewriter.replaceOpWithNewOp<ReduceScatterOp>(
        op, op.getType(), reduce.getInput(), op.getMeshAttr(), op.getMeshAxes(),
        op.getDimAttr(), reduce.getKindAttr());
    return success();
  }
};

/// Two all_reduces of one kind over disjoint axes are one over both.
struct MergeAllReduces : OpRewritePattern<AllReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllReduceOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<AllReduceOp>();
    if (!inner || !isChain(inner, op) || inner.getKind() != op.getKind())
      return failure();
    rewriter.replaceOpWithNewOp<AllReduceOp>(
        op, inner.getInput(), op.getMeshAttr(),
        concatAxes(inner.getMeshAxes(), op.getMeshAxes()), op.getKindAttr());
    return success();
  }
};

/// An all_to_all undone by the inverse all_to_all is its operand.
struct CancelAllToAlls : OpRewritePattern<AllToAllOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllToAllOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<AllToAllOp>();
    if (!inner || inner.getMeshAttr() != op.getMeshAttr() ||
        inner.getMeshAxes() != op.getMeshAxes() ||
        inner.getSplitDim() != op.getConcatDim() ||
        inner.getConcatDim() != op.getSplitDim())
      return failure();
    rewriter.replaceOp(op, inner.getInput());
    return success();
  }
};

} // namespace

void AllGatherOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<GatherOfSlice, MergeGathers>(context);
}

void AllSliceOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                             MLIRContext *context) {
  patterns.add<SliceOfGather, MergeSlices, SliceOfAllReduce>(context);
}

void AllReduceOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<MergeAllReduces>(context);
}

void AllToAllOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                             MLIRContext *context) {
  patterns.add<CancelAllToAlls>(context);
}
