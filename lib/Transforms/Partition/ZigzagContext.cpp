//===- ZigzagContext.cpp - Ring attention's causal load balance -----------===//
//
// --tessera-zigzag-context. Ring attention over a sequence split in order
// gives device r of n the keys of all devices before it: the last device
// computes 2n - 1 times what the first does, and every ring step waits for
// it. Stored in zigzag order (2n chunks as 0, 2n - 1, 1, 2n - 2, ...), device
// r holds chunks r and 2n - 1 - r, and every step costs every device half a
// block (Megatron-LM gets this by permuting the batch in its data loader).
//
// The pass follows the sequence order from the data through the ops'
// sharding rules: a factor that carries it marks the op's tensors of that
// factor, and a tensor of that factor that the order has not reached
// (positions from nn.iota, a position table) is permuted where it meets it.
// What a rule cannot say, the ops' SequenceOrderOpInterface does: which
// depend on the order, and which (attention) read a sequence in any order
// and compare positions. Those then compare the positions of the stored
// chunks (`zigzag`), and results that keep the sequence are permuted back,
// so the function computes what it did.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/SequenceOrderOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessera {
#define GEN_PASS_DEF_ZIGZAGCONTEXTPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// Where a tensor holds the sequence: in dim `dim`, after `major` elements
/// of the dim's outer factors (a reshape may merge it with others).
struct SequenceDim {
  int64_t dim, major;
};

/// An operand to store in zigzag order along its dim `dim`, which holds the
/// whole sequence.
struct PermutedUse {
  OpOperand *use;
  int64_t dim;
};

/// The sequence order of one function: what the analysis found to permute,
/// or why it cannot be.
class SequenceOrder {
public:
  SequenceOrder(func::FuncOp function, int64_t length)
      : function(function), length(length) {}

  /// Follows the order from `data` (the sequence in dim 1) through the
  /// function. Answers the op that depends on the order beyond it, with
  /// the reason, where there is one.
  std::optional<std::pair<Operation *, std::string>>
  analyze(ArrayRef<BlockArgument> data);

  /// The uses to permute, the ops that compare positions (causal
  /// attentions) to store in zigzag order, and the returned values to
  /// permute back (by operand number).
  SmallVector<PermutedUse> uses;
  SmallVector<SequenceOrderOpInterface> positionComparers;
  SmallVector<std::pair<unsigned, int64_t>> results;

private:
  using Failure = std::optional<std::pair<Operation *, std::string>>;
  Failure visit(Operation *op);
  Failure visitRuleOp(ShardingRuleOpInterface op);
  Failure visitSequenceOp(SequenceOrderOpInterface op);

  func::FuncOp function;
  int64_t length;
  llvm::DenseMap<Value, SequenceDim> order;
};

} // namespace

/// The factor of `factors` (a dim's, outer first) that sits after `major`
/// elements and holds `length`, if any.
static std::optional<int64_t> findFactor(const ShardingRule &rule,
                                         ArrayRef<int64_t> factors,
                                         int64_t major, int64_t length) {
  int64_t before = 1;
  for (int64_t factor : factors) {
    int64_t size = rule.getFactors()[factor].size;
    if (before == major && size == length)
      return factor;
    before *= size;
  }
  return std::nullopt;
}

/// Where `factor` sits in `dims` (a tensor's factors per dim), if there.
static std::optional<SequenceDim> locateFactor(const ShardingRule &rule,
                                               const TensorFactors &dims,
                                               int64_t factor) {
  for (auto [dim, factors] : llvm::enumerate(dims)) {
    int64_t before = 1;
    for (int64_t f : factors) {
      if (f == factor)
        return SequenceDim{static_cast<int64_t>(dim), before};
      before *= rule.getFactors()[f].size;
    }
  }
  return std::nullopt;
}

