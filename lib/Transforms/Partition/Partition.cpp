//===- Partition.cpp - SPMD partitioning (--tessera-partition) ------------===//
//
// Rewrites each propagated function into the program of one device: local
// shapes everywhere and dist collectives wherever a producer's sharding
// differs from what its consumer's factor rule needs. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/OptimizerOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/FormatVariadic.h"

namespace tessera {
#define GEN_PASS_DEF_PARTITIONPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-partition"

using namespace mlir;
using namespace tessera;

namespace {

/// Partitions one function over one mesh.
class FunctionPartitioner {
public:
  FunctionPartitioner(func::FuncOp function, dist::MeshOp meshOp, bool explain,
                      const MachineModel *machine)
      : function(function), meshOp(meshOp), mesh(meshOp), explain(explain),
        machine(machine), builder(function.getContext()) {}

  LogicalResult run();

private:
  TensorSharding getSharding(Value value) const;
  RankedTensorType getLocalType(Operation *at, RankedTensorType global,
                                ArrayRef<AxisList> dimAxes);
  /// The local type of `global` under `sharding`, flat or not.
  RankedTensorType getLocalType(Operation *at, RankedTensorType global,
                                const TensorSharding &sharding);
  FailureOr<Value> reshard(Operation *user, const Twine &what, Value local,
                           const TensorSharding &to,
                           dist::ReductionKind kind = dist::ReductionKind::sum);
  FailureOr<Value> reshardDims(Operation *user, const Twine &what, Value local,
                               const TensorSharding &to,
                               dist::ReductionKind kind);
  FailureOr<Value> unflatten(Operation *user, Value local);
  FailureOr<Value> flatten(Operation *user, Value local,
                           const TensorSharding &to, dist::ReductionKind kind);
  bool isFlatPointwise(ShardingRuleOpInterface op, const ShardingRule &rule,
                       ArrayRef<TensorSharding> wanted);
  LogicalResult partitionFlatOp(ShardingRuleOpInterface op,
                                const ShardingRule &rule,
                                ArrayRef<TensorSharding> wanted);
  /// What resharding `value` (by its global type) from `from` to `to`
  /// costs, as reshard inserts it.
  ReshardCost priceReshard(Value value, const TensorSharding &from,
                           TensorSharding to) const;
  LogicalResult reshardResults(Operation *op, ArrayRef<TensorSharding> wanted,
                               dist::ReductionKind kind);
  FactorAxes chooseLayout(ShardingRuleOpInterface op, const ShardingRule &rule,
                          ArrayRef<TensorSharding> operandShardings,
                          ArrayRef<TensorSharding> wanted,
                          ArrayRef<StringAttr> carried);
  LogicalResult partitionRuleOp(ShardingRuleOpInterface op,
                                const ShardingRule &rule);
  LogicalResult partitionFlatReduction(ShardingRuleOpInterface op,
                                       TensorSharding piece,
                                       ArrayRef<TensorSharding> wanted);
  LogicalResult partitionReplicatedOp(Operation *op);
  /// This device's index in each group of mesh axes, at the builder's point.
  Value createAxisIndex(Location loc, ArrayRef<AxisList> groups);
  LogicalResult placeOffsetPiece(nn::OffsetOpInterface op,
                                 const AxisList &axes);
  LogicalResult placeRandomPiece(nn::RandomOpInterface op,
                                 ArrayRef<AxisList> resultDimAxes);

  func::FuncOp function;
  dist::MeshOp meshOp;
  MeshShape mesh;
  bool explain;
  /// Prices layouts in seconds on it; without one, in bytes sent.
  const MachineModel *machine;
  OpBuilder builder;

  /// Global types and wanted shardings of the original values, read before
  /// any rewriting; values that resharding creates get their global type too.
  DenseMap<Value, RankedTensorType> globalTypes;
  DenseMap<Value, TensorSharding> shardings;
  /// The sharding each local value has.
  DenseMap<Value, TensorSharding> localShardings;
  DenseMap<Operation *, ShardingRule> rules;
  /// Values that ops which partition themselves keep beside their local
  /// results for later ops (ring attention's output and its rows'
  /// log-sum-exps, which its gradient's ring reads).
  DenseMap<Value, Value> companions;
  /// Ops that partitioned themselves, their results replaced by what they
  /// built (ring attention), erased at the end.
  SmallVector<Operation *> replacedOps;

