//===- NNSequenceOrder.cpp - how nn ops depend on the order of tokens -----===//
//
// What the factor rules of NNShardingRules.cpp cannot say about the order
// of a sequence's tokens (SequenceOrderOpInterface): which ops mask or
// serve the tokens by place, and how attention, whose rule reads the keys
// by place, computes the same on a sequence in any order and compares
// positions in zigzag order. --tessera-zigzag-context reads nothing
// op-specific but this and the rules.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::nn;

/// A causal softmax gives the keys after each query no weight, by place.
bool SoftmaxOp::dependsOnTokenOrder() { return getCausal(); }

/// It hides the keys after each query, by place.
bool CausalMaskOp::dependsOnTokenOrder() { return true; }

/// Earlier tokens take the experts' slots first.
bool MoeDispatchOp::dependsOnTokenOrder() { return true; }

/// The queries', keys' and values' sequence dim: the keys and values
/// permuted alike give each query the same softmax-weighted sum, and the
/// queries' rows are computed each alone.
SmallVector<std::pair<unsigned, int64_t>> AttentionOp::getSequenceOperands() {
  return {{getQueryMutable().getOperandNumber(), 2},
          {getKeyMutable().getOperandNumber(), 2},
          {getValueMutable().getOperandNumber(), 2}};
}
SmallVector<std::pair<unsigned, int64_t>> AttentionOp::getSequenceResults() {
  return {{0, 2}};
}
bool AttentionOp::comparesPositions() { return getCausal(); }
bool AttentionOp::isRing() { return getRing(); }
/// Its dropout draws each probability by its place in the whole, and a
/// piece of the queries places its rows by `piece`: neither follows a
/// permuted sequence.
bool AttentionOp::canStoreZigzag() {
  return !getPiece() && getDropout().isZero();
}
int64_t AttentionOp::getZigzagOrder() { return getZigzag(); }
void AttentionOp::setZigzagOrder(int64_t n) { setZigzag(n); }