SequenceOrder::Failure SequenceOrder::visitRuleOp(ShardingRuleOpInterface op) {
  ShardingRule rule = op.getShardingRule();
  // The factors that carry the order into the op.
  SmallVector<int64_t> carried;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    auto found = order.find(operand);
    if (found == order.end())
      continue;
    std::optional<int64_t> factor =
        findFactor(rule, rule.getOperandFactors()[index][found->second.dim],
                   found->second.major, length);
    if (!factor)
      return std::pair(op.getOperation(),
                       "splits the sequence's dim in operand #" +
                           std::to_string(index));
    if (rule.getFactors()[*factor].kind == FactorKind::NeedReplication)
      return std::pair(op.getOperation(), "reads operand #" +
                                              std::to_string(index) +
                                              " along the sequence by place");
    if (!llvm::is_contained(carried, *factor))
      carried.push_back(*factor);
  }
  if (carried.size() > 1)
    return std::pair(op.getOperation(),
                     std::string("pairs the sequence with itself"));
  int64_t factor = carried.front();
  // Operands of the factor that the order has not reached are permuted.
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    std::optional<SequenceDim> at =
        locateFactor(rule, rule.getOperandFactors()[index], factor);
    if (!at || order.contains(operand))
      continue;
    if (at->major != 1 ||
        cast<RankedTensorType>(operand.getType()).getDimSize(at->dim) != length)
      return std::pair(op.getOperation(),
                       "merges the sequence with other dims in operand #" +
                           std::to_string(index));
    uses.push_back({&op->getOpOperand(index), at->dim});
  }
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    if (std::optional<SequenceDim> at =
            locateFactor(rule, rule.getResultFactors()[index], factor))
      order[result] = *at;
  return std::nullopt;
}

/// An op that reads its sequence operands in any order they share, though
/// its rule reads some by place (an attention's queries, keys and values
/// in dim 2): an operand the order has not reached is permuted, and one it
/// has must hold it in that dim whole.
SequenceOrder::Failure
SequenceOrder::visitSequenceOp(SequenceOrderOpInterface op) {
  if (op.comparesPositions()) {
    if (!op.isRing() || !op.canStoreZigzag())
      return std::pair(op.getOperation(),
                       std::string("is causal without a ring, or drops "
                                   "its probabilities by place"));
    positionComparers.push_back(op);
  }
  for (auto [index, dim] : op.getSequenceOperands()) {
    Value operand = op->getOperand(index);
    auto found = order.find(operand);
    if (found == order.end() &&
        cast<RankedTensorType>(operand.getType()).getDimSize(dim) == length) {
      uses.push_back({&op->getOpOperand(index), dim});
      continue;
    }
    if (found == order.end() || found->second.dim != dim ||
        found->second.major != 1)
      return std::pair(op.getOperation(),
                       "holds the sequence elsewhere than dim " +
                           std::to_string(dim) + " of operand #" +
                           std::to_string(index));
  }
  for (auto [index, dim] : op.getSequenceResults())
    order[op->getResult(index)] = {dim, 1};
  return std::nullopt;
}

SequenceOrder::Failure SequenceOrder::visit(Operation *op) {
  bool reached = llvm::any_of(op->getOperands(), [&](Value operand) {
    return order.contains(operand);
  });
  if (!reached)
    return std::nullopt;
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
      auto found = order.find(operand);
      if (found == order.end())
        continue;
      if (found->second.major != 1 ||
          cast<RankedTensorType>(operand.getType())
                  .getDimSize(found->second.dim) != length)
        return std::pair(op, "returns the sequence merged with other dims");
      results.push_back({static_cast<unsigned>(index), found->second.dim});
    }
    return std::nullopt;
  }
  if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op)) {
    order[constraint.getResult()] = order.lookup(constraint.getInput());
    return std::nullopt;
  }
  // Before the random ops are refused: an attention is one for its
  // dropout, yet reads its sequence in any order; a causal one says itself
  // whether it can compare positions in zigzag order (canStoreZigzag).
  if (auto sequenceOp = dyn_cast<SequenceOrderOpInterface>(op)) {
    if (sequenceOp.dependsOnTokenOrder())
      return std::pair(op, std::string("depends on the tokens' order"));
    if (!sequenceOp.getSequenceOperands().empty())
      return visitSequenceOp(sequenceOp);
  }
  if (isa<nn::RandomOpInterface>(op))
    return std::pair(op, std::string("draws its numbers by place"));
  auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruleOp || op->getNumRegions() > 0)
    return std::pair(op, std::string("has no sharding rule to follow the "
                                     "sequence through"));
  return visitRuleOp(ruleOp);
}

