//===- Classify.cpp - The pipeline's pre, body and post ops ---------------===//
//
// The first phase of --tessera-pipeline: which ops run once before the
// microbatches (pre), per microbatch (body) or once after them (post), the
// body values summed over the microbatches, gradient clipping's norms (found
// by --tessera-clip-gradients' mark) and the forward ops among the body ops.
//
//===----------------------------------------------------------------------===//

#include "PipelineState.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Transforms/Autodiff/ClipGradients.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::pipeline;

bool pipeline::isMicrobatchReduction(Operation *op) {
  auto reduce = dyn_cast<dist::AllReduceOp>(op);
  return reduce && llvm::any_of(reduce.getMeshAxes(), [](Attribute axis) {
           return cast<StringAttr>(axis).getValue() == kMicrobatchAxis;
         });
}

/// Finds the sums (nn.add, and dist.all_reduce of scalars other than over
/// the microbatches) and the terms (nn.sum_squares) under the norm `root`.
static LogicalResult findNormSumsAndTerms(PipelineState &state,
                                          Operation *root) {
  if (!isa<nn::SqrtOp>(root))
    return root->emitError("cannot pipeline: the gradient norm is not the "
                           "square root of a sum of nn.sum_squares");
  SmallVector<Value> worklist = {root->getOperand(0)};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (isa_and_nonnull<nn::SumSquaresOp>(def)) {
      state.normTerms.insert(def);
      continue;
    }
    bool sum =
        isa_and_nonnull<nn::AddOp>(def) ||
        (isa_and_nonnull<dist::AllReduceOp>(def) &&
         !isMicrobatchReduction(def) &&
         cast<dist::AllReduceOp>(def).getKind() == dist::ReductionKind::sum);
    if (!sum)
      return root->emitError("cannot pipeline: the gradient norm sums a "
                             "value that is no nn.sum_squares");
    state.normSums.insert(def);
    llvm::append_range(worklist, def->getOperands());
  }
  return success();
}

LogicalResult pipeline::findGradientNorms(PipelineState &state) {
  state.body = &state.function.getBody().front();
  for (Operation &op : state.body->without_terminator())
    if (op.hasAttr(kGlobalNormAttrName))
      state.normRoots.insert(&op);
  // A norm without the mark would be pipelined as any other post op: on
  // one rank, from gradients sent there, rather than from every rank's
  // terms.
  for (Operation &op : state.body->without_terminator())
    if (auto update = dyn_cast<nn::AdamWOp>(op); update && update.getGradNorm())
      if (Operation *root = update.getGradNorm().getDefiningOp();
          root && !state.normRoots.contains(root))
        return root->emitError("cannot pipeline: the gradient norm that an "
                               "update reads is not marked ")
               << kGlobalNormAttrName << " (--tessera-clip-gradients marks it)";
  for (Operation *root : state.normRoots)
    if (failed(findNormSumsAndTerms(state, root)))
      return failure();
  return success();
}

/// A sum that is only summed over microbatches is a sum of sums: its terms
/// accumulate where they are made and meet once per step (a tied
/// embedding's gradient from the first and the last stage).
static bool isSumOfSums(Operation &op, bool readsBody, bool readsPost) {
  return isa<nn::AddOp>(op) && readsBody && !readsPost &&
         llvm::all_of(op.getUsers(), [](Operation *user) {
           auto reduce = dyn_cast<dist::AllReduceOp>(user);
           return reduce && isMicrobatchReduction(user) &&
                  (reduce.getKind() == dist::ReductionKind::sum ||
                   reduce.getKind() == dist::ReductionKind::avg);
         });
}

/// Accumulates the body values that the step returns; fails on a data
/// argument returned, or on a per-microbatch one with microbatches.
static LogicalResult accumulateResults(PipelineState &state) {
  auto returnOp = cast<func::ReturnOp>(state.body->getTerminator());
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    if (state.isData(operand))
      return returnOp.emitError("cannot pipeline: result #")
             << index << " is a data argument";
    if (!state.isBody(operand))
      continue;
    if (state.spec.microbatches > 1)
      return returnOp.emitError("cannot split into microbatches: result #")
             << index << " is a per-microbatch value (reduce it, e.g. to a "
             << "mean, or return it from an unpipelined program)";
    state.accumulated.insert(operand);
  }
  return success();
}