  /// What an op that partitions itself asks of this partitioner.
  class OpContext;
};

} // namespace

TensorSharding FunctionPartitioner::getSharding(Value value) const {
  auto it = localShardings.find(value);
  if (it != localShardings.end())
    return it->second;
  return TensorSharding::getReplicated(
      cast<RankedTensorType>(value.getType()).getRank());
}

RankedTensorType FunctionPartitioner::getLocalType(Operation *at,
                                                   RankedTensorType type,
                                                   ArrayRef<AxisList> dimAxes) {
  std::string error;
  FailureOr<SmallVector<int64_t>> shape =
      getLocalShape(type.getShape(), dimAxes, mesh, error);
  if (failed(shape)) {
    at->emitError("cannot partition: ") << error << "; --tessera-pad pads it";
    return {};
  }
  return RankedTensorType::get(*shape, type.getElementType());
}

RankedTensorType
FunctionPartitioner::getLocalType(Operation *at, RankedTensorType global,
                                  const TensorSharding &sharding) {
  RankedTensorType type = getLocalType(at, global, sharding.getDimAxes());
  if (!type || sharding.flat.empty())
    return type;
  return RankedTensorType::get(
      {getFlatPieceElements(type.getShape(), mesh.getGroupSize(sharding.flat))},
      type.getElementType());
}

/// Inserts, at the builder's point, the collectives that take `local` from
/// its sharding to `wanted`; returns the new local value. A flat piece is
/// first gathered and laid out by its dims again, and a value wanted flat
/// is flattened last, so the dims reshard between plain shardings.
FailureOr<Value> FunctionPartitioner::reshard(Operation *user,
                                              const Twine &what, Value local,
                                              const TensorSharding &wanted,
                                              dist::ReductionKind kind) {
  TensorSharding from = getSharding(local);
  if (from == wanted)
    return local;
  Value value = local;
  if (!from.flat.empty()) {
    FailureOr<Value> unflat = unflatten(user, value);
    if (failed(unflat))
      return failure();
    value = *unflat;
  }
  if (wanted.flat.empty())
    return reshardDims(user, what, value, wanted, kind);
  // The partial sums over the flat axes are scattered as the piece is cut,
  // and the others completed on the piece (a microbatch's gradient shards
  // accumulate).
  TensorSharding dims = wanted;
  dims.flat.clear();
  TensorSharding have = getSharding(value);
  if (llvm::all_of(wanted.flat, [&](StringAttr axis) {
        return llvm::is_contained(have.unreduced, axis);
      }))
    dims.unreduced = have.unreduced;
  FailureOr<Value> laidOut = reshardDims(user, what, value, dims, kind);
  if (failed(laidOut))
    return failure();
  return flatten(user, *laidOut, wanted, kind);
}

/// A flat piece gathered over its flat axes, the padding cut off and the
/// elements laid out in the piece's dims again: no copy but the gather.
FailureOr<Value> FunctionPartitioner::unflatten(Operation *user, Value local) {
  TensorSharding from = getSharding(local);
  RankedTensorType global = globalTypes.lookup(local);
  TensorSharding whole = from;
  whole.flat.clear();
  RankedTensorType type = getLocalType(user, global, whole);
  if (!type)
    return failure();
  Location loc = user->getLoc();
  int64_t group = mesh.getGroupSize(from.flat);
  auto pieceType = cast<RankedTensorType>(local.getType());
  SmallVector<Attribute> axes(from.flat.begin(), from.flat.end());
  Value value = dist::AllGatherOp::create(
      builder, loc,
      RankedTensorType::get({pieceType.getDimSize(0) * group},
                            type.getElementType()),
      local, mesh.getName().getValue(), builder.getArrayAttr(axes), 0);
  if (cast<RankedTensorType>(value.getType()).getDimSize(0) !=
      type.getNumElements())
    value = nn::SliceOp::create(
        builder, loc, value, builder.getDenseI64ArrayAttr({0}),
        builder.getDenseI64ArrayAttr({type.getNumElements()}));
  if (value.getType() != type)
    value = nn::ReshapeOp::create(builder, loc, type, value);
  if (explain)
    user->emitRemark() << "gathered a flat piece over "
                       << formatAxes(from.flat);
  localShardings[value] = whole;
  globalTypes[value] = global;
  return value;
}

/// The piece of `local` that `to` stores flat: its elements in a row,
/// padded with zeros to a multiple of the flat group, then scattered (its
/// partial sums over the flat axes completed) or sliced over that group.
FailureOr<Value> FunctionPartitioner::flatten(Operation *user, Value local,
                                              const TensorSharding &to,
                                              dist::ReductionKind kind) {
  TensorSharding from = getSharding(local);
  RankedTensorType global = globalTypes.lookup(local);
  RankedTensorType pieceType = getLocalType(user, global, to);
  if (!pieceType)
    return failure();
  Location loc = user->getLoc();
  auto type = cast<RankedTensorType>(local.getType());
  Type element = type.getElementType();
  int64_t group = mesh.getGroupSize(to.flat);
  int64_t padded = pieceType.getDimSize(0) * group;
  Value value = local;
  if (type.getRank() != 1)
    value = nn::ReshapeOp::create(
        builder, loc, RankedTensorType::get({type.getNumElements()}, element),
        value);
  if (padded != type.getNumElements()) {
    auto zerosType =
        RankedTensorType::get({padded - type.getNumElements()}, element);
    Value zeros = nn::ConstantOp::create(
        builder, loc, cast<ElementsAttr>(builder.getZeroAttr(zerosType)));
    value = nn::ConcatOp::create(builder, loc, ValueRange{value, zeros}, 0);
  }
  SmallVector<Attribute> axes(to.flat.begin(), to.flat.end());
  StringRef meshSymbol = mesh.getName().getValue();
  bool scatter = llvm::all_of(to.flat, [&](StringAttr axis) {
    return llvm::is_contained(from.unreduced, axis);
  });
  if (scatter)
    value = dist::ReduceScatterOp::create(builder, loc, pieceType, value,
                                          meshSymbol,
                                          builder.getArrayAttr(axes), 0, kind);
  else
    value = dist::AllSliceOp::create(builder, loc, pieceType, value, meshSymbol,
                                     builder.getArrayAttr(axes), 0);
  SmallVector<Attribute> rest;
  for (StringAttr axis : from.unreduced)
    if (!llvm::is_contained(to.flat, axis) &&
        !llvm::is_contained(to.unreduced, axis))
      rest.push_back(axis);
  if (!rest.empty())
    value = dist::AllReduceOp::create(builder, loc, value, meshSymbol,
                                      builder.getArrayAttr(rest), kind);
  if (explain)
    user->emitRemark() << (scatter ? "reduce-scattered" : "sliced")
                       << " a flat piece over " << formatAxes(to.flat);
  localShardings[value] = to;
  globalTypes[value] = global;
  return value;
}

/// The collectives that take `local` from its (not flat) sharding to
/// `wanted` (not flat either).
FailureOr<Value> FunctionPartitioner::reshardDims(Operation *user,
                                                  const Twine &what,
                                                  Value local,
                                                  const TensorSharding &wanted,
                                                  dist::ReductionKind kind) {
  TensorSharding from = getSharding(local);
  // A value keeps only partial sums it has: making a whole value partial
  // again is not a reshard.
  TensorSharding to = wanted;
  llvm::erase_if(to.unreduced, [&](StringAttr axis) {
    return !llvm::is_contained(from.unreduced, axis);
  });
  RankedTensorType global = globalTypes.lookup(local);
  SmallVector<ReshardStep> steps = planReshard(from, to);
  if (steps.empty())
    return local;
  FlatSymbolRefAttr meshName = mesh.getName();
  StringRef meshSymbol = meshName.getValue();
  auto axesAttr = [&](ArrayRef<StringAttr> axes) {
    SmallVector<Attribute> names(axes.begin(), axes.end());
    return builder.getArrayAttr(names);
  };
  SmallVector<AxisList> dims = from.getDimAxes();
  Value value = local;
  Location loc = user->getLoc();
  for (const ReshardStep &step : steps) {
    using Kind = ReshardStep::Kind;
    switch (step.kind) {
    case Kind::AllReduce:
      value = dist::AllReduceOp::create(builder, loc, value, meshSymbol,
                                        axesAttr(step.axes), kind);
      break;
    case Kind::ReduceScatter:
    case Kind::AllSlice:
      llvm::append_range(dims[step.dim], step.axes);
      break;
    case Kind::AllGather:
      dims[step.dim].resize(dims[step.dim].size() - step.axes.size());
      break;
    case Kind::AllToAll:
      dims[step.concatDim].resize(dims[step.concatDim].size() -
                                  step.axes.size());
      llvm::append_range(dims[step.dim], step.axes);
      break;
    }
    if (step.kind == Kind::AllReduce)
      continue;
    RankedTensorType type = getLocalType(user, global, dims);
    if (!type)
      return failure();
    switch (step.kind) {
    case Kind::ReduceScatter:
      value =
          dist::ReduceScatterOp::create(builder, loc, type, value, meshSymbol,
                                        axesAttr(step.axes), step.dim, kind);
      break;
    case Kind::AllSlice:
      value = dist::AllSliceOp::create(builder, loc, type, value, meshSymbol,
                                       axesAttr(step.axes), step.dim);
      break;
    case Kind::AllGather:
      value = dist::AllGatherOp::create(builder, loc, type, value, meshSymbol,
                                        axesAttr(step.axes), step.dim);
      break;
    case Kind::AllToAll:
      value = dist::AllToAllOp::create(builder, loc, type, value, meshSymbol,
                                       axesAttr(step.axes), step.dim,
                                       step.concatDim);
      break;
    case Kind::AllReduce:
      break;
    }
  }
  if (explain) {
    InFlightDiagnostic remark = user->emitRemark();
    remark << what << " resharded from " << from.toAttr(meshName) << " to "
           << to.toAttr(meshName) << ":";
    for (const ReshardStep &step : steps) {
      remark << " " << stringifyReshardKind(step.kind) << " over "
             << formatAxes(step.axes);
      if (step.dim >= 0)
        remark << " on dim " << step.dim;
      if (step.concatDim >= 0)
        remark << " from dim " << step.concatDim;
      remark << ";";
    }
  }
  localShardings[value] = to;
  globalTypes[value] = global;
  return value;
}

/// Reshards every result of `op` to what its users want, rewiring the users.
LogicalResult FunctionPartitioner::reshardResults(
    Operation *op, ArrayRef<TensorSharding> wanted, dist::ReductionKind kind) {
  builder.setInsertionPointAfter(op);
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    SmallPtrSet<Operation *, 4> users(result.getUsers().begin(),
                                      result.getUsers().end());
    FailureOr<Value> local =
        reshard(op, "result #" + Twine(index), result, wanted[index], kind);
    if (failed(local))
      return failure();
    result.replaceUsesWithIf(
        *local, [&](OpOperand &use) { return users.contains(use.getOwner()); });
  }
  return success();
}

