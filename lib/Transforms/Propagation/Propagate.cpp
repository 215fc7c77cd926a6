//===- Propagate.cpp - Sharding propagation (--tessera-propagate) ---------===//
//
// Moves shardings from the annotated values to every value along the factors
// of each op's sharding rule, forward and backward to a fixed point, in rounds
// of dim priorities, in waves whose outcome does not depend on the order of
// the ops. A worklist re-queues the users and the producer of every value
// that changes; how a factor's conflicts are settled is a
// FactorPropagation strategy (lib/Analysis). See Passes.td for the
// user-facing contract.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/FactorPropagation.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

namespace tessera {
#define GEN_PASS_DEF_PROPAGATEPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-propagate"

using namespace mlir;
using namespace tessera;

namespace {

static std::string formatLoc(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

/// A user annotation that seeds propagation.
struct Seed {
  Value value;
  TensorSharding sharding;
  std::string origin;
};

/// What `op`'s visit proposes for one open dim of one of its tensors:
/// `axes` extend the dim's, and come from the annotation `origin`.
struct Extension {
  Operation *op;
  Value value;
  int64_t dim;
  AxisList axes;
  std::string origin;
};

/// The strategy of `mode`; aggressive conflicts are priced in seconds on
/// `machine` when there is one, in bytes otherwise.
static std::unique_ptr<FactorPropagation>
createFactorPropagation(PropagationMode mode, const MeshShape &mesh,
                        const MachineModel *machine) {
  switch (mode) {
  case PropagationMode::Conservative:
    return std::make_unique<ConservativeFactorPropagation>();
  case PropagationMode::Aggressive:
    if (machine)
      return std::make_unique<MachineFactorPropagation>(mesh, *machine);
    return std::make_unique<AggressiveFactorPropagation>();
  }
  llvm_unreachable("unknown propagation mode");
}

/// Propagates within one function over one mesh.
class FunctionPropagator {
public:
  /// With `machine`, conflicts weigh resharding by its time on the machine
  /// rather than by its bytes.
  FunctionPropagator(func::FuncOp function, MeshShape mesh,
                     PropagationMode mode, bool explain,
                     const MachineModel *machine)
      : function(function), mesh(std::move(mesh)), explain(explain),
        strategy(createFactorPropagation(mode, this->mesh, machine)) {}

  /// Fails when a result that updates an argument is annotated otherwise.
  LogicalResult run();

private:
  void collectSeeds();
  void applySeeds(std::optional<int64_t> round);
  /// Propagates through `op` once: appends the extensions of its tensors'
  /// dims it proposes (of its results alone when `forwardOnly`), and the
  /// values whose flat axes it set.
  void propagate(Operation *op, bool forwardOnly,
                 SmallVectorImpl<Extension> &extensions,
                 SmallVectorImpl<Value> &changed);
  /// Applies a wave's extensions, settling those that disagree; appends the
  /// values whose sharding grew.
  void applyExtensions(ArrayRef<Extension> extensions,
                       SmallVectorImpl<Value> &changed);
  /// Explains, once per value and dim, proposals that were not kept.
  void recordSettlement(Value value, int64_t dim,
                        ArrayRef<const Extension *> candidates,
                        ArrayRef<StringAttr> kept);
  /// Propagates through the queued ops until no sharding grows.
  void propagateToFixedPoint();
  /// Queues the ops that produce or use `value`.
  void enqueueNeighbours(Value value);
  void resolveSharedAxes(Operation *op, FactorAxes &chosen,
                         ArrayRef<FactorAxes> projected,
                         ArrayRef<Value> tensors);
  void recordConflict(Operation *op, int64_t factor,
                      ArrayRef<FactorCandidate> candidates,
                      const FactorResolution &resolution);
  TensorSharding &getState(Value value);
  LogicalResult writeBack();
  std::string describe(Operation *op, int64_t tensor) const;
  std::string describeOrigin(Value value);

  func::FuncOp function;
  MeshShape mesh;
  bool explain;
  /// Refers to `mesh`, so it is built after it.
  std::unique_ptr<FactorPropagation> strategy;

  SmallVector<Seed> seeds;
  /// The ops with a sharding rule, in program order, and the worklist over
  /// them.
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int> opIndex;
  llvm::BitVector queued;
  llvm::MapVector<Value, TensorSharding> state;
  /// Per value and dim, the annotation its axes came from (empty if none).
  DenseMap<Value, SmallVector<std::string>> origins;
  /// Conflicts seen, reported once per op and factor in explain mode.
  llvm::MapVector<std::pair<Operation *, int64_t>, std::string> conflicts;
  /// Disagreeing proposals settled between ops, once per value and dim.
  llvm::MapVector<std::pair<Value, int64_t>, std::string> settlements;
};

} // namespace

TensorSharding &FunctionPropagator::getState(Value value) {
  auto it = state.find(value);
  if (it != state.end())
    return it->second;
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  return state.insert({value, TensorSharding::getOpen(rank)}).first->second;
}

void FunctionPropagator::collectSeeds() {
  StringRef name = function.getSymName();
  for (BlockArgument arg : function.getArguments())
    if (auto attr = function.getArgAttrOfType<dist::ShardingAttr>(
            arg.getArgNumber(), dist::DistDialect::kShardingAttrName))
      seeds.push_back({arg, TensorSharding::fromAttr(attr),
                       "the annotation of argument #" +
                           std::to_string(arg.getArgNumber()) + " of @" +
                           name.str()});
  auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    auto attr = function.getResultAttrOfType<dist::ShardingAttr>(
        index, dist::DistDialect::kShardingAttrName);
    // A value annotated twice keeps its first annotation; the partitioner
    // reshards it at the return.
    if (!attr || llvm::any_of(seeds, [&, operand = operand](const Seed &seed) {
          return seed.value == operand;
        }))
      continue;
    seeds.push_back({operand, TensorSharding::fromAttr(attr),
                     "the annotation of result #" + std::to_string(index) +
                         " of @" + name.str()});
  }
  function.walk([&](dist::ShardingConstraintOp constraint) {
    seeds.push_back(
        {constraint.getResult(),
         TensorSharding::fromAttr(constraint.getSharding()),
         "the dist.sharding_constraint at " + formatLoc(constraint.getLoc())});
  });
}

/// Applies the dims of every seed whose priority is at most `round` (all
/// when `round` is empty); dims without a priority apply in every round.
/// User annotations overwrite whatever propagation inferred for those dims.
void FunctionPropagator::applySeeds(std::optional<int64_t> round) {
  for (const Seed &seed : seeds) {
    TensorSharding &current = getState(seed.value);
    for (auto [dim, user] : llvm::enumerate(seed.sharding.dims))
      if (!round || !user.priority || *user.priority <= *round)
        current.dims[dim] = user;
    current.replicated = seed.sharding.replicated;
    current.unreduced = seed.sharding.unreduced;
    current.flat = seed.sharding.flat;
    origins[seed.value].assign(current.getRank(), seed.origin);
  }
}

std::string FunctionPropagator::describe(Operation *op, int64_t tensor) const {
  int64_t numOperands = op->getNumOperands();
  if (tensor < numOperands)
    return "operand #" + std::to_string(tensor);
  return "result #" + std::to_string(tensor - numOperands);
}

/// Explains a conflict the first time an op's factor has one: the op is
/// visited again as its tensors grow, but the first competition is the one
/// that decided.
void FunctionPropagator::recordConflict(Operation *op, int64_t factor,
                                        ArrayRef<FactorCandidate> candidates,
                                        const FactorResolution &resolution) {
  LLVM_DEBUG({
    llvm::dbgs() << "  conflict on factor "
                 << ShardingRule::getFactorName(factor) << ": kept "
                 << formatAxes(resolution.axes) << " (" << strategy->getReason()
                 << ")\n";
  });
  if (!explain || conflicts.count({op, factor}))
    return;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "conflict on factor " << ShardingRule::getFactorName(factor) << ": ";
  llvm::interleaveComma(candidates, os, [&](const FactorCandidate &candidate) {
    os << describe(op, candidate.tensor) << " wants "
       << formatAxes(candidate.axes);
  });
  os << "; kept " << formatAxes(resolution.axes);
  if (resolution.winner >= 0)
    os << " of " << describe(op, resolution.winner);
  os << " (" << strategy->getReason() << ")";
  conflicts[{op, factor}] = text;
}

/// Settles the axes that several factors chose (see resolveAxisClaims).
void FunctionPropagator::resolveSharedAxes(Operation *op, FactorAxes &chosen,
                                           ArrayRef<FactorAxes> projected,
                                           ArrayRef<Value> tensors) {
  SmallVector<int64_t> bytes;
  for (Value tensor : tensors)
    bytes.push_back(getTensorBytes(tensor.getType()));
  for (const AxisClaimLoss &loss :
       resolveAxisClaims(chosen, projected, bytes)) {
    LLVM_DEBUG(llvm::dbgs()
               << "  axis \"" << loss.axis.getValue() << "\": factor "
               << ShardingRule::getFactorName(loss.keeper)
               << " keeps it, factor "
               << ShardingRule::getFactorName(loss.loser) << " gives it up\n");
    if (explain && !conflicts.count({op, loss.loser}))
      conflicts[{op, loss.loser}] =
          "conflict on axis \"" + loss.axis.getValue().str() + "\": factor " +
          ShardingRule::getFactorName(loss.keeper) + " keeps it, factor " +
          ShardingRule::getFactorName(loss.loser) +
          " gives it up (fewer bytes to reshard)";
  }
}

/// A pointwise op computes on flat pieces where its operands are stored
/// flat: each result takes the flat axes of the operands laid out as it is
/// (same factors, all of them parallel), when those that are flat agree.
/// Those that are not are cut to the flat layout by the partitioner, as an
/// unsplit operand is sliced to a split one's dims. Flat layouts only move
/// forward: a constraint's result keeps its own (it is a seed).
static void propagateFlat(ShardingRuleOpInterface op, const ShardingRule &rule,
                          function_ref<TensorSharding &(Value)> getState,
                          SmallVectorImpl<Value> &changed) {
  if (!rule.hasOnlyParallelFactors())
    return;
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    std::optional<AxisList> flat;
    for (auto [operandIndex, operand] : llvm::enumerate(op->getOperands())) {
      if (rule.getOperandFactors()[operandIndex] !=
              rule.getResultFactors()[index] ||
          cast<ShapedType>(operand.getType()).getShape() !=
              cast<ShapedType>(result.getType()).getShape())
        continue;
      const AxisList &axes = getState(operand).flat;
      if (axes.empty())
        continue;
      if (flat && *flat != axes)
        return;
      flat = axes;
    }
    // A result that already uses a flat axis otherwise (annotated
    // replicated over it, say) is computed whole.
    TensorSharding &current = getState(result);
    if (!flat || current.flat == *flat ||
        llvm::any_of(*flat,
                     [&](StringAttr axis) { return current.usesAxis(axis); }))
      continue;
    current.flat = *flat;
    changed.push_back(result);
  }
}