std::optional<std::pair<Operation *, std::string>>
SequenceOrder::analyze(ArrayRef<BlockArgument> data) {
  for (BlockArgument arg : data)
    order[arg] = {1, 1};
  for (Operation &op : function.getBody().front())
    if (Failure failure = visit(&op))
      return failure;
  return std::nullopt;
}

namespace {

/// The permutations into and out of zigzag order of `2 zigzag` chunks: the
/// value pinned whole along the sequence (one gather where it is split),
/// its chunks sliced and concatenated in the other order, and the result
/// pinned (whole by default, so that its gradient is gathered once for the
/// slices of the backward). The other dims stay open.
class Reorder {
public:
  Reorder(FlatSymbolRefAttr mesh, int64_t zigzag)
      : mesh(mesh), zigzag(zigzag) {}

  /// `value` in zigzag order along `dim`, pinned there to `pinned` (whole
  /// where null): stored chunk i is chunk i / 2, or 2 zigzag - 1 - i / 2
  /// for odd i.
  Value toZigzag(OpBuilder &builder, Value value, int64_t dim,
                 dist::DimShardingAttr pinned = {}) const {
    return reorder(
        builder, value, dim,
        [&](int64_t i) { return i % 2 == 0 ? i / 2 : 2 * zigzag - 1 - i / 2; },
        pinned);
  }
  /// `value` in zigzag order along `dim` back in natural order.
  Value fromZigzag(OpBuilder &builder, Value value, int64_t dim) const {
    return reorder(builder, value, dim, [&](int64_t chunk) {
      return chunk < zigzag ? 2 * chunk : 2 * (2 * zigzag - 1 - chunk) + 1;
    });
  }

private:
  /// `value` pinned to `pinned` along `dim` (whole where null), its other
  /// dims open.
  Value pin(OpBuilder &builder, Value value, int64_t dim,
            dist::DimShardingAttr pinned) const {
    MLIRContext *context = value.getContext();
    auto open =
        dist::DimShardingAttr::get(context, {}, /*isOpen=*/true, std::nullopt);
    SmallVector<dist::DimShardingAttr> dims(
        cast<RankedTensorType>(value.getType()).getRank(), open);
    dims[dim] = pinned ? pinned
                       : dist::DimShardingAttr::get(
                             context, {}, /*isOpen=*/false, std::nullopt);
    return dist::ShardingConstraintOp::create(
        builder, value.getLoc(), value, dist::ShardingAttr::get(mesh, dims));
  }

  Value reorder(OpBuilder &builder, Value value, int64_t dim,
                llvm::function_ref<int64_t(int64_t)> chunkAt,
                dist::DimShardingAttr pinned = {}) const {
    Location loc = value.getLoc();
    Value whole = pin(builder, value, dim, {});
    auto type = cast<RankedTensorType>(value.getType());
    int64_t rows = type.getDimSize(dim) / (2 * zigzag);
    SmallVector<Value> chunks;
    for (int64_t i = 0; i < 2 * zigzag; ++i) {
      SmallVector<int64_t> start(type.getRank(), 0), limit(type.getShape());
      start[dim] = chunkAt(i) * rows;
      limit[dim] = start[dim] + rows;
      chunks.push_back(nn::SliceOp::create(
          builder, loc, whole, builder.getDenseI64ArrayAttr(start),
          builder.getDenseI64ArrayAttr(limit)));
    }
    return pin(builder, nn::ConcatOp::create(builder, loc, chunks, dim), dim,
               pinned);
  }