/// The all-reduce that combines an op's partial results.
static dist::ReductionKind getReductionKind(ShardingRuleOpInterface op) {
  switch (op.getPartialCombiner()) {
  case PartialCombiner::Sum:
    return dist::ReductionKind::sum;
  case PartialCombiner::Max:
    return dist::ReductionKind::max;
  case PartialCombiner::Min:
    return dist::ReductionKind::min;
  case PartialCombiner::Mean:
    return dist::ReductionKind::avg;
  }
  llvm_unreachable("unknown partial combiner");
}

namespace {
/// Axes claimed for an op's factors, factor by factor: an axis splits at
/// most one factor, a factor is claimed once, and a factor the op cannot
/// partition takes none.
class FactorClaims {
public:
  FactorClaims(ShardingRuleOpInterface op, const ShardingRule &rule)
      : op(op), rule(rule), chosen(rule.getNumFactors()) {}

  void claim(int64_t factor, ArrayRef<StringAttr> axes) {
    if (!chosen[factor].empty() ||
        rule.getFactors()[factor].kind == FactorKind::NeedReplication ||
        !op.isFactorPartitionable(factor))
      return;
    for (StringAttr axis : axes) {
      if (used.contains(axis))
        break;
      chosen[factor].push_back(axis);
      used.insert(axis);
    }
  }

  ShardingRuleOpInterface op;
  const ShardingRule &rule;
  FactorAxes chosen;

private:
  llvm::SmallDenseSet<StringAttr> used;
};
} // namespace

/// Every operand and result holds each factor's axes: on a dim, a factor
/// minor to one not split whole cannot be split (a reshape's dim made of the
/// major part of another and a dim of its own), so it takes no axes on
/// either side, as the dim's layout would not be a block of the tensor.
static void clipToBlocks(const ShardingRule &rule, const MeshShape &mesh,
                         FactorAxes &chosen) {
  for (bool clipped = true; clipped;) {
    clipped = false;
    auto clip = [&](const TensorFactors &tensor) {
      for (ArrayRef<int64_t> dimFactors : tensor) {
        bool whole = true;
        for (int64_t factor : dimFactors) {
          if (!whole && !chosen[factor].empty()) {
            chosen[factor].clear();
            clipped = true;
          }
          whole = whole && rule.getFactors()[factor].size ==
                               mesh.getGroupSize(chosen[factor]);
        }
      }
    };
    for (const TensorFactors &tensor : rule.getOperandFactors())
      clip(tensor);
    for (const TensorFactors &tensor : rule.getResultFactors())
      clip(tensor);
  }
}

/// The sharding of a tensor of `rank` whose dims `dimFactors` take `chosen`
/// factor axes, with partial sums over `unreduced`.
static TensorSharding getFactorLayout(const ShardingRule &rule,
                                      const MeshShape &mesh,
                                      const TensorFactors &dimFactors,
                                      const FactorAxes &chosen, int64_t rank,
                                      ArrayRef<StringAttr> unreduced) {
  TensorSharding sharding = TensorSharding::getReplicated(rank);
  for (auto [dim, axes] :
       llvm::enumerate(projectFromFactors(rule, dimFactors, chosen, mesh)))
    sharding.dims[dim].axes = axes;
  sharding.unreduced.assign(unreduced.begin(), unreduced.end());
  return sharding;
}

/// What result `index` of an op computed with `chosen` factor axes holds:
/// partial sums over the axes of the reduction factors it lacks, besides the
/// `carried` ones.
static TensorSharding getResultLayout(const ShardingRule &rule,
                                      const MeshShape &mesh, int64_t index,
                                      const FactorAxes &chosen, int64_t rank,
                                      ArrayRef<StringAttr> carried) {
  TensorSharding sharding = getFactorLayout(
      rule, mesh, rule.getResultFactors()[index], chosen, rank, carried);
  for (int64_t factor = 0; factor < rule.getNumFactors(); ++factor)
    if (rule.isReducedIn(index, factor))
      llvm::append_range(sharding.unreduced, chosen[factor]);
  return sharding;
}

ReshardCost FunctionPartitioner::priceReshard(Value value,
                                              const TensorSharding &from,
                                              TensorSharding to) const {
  // As reshardDims: a value keeps only partial sums it has.
  llvm::erase_if(to.unreduced, [&](StringAttr axis) {
    return !llvm::is_contained(from.unreduced, axis);
  });
  RankedTensorType global = globalTypes.lookup(value);
  return getReshardCost(machine, mesh, global.getShape(),
                        getElementBytes(global), from, to);
}