void FunctionPropagator::propagate(Operation *op, bool forwardOnly,
                                   SmallVectorImpl<Extension> &extensions,
                                   SmallVectorImpl<Value> &changed) {
  ShardingRule rule;
  if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op)) {
    rule = ruleOp.getShardingRule();
  } else if (isa<dist::ShardingConstraintOp>(op)) {
    rule =
        ShardingRuleBuilder(op->getOperandTypes(), op->getResultTypes())
            .addPointwise(
                cast<RankedTensorType>(op->getResult(0).getType()).getShape())
            .build();
  } else {
    return;
  }

  SmallVector<Value> tensors(op->getOperands());
  llvm::append_range(tensors, op->getResults());
  SmallVector<const TensorFactors *> factorsOf;
  for (const TensorFactors &dims : rule.getOperandFactors())
    factorsOf.push_back(&dims);
  for (const TensorFactors &dims : rule.getResultFactors())
    factorsOf.push_back(&dims);

  // Each tensor's view of each factor.
  SmallVector<FactorAxes> projected;
  for (auto [index, value] : llvm::enumerate(tensors))
    projected.push_back(projectToFactors(rule, *factorsOf[index],
                                         getState(value).getDimAxes(), mesh));

  FactorAxes chosen(rule.getNumFactors());
  SmallVector<int64_t> winners(rule.getNumFactors(), -1);
  for (int64_t factor = 0; factor < rule.getNumFactors(); ++factor) {
    if (rule.getFactors()[factor].kind == FactorKind::NeedReplication)
      continue;
    SmallVector<FactorCandidate> candidates;
    for (auto [index, view] : llvm::enumerate(projected))
      if (!view[factor].empty())
        candidates.push_back({static_cast<int64_t>(index), view[factor],
                              getTensorBytes(tensors[index].getType())});
    FactorResolution resolution = strategy->resolve(candidates);
    if (resolution.isConflict)
      recordConflict(op, factor, candidates, resolution);
    chosen[factor] = std::move(resolution.axes);
    winners[factor] = resolution.winner;
  }
  resolveSharedAxes(op, chosen, projected, tensors);
  if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op))
    propagateFlat(
        ruleOp, rule,
        [&](Value value) -> TensorSharding & { return getState(value); },
        changed);

  for (auto [index, value] : llvm::enumerate(tensors)) {
    if (forwardOnly && static_cast<int64_t>(index) < op->getNumOperands())
      continue;
    SmallVector<AxisList> wanted =
        projectFromFactors(rule, *factorsOf[index], chosen, mesh);
    const TensorSharding &current = getState(value);
    for (auto [dim, dimFactors] : llvm::enumerate(*factorsOf[index])) {
      const DimSharding &have = current.dims[dim];
      if (!have.isOpen || wanted[dim].size() <= have.axes.size() ||
          !isAxesPrefix(have.axes, wanted[dim]))
        continue;
      Extension extension{op, value, static_cast<int64_t>(dim), have.axes, ""};
      for (StringAttr axis :
           ArrayRef<StringAttr>(wanted[dim]).drop_front(have.axes.size())) {
        if (current.usesAxis(axis))
          break;
        extension.axes.push_back(axis);
      }
      if (extension.axes.size() == have.axes.size())
        continue;
      LLVM_DEBUG(llvm::dbgs()
                 << "  " << describe(op, index) << " dim " << dim << " wants "
                 << formatAxes(extension.axes) << "\n");
      // The new axes come from the annotation that reached the winning
      // tensor's dim of the same factor.
      StringAttr first = extension.axes[have.axes.size()];
      for (int64_t factor : dimFactors) {
        int64_t winner = winners[factor];
        if (winner < 0 || !llvm::is_contained(chosen[factor], first))
          continue;
        SmallVector<std::string> from = origins.lookup(tensors[winner]);
        for (auto [winnerDim, winnerFactors] :
             llvm::enumerate(*factorsOf[winner]))
          if (llvm::is_contained(winnerFactors, factor) &&
              winnerDim < from.size())
            extension.origin = from[winnerDim];
        break;
      }
      extensions.push_back(std::move(extension));
    }
  }
}

