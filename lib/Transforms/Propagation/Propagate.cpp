//===- Propagate.cpp - Sharding propagation (--tessera-propagate) ---------===//
//
// Moves shardings from the annotated values to every value along the factors
// of each op's sharding rule, forward and backward to a fixed point, in rounds
// of dim priorities. See Passes.td for the user-facing contract.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace tessera {
#define GEN_PASS_DEF_PROPAGATEPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-propagate"

using namespace mlir;
using namespace tessera;

namespace {

enum class Mode { Aggressive, Conservative };

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

/// Propagates within one function over one mesh.
class FunctionPropagator {
public:
  /// With `machine`, conflicts weigh resharding by its time on the machine
  /// rather than by its bytes.
  FunctionPropagator(func::FuncOp function, MeshShape mesh, Mode mode,
                     bool explain, const MachineModel *machine)
      : function(function), mesh(std::move(mesh)), mode(mode), explain(explain),
        machine(machine) {}

  /// Fails when a result that updates an argument is annotated otherwise.
  LogicalResult run();

private:
  void collectSeeds();
  void applySeeds(std::optional<int64_t> round);
  bool propagate(Operation *op);
  void resolveSharedAxes(Operation *op, FactorAxes &chosen,
                         ArrayRef<FactorAxes> projected,
                         ArrayRef<Value> tensors);
  AxisList resolve(Operation *op, int64_t factor,
                   ArrayRef<std::pair<int64_t, AxisList>> candidates,
                   ArrayRef<Value> tensors, int64_t &winner);
  TensorSharding &getState(Value value);
  LogicalResult writeBack();
  std::string describe(Operation *op, int64_t tensor) const;
  std::string describeOrigin(Value value);

  func::FuncOp function;
  MeshShape mesh;
  Mode mode;
  bool explain;
  const MachineModel *machine;

  SmallVector<Seed> seeds;
  llvm::MapVector<Value, TensorSharding> state;
  /// Per value and dim, the annotation its axes came from (empty if none).
  DenseMap<Value, SmallVector<std::string>> origins;
  /// Conflicts seen, reported once per op and factor in explain mode.
  llvm::MapVector<std::pair<Operation *, int64_t>, std::string> conflicts;
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
    origins[seed.value].assign(current.getRank(), seed.origin);
  }
}

std::string FunctionPropagator::describe(Operation *op, int64_t tensor) const {
  int64_t numOperands = op->getNumOperands();
  if (tensor < numOperands)
    return "operand #" + std::to_string(tensor);
  return "result #" + std::to_string(tensor - numOperands);
}

AxisList
FunctionPropagator::resolve(Operation *op, int64_t factor,
                            ArrayRef<std::pair<int64_t, AxisList>> candidates,
                            ArrayRef<Value> tensors, int64_t &winner) {
  winner = -1;
  if (candidates.empty())
    return {};
  // Compatible candidates are prefixes of the longest one.
  const auto *longest =
      llvm::max_element(candidates, [](const auto &a, const auto &b) {
        return a.second.size() < b.second.size();
      });
  if (llvm::all_of(candidates, [&](const auto &candidate) {
        return isAxesPrefix(candidate.second, longest->second);
      })) {
    winner = longest->first;
    return longest->second;
  }

  AxisList chosen;
  if (mode == Mode::Conservative) {
    chosen = candidates.front().second;
    for (const auto &candidate : candidates.drop_front()) {
      size_t n = 0;
      while (n < chosen.size() && n < candidate.second.size() &&
             chosen[n] == candidate.second[n])
        ++n;
      chosen.resize(n);
    }
    winner = chosen.empty() ? -1 : candidates.front().first;
  } else {
    // Keep the candidate that leaves the fewest bytes to reshard: the
    // tensors whose own candidate is incompatible with it. On a machine,
    // the fastest: each such tensor is gathered over its axes the candidate
    // lacks, at the bandwidth of the links those axes cross.
    double bestCost = std::numeric_limits<double>::infinity();
    for (const auto &candidate : candidates) {
      double cost = 0;
      for (const auto &other : candidates) {
        if (isAxesPrefix(other.second, candidate.second) ||
            isAxesPrefix(candidate.second, other.second))
          continue;
        double bytes = getTensorBytes(tensors[other.first].getType());
        if (!machine) {
          cost += bytes;
          continue;
        }
        AxisList gathered;
        for (StringAttr axis : other.second)
          if (!llvm::is_contained(candidate.second, axis))
            gathered.push_back(axis);
        cost += getCollectiveSeconds(*machine, CollectiveKind::AllGather, bytes,
                                     mesh.getDeviceGroup(gathered));
      }
      if (cost < bestCost ||
          (cost == bestCost && candidate.second.size() > chosen.size())) {
        bestCost = cost;
        chosen = candidate.second;
        winner = candidate.first;
      }
    }
  }

  if (explain && !conflicts.count({op, factor})) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "conflict on factor " << ShardingRule::getFactorName(factor) << ": ";
    llvm::interleaveComma(candidates, os, [&](const auto &candidate) {
      os << describe(op, candidate.first) << " wants "
         << formatAxes(candidate.second);
    });
    os << "; kept " << formatAxes(chosen);
    if (winner >= 0)
      os << " of " << describe(op, winner);
    os << (mode == Mode::Conservative ? " (conservative: common prefix)"
           : machine ? " (fastest to reshard on " + machine->name + ")"
                     : std::string(" (fewest bytes to reshard)"));
    conflicts[{op, factor}] = text;
  }
  return chosen;
}