/// The layout of `op`'s factors whose reshards cost least: its operands
/// from `operandShardings`, its results to `wanted`. See Passes.td.
FactorAxes FunctionPartitioner::chooseLayout(
    ShardingRuleOpInterface op, const ShardingRule &rule,
    ArrayRef<TensorSharding> operandShardings, ArrayRef<TensorSharding> wanted,
    ArrayRef<StringAttr> carried) {
  SmallVector<FactorAxes> operandViews, resultViews;
  for (auto [index, sharding] : llvm::enumerate(operandShardings))
    operandViews.push_back(projectToFactors(
        rule, rule.getOperandFactors()[index], sharding.getDimAxes(), mesh));
  for (auto [index, sharding] : llvm::enumerate(wanted))
    resultViews.push_back(projectToFactors(rule, rule.getResultFactors()[index],
                                           sharding.getDimAxes(), mesh));
  auto firstNonEmpty = [](ArrayRef<FactorAxes> views, int64_t factor) {
    for (const FactorAxes &view : views)
      if (!view[factor].empty())
        return view[factor];
    return AxisList();
  };
  auto isKind = [&](int64_t factor, FactorKind kind) {
    return rule.getFactors()[factor].kind == kind;
  };
  // By default, reduction factors take their axes from the operands (the
  // results they sum into do not have them); then the results decide the
  // other factors. Reductions claim first so that a split contracting dim is
  // computed where its operands already are.
  auto claimByDefault = [&](FactorClaims &claims) {
    for (int64_t factor = 0; factor < rule.getNumFactors(); ++factor)
      if (isKind(factor, FactorKind::Reduction))
        claims.claim(factor, firstNonEmpty(operandViews, factor));
    for (int64_t factor = 0; factor < rule.getNumFactors(); ++factor) {
      if (!isKind(factor, FactorKind::Parallel))
        continue;
      AxisList axes = firstNonEmpty(resultViews, factor);
      if (axes.empty() && op->getNumResults() == 0)
        axes = firstNonEmpty(operandViews, factor);
      claims.claim(factor, axes);
    }
  };
  SmallVector<FactorAxes> layouts;
  auto addLayout = [&](FactorClaims &claims) {
    claimByDefault(claims);
    clipToBlocks(rule, mesh, claims.chosen);
    if (!llvm::is_contained(layouts, claims.chosen))
      layouts.push_back(claims.chosen);
  };
  FactorClaims byDefault(op, rule);
  addLayout(byDefault);
  // The alternatives, as GSPMD's dot handler weighs them: the results'
  // parallel factors first (the output stationary), or every factor as one
  // operand or result has it (that tensor stationary, a weight-stationary
  // layout among them). A flat piece takes the default.
  bool flat = llvm::any_of(operandShardings,
                           [](const TensorSharding &sharding) {
                             return !sharding.flat.empty();
                           }) ||
              llvm::any_of(wanted, [](const TensorSharding &sharding) {
                return !sharding.flat.empty();
              });
  if (!flat) {
    FactorClaims outputFirst(op, rule);
    for (int64_t factor = 0; factor < rule.getNumFactors(); ++factor)
      if (isKind(factor, FactorKind::Parallel))
        outputFirst.claim(factor, firstNonEmpty(resultViews, factor));
    addLayout(outputFirst);
    for (const FactorAxes &view :
         llvm::concat<FactorAxes>(operandViews, resultViews)) {
      FactorClaims stationary(op, rule);
      for (auto [factor, axes] : llvm::enumerate(view))
        stationary.claim(factor, axes);
      addLayout(stationary);
    }
  }

  // The cheapest layout by its reshards, among those that split the op's
  // work at least as finely as the default (no communication is saved by
  // computing more); ties go to the earlier.
  auto price = [&](const FactorAxes &chosen) {
    ReshardCost cost;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      cost += priceReshard(
          operand, operandShardings[index],
          getFactorLayout(rule, mesh, rule.getOperandFactors()[index], chosen,
                          operandShardings[index].getRank(), carried));
    for (auto [index, result] : llvm::enumerate(op->getResults()))
      cost += priceReshard(result,
                           getResultLayout(rule, mesh, index, chosen,
                                           wanted[index].getRank(), carried),
                           wanted[index]);
    return cost;
  };
  auto getSplit = [&](const FactorAxes &chosen) {
    int64_t devices = 1;
    for (const AxisList &axes : chosen)
      devices *= mesh.getGroupSize(axes);
    return devices;
  };
  auto getScalar = [&](const ReshardCost &cost) {
    return machine ? cost.seconds : cost.sentBytes;
  };
  SmallVector<ReshardCost> costs;
  int64_t best = 0;
  for (auto [index, chosen] : llvm::enumerate(layouts)) {
    costs.push_back(price(chosen));
    if (getSplit(chosen) >= getSplit(layouts.front()) &&
        getScalar(costs.back()) < getScalar(costs[best]))
      best = index;
  }
  if (explain && layouts.size() > 1) {
    auto print = [&](InFlightDiagnostic &remark, int64_t index) {
      for (auto [factor, axes] : llvm::enumerate(layouts[index]))
        remark << " " << ShardingRule::getFactorName(factor) << "="
               << formatAxes(axes);
      remark << " (sends " << std::llround(costs[index].sentBytes)
             << " bytes per device";
      if (machine)
        remark << ", "
               << llvm::formatv("{0:F2}", costs[index].seconds * 1e6).str()
               << " us";
      remark << ")";
    };
    InFlightDiagnostic remark = op->emitRemark("factor layout chosen by cost:");
    print(remark, best);
    remark << "; also priced:";
    StringRef separator = "";
    for (int64_t index = 0; index < static_cast<int64_t>(layouts.size());
         ++index)
      if (index != best) {
        remark << separator;
        print(remark, index);
        separator = ";";
      }
  }
  return layouts[best];
}

/// What an op that partitions itself (ShardingRuleOpInterface::partition)
/// asks of the partitioner: the layout chosen for its factors, its operands'
/// pieces, and its results' replacements, resharded to what their users
/// want.
class FunctionPartitioner::OpContext final : public PartitionContext {
public:
  OpContext(FunctionPartitioner &partitioner, ShardingRuleOpInterface op,
            const ShardingRule &rule, const FactorAxes &chosen,
            ArrayRef<TensorSharding> wanted)
      : partitioner(partitioner), op(op), rule(rule), chosen(chosen),
        wanted(wanted) {}

  const ShardingRule &getRule() const override { return rule; }
  ArrayRef<AxisList> getFactorAxes() const override { return chosen; }
  int64_t getGroupSize(ArrayRef<StringAttr> axes) const override {
    return partitioner.mesh.getGroupSize(axes);
  }