/// Every op of a wave read the shardings as the wave found them, so the
/// outcome cannot depend on their order. Per value, dims settle from the
/// first: of the axes proposed for a dim, the proposal that most proposals
/// agree with (are prefixes of) wins, then the one with more axes, then the
/// one whose axes come first in the mesh; axes the value already uses are
/// dropped.
void FunctionPropagator::applyExtensions(ArrayRef<Extension> extensions,
                                         SmallVectorImpl<Value> &changed) {
  llvm::MapVector<Value, SmallVector<const Extension *>> byValue;
  for (const Extension &extension : extensions)
    byValue[extension.value].push_back(&extension);
  auto getAxisIndex = [&](StringAttr axis) {
    return llvm::find(mesh.getAxes(), axis) - mesh.getAxes().begin();
  };
  auto comesFirst = [&](const AxisList &lhs, const AxisList &rhs) {
    return std::lexicographical_compare(
        lhs.begin(), lhs.end(), rhs.begin(), rhs.end(),
        [&](StringAttr a, StringAttr b) {
          return getAxisIndex(a) < getAxisIndex(b);
        });
  };
  for (auto &[value, proposed] : byValue) {
    TensorSharding &current = getState(value);
    bool grew = false;
    for (int64_t dim = 0; dim < current.getRank(); ++dim) {
      SmallVector<const Extension *> candidates;
      for (const Extension *extension : proposed)
        if (extension->dim == dim)
          candidates.push_back(extension);
      if (candidates.empty())
        continue;
      auto getVotes = [&](const Extension *candidate) {
        return llvm::count_if(candidates, [&](const Extension *other) {
          return isAxesPrefix(other->axes, candidate->axes);
        });
      };
      const Extension *best = candidates.front();
      for (const Extension *candidate : llvm::drop_begin(candidates)) {
        auto votes = getVotes(candidate), bestVotes = getVotes(best);
        if (votes != bestVotes ? votes > bestVotes
            : candidate->axes.size() != best->axes.size()
                ? candidate->axes.size() > best->axes.size()
                : comesFirst(candidate->axes, best->axes))
          best = candidate;
      }
      DimSharding &have = current.dims[dim];
      AxisList extension;
      if (isAxesPrefix(have.axes, best->axes))
        for (StringAttr axis : llvm::drop_begin(best->axes, have.axes.size())) {
          if (current.usesAxis(axis))
            break;
          extension.push_back(axis);
        }
      if (explain) {
        AxisList kept = have.axes;
        llvm::append_range(kept, extension);
        recordSettlement(value, dim, candidates, kept);
      }
      if (extension.empty())
        continue;
      llvm::append_range(have.axes, extension);
      LLVM_DEBUG(llvm::dbgs()
                 << "  dim " << dim << " += " << formatAxes(extension) << "\n");
      if (!best->origin.empty()) {
        SmallVector<std::string> &to = origins[value];
        to.resize(current.getRank());
        to[dim] = best->origin;
      }
      grew = true;
    }
    if (grew)
      changed.push_back(value);
  }
}