  FlatSymbolRefAttr mesh;
  int64_t zigzag;
};

/// Sets `builder` where a permutation of `value` goes: before its first
/// user for an argument (a late one stays late: a pipeline cuts between
/// the layers it would otherwise cross), else after its op.
void setInsertionPoint(OpBuilder &builder, Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg) {
    builder.setInsertionPointAfterValue(value);
    return;
  }
  Operation *first = nullptr;
  for (Operation *user : arg.getUsers()) {
    Operation *inBlock = arg.getOwner()->findAncestorOpInBlock(*user);
    if (inBlock && (!first || inBlock->isBeforeInBlock(first)))
      first = inBlock;
  }
  if (first)
    builder.setInsertionPoint(first);
  else
    builder.setInsertionPointToStart(arg.getOwner());
}

/// Permutes values into zigzag order once each, as early as it can: a value
/// made from one operand by an op that keeps the sequence factor (a
/// broadcast, a cast, an elementwise op) and read only where the order
/// needs it is made from its operand in zigzag order instead, so that a
/// position table is permuted before it is broadcast over the batch.
class Permuter {
public:
  Permuter(const Reorder &reorder, int64_t length)
      : reorder(reorder), length(length) {}

  /// `value` (which holds the sequence whole in `dim`) in zigzag order.
  Value get(Value value, int64_t dim) {
    auto key = std::pair(value, dim);
    if (Value done = permuted.lookup(key))
      return done;
    Value result = make(value, dim);
    permuted[key] = result;
    return result;
  }

private:
  Value make(Value value, int64_t dim) {
    if (Operation *def = value.getDefiningOp(); def && value.hasOneUse() &&
                                                def->getNumOperands() == 1 &&
                                                def->getNumResults() == 1)
      if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(def)) {
        ShardingRule rule = ruleOp.getShardingRule();
        ArrayRef<int64_t> factors = rule.getResultDimFactors(0, dim);
        if (rule.hasOnlyParallelFactors() && factors.size() == 1) {
          std::optional<SequenceDim> at =
              locateFactor(rule, rule.getOperandFactors()[0], factors.front());
          // Broadcast along the sequence: the same in any order.
          if (!at)
            return value;
          Value operand = def->getOperand(0);
          if (at->major == 1 &&
              cast<RankedTensorType>(operand.getType()).getDimSize(at->dim) ==
                  length) {
            def->setOperand(0, get(operand, at->dim));
            return value;
          }
        }
      }
    OpBuilder builder(value.getContext());
    setInsertionPoint(builder, value);
    return reorder.toZigzag(builder, value, dim);
  }

  const Reorder &reorder;
  int64_t length;
  llvm::DenseMap<std::pair<Value, int64_t>, Value> permuted;
};

struct ZigzagContextPass
    : public tessera::impl::ZigzagContextPassBase<ZigzagContextPass> {
  void runOnOperation() override;
};

} // namespace

/// The data of `function` whose sequence (dim 1) splits over "cp" of
/// `mesh`.
static SmallVector<BlockArgument> getSequenceData(func::FuncOp function,
                                                  FlatSymbolRefAttr mesh) {
  SmallVector<BlockArgument> data;
  for (BlockArgument arg : function.getArguments()) {
    auto sharding = function.getArgAttrOfType<dist::ShardingAttr>(
        arg.getArgNumber(), dist::DistDialect::kShardingAttrName);
    if (!sharding || sharding.getMesh() != mesh ||
        function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName) ||
        sharding.getDims().size() < 2)
      continue;
    if (llvm::any_of(sharding.getDims()[1].getAxes(),
                     [](StringAttr axis) { return axis.getValue() == "cp"; }))
      data.push_back(arg);
  }
  return data;
}