  SmallVector<AxisList> getOperandDimAxes(unsigned index) const override {
    RankedTensorType global =
        partitioner.globalTypes.lookup(op->getOperand(index));
    return getFactorLayout(rule, partitioner.mesh,
                           rule.getOperandFactors()[index], chosen,
                           global.getRank(), {})
        .getDimAxes();
  }

  FailureOr<Value> reshardOperand(unsigned index,
                                  ArrayRef<AxisList> dimAxes) override {
    return partitioner.reshard(op, "operand #" + Twine(index),
                               op->getOperand(index), getLayout(dimAxes, {}));
  }

  SmallVector<AxisList> getResultDimAxes(unsigned index) const override {
    return getChosenResultLayout(index).getDimAxes();
  }

  AxisList getResultUnreduced(unsigned index) const override {
    return getChosenResultLayout(index).unreduced;
  }

  LogicalResult replaceResult(unsigned index, Value local,
                              ArrayRef<AxisList> dimAxes,
                              ArrayRef<StringAttr> unreduced) override {
    Value result = op->getResult(index);
    partitioner.globalTypes[local] = partitioner.globalTypes.lookup(result);
    partitioner.localShardings[local] = getLayout(dimAxes, unreduced);
    FailureOr<Value> laidOut =
        partitioner.reshard(op, "result #" + Twine(index), local, wanted[index],
                            getReductionKind(op));
    if (failed(laidOut))
      return failure();
    result.replaceAllUsesWith(*laidOut);
    return success();
  }

  Value createAxisIndex(Location loc, ArrayRef<AxisList> groups) override {
    return partitioner.createAxisIndex(loc, groups);
  }

  Value createRingShift(Location loc, Value value,
                        ArrayRef<StringAttr> ring) override {
    OpBuilder &builder = partitioner.builder;
    int64_t size = partitioner.mesh.getGroupSize(ring);
    SmallVector<int64_t> pairs;
    for (int64_t r = 0; r < size; ++r)
      pairs.append({r, (r + 1) % size});
    return dist::CollectivePermuteOp::create(
        builder, loc, value.getType(), value,
        FlatSymbolRefAttr::get(partitioner.meshOp.getSymNameAttr()),
        builder.getArrayAttr(llvm::to_vector_of<Attribute>(ring)),
        builder.getDenseI64ArrayAttr(pairs));
  }

  void setCompanion(Value local, Value companion) override {
    partitioner.companions[local] = companion;
  }

  Value getCompanion(Value local) const override {
    return partitioner.companions.lookup(local);
  }

private:
  /// A closed sharding with `dimAxes` per dim and partial sums over
  /// `unreduced`.
  static TensorSharding getLayout(ArrayRef<AxisList> dimAxes,
                                  ArrayRef<StringAttr> unreduced) {
    TensorSharding layout = TensorSharding::getReplicated(dimAxes.size());
    for (auto [dim, axes] : llvm::enumerate(dimAxes))
      layout.dims[dim].axes = axes;
    layout.unreduced.assign(unreduced.begin(), unreduced.end());
    return layout;
  }

  /// What result `index` holds on the chosen factor axes.
  TensorSharding getChosenResultLayout(unsigned index) const {
    return getResultLayout(rule, partitioner.mesh, index, chosen,
                           wanted[index].getRank(), {});
  }

  FunctionPartitioner &partitioner;
  ShardingRuleOpInterface op;
  const ShardingRule &rule;
  const FactorAxes &chosen;
  ArrayRef<TensorSharding> wanted;
};

LogicalResult FunctionPartitioner::partitionRuleOp(ShardingRuleOpInterface op,
                                                   const ShardingRule &rule) {
  SmallVector<TensorSharding> operandShardings;
  for (Value operand : op->getOperands())
    operandShardings.push_back(getSharding(operand));
  SmallVector<TensorSharding> wanted;
  for (Value result : op->getResults())
    wanted.push_back(shardings.lookup(result));
  // A pointwise op wanted flat computes on flat pieces; any other computes
  // laid out by its dims, and reshardResults stores what is wanted flat.
  if (isFlatPointwise(op, rule, wanted))
    return partitionFlatOp(op, rule, wanted);
  // A sum of squares of a flat piece sums the piece as it is stored.
  if (op.reducesFlatPieces() && !operandShardings.front().flat.empty())
    return partitionFlatReduction(op, operandShardings.front(), wanted);

  // A linear op carries the pending sums its result is wanted with, where
  // every operand has them: it computes on the partial sums.
  AxisList carried;
  if (op.isLinear() && wanted.size() == 1)
    for (StringAttr axis : wanted.front().unreduced)
      if (llvm::all_of(operandShardings, [&](const TensorSharding &sharding) {
            return llvm::is_contained(sharding.unreduced, axis);
          }))
        carried.push_back(axis);

  FactorAxes chosen = chooseLayout(op, rule, operandShardings, wanted, carried);
  builder.setInsertionPoint(op);
  // An op may partition itself (ring attention) rather than be computed on
  // the chosen layout; it has then replaced its results, and is erased once
  // the function is partitioned.
  OpContext context(*this, op, rule, chosen, wanted);
  FailureOr<bool> partitioned = op.partition(context, builder);
  if (failed(partitioned))
    return failure();
  if (*partitioned) {
    replacedOps.push_back(op);
    return success();
  }
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    FailureOr<Value> local = reshard(
        op, "operand #" + Twine(index), operand,
        getFactorLayout(rule, mesh, rule.getOperandFactors()[index], chosen,
                        operandShardings[index].getRank(), carried));
    if (failed(local))
      return failure();
    op->setOperand(index, *local);
  }

  LLVM_DEBUG({
    llvm::dbgs() << "partition " << op->getName() << " at " << op->getLoc()
                 << ":";
    for (auto [factor, axes] : llvm::enumerate(chosen))
      llvm::dbgs() << " #" << factor << "=" << formatAxes(axes);
    llvm::dbgs() << "\n";
  });
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    TensorSharding actual = getResultLayout(rule, mesh, index, chosen,
                                            wanted[index].getRank(), carried);
    RankedTensorType localType =
        getLocalType(op, globalTypes.lookup(result), actual.getDimAxes());
    if (!localType)
      return failure();
    result.setType(localType);
    localShardings[result] = actual;
    if (index == 0)
      if (auto random = dyn_cast<nn::RandomOpInterface>(op.getOperation()))
        if (failed(placeRandomPiece(random, actual.getDimAxes())))
          return failure();
  }
  if (auto offset = dyn_cast<nn::OffsetOpInterface>(op.getOperation()))
    if (failed(placeOffsetPiece(offset, chosen[offset.getOffsetFactor()])))
      return failure();

  op.updateLocalAttributes();

  return reshardResults(op, wanted, getReductionKind(op));
}