void FunctionPropagator::recordSettlement(
    Value value, int64_t dim, ArrayRef<const Extension *> candidates,
    ArrayRef<StringAttr> kept) {
  if (settlements.count({value, dim}) ||
      llvm::all_of(candidates, [&](const Extension *candidate) {
        return isAxesPrefix(candidate->axes, kept);
      }))
    return;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "dim " << dim << ": ";
  llvm::interleaveComma(candidates, os, [&](const Extension *candidate) {
    os << formatLoc(candidate->op->getLoc()) << " wants "
       << formatAxes(candidate->axes);
  });
  os << "; kept " << formatAxes(kept)
     << " (the proposal most agree with, then more axes, then the mesh's "
        "order; no axis an earlier dim has)";
  settlements[{value, dim}] = text;
}

/// The partial-sum axes that every reader of `value` keeps: a value read
/// only by sharding constraints that leave the same axes unreduced (ZeRO-1's
/// gradients, summed over the microbatches before they are reduce-scattered)
/// or store it flat (ZeRO-2's flat gradients, scattered there over the flat
/// axes, the other sums, the microbatches', completed on the piece), or by
/// linear ops whose results keep them, stays partial over them, so that the
/// partitioner does not complete the sum at the producer.
static AxisList getKeptPartialAxes(Value value, ArrayRef<StringAttr> meshAxes,
                                   DenseMap<Value, AxisList> &memo) {
  if (auto it = memo.find(value); it != memo.end())
    return it->second;
  std::optional<AxisList> kept;
  for (Operation *user : value.getUsers()) {
    AxisList axes;
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(user)) {
      // Storing a value flat scatters its sums over the flat axes.
      TensorSharding wanted =
          TensorSharding::fromAttr(constraint.getSharding());
      axes = wanted.flat.empty() ? wanted.unreduced : AxisList(meshAxes);
    } else if (auto rule = dyn_cast<ShardingRuleOpInterface>(user);
               rule && rule.isLinear() && user->getNumResults() == 1) {
      axes = getKeptPartialAxes(user->getResult(0), meshAxes, memo);
    }
    if (axes.empty() || (kept && *kept != axes)) {
      kept = AxisList();
      break;
    }
    kept = std::move(axes);
  }
  return memo[value] = kept.value_or(AxisList());
}