/// An axis splits at most one factor of an op. When several factors want
/// one, the factor whose tensors already hold the most bytes split over it
/// keeps it (the others' tensors are the ones to reshard); ties go to the
/// first factor. A factor that loses an axis loses the axes after it too.
void FunctionPropagator::resolveSharedAxes(Operation *op, FactorAxes &chosen,
                                           ArrayRef<FactorAxes> projected,
                                           ArrayRef<Value> tensors) {
  auto weight = [&](int64_t factor, StringAttr axis) {
    int64_t bytes = 0;
    for (auto [index, view] : llvm::enumerate(projected))
      if (llvm::is_contained(view[factor], axis))
        bytes += getTensorBytes(tensors[index].getType());
    return bytes;
  };
  for (bool changed = true; changed;) {
    changed = false;
    llvm::MapVector<StringAttr, SmallVector<int64_t>> claims;
    for (auto [factor, axes] : llvm::enumerate(chosen))
      for (StringAttr axis : axes)
        claims[axis].push_back(factor);
    for (auto &[axis, factors] : claims) {
      if (factors.size() < 2)
        continue;
      int64_t keeper = factors.front();
      for (int64_t factor : factors)
        if (weight(factor, axis) > weight(keeper, axis))
          keeper = factor;
      for (int64_t factor : factors) {
        if (factor == keeper)
          continue;
        AxisList &axes = chosen[factor];
        axes.erase(llvm::find(axes, axis), axes.end());
        if (explain && !conflicts.count({op, factor}))
          conflicts[{op, factor}] =
              "conflict on axis \"" + axis.getValue().str() + "\": factor " +
              ShardingRule::getFactorName(keeper) + " keeps it, factor " +
              ShardingRule::getFactorName(factor) +
              " gives it up (fewer bytes to reshard)";
      }
      changed = true;
      break;
    }
  }
}