/// An op that reduces flat pieces (a sum of squares) sums the elements of
/// its operand's flat piece `piece` (the padding is zeros): a partial sum
/// over every axis that splits it.
LogicalResult
FunctionPartitioner::partitionFlatReduction(ShardingRuleOpInterface op,
                                            TensorSharding piece,
                                            ArrayRef<TensorSharding> wanted) {
  piece.unreduced.clear();
  builder.setInsertionPoint(op);
  FailureOr<Value> local = reshard(op, "operand #0", op->getOperand(0), piece);
  if (failed(local))
    return failure();
  op->setOperand(0, *local);
  TensorSharding partial = TensorSharding::getReplicated(0);
  for (const AxisList &axes : piece.getDimAxes())
    llvm::append_range(partial.unreduced, axes);
  llvm::append_range(partial.unreduced, piece.flat);
  localShardings[op->getResult(0)] = partial;
  return reshardResults(op, wanted, dist::ReductionKind::sum);
}

/// A dist.axis_index: a tensor<N x i64> of this device's index in each of
/// the N groups.
Value FunctionPartitioner::createAxisIndex(Location loc,
                                           ArrayRef<AxisList> groups) {
  SmallVector<Attribute> groupAttrs;
  for (const AxisList &axes : groups)
    groupAttrs.push_back(
        builder.getArrayAttr(llvm::to_vector_of<Attribute>(axes)));
  return dist::AxisIndexOp::create(
      builder, loc,
      RankedTensorType::get({static_cast<int64_t>(groups.size())},
                            builder.getI64Type()),
      FlatSymbolRefAttr::get(meshOp.getSymNameAttr()),
      builder.getArrayAttr(groupAttrs));
}

/// An op that positions integers against a dim split over `axes` (a
/// vocab-split embedding table, a class-split one-hot) reads its piece's
/// index along the dim from a dist.axis_index over those axes; over axes of
/// one device its piece is the whole dim.
LogicalResult FunctionPartitioner::placeOffsetPiece(nn::OffsetOpInterface op,
                                                    const AxisList &axes) {
  if (mesh.getGroupSize(axes) == 1)
    return success();
  if (op.getPiece())
    return op->emitOpError("is already a device's piece; partition the global "
                           "program once");
  builder.setInsertionPoint(op);
  op.getPieceMutable().assign(createAxisIndex(op->getLoc(), {axes}));
  return success();
}

/// A random op split over some axes draws for its piece: it reads the
/// piece's index along each dim of its draw from a dist.axis_index over the
/// axes of the result dim the draw dim follows, and the global shape places
/// it. One that does not draw (no step) reads it where a dim it positions
/// by is split (causal attention on a piece of its queries).
/// `resultDimAxes` are result 0's; the op is local already.
LogicalResult
FunctionPartitioner::placeRandomPiece(nn::RandomOpInterface op,
                                      ArrayRef<AxisList> resultDimAxes) {
  SmallVector<int64_t> shape = op.getDrawShape();
  SmallVector<AxisList> drawAxes;
  for (int64_t dim : op.getDrawDims())
    drawAxes.push_back(dim < 0 ? AxisList() : resultDimAxes[dim]);
  // Without a step, only a split of the dims the op positions by needs it.
  SmallVector<int64_t> needed = op.getPositionedDims();
  if (op.getStep())
    needed = llvm::to_vector(llvm::seq<int64_t>(0, drawAxes.size()));
  // Axes of one device split nothing.
  if (llvm::all_of(needed, [&](int64_t dim) {
        return mesh.getGroupSize(drawAxes[dim]) == 1;
      }))
    return success();
  if (op.getPiece())
    return op->emitOpError("is already a device's piece; partition the global "
                           "program once");
  for (auto [dim, axes] : llvm::enumerate(drawAxes))
    shape[dim] *= mesh.getGroupSize(axes);
  builder.setInsertionPoint(op);
  op.getPieceMutable().assign(createAxisIndex(op->getLoc(), drawAxes));
  op.setGlobalShapeAttr(builder.getDenseI64ArrayAttr(shape));
  return success();
}

/// Whether `op` computes on flat pieces: a pointwise op (every factor
/// parallel) whose results, all of one shape and factors, are all wanted as
/// one flat sharding.
bool FunctionPartitioner::isFlatPointwise(ShardingRuleOpInterface op,
                                          const ShardingRule &rule,
                                          ArrayRef<TensorSharding> wanted) {
  // A random op's piece is a block of each dim (its draw's place).
  if (wanted.empty() || wanted.front().flat.empty() ||
      !rule.hasOnlyParallelFactors() ||
      isa<nn::RandomOpInterface>(op.getOperation()))
    return false;
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    if (wanted[index] != wanted.front() ||
        rule.getResultFactors()[index] != rule.getResultFactors().front() ||
        globalTypes.lookup(result).getShape() !=
            globalTypes.lookup(op->getResult(0)).getShape())
      return false;
  return true;
}

/// A pointwise op whose results are wanted flat computes on flat pieces:
/// each operand laid out as its results (same factors and shape) is
/// resharded to their sharding, the others (AdamW's step) are whole.
LogicalResult
FunctionPartitioner::partitionFlatOp(ShardingRuleOpInterface op,
                                     const ShardingRule &rule,
                                     ArrayRef<TensorSharding> wanted) {
  ArrayRef<int64_t> shape = globalTypes.lookup(op->getResult(0)).getShape();
  builder.setInsertionPoint(op);
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    RankedTensorType global = globalTypes.lookup(operand);
    bool alike =
        rule.getOperandFactors()[index] == rule.getResultFactors().front() &&
        global.getShape() == shape;
    TensorSharding required =
        alike ? wanted.front()
              : TensorSharding::getReplicated(global.getRank());
    FailureOr<Value> local =
        reshard(op, "operand #" + Twine(index), operand, required);
    if (failed(local))
      return failure();
    op->setOperand(index, *local);
  }
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    RankedTensorType type =
        getLocalType(op, globalTypes.lookup(result), wanted[index]);
    if (!type)
      return failure();
    result.setType(type);
    localShardings[result] = wanted[index];
  }
  op.updateLocalAttributes();
  return success();
}