LogicalResult FunctionPropagator::writeBack() {
  MLIRContext *context = function.getContext();
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  auto format = [&](Value value) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << getState(value).getClosed().toAttr(mesh.getName()) << " "
       << describeOrigin(value);
    return text;
  };

  for (BlockArgument arg : function.getArguments()) {
    if (!isa<RankedTensorType>(arg.getType()))
      continue;
    function.setArgAttr(arg.getArgNumber(), attrName,
                        getState(arg).getClosed().toAttr(mesh.getName()));
    if (explain)
      function.emitRemark()
          << "argument #" << arg.getArgNumber() << ": " << format(arg);
  }
  DenseMap<Value, AxisList> keptPartial;
  function.walk([&](Operation *op) {
    // A constraint's open dims take what propagation gave them (its closed
    // dims it gave as written), so that the partitioner reshards only what
    // the user closed.
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op)) {
      if (llvm::any_of(
              constraint.getSharding().getDims(),
              [](dist::DimShardingAttr dim) { return dim.getIsOpen(); }))
        constraint.setShardingAttr(
            cast<dist::ShardingAttr>(getState(constraint.getResult())
                                         .getClosed()
                                         .toAttr(mesh.getName())));
      return;
    }
    if (isa<func::FuncOp>(op) || op->getNumResults() == 0 ||
        !llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
      return;
    SmallVector<Attribute> shardings;
    for (Value result : op->getResults()) {
      TensorSharding sharding = getState(result).getClosed();
      // Kept partial over the axes its users keep partial, but those that
      // already split or replicate it: a value is never both split and
      // partial over one axis (a weight's gradient split over tp, stored
      // flat over every axis by ZeRO-3, is partial over dp alone).
      if (sharding.flat.empty()) {
        sharding.unreduced.clear();
        AxisList kept = getKeptPartialAxes(result, mesh.getAxes(), keptPartial);
        for (StringAttr axis : kept)
          if (!sharding.usesAxis(axis))
            sharding.unreduced.push_back(axis);
      }
      shardings.push_back(sharding.toAttr(mesh.getName()));
    }
    op->setAttr(attrName, ArrayAttr::get(context, shardings));
    if (!explain)
      return;
    for (auto [index, result] : llvm::enumerate(op->getResults()))
      op->emitRemark() << "result #" << index << ": " << format(result);
  });
  auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    if (!isa<RankedTensorType>(operand.getType()))
      continue;
    Attribute given = function.getResultAttr(index, attrName);
    // New state (a train step's parameters and optimizer state) is laid out
    // as the argument it replaces, whatever sharding computed it: the
    // partitioner then gathers or slices it back.
    if (auto updated = function.getResultAttrOfType<IntegerAttr>(
            index, nn::kUpdatesAttrName)) {
      Attribute argument = getState(function.getArgument(updated.getInt()))
                               .getClosed()
                               .toAttr(mesh.getName());
      if (given && given != argument)
        return function.emitError("result #")
               << index << " updates argument #" << updated.getInt()
               << " but is annotated " << given << " while the argument is "
               << argument;
      function.setResultAttr(index, attrName, argument);
      continue;
    }
    if (!given) {
      function.setResultAttr(
          index, attrName,
          getState(operand).getClosed().toAttr(mesh.getName()));
      continue;
    }
    // An annotation's open dims take the axes the value has there beyond
    // the annotation's own (as far as no other part of the annotation uses
    // them), so that the value leaves as it is rather than resharded.
    auto annotation = dyn_cast<dist::ShardingAttr>(given);
    if (!annotation)
      continue;
    TensorSharding result = TensorSharding::fromAttr(annotation);
    const TensorSharding &value = getState(operand);
    if (value.getRank() != result.getRank() ||
        llvm::none_of(result.dims,
                      [](const DimSharding &dim) { return dim.isOpen; }))
      continue;
    for (int64_t dim = 0; dim < result.getRank(); ++dim) {
      DimSharding &want = result.dims[dim];
      const AxisList &have = value.dims[dim].axes;
      if (!want.isOpen || have.size() <= want.axes.size() ||
          !std::equal(want.axes.begin(), want.axes.end(), have.begin()))
        continue;
      for (StringAttr axis : llvm::drop_begin(have, want.axes.size())) {
        if (result.usesAxis(axis))
          break;
        want.axes.push_back(axis);
      }
    }
    function.setResultAttr(index, attrName,
                           result.getClosed().toAttr(mesh.getName()));
  }
  for (auto &[key, text] : conflicts)
    key.first->emitRemark() << text;
  for (auto &[key, text] : settlements) {
    auto [value, dim] = key;
    if (auto arg = dyn_cast<BlockArgument>(value))
      function.emitRemark() << "argument #" << arg.getArgNumber()
                            << " settled between ops on " << text;
    else
      value.getDefiningOp()->emitRemark()
          << "result #" << cast<OpResult>(value).getResultNumber()
          << " settled between ops on " << text;
  }
  return success();
}