bool FunctionPropagator::propagate(Operation *op) {
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
    return false;
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
    SmallVector<std::pair<int64_t, AxisList>> candidates;
    for (auto [index, view] : llvm::enumerate(projected))
      if (!view[factor].empty())
        candidates.push_back({static_cast<int64_t>(index), view[factor]});
    chosen[factor] = resolve(op, factor, candidates, tensors, winners[factor]);
  }
  resolveSharedAxes(op, chosen, projected, tensors);

  bool changed = false;
  for (auto [index, value] : llvm::enumerate(tensors)) {
    SmallVector<AxisList> wanted =
        projectFromFactors(rule, *factorsOf[index], chosen, mesh);
    TensorSharding &current = getState(value);
    for (auto [dim, dimFactors] : llvm::enumerate(*factorsOf[index])) {
      DimSharding &have = current.dims[dim];
      if (!have.isOpen || wanted[dim].size() <= have.axes.size() ||
          !isAxesPrefix(have.axes, wanted[dim]))
        continue;
      AxisList extension;
      for (StringAttr axis :
           ArrayRef<StringAttr>(wanted[dim]).drop_front(have.axes.size())) {
        if (current.usesAxis(axis))
          break;
        extension.push_back(axis);
      }
      if (extension.empty())
        continue;
      llvm::append_range(have.axes, extension);
      changed = true;
      // The new axes come from the annotation that reached the winning
      // tensor's dim of the same factor.
      for (int64_t factor : dimFactors) {
        int64_t winner = winners[factor];
        if (winner < 0 ||
            !llvm::is_contained(chosen[factor], extension.front()))
          continue;
        SmallVector<std::string> from = origins.lookup(tensors[winner]);
        for (auto [winnerDim, winnerFactors] :
             llvm::enumerate(*factorsOf[winner]))
          if (llvm::is_contained(winnerFactors, factor) &&
              winnerDim < from.size()) {
            SmallVector<std::string> &to = origins[value];
            to.resize(current.getRank());
            to[dim] = from[winnerDim];
          }
        break;
      }
    }
  }
  return changed;
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
  function.walk([&](Operation *op) {
    if (isa<dist::ShardingConstraintOp, func::FuncOp>(op) ||
        op->getNumResults() == 0 ||
        !llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
      return;
    SmallVector<Attribute> shardings;
    for (Value result : op->getResults())
      shardings.push_back(getState(result).getClosed().toAttr(mesh.getName()));
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
    if (!given)
      function.setResultAttr(
          index, attrName,
          getState(operand).getClosed().toAttr(mesh.getName()));
  }
  for (auto &[key, text] : conflicts)
    key.first->emitRemark() << text;
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

LogicalResult FunctionPropagator::run() {
  collectSeeds();
  SmallVector<Operation *> ops;
  function.walk([&](Operation *op) {
    if (op == function.getOperation() || isa<func::ReturnOp>(op))
      return;
    if (isa<ShardingRuleOpInterface, dist::ShardingConstraintOp>(op)) {
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

  for (std::optional<int64_t> round : rounds) {
    applySeeds(round);
    // Every change appends an axis, so this terminates; the bound is a guard.
    for (int iteration = 0; iteration < 1000; ++iteration) {
      bool changed = false;
      for (Operation *op : ops)
        changed |= propagate(op);
      for (Operation *op : llvm::reverse(ops))
        changed |= propagate(op);
      if (!changed)
        break;
    }
  }
  return writeBack();
}

namespace {
struct PropagatePass : tessera::impl::PropagatePassBase<PropagatePass> {
  using PropagatePassBase::PropagatePassBase;

  void runOnOperation() override {
    if (mode != "aggressive" && mode != "conservative") {
      // At the location only: a note printing the whole module helps no one.
      emitError(getOperation().getLoc(), "unknown propagation mode '")
          << mode << "', expected aggressive or conservative";
      return signalPassFailure();
    }
    Mode parsedMode =
        mode == "aggressive" ? Mode::Aggressive : Mode::Conservative;
    std::optional<MachineModel> machineModel;
    if (!machine.empty()) {
      llvm::Expected<MachineModel> loaded =
          loadMachineModel(machine, TESSERA_MACHINES_DIR);
      if (!loaded) {
        emitError(getOperation().getLoc(), "cannot load machine '")
            << machine << "': " << llvm::toString(loaded.takeError());
        return signalPassFailure();
      }
      machineModel = std::move(*loaded);
    }
    WalkResult result = getOperation().walk([&](func::FuncOp function) {
      if (function.isExternal())
        return WalkResult::advance();
      FailureOr<dist::MeshOp> mesh = getFunctionMesh(function);
      if (failed(mesh))
        return WalkResult::interrupt();
      if (*mesh && failed(FunctionPropagator(
                              function, MeshShape(*mesh), parsedMode, explain,
                              machineModel ? &*machineModel : nullptr)
                              .run()))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