/// Ops without a sharding rule compute on replicated operands.
LogicalResult FunctionPartitioner::partitionReplicatedOp(Operation *op) {
  op->emitWarning("op has no sharding rule; it runs replicated");
  builder.setInsertionPoint(op);
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    if (!type)
      continue;
    FailureOr<Value> local =
        reshard(op, "operand #" + Twine(operand.getOperandNumber()),
                operand.get(), TensorSharding::getReplicated(type.getRank()));
    if (failed(local))
      return failure();
    operand.set(*local);
  }
  for (Value result : op->getResults())
    if (auto type = dyn_cast<RankedTensorType>(result.getType()))
      localShardings[result] = TensorSharding::getReplicated(type.getRank());
  return success();
}

LogicalResult FunctionPartitioner::run() {
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  auto shardingOr = [](Attribute attr, int64_t rank) {
    if (auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr))
      return TensorSharding::fromAttr(sharding).getClosed();
    return TensorSharding::getReplicated(rank);
  };

  // Read the global program before rewriting any of it.
  for (BlockArgument arg : function.getArguments())
    if (auto type = dyn_cast<RankedTensorType>(arg.getType())) {
      globalTypes[arg] = type;
      localShardings[arg] = shardingOr(
          function.getArgAttr(arg.getArgNumber(), attrName), type.getRank());
    }
  SmallVector<Operation *> ops;
  WalkResult walk = function.walk([&](Operation *op) {
    if (op == function.getOperation())
      return WalkResult::advance();
    ops.push_back(op);
    if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op))
      rules[op] = ruleOp.getShardingRule();
    auto perResult = dyn_cast_or_null<ArrayAttr>(op->getAttr(attrName));
    if (isa<ShardingRuleOpInterface>(op) && op->getNumResults() > 0 &&
        (!perResult || perResult.size() != op->getNumResults())) {
      op->emitError("has no sharding of its results; run --tessera-propagate "
                    "before --tessera-partition");
      return WalkResult::interrupt();
    }
    for (auto [index, result] : llvm::enumerate(op->getResults())) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type)
        continue;
      globalTypes[result] = type;
      Attribute attr = perResult ? perResult[index] : Attribute();
      if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op))
        attr = constraint.getSharding();
      shardings[result] = shardingOr(attr, type.getRank());
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  for (BlockArgument arg : function.getArguments()) {
    RankedTensorType global = globalTypes.lookup(arg);
    if (!global)
      continue;
    std::string error;
    const TensorSharding &sharding = localShardings[arg];
    FailureOr<SmallVector<int64_t>> shape =
        getLocalShape(global.getShape(), sharding.getDimAxes(), mesh, error);
    if (failed(shape))
      return function.emitError("cannot partition argument #")
             << arg.getArgNumber() << ": " << error
             << "; --tessera-pad pads it";
    if (!sharding.flat.empty()) {
      shape = SmallVector<int64_t>{
          getFlatPieceElements(*shape, mesh.getGroupSize(sharding.flat))};
      function.setArgAttr(arg.getArgNumber(),
                          dist::DistDialect::kGlobalShapeAttrName,
                          builder.getDenseI64ArrayAttr(global.getShape()));
    }
    arg.setType(RankedTensorType::get(*shape, global.getElementType()));
  }

  for (Operation *op : ops) {
    if (auto it = rules.find(op); it != rules.end()) {
      if (failed(
              partitionRuleOp(cast<ShardingRuleOpInterface>(op), it->second)))
        return failure();
      op->removeAttr(attrName);
      continue;
    }
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op)) {
      builder.setInsertionPoint(op);
      FailureOr<Value> local =
          reshard(op, "the constrained value", constraint.getInput(),
                  shardings.lookup(constraint.getResult()));
      if (failed(local))
        return failure();
      constraint.getResult().replaceAllUsesWith(*local);
      constraint.erase();
      continue;
    }
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      builder.setInsertionPoint(op);
      for (OpOperand &operand : returnOp->getOpOperands()) {
        auto type = dyn_cast<RankedTensorType>(operand.get().getType());
        if (!type)
          continue;
        unsigned index = operand.getOperandNumber();
        TensorSharding wanted =
            shardingOr(function.getResultAttr(index, attrName), type.getRank());
        RankedTensorType global = globalTypes.lookup(operand.get());
        FailureOr<Value> local =
            reshard(op, "result #" + Twine(index), operand.get(), wanted);
        if (failed(local))
          return failure();
        operand.set(*local);
        if (!wanted.flat.empty())
          function.setResultAttr(
              index, dist::DistDialect::kGlobalShapeAttrName,
              builder.getDenseI64ArrayAttr(global.getShape()));
      }
      continue;
    }
    if (llvm::any_of(op->getOperandTypes(), llvm::IsaPred<RankedTensorType>) ||
        llvm::any_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
      if (failed(partitionReplicatedOp(op)))
        return failure();
  }

  for (Operation *op : llvm::reverse(replacedOps))
    op->erase();
  auto returnOp = cast<func::ReturnOp>(function.getBody().back().back());
  function.setType(FunctionType::get(function.getContext(),
                                     function.front().getArgumentTypes(),
                                     returnOp.getOperandTypes()));
  return success();
}

/// Whether `value` is only summed on (by ops linear in their operands
/// together) into an all_slice over `axes`.
static bool isSummedIntoSlice(Value value, ArrayAttr axes) {
  while (value.hasOneUse()) {
    Operation *user = *value.getUsers().begin();
    if (auto slice = dyn_cast<dist::AllSliceOp>(user))
      return slice.getMeshAxes() == axes;
    auto rule = dyn_cast<ShardingRuleOpInterface>(user);
    if (!rule || !rule.isLinear() || user->getNumOperands() < 2 ||
        user->getNumResults() != 1)
      return false;
    value = user->getResult(0);
  }
  return false;
}

/// Whether `value` is a parameter's gradient: summed on (by linear ops) and
/// cast into an optimizer's update.
static bool isSummedIntoUpdate(Value value) {
  while (value.hasOneUse()) {
    Operation *user = *value.getUsers().begin();
    if (isa<OptimizerOpInterface>(user))
      return true;
    auto rule = dyn_cast<ShardingRuleOpInterface>(user);
    if (!rule || !rule.isLinear() || user->getNumResults() != 1)
      return false;
    value = user->getResult(0);
  }
  return false;
}