LogicalResult pipeline::classify(PipelineState &state) {
  func::FuncOp function = state.function;
  state.body = &function.getBody().front();
  for (BlockArgument arg : function.getArguments())
    if (!function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName) &&
        !function.getArgAttr(arg.getArgNumber(), nn::kStateAttrName))
      state.dataArgs.insert(arg.getArgNumber());
  bool microbatched = state.spec.microbatches > 1;
  for (Operation &op : state.body->without_terminator()) {
    if (op.hasAttr(dist::DistDialect::kStreamAttrName) ||
        isa<dist::WaitOp, dist::SendOp, dist::RecvOp>(op))
      return op.emitError("cannot pipeline a program that is already "
                          "scheduled: run --tessera-pipeline before "
                          "--tessera-schedule");
    auto classOf = [&](Value value) -> std::optional<OpClass> {
      if (state.isData(value))
        return OpClass::Body;
      Operation *def = value.getDefiningOp();
      if (!def)
        return std::nullopt;
      return state.classes.lookup(def);
    };
    bool readsPost = false, readsBody = false;
    for (Value operand : op.getOperands()) {
      std::optional<OpClass> kind = classOf(operand);
      readsPost |= kind == OpClass::Post;
      readsBody |= kind == OpClass::Body;
    }
    // An index along the microbatches differs from one microbatch to the
    // next, as data does.
    if (auto index = dyn_cast<dist::AxisIndexOp>(op))
      for (unsigned group = 0; group < index.getGroups().size(); ++group)
        readsBody |= llvm::is_contained(index.getGroup(group), kMicrobatchAxis);
    bool sumOfSums = isSumOfSums(op, readsBody, readsPost);
    // A gradient norm is made after the gradients, as the updates are.
    bool norm = state.normTerms.contains(&op) || state.normSums.contains(&op) ||
                state.normRoots.contains(&op);
    bool post = readsPost || sumOfSums || isMicrobatchReduction(&op) ||
                isa<OptimizerOpInterface>(op) || norm;
    state.classes[&op] = post        ? OpClass::Post
                         : readsBody ? OpClass::Body
                                     : OpClass::Pre;
    if (post) {
      for (Value operand : op.getOperands()) {
        if (classOf(operand) != OpClass::Body)
          continue;
        if (microbatched && !isMicrobatchReduction(&op) && !sumOfSums)
          return op.emitError("cannot split into microbatches: '")
                 << op.getName()
                 << "' reads a per-microbatch value that is not reduced over "
                    "microbatches (an all_reduce over \""
                 << kMicrobatchAxis << "\")";
        if (state.isData(operand))
          return op.emitError("cannot pipeline: an optimizer update reads a "
                              "data argument");
        state.accumulated.insert(operand);
      }
      continue;
    }
    if (!readsBody)
      continue;
    state.bodyOps.push_back(&op);
    if (auto collective = dyn_cast<dist::CollectiveOpInterface>(op))
      for (Attribute axis : collective.getMeshAxes())
        if (cast<StringAttr>(axis).getValue() == kMicrobatchAxis)
          return op.emitError("cannot split into microbatches: this "
                              "collective needs values of other microbatches "
                              "(an op reads the whole batch)");
  }
  return accumulateResults(state);
}

void pipeline::findForward(PipelineState &state) {
  // The loss: the first scalar float result that updates no argument. The
  // forward ops are the body ops it depends on; with no loss, all are.
  Block *body = state.body;
  auto returnOp = cast<func::ReturnOp>(body->getTerminator());
  Value loss;
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!loss && type && type.getRank() == 0 &&
        isa<FloatType>(type.getElementType()) &&
        !state.function.getResultAttr(index, nn::kUpdatesAttrName))
      loss = operand;
  }
  bool hasUpdates = llvm::any_of(body->without_terminator(), [](Operation &op) {
    return isa<OptimizerOpInterface>(op);
  });
  if (!loss || !hasUpdates) {
    state.forwardOps.insert(state.bodyOps.begin(), state.bodyOps.end());
    return;
  }
  SmallVector<Value> worklist = {loss};
  llvm::DenseSet<Operation *> seen;
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || state.classes.lookup(def) == OpClass::Pre ||
        !seen.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
  }
  for (Operation *op : state.bodyOps)
    if (seen.contains(op))
      state.forwardOps.insert(op);
}