/// The lengths of `op`'s sequence operands, in their order.
static SmallVector<int64_t> getSequenceLengths(SequenceOrderOpInterface op) {
  return llvm::map_to_vector(
      op.getSequenceOperands(), [&](std::pair<unsigned, int64_t> operand) {
        return cast<RankedTensorType>(op->getOperand(operand.first).getType())
            .getDimSize(operand.second);
      });
}

/// Stores `function`'s sequence in zigzag order of `2 zigzag` chunks, where
/// its ring attentions are causal and nothing else depends on the order;
/// else warns why its ring stays unbalanced.
static void balance(func::FuncOp function, dist::MeshOp mesh, int64_t zigzag) {
  auto meshSymbol = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  SmallVector<BlockArgument> data = getSequenceData(function, meshSymbol);
  // The causal rings in order: what the zigzag order balances.
  SmallVector<SequenceOrderOpInterface> rings;
  function.walk([&](SequenceOrderOpInterface op) {
    if (op.isRing() && op.comparesPositions() && op.getZigzagOrder() == 0 &&
        !op.getSequenceOperands().empty())
      rings.push_back(op);
  });
  if (data.empty() || rings.empty())
    return;
  int64_t length = getSequenceLengths(rings.front()).front();
  auto unbalanced = [&](Operation *op, const Twine &why) {
    op->emitWarning("ring attention stays unbalanced (no zigzag order): ")
        << why;
  };
  for (SequenceOrderOpInterface ring : rings)
    if (llvm::any_of(getSequenceLengths(ring),
                     [&](int64_t other) { return other != length; }) ||
        length % (2 * zigzag) != 0)
      return unbalanced(ring, "its sequence of " + Twine(length) +
                                  " is not one of whole chunks of 2 x cp = " +
                                  Twine(2 * zigzag) + " in every attention");
  for (BlockArgument arg : data)
    if (cast<RankedTensorType>(arg.getType()).getDimSize(1) != length)
      return unbalanced(function, "argument #" + Twine(arg.getArgNumber()) +
                                      " is not of the attention's sequence");
  SequenceOrder order(function, length);
  if (auto failure = order.analyze(data))
    return unbalanced(failure->first,
                      "the op " + failure->second +
                          ", which the order of the sequence would change");

  // The data, permuted where first read, their sequence pinned to its
  // split (the other dims left open: propagation splits the batch, and
  // microbatches too).
  Reorder reorder(meshSymbol, zigzag);
  OpBuilder builder(function.getContext());
  for (BlockArgument arg : data) {
    setInsertionPoint(builder, arg);
    auto sharding = function.getArgAttrOfType<dist::ShardingAttr>(
        arg.getArgNumber(), dist::DistDialect::kShardingAttrName);
    SmallVector<OpOperand *> uses =
        llvm::map_to_vector(arg.getUses(), [](OpOperand &use) { return &use; });
    Value stored = reorder.toZigzag(builder, arg, 1, sharding.getDims()[1]);
    for (OpOperand *use : uses)
      use->set(stored);
  }
  Permuter permuter(reorder, length);
  for (PermutedUse use : order.uses)
    use.use->set(permuter.get(use.use->get(), use.dim));
  for (SequenceOrderOpInterface op : order.positionComparers)
    op.setZigzagOrder(zigzag);
  Operation *ret = function.getBody().front().getTerminator();
  builder.setInsertionPoint(ret);
  for (auto [index, dim] : order.results)
    ret->setOperand(index,
                    reorder.fromZigzag(builder, ret->getOperand(index), dim));
}

void ZigzagContextPass::runOnOperation() {
  ModuleOp module = getOperation();
  for (dist::MeshOp mesh : module.getOps<dist::MeshOp>()) {
    std::optional<int64_t> cp = mesh.getAxisSize("cp");
    if (!cp || *cp < 2)
      continue;
    for (func::FuncOp function : module.getOps<func::FuncOp>())
      if (!function.isExternal())
        balance(function, mesh, *cp);
  }
}