namespace {
/// A sum of all_reduced terms (`f(all_reduce(a), all_reduce(b))` for an op f
/// linear in its operands together, each term over the same axes and read
/// only here) is one all_reduce of the sum of the terms: the gradients of
/// q, k and v meeting at their input, which the next op needs whole (or, as
/// sequence parallelism slices it, one reduce_scatter). A parameter's
/// gradient of several terms (a tied embedding's) is left to reduce term by
/// term: the first term's reduction then runs behind the rest of the
/// backward pass rather than after it.
struct ReduceTheSum : OpInterfaceRewritePattern<ShardingRuleOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;
  LogicalResult matchAndRewrite(ShardingRuleOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (!op.isLinear() || op->getNumOperands() < 2 || op->getNumResults() != 1)
      return failure();
    SmallVector<dist::AllReduceOp> terms;
    auto first = op->getOperand(0).getDefiningOp<dist::AllReduceOp>();
    if (!first || (!isSummedIntoSlice(op->getResult(0), first.getMeshAxes()) &&
                   isSummedIntoUpdate(op->getResult(0))))
      return failure();
    for (Value operand : op->getOperands()) {
      auto reduce = operand.getDefiningOp<dist::AllReduceOp>();
      if (!reduce || !reduce->hasOneUse() ||
          reduce.getKind() != dist::ReductionKind::sum ||
          (!terms.empty() &&
           (reduce.getMeshAttr() != terms.front().getMeshAttr() ||
            reduce.getMeshAxes() != terms.front().getMeshAxes())))
        return failure();
      terms.push_back(reduce);
    }
    rewriter.setInsertionPoint(op);
    IRMapping mapping;
    for (dist::AllReduceOp term : terms)
      mapping.map(term.getResult(), term.getInput());
    Operation *sum = rewriter.clone(*op, mapping);
    rewriter.replaceOpWithNewOp<dist::AllReduceOp>(
        op, sum->getResult(0), first.getMeshAttr(), first.getMeshAxes(),
        first.getKindAttr());
    for (dist::AllReduceOp term : terms)
      rewriter.eraseOp(term);
    return success();
  }
};
} // namespace

/// The permutation of `op`'s operand dims its result is, when `op` only
/// permutes them (nn.transpose); none for any other op or none.
static std::optional<SmallVector<int64_t>> getDimPermutation(Operation *op) {
  if (auto rule = dyn_cast_or_null<ShardingRuleOpInterface>(op))
    return rule.getDimPermutation();
  return std::nullopt;
}

/// The reshard optimizer: the dist collectives' canonicalization patterns
/// (pairs that cancel, runs that merge, sums reduced once) plus the ops'
/// folders (collectives over one-device groups, no-op reshapes) and
/// dead-code removal.
static LogicalResult optimizeReshards(func::FuncOp function) {
  MLIRContext *context = function.getContext();
  RewritePatternSet patterns(context);
  patterns.add<ReduceTheSum>(context);
  dist::AllGatherOp::getCanonicalizationPatterns(patterns, context);
  dist::AllSliceOp::getCanonicalizationPatterns(patterns, context);
  dist::AllReduceOp::getCanonicalizationPatterns(patterns, context);
  dist::AllToAllOp::getCanonicalizationPatterns(patterns, context);
  GreedyRewriteConfig config;
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  (void)applyPatternsGreedily(function, std::move(patterns), config);
  // An all_to_all repeated on the same value in a block (the backward
  // resharding a forward value again: context parallelism's keys and
  // values) is made once. Its result is as large as its operand, so keeping
  // it for the later user costs no more than keeping the operand did. (A
  // repeated all_gather is left: ZeRO-3 gathers again on purpose.) The same
  // holds through transposes: exchanges of transposes of one value (or of
  // it and a transpose of it) that split and concatenate the same dims of
  // that value are one exchange, transposed for each user (a gradient read
  // as dX's operand and, transposed otherwise, as dW's).
  using Exchange = std::tuple<Value, Attribute, int64_t, int64_t>;
  struct Made {
    dist::AllToAllOp exchange;
    /// The permutation from the exchanged value to the operand it was
    /// exchanged as (empty: none).
    SmallVector<int64_t> permutation;
  };
  llvm::DenseMap<Exchange, Made> made;
  function.walk([&](dist::AllToAllOp exchange) {
    Attribute axes = exchange.getMeshAxesAttr();
    int64_t split = exchange.getSplitDim(), concat = exchange.getConcatDim();
    // The exchange in the frame of the value before a transpose.
    Value source = exchange.getInput();
    SmallVector<int64_t> permutation;
    if (std::optional<SmallVector<int64_t>> dimPermutation =
            getDimPermutation(source.getDefiningOp())) {
      source = source.getDefiningOp()->getOperand(0);
      permutation = std::move(*dimPermutation);
      split = permutation[split];
      concat = permutation[concat];
    }
    Exchange key{source, axes, split, concat};
    auto found = made.find(key);
    if (found == made.end() ||
        found->second.exchange->getBlock() != exchange->getBlock()) {
      made[key] = {exchange, permutation};
      return;
    }
    // Dim i of this result is dim permutation[i] of the source, which is
    // dim inverse(earlier)[permutation[i]] of the earlier result.
    Made &earlier = found->second;
    int64_t rank = exchange.getType().getRank();
    SmallVector<int64_t> fromEarlier(rank);
    for (int64_t dim = 0; dim < rank; ++dim) {
      int64_t sourceDim = permutation.empty() ? dim : permutation[dim];
      fromEarlier[dim] = earlier.permutation.empty()
                             ? sourceDim
                             : llvm::find(earlier.permutation, sourceDim) -
                                   earlier.permutation.begin();
    }
    Value moved = earlier.exchange.getResult();
    if (!llvm::equal(fromEarlier, llvm::seq<int64_t>(0, rank))) {
      OpBuilder builder(exchange);
      moved = nn::TransposeOp::create(builder, exchange.getLoc(), moved,
                                      fromEarlier);
    }
    assert(moved.getType() == exchange.getType());
    Operation *operand = exchange.getInput().getDefiningOp();
    exchange.replaceAllUsesWith(moved);
    exchange.erase();
    if (getDimPermutation(operand) && operand->use_empty())
      operand->erase();
  });
  return success();
}

namespace {
struct PartitionPass : tessera::impl::PartitionPassBase<PartitionPass> {
  using PartitionPassBase::PartitionPassBase;

  void runOnOperation() override {
    FailureOr<std::optional<MachineModel>> machineModel =
        loadOptionalMachine(getOperation(), machine);
    if (failed(machineModel))
      return signalPassFailure();
    const MachineModel *onMachine = *machineModel ? &**machineModel : nullptr;
    if (failed(forEachMeshFunction(
            getOperation(), [&](func::FuncOp function, dist::MeshOp mesh) {
              if (failed(FunctionPartitioner(function, mesh, explain, onMachine)
                             .run()))
                return failure();
              function->setAttr(dist::DistDialect::kPartitionedAttrName,
                                UnitAttr::get(function.getContext()));
              return optimizeReshards(function);
            })))
      signalPassFailure();
  }
};
} // namespace