/// "from X" when one annotation explains every dim, else "dim 0 from X, dim
/// 1 from Y" for the dims some annotation reached.
std::string FunctionPropagator::describeOrigin(Value value) {
  SmallVector<std::string> dims = origins.lookup(value);
  bool any =
      llvm::any_of(dims, [](const std::string &o) { return !o.empty(); });
  if (!any)
    return "from no annotation (replicated)";
  if (llvm::all_equal(dims) &&
      static_cast<int64_t>(dims.size()) == getState(value).getRank())
    return "from " + dims.front();
  std::string text;
  llvm::raw_string_ostream os(text);
  bool first = true;
  for (auto [dim, origin] : llvm::enumerate(dims)) {
    if (origin.empty())
      continue;
    os << (first ? "" : ", ") << "dim " << dim << " from " << origin;
    first = false;
  }
  return text;
}

void FunctionPropagator::enqueueNeighbours(Value value) {
  auto enqueue = [&](Operation *op) {
    auto it = opIndex.find(op);
    if (it != opIndex.end())
      queued.set(it->second);
  };
  if (Operation *producer = value.getDefiningOp())
    enqueue(producer);
  for (Operation *user : value.getUsers())
    enqueue(user);
}

/// Visits the queued ops in waves: each wave's ops read the shardings as
/// the wave found them, and their extensions apply after it
/// (applyExtensions), so that the outcome does not depend on the order of
/// the ops. The shardings first flow forward alone, from operands to
/// results, to a fixed point (the batch's split reaches the backward pass
/// through the forward activations before any gradient's annotation flows
/// back into them, as GSPMD's forward pass comes first), then in both
/// directions. An op is visited only when a tensor of it changed since its
/// last visit, for otherwise the visit would change nothing.
void FunctionPropagator::propagateToFixedPoint() {
  // Every change appends an axis to a dim, so each phase terminates; the
  // bound is a guard.
  int64_t maxWaves = static_cast<int64_t>(ops.size() + 1) *
                     static_cast<int64_t>(mesh.getAxes().size() + 1);
  llvm::BitVector touched = queued;
  SmallVector<int> visits;
  SmallVector<Extension> extensions;
  SmallVector<Value> changed;
  for (bool forwardOnly : {true, false}) {
    if (!forwardOnly)
      queued = touched;
    for (int64_t wave = 0; wave < maxWaves && queued.any(); ++wave) {
      visits.assign(queued.set_bits_begin(), queued.set_bits_end());
      queued.reset();
      LLVM_DEBUG(llvm::dbgs()
                 << (forwardOnly ? "forward " : "") << "wave " << wave << ": "
                 << visits.size() << " ops queued\n");
      extensions.clear();
      changed.clear();
      for (int index : visits) {
        Operation *op = ops[index];
        LLVM_DEBUG(llvm::dbgs() << "visit " << op->getName() << " at "
                                << formatLoc(op->getLoc()) << "\n");
        propagate(op, forwardOnly, extensions, changed);
      }
      applyExtensions(extensions, changed);
      for (Value value : changed) {
        LLVM_DEBUG(llvm::dbgs()
                   << "  now " << getState(value).toAttr(mesh.getName())
                   << "\n");
        enqueueNeighbours(value);
      }
      touched |= queued;
    }
  }
}

LogicalResult FunctionPropagator::run() {
  collectSeeds();
  function.walk([&](Operation *op) {
    if (op == function.getOperation() || isa<func::ReturnOp>(op))
      return;
    if (isa<ShardingRuleOpInterface, dist::ShardingConstraintOp>(op)) {
      opIndex[op] = ops.size();
      ops.push_back(op);
      return;
    }
    if (llvm::any_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>)) {
      op->emitWarning("op has no sharding rule; its results are replicated");
      for (Value result : op->getResults())
        if (auto type = dyn_cast<RankedTensorType>(result.getType()))
          state.insert({result, TensorSharding::getReplicated(type.getRank())});
    }
  });

  // Rounds of priorities, lowest first; one round when there are none.
  std::set<int64_t> priorities;
  for (const Seed &seed : seeds)
    for (const DimSharding &dim : seed.sharding.dims)
      if (dim.priority)
        priorities.insert(*dim.priority);
  SmallVector<std::optional<int64_t>> rounds(priorities.begin(),
                                             priorities.end());
  if (rounds.empty())
    rounds.push_back(std::nullopt);

  // The first round visits every op; a later one only those the seeds it
  // applies touch, as the others stand at the previous round's fixed point.
  queued.resize(ops.size(), true);
  for (std::optional<int64_t> round : rounds) {
    LLVM_DEBUG({
      llvm::dbgs() << "@" << function.getSymName() << ": round ";
      if (round)
        llvm::dbgs() << "p" << *round << "\n";
      else
        llvm::dbgs() << "without priorities\n";
    });
    applySeeds(round);
    for (const Seed &seed : seeds)
      enqueueNeighbours(seed.value);
    propagateToFixedPoint();
  }
  return writeBack();
}

namespace {
struct PropagatePass : tessera::impl::PropagatePassBase<PropagatePass> {
  using PropagatePassBase::PropagatePassBase;

  void runOnOperation() override {
    FailureOr<std::optional<MachineModel>> machineModel =
        loadOptionalMachine(getOperation(), machine);
    if (failed(machineModel))
      return signalPassFailure();
    const MachineModel *onMachine = *machineModel ? &**machineModel : nullptr;
    if (failed(forEachMeshFunction(
            getOperation(), [&](func::FuncOp function, dist::MeshOp mesh) {
              return FunctionPropagator(function, MeshShape(mesh), mode,
                                        explain, onMachine)
                  .run();
            })))
      signalPassFailure();
  }
};
} // namespace
