//===- ShardingSolver.cpp - Per-op shardings as an integer program --------===//
//
// The program (after Alpa's intra-op pass): a binary x per node (op or
// function argument) and strategy, one per node; on an edge whose two ends
// each have several distinct shardings, a continuous y per pair of the
// producer's result sharding and the consumer's operand need, tied to the
// x's by transport constraints (its rows and columns sum to the x's), so
// that the y of the chosen pair is 1 and the edge costs its reshards.
//
//===----------------------------------------------------------------------===//

#include "tessera/Search/ShardingSolver.h"

#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/PipelineSchedule.h"
#include "tessera/Analysis/StageCuts.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <coin/CbcModel.hpp>
#include <coin/CbcSolver.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/OsiClpSolverInterface.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

using namespace mlir;
using namespace tessera;

/// How long CBC may search before the best sharding found is taken.
constexpr int kSolveSeconds = 30;

/// Bytes in the largest unit they fill: 1.50 GB, 820.00 KB.
static std::string formatBytes(double bytes) {
  if (bytes >= 1e9)
    return llvm::formatv("{0:F2} GB", bytes / 1e9).str();
  if (bytes >= 1e6)
    return llvm::formatv("{0:F2} MB", bytes / 1e6).str();
  return llvm::formatv("{0:F2} KB", bytes / 1e3).str();
}

namespace {

/// One way to shard a node.
struct Strategy {
  FactorAxes factorAxes;
  /// What the node needs of each operand; none where it needs nothing (a
  /// value that is not a ranked tensor, an unannotated function result).
  SmallVector<std::optional<TensorSharding>> operands;
  /// Each operand's gradient as the node's backward makes it: the
  /// operand's dims, partial over the axes of the split factors it lacks.
  SmallVector<TensorSharding> operandGradients;
  /// Each result's sharding (the argument's), and as the op computes it,
  /// partial over its split reductions.
  SmallVector<TensorSharding> results, partialResults;
  /// Compute and the node's own reshards (its partial sums completed), and
  /// the bytes those move.
  double seconds = 0, reshardBytes = 0;
  double memoryBytes = 0;
};

struct Node {
  /// The op, the argument, or neither: the sum of a value's gradients.
  Operation *op = nullptr;
  int64_t argument = -1;
  std::vector<Strategy> strategies;
  /// The node whose variables this one shares: itself but for the ops and
  /// parameters of a repeated block.
  int64_t representative = 0;
  /// The node whose choice decides this one's (itself, or the producer it
  /// follows), and this node's strategy for each of the root's.
  int64_t root = 0;
  SmallVector<int64_t> strategyMap;
};

/// The cost of an edge between choices that cannot meet: more than any
/// step takes.
constexpr double kForbiddenSeconds = 1e4;

/// What an edge prices between its two ends.
enum class EdgeKind {
  /// A value's reshard from the producer's result (`producer`'s result
  /// `result`) into the consumer's need (`consumer`'s operand `operand`),
  /// and its gradient's back.
  Value,
  /// The forward's reshard alone: the gradient goes through a sum node.
  Forward,
  /// A consumer's gradient (`producer`'s operand `result`) completed into
  /// its need and resharded into the sum (`consumer`), or, into a sum of
  /// partial terms, kept partial over the sum's axes.
  IntoSum,
  /// The summed gradient (`producer`) resharded into the producer's result
  /// (`consumer`'s result `operand`).
  OutOfSum,
};

/// A value read by an operand of a node, or its gradient's way back.
struct Edge {
  int64_t producer, result, consumer, operand;
  Value value;
  EdgeKind kind = EdgeKind::Value;
};

StringRef getDtypeName(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (element.isBF16())
    return "bf16";
  if (element.isF16())
    return "fp16";
  return "fp32";
}

/// `sharding` seen by the solver: only the solved axes.
TensorSharding restrictTo(const TensorSharding &sharding,
                          ArrayRef<StringAttr> axes) {
  TensorSharding restricted = sharding;
  auto keep = [&](AxisList &list) {
    llvm::erase_if(
        list, [&](StringAttr axis) { return !llvm::is_contained(axes, axis); });
  };
  for (DimSharding &dim : restricted.dims) {
    keep(dim.axes);
    dim.priority.reset();
  }
  keep(restricted.replicated);
  keep(restricted.unreduced);
  restricted.flat.clear();
  return restricted;
}

/// The shardings a tensor of `shape` may take from `base` (what its
/// annotation fixes): each solved axis `base` does not use on one of its
/// open dims that it divides, or on none. Closed dims.
SmallVector<TensorSharding> getTensorShardings(ArrayRef<int64_t> shape,
                                               const TensorSharding &base,
                                               ArrayRef<StringAttr> axes,
                                               const MeshShape &mesh) {
  SmallVector<StringAttr> free;
  for (StringAttr axis : axes)
    if (!base.usesAxis(axis))
      free.push_back(axis);
  SmallVector<TensorSharding> shardings;
  TensorSharding current = base;
  std::function<void(size_t)> place = [&](size_t index) {
    if (index == free.size()) {
      TensorSharding closed = current.getClosed();
      closed.replicated = current.replicated;
      shardings.push_back(closed);
      return;
    }
    place(index + 1);
    for (auto [dim, sharding] : llvm::enumerate(current.dims)) {
      if (!sharding.isOpen)
        continue;
      sharding.axes.push_back(free[index]);
      if (shape[dim] % mesh.getGroupSize(sharding.axes) == 0)
        place(index + 1);
      sharding.axes.pop_back();
    }
  };
  place(0);
  return shardings;
}

/// Builds the nodes of one function and prices them.
class ProgramBuilder {
public:
  ProgramBuilder(func::FuncOp function, const MeshShape &mesh,
                 ArrayRef<StringAttr> axes, const MachineModel &machine,
                 const ShardingSolverOptions &options)
      : function(function), mesh(mesh), axes(axes), machine(machine),
        options(options) {
    for (StringAttr axis : mesh.getAxes())
      if (llvm::is_contained(options.zeroAxes, axis.getValue()))
        zeroAxes.push_back(axis);
    for (StringAttr axis : axes)
      if (llvm::is_contained(options.batchAxes, axis.getValue()))
        batchAxes.push_back(axis);
  }

  LogicalResult build(std::string &error);
  /// The bytes of `value`'s piece on a device under `sharding`.
  double getLocalBytes(Value value, const TensorSharding &sharding) const;
  /// Returns the number of blocks that share variables.
  int64_t shareBlocks();
  /// Returns the number of ops merged into their operand's producer.
  int64_t mergeFollowers();
  /// Gives each trained value read more than once a node of its own that
  /// sums its gradients: as the train step sums them before they go back,
  /// each consumer's gradient is resharded into the sum, and the sum once
  /// into the producer's result. An activation's sum may also be taken on
  /// partial terms and completed once (the partitioner's sum of q, k and
  /// v's gradients); a parameter's is completed term by term.
  void addGradientSums();
  /// The cost of `edge`'s kind between its ends' keys (see getEdgeKey).
  ReshardCost
  getEdgeCost(EdgeKind kind, Value value,
              const std::pair<TensorSharding, TensorSharding> &from,
              const std::pair<TensorSharding, TensorSharding> &to) const;

  /// The cost of resharding `value` from `from` to `to`, forward, and of
  /// its gradient back, made as `gradient` by the consumer.
  ReshardCost getEdgeCost(Value value, const TensorSharding &from,
                          const TensorSharding &to,
                          const TensorSharding &gradient) const;

  func::FuncOp function;
  const MeshShape &mesh;
  ArrayRef<StringAttr> axes;
  /// ZeRO's axes on this mesh.
  SmallVector<StringAttr> zeroAxes;
  /// The solved axes that split only the batch (options.batchAxes).
  SmallVector<StringAttr> batchAxes;
  const MachineModel &machine;
  const ShardingSolverOptions &options;

  std::vector<Node> nodes;
  std::vector<Edge> edges;
  DenseMap<Operation *, int64_t> nodeOfOp;
  DenseMap<int64_t, int64_t> nodeOfArgument;
  /// Values a gradient flows to: those made from parameters.
  DenseSet<Value> differentiable;
  /// Values made from the data (not from parameters and constants alone).
  DenseSet<Value> dataValues;
  /// With batch axes: the dims of each value that hold the batch, and the
  /// factors of each op that do.
  DenseMap<Value, SmallVector<bool>> batchDims;
  DenseMap<Operation *, SmallVector<bool>> batchFactors;

private:
  void findBatchDims();
  /// Whether `sharding` of `value` puts the batch axes on its batch dims
  /// only and the other axes off them; `strict`: and uses every batch axis
  /// where the value has a batch dim.
  bool keepsBatch(Value value, const TensorSharding &sharding,
                  bool strict) const;
  /// The shardings of `shardings` that keep the batch, strictly where any
  /// does.
  SmallVector<TensorSharding>
  filterBatch(Value value, SmallVector<TensorSharding> shardings) const;
  /// The cost of resharding `value` from `from` to `to` in a step (per
  /// microbatch unless `perMicrobatch` is false: once per step).
  ReshardCost reshard(Value value, const TensorSharding &from,
                      const TensorSharding &to,
                      bool perMicrobatch = true) const;
  double getComputeSeconds(Operation *op, double split) const;
  std::vector<Strategy> getRuleStrategies(ShardingRuleOpInterface op,
                                          const ShardingRule &rule) const;
  Strategy getReplicatedStrategy(Operation *op) const;
  std::optional<TensorSharding> getAnnotation(Attribute attr) const;
};

} // namespace

ReshardCost ProgramBuilder::reshard(Value value, const TensorSharding &from,
                                    const TensorSharding &to,
                                    bool perMicrobatch) const {
  auto type = cast<RankedTensorType>(value.getType());
  // A value keeps only the partial sums it has (see the partitioner).
  TensorSharding target = to;
  llvm::erase_if(target.unreduced, [&](StringAttr axis) {
    return !llvm::is_contained(from.unreduced, axis);
  });
  // A step of microbatches reshards each microbatch's value: its batch dim
  // a microbatch's, or (a value without the batch) the whole, each time.
  int64_t m = perMicrobatch ? options.microbatches : 1;
  SmallVector<int64_t> shape(type.getShape());
  if (auto it = batchDims.find(value); m > 1 && it != batchDims.end())
    for (auto [size, batch] : llvm::zip(shape, it->second))
      if (batch && size % m == 0) {
        size /= m;
        break;
      }
  ReshardCost cost =
      getReshardCost(machine, mesh, shape, getElementBytes(type), from, target);
  cost.seconds *= m;
  cost.bytes *= m;
  return cost;
}

double ProgramBuilder::getLocalBytes(Value value,
                                     const TensorSharding &sharding) const {
  auto type = cast<RankedTensorType>(value.getType());
  double bytes = getElementBytes(type);
  for (auto [size, dim] : llvm::zip(type.getShape(), sharding.dims))
    bytes *= static_cast<double>(size) / mesh.getGroupSize(dim.axes);
  return bytes;
}

void ProgramBuilder::findBatchDims() {
  // Also where the batch axes have one device: microbatches split the batch.
  if (options.batchAxes.empty())
    return;
  auto isParameter = [&](Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName);
  };
  for (BlockArgument arg : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0 || isParameter(arg))
      continue;
    SmallVector<bool> dims(type.getRank(), false);
    dims.front() = true;
    batchDims[arg] = std::move(dims);
  }
  // A dim holds the batch where its major factor (a merged [b * s] dim's b)
  // is one that a batch dim of the op's operands or results holds: forward
  // from the data, and back into what is combined with it (a broadcast
  // position table added to the embeddings), but never into a parameter.
  SmallVector<std::pair<Operation *, ShardingRule>> rules;
  function.walk([&](ShardingRuleOpInterface op) {
    rules.emplace_back(op, op.getShardingRule());
  });
  auto isBatch = [&](Value value, size_t dim) {
    auto it = batchDims.find(value);
    return it != batchDims.end() && dim < it->second.size() && it->second[dim];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &[op, rule] : rules) {
      SmallVector<bool> &factors = batchFactors[op];
      factors.resize(rule.getNumFactors(), false);
      auto visit = [&](ArrayRef<TensorFactors> tensors, ValueRange values,
                       bool mark) {
        for (auto [index, tensor] : llvm::enumerate(tensors)) {
          if (index >= values.size())
            break;
          Value value = values[index];
          for (auto [dim, dimFactors] : llvm::enumerate(tensor)) {
            if (dimFactors.empty())
              continue;
            int64_t major = dimFactors.front();
            if (!mark) {
              if (isBatch(value, dim) && !factors[major])
                factors[major] = changed = true;
            } else if (factors[major] && !isBatch(value, dim) &&
                       !isParameter(value)) {
              SmallVector<bool> &dims = batchDims[value];
              dims.resize(tensor.size(), false);
              dims[dim] = changed = true;
            }
          }
        }
      };
      visit(rule.getOperandFactors(), op->getOperands(), false);
      visit(rule.getResultFactors(), op->getResults(), false);
      visit(rule.getOperandFactors(), op->getOperands(), true);
      visit(rule.getResultFactors(), op->getResults(), true);
    }
    // A constraint's input and result are one value.
    function.walk([&](dist::ShardingConstraintOp constraint) {
      for (auto [from, to] : {std::pair<Value, Value>(constraint.getInput(),
                                                      constraint.getResult()),
                              std::pair<Value, Value>(constraint.getResult(),
                                                      constraint.getInput())}) {
        auto it = batchDims.find(from);
        if (it == batchDims.end() || isParameter(to))
          continue;
        SmallVector<bool> dims = it->second;
        SmallVector<bool> &target = batchDims[to];
        if (target != dims) {
          target.resize(dims.size(), false);
          for (auto [dim, batch] : llvm::enumerate(dims))
            if (batch && !target[dim])
              target[dim] = changed = true;
        }
      }
    });
  }
}

bool ProgramBuilder::keepsBatch(Value value, const TensorSharding &sharding,
                                bool strict) const {
  if (batchAxes.empty())
    return true;
  auto it = batchDims.find(value);
  ArrayRef<bool> dims =
      it != batchDims.end() ? ArrayRef<bool>(it->second) : ArrayRef<bool>();
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.dims)) {
    bool batch = dim < dims.size() && dims[dim];
    for (StringAttr axis : dimSharding.axes)
      if (llvm::is_contained(batchAxes, axis) != batch)
        return false;
  }
  return !strict || !llvm::is_contained(dims, true) ||
         llvm::all_of(batchAxes,
                      [&](StringAttr axis) { return sharding.usesAxis(axis); });
}

SmallVector<TensorSharding>
ProgramBuilder::filterBatch(Value value,
                            SmallVector<TensorSharding> shardings) const {
  for (bool strict : {true, false}) {
    SmallVector<TensorSharding> kept;
    for (const TensorSharding &sharding : shardings)
      if (keepsBatch(value, sharding, strict))
        kept.push_back(sharding);
    if (!kept.empty())
      return kept;
  }
  return shardings;
}

ReshardCost ProgramBuilder::getEdgeCost(Value value, const TensorSharding &from,
                                        const TensorSharding &to,
                                        const TensorSharding &gradient) const {
  ReshardCost cost = reshard(value, from, to);
  // The gradient completes its sums into the consumer's layout, then goes
  // back to the producer's: a slice's gradient is gathered, a gather's
  // sliced. A parameter that ZeRO stores split has its sums over ZeRO's
  // axes reduce-scattered onto its pieces instead (the weights' gather
  // prices the rest, see build).
  if (options.training && differentiable.contains(value)) {
    TensorSharding completed = gradient;
    auto arg = dyn_cast<BlockArgument>(value);
    func::FuncOp owner = function;
    bool parameter =
        arg && owner.getArgAttr(arg.getArgNumber(), nn::kParamAttrName);
    // A parameter's gradient is summed over the microbatches and reduced
    // once per step, but from ZeRO-2 on, where each microbatch's is
    // reduce-scattered.
    bool perMicrobatch = !parameter || options.zeroStage >= 2;
    if (options.zeroStage > 0 && !zeroAxes.empty() && parameter &&
        llvm::all_of(zeroAxes, [&](StringAttr axis) {
          return llvm::is_contained(gradient.unreduced, axis);
        })) {
      llvm::erase_if(completed.unreduced, [&](StringAttr axis) {
        return llvm::is_contained(zeroAxes, axis);
      });
      double bytes = getLocalBytes(value, to);
      int64_t times = perMicrobatch ? options.microbatches : 1;
      cost += ReshardCost{
          times * getCollectiveSeconds(machine, CollectiveKind::ReduceScatter,
                                       bytes, mesh.getDeviceGroup(zeroAxes)),
          times * bytes};
    }
    cost += reshard(value, completed, to, perMicrobatch);
    cost += reshard(value, to, from);
  }
  return cost;
}

double ProgramBuilder::getComputeSeconds(Operation *op, double split) const {
  auto cost = dyn_cast<CostOpInterface>(op);
  if (!cost || op->getNumResults() == 0)
    return 0;
  double pieces = split * options.microbatches;
  llvm::Expected<double> seconds = tessera::getComputeSeconds(
      machine, getDtypeName(op->getResult(0).getType()),
      cost.getFlops() / pieces, cost.getBytesAccessed() / pieces);
  if (!seconds) {
    llvm::consumeError(seconds.takeError());
    return 0;
  }
  // The backward computes about twice the forward.
  bool trained =
      options.training && llvm::any_of(op->getResults(), [&](Value result) {
        return differentiable.contains(result);
      });
  return *seconds * options.microbatches * (trained ? 3 : 1);
}

std::optional<TensorSharding>
ProgramBuilder::getAnnotation(Attribute attr) const {
  auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr);
  if (!sharding)
    return std::nullopt;
  return restrictTo(TensorSharding::fromAttr(sharding), axes);
}

Strategy ProgramBuilder::getReplicatedStrategy(Operation *op) const {
  Strategy strategy;
  for (Value operand : op->getOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    strategy.operands.push_back(
        type ? std::optional(TensorSharding::getReplicated(type.getRank()))
             : std::nullopt);
    strategy.operandGradients.push_back(
        TensorSharding::getReplicated(type ? type.getRank() : 0));
  }
  for (Value result : op->getResults()) {
    auto type = dyn_cast<RankedTensorType>(result.getType());
    strategy.results.push_back(
        TensorSharding::getReplicated(type ? type.getRank() : 0));
  }
  strategy.seconds = getComputeSeconds(op, 1);
  return strategy;
}

/// Every assignment of the solved axes to the op's factors (an axis to at
/// most one factor that the op partitions and that it divides) under which
/// each tensor's dims hold their factors' axes (a factor minor to one not
/// split whole takes none); each reduction's partial results completed whole
/// or, for a one-result op, scattered onto one of its dims.
std::vector<Strategy>
ProgramBuilder::getRuleStrategies(ShardingRuleOpInterface op,
                                  const ShardingRule &rule) const {
  SmallVector<FactorAxes> assignments;
  FactorAxes current(rule.getNumFactors());
  std::function<void(size_t)> assign = [&](size_t index) {
    if (index == axes.size()) {
      assignments.push_back(current);
      return;
    }
    assign(index + 1);
    for (int64_t factor = 0; factor < rule.getNumFactors(); ++factor) {
      const Factor &f = rule.getFactors()[factor];
      if (f.kind == FactorKind::NeedReplication ||
          !op.isFactorPartitionable(factor))
        continue;
      current[factor].push_back(axes[index]);
      if (f.size % mesh.getGroupSize(current[factor]) == 0)
        assign(index + 1);
      current[factor].pop_back();
    }
  };
  assign(0);
  // With batch axes: they split the op's batch factors only, every one of
  // them where it has such a factor and some assignment allows it; the
  // other axes never do.
  if (!batchAxes.empty()) {
    auto it = batchFactors.find(op);
    ArrayRef<bool> factors = it != batchFactors.end()
                                 ? ArrayRef<bool>(it->second)
                                 : ArrayRef<bool>();
    auto keeps = [&](const FactorAxes &factorAxes, bool strict) {
      size_t batchAssigned = 0;
      for (auto [factor, factorAxesList] : llvm::enumerate(factorAxes))
        for (StringAttr axis : factorAxesList) {
          bool batch = factor < factors.size() && factors[factor];
          if (llvm::is_contained(batchAxes, axis) != batch)
            return false;
          batchAssigned += batch;
        }
      return !strict || !llvm::is_contained(factors, true) ||
             batchAssigned == batchAxes.size();
    };
    for (bool strict : {true, false}) {
      SmallVector<FactorAxes> kept;
      for (const FactorAxes &factorAxes : assignments)
        if (keeps(factorAxes, strict))
          kept.push_back(factorAxes);
      if (!kept.empty()) {
        assignments = std::move(kept);
        break;
      }
    }
  }

  auto holdsAxes = [&](const FactorAxes &factorAxes,
                       const TensorFactors &tensor) {
    for (ArrayRef<int64_t> dimFactors : tensor) {
      bool whole = true;
      for (int64_t factor : dimFactors) {
        if (!whole && !factorAxes[factor].empty())
          return false;
        whole = whole && rule.getFactors()[factor].size ==
                             mesh.getGroupSize(factorAxes[factor]);
      }
    }
    return true;
  };
  auto inTensor = [](const TensorFactors &tensor, int64_t factor) {
    return llvm::any_of(tensor, [&](ArrayRef<int64_t> dimFactors) {
      return llvm::is_contained(dimFactors, factor);
    });
  };
  auto makeSharding = [&](const TensorFactors &tensor,
                          const FactorAxes &factorAxes) {
    TensorSharding sharding =
        TensorSharding::getReplicated(static_cast<int64_t>(tensor.size()));
    for (auto [dim, dimAxes] :
         llvm::enumerate(projectFromFactors(rule, tensor, factorAxes, mesh)))
      sharding.dims[dim].axes = dimAxes;
    return sharding;
  };

  std::vector<Strategy> strategies;
  for (const FactorAxes &factorAxes : assignments) {
    if (!llvm::all_of(rule.getOperandFactors(),
                      [&](const TensorFactors &tensor) {
                        return holdsAxes(factorAxes, tensor);
                      }) ||
        !llvm::all_of(rule.getResultFactors(),
                      [&](const TensorFactors &tensor) {
                        return holdsAxes(factorAxes, tensor);
                      }))
      continue;
    Strategy strategy;
    strategy.factorAxes = factorAxes;
    double split = 1;
    for (const AxisList &factorAxesList : factorAxes)
      split *= mesh.getGroupSize(factorAxesList);
    for (auto [index, tensor] : llvm::enumerate(rule.getOperandFactors())) {
      TensorSharding need = makeSharding(tensor, factorAxes);
      TensorSharding gradient = need;
      for (auto [factor, factorAxesList] : llvm::enumerate(factorAxes))
        if (!inTensor(tensor, factor))
          llvm::append_range(gradient.unreduced, factorAxesList);
      strategy.operands.push_back(need);
      strategy.operandGradients.push_back(gradient);
    }
    SmallVector<TensorSharding> raw;
    for (auto [index, tensor] : llvm::enumerate(rule.getResultFactors())) {
      raw.push_back(makeSharding(tensor, factorAxes));
      for (auto [factor, factorAxesList] : llvm::enumerate(factorAxes))
        if (rule.isReducedIn(index, factor))
          llvm::append_range(raw.back().unreduced, factorAxesList);
    }
    double computeSeconds = getComputeSeconds(op, split);
    // Partial sums are completed from `raw` into `complete`; the
    // gradient goes back the other way.
    auto addStrategy = [&](ArrayRef<TensorSharding> complete) {
      Strategy variant = strategy;
      variant.seconds = computeSeconds;
      variant.partialResults = raw;
      for (auto [index, result] : llvm::enumerate(op->getResults())) {
        variant.results.push_back(complete[index]);
        if (raw[index] != complete[index]) {
          ReshardCost cost = reshard(result, raw[index], complete[index]);
          TensorSharding dims = raw[index];
          dims.unreduced.clear();
          if (options.training && differentiable.contains(result))
            cost += reshard(result, complete[index], dims);
          variant.seconds += cost.seconds;
          variant.reshardBytes += cost.bytes;
        }
        if (options.training && options.keepActivations)
          variant.memoryBytes += getLocalBytes(result, complete[index]);
      }
      strategies.push_back(std::move(variant));
    };
    SmallVector<TensorSharding> whole = raw;
    for (TensorSharding &sharding : whole)
      sharding.unreduced.clear();
    addStrategy(whole);
    if (op->getNumResults() != 1 || raw[0].unreduced.empty())
      continue;
    AxisList partial = raw[0].unreduced;
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    // Onto a dim whose axes stay in mesh order, as every other choice
    // orders them.
    auto meshPosition = [&](StringAttr axis) {
      return llvm::find(mesh.getAxes(), axis) - mesh.getAxes().begin();
    };
    for (int64_t dim = 0; dim < type.getRank(); ++dim) {
      SmallVector<TensorSharding> scattered = whole;
      AxisList &dimAxes = scattered[0].dims[dim].axes;
      llvm::append_range(dimAxes, partial);
      if (type.getDimSize(dim) % mesh.getGroupSize(dimAxes) == 0 &&
          llvm::is_sorted(dimAxes,
                          [&](StringAttr a, StringAttr b) {
                            return meshPosition(a) < meshPosition(b);
                          }) &&
          keepsBatch(op->getResult(0), scattered[0], /*strict=*/false))
        addStrategy(scattered);
    }
  }
  return strategies;
}

LogicalResult ProgramBuilder::build(std::string &error) {
  findBatchDims();
  // What gradients reach and what the data makes.
  for (BlockArgument arg : function.getArguments()) {
    if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      differentiable.insert(arg);
    else
      dataValues.insert(arg);
  }
  function.walk([&](Operation *op) {
    auto reads = [&](const DenseSet<Value> &set) {
      return llvm::any_of(op->getOperands(),
                          [&](Value value) { return set.contains(value); });
    };
    if (reads(differentiable))
      differentiable.insert(op->result_begin(), op->result_end());
    if (reads(dataValues))
      dataValues.insert(op->result_begin(), op->result_end());
  });

  StringRef attrName = dist::DistDialect::kShardingAttrName;
  for (BlockArgument arg : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    std::optional<TensorSharding> annotation =
        getAnnotation(function.getArgAttr(arg.getArgNumber(), attrName));
    Node node;
    node.argument = arg.getArgNumber();
    bool trained = options.training && differentiable.contains(arg);
    for (const TensorSharding &sharding : filterBatch(
             arg, getTensorShardings(
                      type.getShape(),
                      annotation ? *annotation
                                 : TensorSharding::getOpen(type.getRank()),
                      axes, mesh))) {
      Strategy strategy;
      strategy.results.push_back(sharding);
      if (trained) {
        // ZeRO's axes split the stored state, not the dims.
        if (options.zeroStage > 0 &&
            llvm::any_of(zeroAxes, [&](StringAttr axis) {
              return sharding.usesAxis(axis);
            }))
          continue;
        double bytes = getLocalBytes(arg, sharding);
        double group = options.zeroStage > 0 ? mesh.getGroupSize(zeroAxes) : 1;
        auto share = [&](int64_t stage) {
          return options.zeroStage >= stage ? bytes / group : bytes;
        };
        strategy.memoryBytes =
            share(3) + share(2) +
            share(1) * options.optimizerBytesPerParameterByte;
        // Stage 3 gathers the weight for each microbatch's forward and
        // backward; stages 1 and 2 once per step, after the update.
        if (options.zeroStage > 0 && group > 1) {
          int64_t gathers =
              options.zeroStage >= 3 ? 2 * options.microbatches : 1;
          double seconds =
              getCollectiveSeconds(machine, CollectiveKind::AllGather, bytes,
                                   mesh.getDeviceGroup(zeroAxes));
          strategy.seconds += gathers * seconds;
          strategy.reshardBytes += gathers * bytes;
        }
      }
      node.strategies.push_back(std::move(strategy));
    }
    if (node.strategies.empty()) {
      error = llvm::formatv("argument #{0} has no sharding its annotation "
                            "allows on the solved axes",
                            arg.getArgNumber());
      return failure();
    }
    nodeOfArgument[arg.getArgNumber()] = nodes.size();
    nodes.push_back(std::move(node));
  }

  for (Operation &op : function.front()) {
    Node node;
    node.op = &op;
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(&op)) {
      auto type = constraint.getType();
      TensorSharding annotation = *getAnnotation(constraint.getSharding());
      TensorSharding base = annotation;
      base.unreduced.clear();
      for (const TensorSharding &sharding :
           filterBatch(constraint.getResult(),
                       getTensorShardings(type.getShape(), base, axes, mesh))) {
        Strategy strategy;
        TensorSharding need = sharding;
        need.unreduced = annotation.unreduced;
        strategy.operands.push_back(need);
        strategy.operandGradients.push_back(sharding);
        strategy.results.push_back(sharding);
        node.strategies.push_back(std::move(strategy));
      }
    } else if (auto ret = dyn_cast<func::ReturnOp>(&op)) {
      // The function's annotated results are needed as annotated.
      Strategy strategy;
      for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
        std::optional<TensorSharding> annotation =
            getAnnotation(function.getResultAttr(index, attrName));
        if (annotation)
          *annotation = annotation->getClosed();
        strategy.operands.push_back(annotation);
        auto type = dyn_cast<RankedTensorType>(operand.getType());
        strategy.operandGradients.push_back(
            annotation
                ? *annotation
                : TensorSharding::getReplicated(type ? type.getRank() : 0));
      }
      node.strategies.push_back(std::move(strategy));
    } else if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(&op)) {
      node.strategies = getRuleStrategies(ruleOp, ruleOp.getShardingRule());
    } else {
      node.strategies.push_back(getReplicatedStrategy(&op));
    }
    if (node.strategies.empty()) {
      // The rule allows nothing on these axes: computed whole.
      node.strategies.push_back(getReplicatedStrategy(&op));
    }
    nodeOfOp[&op] = nodes.size();
    nodes.push_back(std::move(node));
  }

  for (auto [index, node] : llvm::enumerate(nodes)) {
    node.representative = index;
    if (!node.op)
      continue;
    for (OpOperand &operand : node.op->getOpOperands()) {
      if (!node.strategies.front().operands[operand.getOperandNumber()])
        continue;
      Value value = operand.get();
      Edge edge;
      edge.consumer = index;
      edge.operand = operand.getOperandNumber();
      edge.value = value;
      if (auto arg = dyn_cast<BlockArgument>(value)) {
        edge.producer = nodeOfArgument.lookup(arg.getArgNumber());
        edge.result = 0;
      } else {
        edge.producer = nodeOfOp.lookup(value.getDefiningOp());
        edge.result = cast<OpResult>(value).getResultNumber();
      }
      edges.push_back(edge);
    }
  }
  return success();
}

/// Ties the ops of each repeated block after the first, and the parameters
/// and parameter-only ops they read, to those of the first block. Gives up
/// (nothing tied) where the blocks do not correspond one to one.
int64_t ProgramBuilder::shareBlocks() {
  SmallVector<SmallVector<Operation *>> blocks = findRepeatedBlocks(function);
  if (blocks.size() < 2)
    return 0;
  auto nodeOf = [&](Value value) -> std::optional<int64_t> {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      auto it = nodeOfArgument.find(arg.getArgNumber());
      return it == nodeOfArgument.end() ? std::nullopt
                                        : std::optional(it->second);
    }
    return nodeOfOp.lookup(value.getDefiningOp());
  };
  DenseMap<int64_t, int64_t> tied;
  std::function<bool(Value, Value)> tieValues = [&](Value value,
                                                    Value first) -> bool {
    if (value == first || dataValues.contains(value) ||
        dataValues.contains(first))
      return true;
    std::optional<int64_t> node = nodeOf(value), firstNode = nodeOf(first);
    if (!node || !firstNode || value.getType() != first.getType())
      return false;
    auto [it, inserted] = tied.try_emplace(*node, *firstNode);
    if (!inserted)
      return it->second == *firstNode;
    Operation *op = value.getDefiningOp();
    Operation *firstOp = first.getDefiningOp();
    if (!op || !firstOp)
      return isa<BlockArgument>(value) && isa<BlockArgument>(first) &&
             function.getArgAttr(cast<BlockArgument>(value).getArgNumber(),
                                 nn::kParamAttrName);
    if (op->getName() != firstOp->getName() ||
        op->getNumOperands() != firstOp->getNumOperands())
      return false;
    for (auto [operand, firstOperand] :
         llvm::zip(op->getOperands(), firstOp->getOperands()))
      if (!tieValues(operand, firstOperand))
        return false;
    return true;
  };
  for (size_t block = 1; block < blocks.size(); ++block)
    for (auto [op, firstOp] : llvm::zip(blocks[block], blocks[0])) {
      auto [it, inserted] =
          tied.try_emplace(nodeOfOp.lookup(op), nodeOfOp.lookup(firstOp));
      if ((!inserted && it->second != nodeOfOp.lookup(firstOp)) ||
          op->getAttrDictionary() != firstOp->getAttrDictionary())
        return 0;
      for (auto [operand, firstOperand] :
           llvm::zip(op->getOperands(), firstOp->getOperands()))
        if (!tieValues(operand, firstOperand))
          return 0;
    }
  for (auto [node, first] : tied)
    nodes[node].representative = first;
  return blocks.size();
}

/// Merges each op that computes pointwise on one data operand (its other
/// operands made of parameters and constants), as Alpa merges element-wise
/// ops, transposes and reshapes, into that operand's producer: for each of
/// the producer's choices it takes the one that needs the operand as made,
/// so that it adds no variables. Then each op of parameters and constants
/// alone with one reader into that reader, made as it needs. An op that
/// cannot follow every choice keeps its own.
/// For each of a root's `choices`, the first strategy of `node` that
/// `matches` it; none when one has no match.
static std::optional<SmallVector<int64_t>>
mapStrategies(const Node &node, size_t choices,
              llvm::function_ref<bool(const Strategy &, size_t)> matches) {
  SmallVector<int64_t> map;
  for (size_t s = 0; s < choices; ++s) {
    auto match = llvm::find_if(
        node.strategies, [&](const Strategy &own) { return matches(own, s); });
    if (match == node.strategies.end())
      return std::nullopt;
    map.push_back(match - node.strategies.begin());
  }
  return map;
}

int64_t ProgramBuilder::mergeFollowers() {
  int64_t merged = 0;
  for (Node &node : nodes) {
    node.root = &node - nodes.data();
    node.strategyMap.clear();
    for (size_t s = 0; s < node.strategies.size(); ++s)
      node.strategyMap.push_back(s);
  }
  for (Node &node : nodes) {
    // Block copies follow their first block's node, merged or not.
    if (!node.op || node.representative != &node - nodes.data())
      continue;
    auto ruleOp = dyn_cast<ShardingRuleOpInterface>(node.op);
    if (!ruleOp || !ruleOp.getShardingRule().hasOnlyParallelFactors() ||
        node.op->getNumResults() != 1)
      continue;
    std::optional<int64_t> dataOperand;
    for (OpOperand &operand : node.op->getOpOperands()) {
      if (!dataValues.contains(operand.get()))
        continue;
      if (dataOperand) {
        dataOperand.reset();
        break;
      }
      dataOperand = operand.getOperandNumber();
    }
    if (!dataOperand)
      continue;
    Value value = node.op->getOperand(*dataOperand);
    Operation *producerOp = value.getDefiningOp();
    if (!producerOp)
      continue;
    const Node &producer =
        nodes[nodes[nodeOfOp.lookup(producerOp)].representative];
    int64_t result = cast<OpResult>(value).getResultNumber();
    const Node &root = nodes[producer.root];
    std::optional<SmallVector<int64_t>> map = mapStrategies(
        node, root.strategies.size(), [&](const Strategy &own, size_t s) {
          const TensorSharding &made =
              producer.strategies[producer.strategyMap[s]].results[result];
          return own.operands[*dataOperand]->getDimAxes() == made.getDimAxes();
        });
    if (!map)
      continue;
    node.root = producer.root;
    node.strategyMap = std::move(*map);
    ++merged;
  }
  // An op of parameters and constants alone read by one op (a bias's
  // broadcast, a constant) is made as its reader needs it.
  for (Node &node : llvm::reverse(nodes)) {
    if (!node.op || node.representative != &node - nodes.data() ||
        node.op->getNumResults() != 1 || !node.op->getResult(0).hasOneUse() ||
        dataValues.contains(node.op->getResult(0)) ||
        node.root != &node - nodes.data())
      continue;
    OpOperand &use = *node.op->getResult(0).use_begin();
    auto it = nodeOfOp.find(use.getOwner());
    if (it == nodeOfOp.end())
      continue;
    const Node &reader = nodes[nodes[it->second].representative];
    const Node &root = nodes[reader.root];
    std::optional<SmallVector<int64_t>> map = mapStrategies(
        node, root.strategies.size(), [&](const Strategy &own, size_t s) {
          const std::optional<TensorSharding> &need =
              reader.strategies[reader.strategyMap[s]]
                  .operands[use.getOperandNumber()];
          return need && own.results.front().getDimAxes() == need->getDimAxes();
        });
    if (!map)
      continue;
    node.root = reader.root;
    node.strategyMap = std::move(*map);
    ++merged;
  }
  for (Node &node : nodes) {
    const Node &first = nodes[node.representative];
    node.root = first.root;
    node.strategyMap = first.strategyMap;
  }
  return merged;
}

void ProgramBuilder::addGradientSums() {
  if (!options.training)
    return;
  // The Value edges of each value, by its producer's end.
  llvm::MapVector<std::pair<int64_t, int64_t>, SmallVector<size_t>> readers;
  for (auto [index, edge] : llvm::enumerate(edges))
    if (differentiable.contains(edge.value))
      readers[{edge.producer, edge.result}].push_back(index);
  std::map<std::pair<int64_t, int64_t>, int64_t> sumOf;
  for (auto &[end, indices] : readers) {
    if (indices.size() < 2)
      continue;
    Value value = edges[indices.front()].value;
    auto type = cast<RankedTensorType>(value.getType());
    Value source = value;
    while (auto cast = source.getDefiningOp<nn::CastOp>())
      source = cast.getInput();
    bool parameter = isa<BlockArgument>(source);
    Node sum;
    int64_t index = nodes.size();
    for (const TensorSharding &sharding : getTensorShardings(
             type.getShape(), TensorSharding::getOpen(type.getRank()), axes,
             mesh)) {
      // Partial over each set of the axes its dims leave free.
      SmallVector<StringAttr> free;
      for (StringAttr axis : axes)
        if (llvm::none_of(sharding.dims, [&](const DimSharding &dim) {
              return llvm::is_contained(dim.axes, axis);
            }))
          free.push_back(axis);
      uint64_t subsets = parameter ? 1 : uint64_t(1) << free.size();
      for (uint64_t subset = 0; subset < subsets; ++subset) {
        Strategy strategy;
        strategy.results.push_back(sharding);
        for (auto [bit, axis] : llvm::enumerate(free))
          if (subset & (uint64_t(1) << bit))
            strategy.results.back().unreduced.push_back(axis);
        sum.strategies.push_back(std::move(strategy));
      }
    }
    // A block copy's sum is its first block's.
    int64_t producerFirst = nodes[end.first].representative;
    auto first = sumOf.find({producerFirst, end.second});
    sum.representative = first != sumOf.end() ? first->second : index;
    sum.root = index;
    for (size_t s = 0; s < sum.strategies.size(); ++s)
      sum.strategyMap.push_back(s);
    if (first != sumOf.end()) {
      sum.root = nodes[first->second].root;
      sum.strategyMap = nodes[first->second].strategyMap;
    }
    sumOf[end] = index;
    nodes.push_back(std::move(sum));
    for (size_t reader : indices) {
      Edge &edge = edges[reader];
      edge.kind = EdgeKind::Forward;
      edges.push_back(
          {edge.consumer, edge.operand, index, 0, value, EdgeKind::IntoSum});
    }
    edges.push_back(
        {index, 0, end.first, end.second, value, EdgeKind::OutOfSum});
  }
}

ReshardCost ProgramBuilder::getEdgeCost(
    EdgeKind kind, Value value,
    const std::pair<TensorSharding, TensorSharding> &from,
    const std::pair<TensorSharding, TensorSharding> &to) const {
  switch (kind) {
  case EdgeKind::Value:
    return getEdgeCost(value, from.first, to.first, to.second);
  case EdgeKind::Forward:
  case EdgeKind::OutOfSum:
    return reshard(value, from.first, to.first);
  case EdgeKind::IntoSum: {
    if (!to.first.unreduced.empty()) {
      // A term joins a partial sum only partial over its axes, as the
      // partitioner sums terms that are all reduced over the same axes.
      if (llvm::any_of(to.first.unreduced, [&](StringAttr axis) {
            return !llvm::is_contained(from.second.unreduced, axis);
          }))
        return {kForbiddenSeconds, 0};
      return reshard(value, from.second, to.first);
    }
    ReshardCost cost = reshard(value, from.second, from.first);
    cost += reshard(value, from.first, to.first);
    return cost;
  }
  }
  llvm_unreachable("unknown edge kind");
}

/// What of `strategy` an edge of `kind` reads at its end (`producerEnd`
/// or not) and `slot`: the result or need, with the gradient a consumer
/// makes where the edge prices it.
static std::pair<TensorSharding, TensorSharding>
getEdgeKey(const Strategy &strategy, EdgeKind kind, bool producerEnd,
           int64_t slot) {
  if (producerEnd && kind == EdgeKind::IntoSum)
    return {*strategy.operands[slot], strategy.operandGradients[slot]};
  if (producerEnd || kind == EdgeKind::IntoSum || kind == EdgeKind::OutOfSum)
    return {strategy.results[slot], {}};
  if (kind == EdgeKind::Value)
    return {*strategy.operands[slot], strategy.operandGradients[slot]};
  return {*strategy.operands[slot], {}};
}

namespace {

/// The edges between two representatives, one cost matrix over their
/// roots' choices.
struct EdgeClass {
  EdgeKind kind;
  /// The representatives at its ends, and their roots.
  int64_t producer, result, consumer, operand;
  int64_t producerRoot, consumerRoot;
  /// How many edges of the program it stands for.
  int64_t count = 0;
  Value value;
  /// Per choice of each end's root, the index of its distinct sharding.
  SmallVector<int64_t> producerIndex, consumerIndex;
  /// The reshards per (producer sharding, consumer sharding).
  SmallVector<SmallVector<ReshardCost>> costs;

  const ReshardCost &get(int64_t producerChoice, int64_t consumerChoice) const {
    return costs[producerIndex[producerChoice]][consumerIndex[consumerChoice]];
  }
  double getSeconds(int64_t producerChoice, int64_t consumerChoice) const {
    return get(producerChoice, consumerChoice).seconds;
  }
};

/// Numbers the distinct elements of `elements`; `index` gets each one's.
template <typename T>
std::vector<T> numberDistinct(ArrayRef<T> elements,
                              SmallVectorImpl<int64_t> &index) {
  std::vector<T> distinct;
  for (const T &element : elements) {
    auto it = llvm::find(distinct, element);
    index.push_back(it - distinct.begin());
    if (it == distinct.end())
      distinct.push_back(element);
  }
  return distinct;
}

} // namespace

llvm::Expected<ShardingSolution>
tessera::solveShardings(func::FuncOp function, dist::MeshOp meshOp,
                        const MachineModel &machine,
                        const ShardingSolverOptions &options) {
  auto started = std::chrono::steady_clock::now();
  MeshShape mesh(meshOp);
  SmallVector<StringAttr> axes;
  if (options.axes.empty()) {
    axes.assign(mesh.getAxes().begin(), mesh.getAxes().end());
  } else {
    // In mesh order, as an axis list of a dim is major to minor.
    for (StringAttr axis : mesh.getAxes())
      if (llvm::is_contained(options.axes, axis.getValue()))
        axes.push_back(axis);
    for (const std::string &axis : options.axes)
      if (!llvm::any_of(axes,
                        [&](StringAttr a) { return a.getValue() == axis; }))
        return llvm::createStringError(
            llvm::formatv("mesh @{0} has no axis '{1}'", meshOp.getSymName(),
                          axis)
                .str());
  }
  for (const std::string &axis : options.batchAxes)
    if (!llvm::any_of(axes, [&](StringAttr a) { return a.getValue() == axis; }))
      return llvm::createStringError(
          llvm::formatv(
              "the batch axis '{0}' is not a solved axis of mesh @{1}", axis,
              meshOp.getSymName())
              .str());
  // An axis of one device splits nothing.
  llvm::erase_if(axes,
                 [&](StringAttr axis) { return mesh.getAxisSize(axis) == 1; });
  if (function.getBody().getBlocks().size() != 1)
    return llvm::createStringError("the solver reads functions of one block");

  ProgramBuilder program(function, mesh, axes, machine, options);
  std::string error;
  if (failed(program.build(error)))
    return llvm::createStringError(error);
  int64_t sharedBlocks = options.shareBlocks ? program.shareBlocks() : 0;
  program.mergeFollowers();
  program.addGradientSums();
  std::vector<Node> &nodes = program.nodes;
  auto strategyOf = [&](const Node &node,
                        int64_t rootChoice) -> const Strategy & {
    return node.strategies[node.strategyMap[rootChoice]];
  };

  // The pipeline stage that holds each node: an op's from the stage starts
  // before it, an argument's its first reader's (a sum of gradients, the
  // first).
  int64_t stages = options.stageStarts.size() + 1;
  DenseMap<Operation *, int64_t> stageOfOp;
  for (Operation &op : function.front()) {
    if (llvm::is_contained(options.stageStarts, &op))
      stageOfOp[&op] = llvm::find(options.stageStarts, &op) -
                       options.stageStarts.begin() + 1;
    else
      stageOfOp[&op] = op.getPrevNode() ? stageOfOp[op.getPrevNode()] : 0;
  }
  auto getStage = [&](const Node &node) -> int64_t {
    if (node.op)
      return stageOfOp.lookup(node.op);
    if (node.argument < 0)
      return 0;
    int64_t stage = stages - 1;
    for (Operation *user : function.getArgument(node.argument).getUsers())
      stage = std::min(stage, stageOfOp.lookup(user));
    return stage;
  };

  // The roots carry the variables; every node adds its cost to its root's,
  // and its memory to its root's in its stage.
  llvm::MapVector<int64_t, SmallVector<double>> rootSeconds;
  llvm::MapVector<int64_t, SmallVector<SmallVector<double>>> rootMemory;
  for (const Node &node : nodes) {
    size_t choices = nodes[node.root].strategies.size();
    SmallVector<double> &seconds = rootSeconds[node.root];
    SmallVector<SmallVector<double>> &memory = rootMemory[node.root];
    seconds.resize(choices, 0);
    memory.resize(stages, SmallVector<double>(choices, 0));
    int64_t stage = getStage(node);
    for (size_t s = 0; s < choices; ++s) {
      seconds[s] += strategyOf(node, s).seconds;
      memory[stage][s] += strategyOf(node, s).memoryBytes;
    }
  }

  // Edges between representatives.
  std::map<std::tuple<EdgeKind, int64_t, int64_t, int64_t, int64_t>, int64_t>
      classOf;
  std::vector<EdgeClass> edgeClasses;
  SmallVector<int64_t> edgeClassOf;
  for (const Edge &edge : program.edges) {
    int64_t producer = nodes[edge.producer].representative;
    int64_t consumer = nodes[edge.consumer].representative;
    auto key = std::make_tuple(edge.kind, producer, edge.result, consumer,
                               edge.operand);
    auto [it, inserted] = classOf.try_emplace(key, edgeClasses.size());
    if (inserted) {
      EdgeClass &edgeClass = edgeClasses.emplace_back();
      edgeClass.kind = edge.kind;
      edgeClass.producer = producer;
      edgeClass.result = edge.result;
      edgeClass.consumer = consumer;
      edgeClass.operand = edge.operand;
      edgeClass.producerRoot = nodes[producer].root;
      edgeClass.consumerRoot = nodes[consumer].root;
      edgeClass.value = edge.value;
    }
    ++edgeClasses[it->second].count;
    edgeClassOf.push_back(it->second);
  }
  // An edge's cost depends on what each end makes or needs of the value or
  // of its gradient.
  using Key = std::pair<TensorSharding, TensorSharding>;
  for (EdgeClass &edgeClass : edgeClasses) {
    const Node &producer = nodes[edgeClass.producer];
    const Node &consumer = nodes[edgeClass.consumer];
    std::vector<Key> from, to;
    for (size_t s = 0; s < nodes[producer.root].strategies.size(); ++s)
      from.push_back(getEdgeKey(strategyOf(producer, s), edgeClass.kind,
                                /*producerEnd=*/true, edgeClass.result));
    for (size_t t = 0; t < nodes[consumer.root].strategies.size(); ++t)
      to.push_back(getEdgeKey(strategyOf(consumer, t), edgeClass.kind,
                              /*producerEnd=*/false, edgeClass.operand));
    std::vector<Key> distinctFrom =
        numberDistinct<Key>(from, edgeClass.producerIndex);
    std::vector<Key> distinctTo =
        numberDistinct<Key>(to, edgeClass.consumerIndex);
    for (const Key &source : distinctFrom) {
      SmallVector<ReshardCost> &row = edgeClass.costs.emplace_back();
      for (const Key &target : distinctTo)
        row.push_back(program.getEdgeCost(edgeClass.kind, edgeClass.value,
                                          source, target));
    }
  }

  // The integer program, in microseconds (CBC's tolerances are absolute).
  constexpr double kScale = 1e6;
  std::vector<double> objective, colLower, colUpper, rowLower, rowUpper;
  std::vector<bool> isInteger;
  CoinPackedMatrix matrix(false, 0, 0);
  auto addColumn = [&](double cost, bool integer) {
    objective.push_back(cost * kScale);
    colLower.push_back(0);
    colUpper.push_back(1);
    isInteger.push_back(integer);
    return static_cast<int>(objective.size() - 1);
  };
  auto addRow = [&](ArrayRef<int> columns, ArrayRef<double> values,
                    double lower, double upper) {
    CoinPackedVector row(static_cast<int>(columns.size()), columns.data(),
                         values.data());
    matrix.appendRow(row);
    rowLower.push_back(lower);
    rowUpper.push_back(upper);
  };
  DenseMap<int64_t, SmallVector<int>> columnsOf;
  // Per stage: the least memory any choice takes, and its memory row.
  SmallVector<double> minimumMemory(stages, 0);
  SmallVector<SmallVector<int>> memoryColumns(stages);
  SmallVector<SmallVector<double>> memoryValues(stages);
  for (auto &[root, seconds] : rootSeconds) {
    SmallVector<int> &columns = columnsOf[root];
    const SmallVector<SmallVector<double>> &memory = rootMemory[root];
    for (auto [s, cost] : llvm::enumerate(seconds)) {
      columns.push_back(addColumn(cost, true));
      for (int64_t stage = 0; stage < stages; ++stage)
        if (memory[stage][s] > 0) {
          memoryColumns[stage].push_back(columns.back());
          memoryValues[stage].push_back(memory[stage][s]);
        }
    }
    for (int64_t stage = 0; stage < stages; ++stage)
      minimumMemory[stage] += *llvm::min_element(memory[stage]);
    SmallVector<double> ones(columns.size(), 1.0);
    addRow(columns, ones, 1, 1);
  }
  for (EdgeClass &edgeClass : edgeClasses) {
    SmallVector<int> &from = columnsOf[edgeClass.producerRoot];
    SmallVector<int> &to = columnsOf[edgeClass.consumerRoot];
    int64_t rows = edgeClass.costs.size();
    int64_t cols = edgeClass.costs.front().size();
    double n = edgeClass.count;
    auto addToColumn = [&](int column, double seconds) {
      objective[column] += n * seconds * kScale;
    };
    if (edgeClass.producerRoot == edgeClass.consumerRoot) {
      // Both ends follow one root: the cost is its choice's alone.
      for (size_t s = 0; s < from.size(); ++s)
        addToColumn(from[s], edgeClass.getSeconds(s, s));
      continue;
    }
    if (rows == 1 || cols == 1) {
      // The cost is the other end's alone.
      if (rows == 1)
        for (size_t t = 0; t < to.size(); ++t)
          addToColumn(to[t], edgeClass.getSeconds(0, t));
      else
        for (size_t s = 0; s < from.size(); ++s)
          addToColumn(from[s], edgeClass.getSeconds(s, 0));
      continue;
    }
    SmallVector<SmallVector<int>> pair(rows, SmallVector<int>(cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        pair[i][j] = addColumn(n * edgeClass.costs[i][j].seconds, false);
    for (int64_t i = 0; i < rows; ++i) {
      SmallVector<int> columns(pair[i].begin(), pair[i].end());
      SmallVector<double> values(cols, 1.0);
      for (size_t s = 0; s < from.size(); ++s)
        if (edgeClass.producerIndex[s] == i) {
          columns.push_back(from[s]);
          values.push_back(-1.0);
        }
      addRow(columns, values, 0, 0);
    }
    for (int64_t j = 0; j < cols; ++j) {
      SmallVector<int> columns;
      SmallVector<double> values(rows, 1.0);
      for (int64_t i = 0; i < rows; ++i)
        columns.push_back(pair[i][j]);
      for (size_t t = 0; t < to.size(); ++t)
        if (edgeClass.consumerIndex[t] == j) {
          columns.push_back(to[t]);
          values.push_back(-1.0);
        }
      addRow(columns, values, 0, 0);
    }
  }
  double memoryLimit = options.memoryLimitBytes.value_or(machine.memoryBytes);
  for (int64_t stage = 0; stage < stages; ++stage) {
    if (minimumMemory[stage] > memoryLimit)
      return llvm::createStringError(llvm::formatv(
          "no sharding on {0} fits: the model state and activations take at "
          "least {1} per device{2}, over the limit of {3}",
          formatAxes(axes), formatBytes(minimumMemory[stage]),
          stages > 1 ? llvm::formatv(" of pipeline stage {0}", stage).str()
                     : std::string(),
          formatBytes(memoryLimit)));
    if (!memoryColumns[stage].empty())
      addRow(memoryColumns[stage], memoryValues[stage], -COIN_DBL_MAX,
             memoryLimit);
  }

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, colLower.data(), colUpper.data(), objective.data(),
                     rowLower.data(), rowUpper.data());
  for (auto [column, integer] : llvm::enumerate(isInteger))
    if (integer)
      solver.setInteger(static_cast<int>(column));
  // CBC as its command line runs it: presolve, cuts and heuristics, which a
  // bare branch and bound lacks.
  CbcModel model(solver);
  CbcSolverUsefulData data;
  CbcMain0(model, data);
  std::string seconds = std::to_string(kSolveSeconds);
  const char *arguments[] = {"tessera",       "-log",   "0",    "-sec",
                             seconds.c_str(), "-solve", "-quit"};
  CbcMain1(
      std::size(arguments), arguments, model, [](CbcModel *, int) { return 0; },
      data);
  const double *values = model.bestSolution();
  if (!values)
    return llvm::createStringError(
        model.isProvenInfeasible()
            ? llvm::formatv("no sharding on {0} fits in {1} per device",
                            formatAxes(axes), formatBytes(memoryLimit))
                  .str()
            : llvm::formatv("the solver found no sharding in {0} s",
                            kSolveSeconds)
                  .str());

  ShardingSolution solution;
  solution.axes = axes;
  solution.openToOtherAxes = !options.batchAxes.empty();
  solution.variables = objective.size();
  solution.constraints = rowLower.size();
  solution.optimal = model.isProvenOptimal();
  solution.nodes = llvm::count_if(
      nodes, [](const Node &node) { return node.op || node.argument >= 0; });
  solution.distinctNodes = rootSeconds.size();
  solution.sharedBlocks = sharedBlocks;
  DenseMap<int64_t, int64_t> chosen;
  for (auto &[root, columns] : columnsOf) {
    int64_t best = 0;
    for (auto [s, column] : llvm::enumerate(columns))
      if (values[column] > values[columns[best]])
        best = s;
    chosen[root] = best;
  }

  // The objective at the chosen strategies, and per root how it changes
  // when the root alone changes.
  DenseMap<int64_t, SmallVector<const EdgeClass *>> incident;
  double objectiveSeconds = 0;
  auto edgeCost = [&](const EdgeClass &edgeClass, int64_t root,
                      int64_t choice) {
    int64_t producer = edgeClass.producerRoot == root
                           ? choice
                           : chosen[edgeClass.producerRoot];
    int64_t consumer = edgeClass.consumerRoot == root
                           ? choice
                           : chosen[edgeClass.consumerRoot];
    return edgeClass.count * edgeClass.getSeconds(producer, consumer);
  };
  for (const EdgeClass &edgeClass : edgeClasses) {
    incident[edgeClass.producerRoot].push_back(&edgeClass);
    if (edgeClass.consumerRoot != edgeClass.producerRoot)
      incident[edgeClass.consumerRoot].push_back(&edgeClass);
    objectiveSeconds += edgeCost(edgeClass, -1, 0);
    solution.reshardBytes +=
        edgeClass.count *
        edgeClass
            .get(chosen[edgeClass.producerRoot], chosen[edgeClass.consumerRoot])
            .bytes;
  }
  for (const Node &node : nodes)
    solution.reshardBytes += strategyOf(node, chosen[node.root]).reshardBytes;
  SmallVector<double> stageMemory(stages, 0);
  for (auto &[root, seconds] : rootSeconds) {
    objectiveSeconds += seconds[chosen[root]];
    for (int64_t stage = 0; stage < stages; ++stage)
      stageMemory[stage] += rootMemory[root][stage][chosen[root]];
  }
  solution.memoryBytes = *llvm::max_element(stageMemory);
  solution.objectiveSeconds = objectiveSeconds;
  DenseMap<int64_t, std::pair<double, int64_t>> runnerUp;
  for (auto &[root, seconds] : rootSeconds) {
    auto costWith = [&](int64_t s) {
      double cost = seconds[s];
      for (const EdgeClass *edgeClass : incident[root])
        cost += edgeCost(*edgeClass, root, s);
      return cost;
    };
    int64_t current = chosen[root];
    double here = costWith(current);
    for (size_t s = 0; s < seconds.size(); ++s) {
      auto overMemory = [&](int64_t stage) {
        const SmallVector<double> &memory = rootMemory[root][stage];
        return stageMemory[stage] + memory[s] - memory[current] > memoryLimit;
      };
      if (static_cast<int64_t>(s) == current ||
          llvm::any_of(llvm::seq<int64_t>(0, stages), overMemory))
        continue;
      double extra = costWith(s) - here;
      auto it = runnerUp.find(root);
      if (it == runnerUp.end() || extra < it->second.first)
        runnerUp[root] = {extra, s};
    }
  }

  // Each edge's reshards at the chosen ends, on the node that reads the
  // value (the one that feeds a sum of gradients).
  auto isChoice = [&](int64_t node) {
    return nodes[node].op || nodes[node].argument >= 0;
  };
  DenseMap<int64_t, double> edgeSeconds;
  for (auto [edge, edgeClass] : llvm::zip(program.edges, edgeClassOf)) {
    const EdgeClass &priced = edgeClasses[edgeClass];
    int64_t owner = isChoice(edge.consumer) ? edge.consumer : edge.producer;
    edgeSeconds[owner] += priced.getSeconds(chosen[priced.producerRoot],
                                            chosen[priced.consumerRoot]);
  }
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (!isChoice(index))
      continue;
    const Strategy &strategy = strategyOf(node, chosen[node.root]);
    ShardingChoice &choice = solution.choices.emplace_back();
    choice.edgeSeconds = edgeSeconds.lookup(index);
    if (node.op) {
      for (auto [result, sharding] :
           llvm::zip(node.op->getResults(), strategy.results))
        if (isa<RankedTensorType>(result.getType()))
          choice.resultBytes += program.getLocalBytes(result, sharding);
    } else {
      choice.resultBytes = program.getLocalBytes(
          function.getArgument(node.argument), strategy.results.front());
      if (function.getArgAttr(node.argument, nn::kParamAttrName))
        choice.stateBytes = strategy.memoryBytes;
    }
    choice.op = node.op;
    choice.argument = node.argument;
    choice.chosen = {strategy.factorAxes, strategy.results};
    choice.partialResults = strategy.partialResults;
    choice.seconds = strategy.seconds;
    choice.follows = node.root != node.representative;
    if (choice.follows)
      continue;
    if (auto it = runnerUp.find(node.root); it != runnerUp.end()) {
      const Strategy &other = strategyOf(node, it->second.second);
      choice.runnerUp = {other.factorAxes, other.results};
      choice.runnerUpExtraSeconds = it->second.first;
    }
  }
  // Where a consumer needs another sharding than its producer gives.
  for (const Edge &edge : program.edges) {
    if (edge.kind != EdgeKind::Value && edge.kind != EdgeKind::Forward)
      continue;
    const Node &producer = nodes[edge.producer];
    const Node &consumer = nodes[edge.consumer];
    const TensorSharding &from =
        strategyOf(producer, chosen[producer.root]).results[edge.result];
    const TensorSharding &to =
        *strategyOf(consumer, chosen[consumer.root]).operands[edge.operand];
    if (from.getDimAxes() != to.getDimAxes() || from.unreduced != to.unreduced)
      solution.operands[&consumer.op->getOpOperand(edge.operand)] = to;
  }
  solution.solveSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  return solution;
}

/// `solved` as an annotation: closed when every axis is solved (and
/// `open` is not asked); otherwise open to the others, the solved ones it
/// does not use replicated, and what `annotation` had of the others kept.
static dist::ShardingAttr
getAnnotationAttr(const TensorSharding &solved,
                  const std::optional<TensorSharding> &annotation,
                  const MeshShape &mesh, ArrayRef<StringAttr> solvedAxes,
                  bool open) {
  bool allSolved = !open && llvm::all_of(mesh.getAxes(), [&](StringAttr axis) {
    return mesh.getAxisSize(axis) == 1 || llvm::is_contained(solvedAxes, axis);
  });
  TensorSharding sharding = solved;
  if (!allSolved) {
    for (auto [dim, dimSharding] : llvm::enumerate(sharding.dims)) {
      AxisList axes;
      bool isOpen = true;
      if (annotation) {
        for (StringAttr axis : annotation->dims[dim].axes)
          if (!llvm::is_contained(solvedAxes, axis))
            axes.push_back(axis);
        isOpen = annotation->dims[dim].isOpen;
      }
      llvm::append_range(axes, dimSharding.axes);
      dimSharding.axes = axes;
      dimSharding.isOpen = isOpen;
    }
    for (StringAttr axis : solvedAxes)
      if (!sharding.usesAxis(axis))
        sharding.replicated.push_back(axis);
    if (annotation)
      for (StringAttr axis : annotation->replicated)
        if (!llvm::is_contained(sharding.replicated, axis))
          sharding.replicated.push_back(axis);
  } else {
    for (DimSharding &dim : sharding.dims)
      dim.isOpen = false;
    sharding.replicated.clear();
  }
  return sharding.toAttr(mesh.getName());
}

void tessera::applyShardings(func::FuncOp function, dist::MeshOp meshOp,
                             const ShardingSolution &solution) {
  MeshShape mesh(meshOp);
  ArrayRef<StringAttr> axes = solution.axes;
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  OpBuilder builder(function.getContext());
  for (const ShardingChoice &choice : solution.choices) {
    if (choice.op)
      continue;
    std::optional<TensorSharding> annotation;
    if (auto attr = function.getArgAttrOfType<dist::ShardingAttr>(
            choice.argument, attrName))
      annotation = TensorSharding::fromAttr(attr);
    function.setArgAttr(choice.argument, attrName,
                        getAnnotationAttr(choice.chosen.results.front(),
                                          annotation, mesh, axes,
                                          /*open=*/false));
  }
  for (const ShardingChoice &choice : solution.choices) {
    if (!choice.op ||
        isa<dist::ShardingConstraintOp, func::ReturnOp>(choice.op))
      continue;
    builder.setInsertionPointAfter(choice.op);
    for (auto [index, result] : llvm::enumerate(choice.op->getResults())) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || type.getRank() == 0)
        continue;
      // Partial sums are completed as priced, and so is their gradient (an
      // unreduced constraint's gradient is its dims): a scattered result's
      // gradient is gathered before the op's backward reads it.
      Value value = result;
      if (index < choice.partialResults.size() &&
          choice.partialResults[index] != choice.chosen.results[index])
        value = dist::ShardingConstraintOp::create(
            builder, result.getLoc(), value,
            getAnnotationAttr(choice.partialResults[index], std::nullopt, mesh,
                              axes, solution.openToOtherAxes));
      auto constraint = dist::ShardingConstraintOp::create(
          builder, result.getLoc(), value,
          getAnnotationAttr(choice.chosen.results[index], std::nullopt, mesh,
                            axes, solution.openToOtherAxes));
      result.replaceAllUsesExcept(constraint, value == result
                                                  ? constraint.getOperation()
                                                  : value.getDefiningOp());
    }
  }
  for (auto [operand, sharding] : solution.operands) {
    Operation *user = operand->getOwner();
    builder.setInsertionPoint(user);
    auto constraint = dist::ShardingConstraintOp::create(
        builder, user->getLoc(), operand->get(),
        getAnnotationAttr(sharding, std::nullopt, mesh, axes,
                          solution.openToOtherAxes));
    operand->set(constraint);
  }
}

/// The results' shardings and the factors' axes of `alternative`:
/// `#dist.sharding<@mesh, [{}, {"tp"}]> (k={"tp"})`.
static std::string formatAlternative(const ShardingAlternative &alternative,
                                     dist::MeshOp mesh) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto meshName = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  llvm::interleaveComma(
      alternative.results, os,
      [&](const TensorSharding &sharding) { os << sharding.toAttr(meshName); });
  SmallVector<std::string> factors;
  for (auto [factor, axes] : llvm::enumerate(alternative.factorAxes))
    if (!axes.empty())
      factors.push_back(ShardingRule::getFactorName(factor) + "=" +
                        formatAxes(axes));
  if (!factors.empty())
    os << " (" << llvm::join(factors, ", ") << ")";
  return text;
}

std::string tessera::describeChoice(const ShardingChoice &choice,
                                    dist::MeshOp mesh) {
  std::string text = "sharded " + formatAlternative(choice.chosen, mesh) +
                     llvm::formatv(" at {0:F3} us", choice.seconds * 1e6).str();
  if (choice.follows)
    return text + "; follows its operand";
  if (!choice.runnerUp)
    return text + "; no other choice";
  return text + "; runner-up " + formatAlternative(*choice.runnerUp, mesh) +
         llvm::formatv(" costs {0:F3} us more",
                       choice.runnerUpExtraSeconds * 1e6)
             .str();
}

namespace {
/// A solved function's forward in items between its layer boundaries (the
/// places where one value of the data crosses), in program order: what
/// each item's ops and the arguments and parameter-only ops they read
/// first cost a step, hold on a device and pass to the next item.
struct StageItems {
  /// The first op of each item.
  SmallVector<Operation *> starts;
  /// A step's seconds.
  SmallVector<double> seconds;
  /// The model state, and the values the item makes per device.
  SmallVector<double> stateBytes, activationBytes;
  /// The largest parameter's piece: a train step holds its gradient, as
  /// the backward makes it, beside the stored (accumulated) ones.
  SmallVector<double> largestParameterBytes;
  /// The bytes per device of what the item passes to the next.
  SmallVector<double> outputBytes;
  /// What its backward holds beside what the forward kept (gradients and
  /// temporaries), at most: as a step frees the kept values at their last
  /// reader (less what it has freed of the item's own), and as a pipeline
  /// holds them (each in a buffer of its own for the whole schedule).
  SmallVector<double> transientBytes, pipelinedTransientBytes;
  /// The data arguments it reads first (the step's inputs, held whole).
  SmallVector<double> inputBytes;
  /// What the weight gradients of its ops that read a parameter read: their
  /// data operands (held to ZB-H1's W unit), and the gradients of their
  /// results (made by the B unit for W).
  SmallVector<double> weightReadBytes, weightMadeBytes;
  /// What selective recomputation remakes of its attention cores
  /// (getAttentionCores): the values the backward reads and the rest of the
  /// forward does not, their ops' step, and its largest core's values.
  SmallVector<double> coreBytes, coreSeconds, largestCoreBytes;
  /// The item of each op that reads the data.
  DenseMap<Operation *, int64_t> itemOf;

  /// `activations`: per model op of the function, the results the
  /// backward reads, which are an item's activations, and what its
  /// backward holds beside them, scaled by the op's split; where empty,
  /// every result, and twice the item's largest value.
  StageItems(func::FuncOp function, const ShardingSolution &solution,
             const TrainStepActivations &activations = {});
  size_t size() const { return starts.size(); }
};
} // namespace

StageItems::StageItems(func::FuncOp function, const ShardingSolution &solution,
                       const TrainStepActivations &activations) {
  // The ops that read the data (not what parameters and constants alone
  // make), as findRepeatedBlocks reads them.
  DenseSet<Value> data;
  for (BlockArgument arg : function.getArguments())
    if (!function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      data.insert(arg);
  SmallVector<Operation *> dataOps;
  DenseMap<Operation *, const ShardingChoice *> choiceOf;
  SmallVector<const ShardingChoice *> others;
  for (const ShardingChoice &choice : solution.choices) {
    if (choice.op)
      choiceOf[choice.op] = &choice;
    if (!choice.op || isa<func::ReturnOp>(choice.op) ||
        llvm::none_of(choice.op->getOperands(),
                      [&](Value value) { return data.contains(value); })) {
      others.push_back(&choice);
      continue;
    }
    dataOps.push_back(choice.op);
    data.insert(choice.op->result_begin(), choice.op->result_end());
  }
  if (dataOps.empty())
    return;
  SmallVector<int64_t> boundaries = getLayerBoundaries(dataOps);
  int64_t items = boundaries.size();
  starts.resize(items);
  seconds.assign(items, 0);
  stateBytes.assign(items, 0);
  activationBytes.assign(items, 0);
  largestParameterBytes.assign(items, 0);
  outputBytes.assign(items, 0);
  weightReadBytes.assign(items, 0);
  weightMadeBytes.assign(items, 0);
  inputBytes.assign(items, 0);
  transientBytes.assign(items, 0);
  pipelinedTransientBytes.assign(items, 0);
  // Per item, its values' bytes on a device and whole.
  SmallVector<std::pair<double, double>> shares(items);
  coreBytes.assign(items, 0);
  coreSeconds.assign(items, 0);
  largestCoreBytes.assign(items, 0);
  // The bytes per device of each value the data ops read.
  DenseMap<Value, double> valueBytes;
  for (const ShardingChoice &choice : solution.choices) {
    if (!choice.op)
      valueBytes[function.getArgument(choice.argument)] = choice.resultBytes;
    else if (choice.op->getNumResults() == 1)
      valueBytes[choice.op->getResult(0)] = choice.resultBytes;
  }
  DenseSet<Value> readByWeights;
  // What the backward reads of each op's results, where known.
  SmallVector<Operation *> modelOps;
  for (Operation &op : function.front().without_terminator())
    if (!isa<dist::DistDialect>(op.getDialect()))
      modelOps.push_back(&op);
  DenseMap<Operation *, uint64_t> keptOf;
  if (modelOps.size() == activations.kept.size())
    for (auto [op, results] : llvm::zip(modelOps, activations.kept))
      keptOf[op] = results;
  auto isKept = [&](Value value) {
    auto result = dyn_cast<OpResult>(value);
    if (!result)
      return false; // an argument is the step's input, not an activation
    if (keptOf.empty())
      return true;
    return result.getResultNumber() < 64 &&
           (keptOf.lookup(result.getOwner()) >> result.getResultNumber()) & 1;
  };
  auto getKeptBytes = [&](const ShardingChoice &choice) {
    unsigned results = choice.op->getNumResults();
    if (results == 0)
      return 0.0;
    unsigned keptResults = llvm::count_if(choice.op->getResults(), isKept);
    return choice.resultBytes * keptResults / results;
  };
  for (int64_t item = 0; item < items; ++item) {
    starts[item] = dataOps[boundaries[item]];
    int64_t end = item + 1 < items ? boundaries[item + 1] : dataOps.size();
    for (int64_t i = boundaries[item]; i < end; ++i)
      itemOf[dataOps[i]] = item;
  }
  auto add = [&](const ShardingChoice &choice, int64_t item) {
    seconds[item] += choice.seconds + choice.edgeSeconds;
    stateBytes[item] += choice.stateBytes;
  };
  for (Operation *op : dataOps) {
    const ShardingChoice &choice = *choiceOf.lookup(op);
    int64_t item = itemOf.lookup(op);
    add(choice, item);
    activationBytes[item] += getKeptBytes(choice);
    // Without the measured backward: its gradient, and the one made of it.
    if (keptOf.empty()) {
      transientBytes[item] =
          std::max(transientBytes[item], 2 * choice.resultBytes);
      pipelinedTransientBytes[item] = transientBytes[item];
    }
    // The share of its values a device holds.
    shares[item].first += choice.resultBytes;
    for (Value result : op->getResults())
      if (auto type = dyn_cast<RankedTensorType>(result.getType()))
        shares[item].second += type.getNumElements() * getElementBytes(type);
    if (llvm::any_of(op->getOperands(), [](Value value) {
          return !getParamName(value).empty();
        })) {
      weightMadeBytes[item] += choice.resultBytes;
      for (Value operand : op->getOperands())
        if (data.contains(operand) && isKept(operand) &&
            readByWeights.insert(operand).second)
          weightReadBytes[item] += valueBytes.lookup(operand);
    }
    // What a later item reads of it crosses every boundary between.
    for (Operation *user : op->getUsers())
      if (auto it = itemOf.find(user); it != itemOf.end())
        for (int64_t crossed = item; crossed < it->second; ++crossed)
          outputBytes[crossed] =
              std::max(outputBytes[crossed], choice.resultBytes);
  }
  // The rest (arguments, what parameters and constants alone make, the
  // return) with their first reader's item, latest first so that each
  // reader is placed; what no item reads goes with the last.
  for (const ShardingChoice *choice : llvm::reverse(others)) {
    Value made = choice->op && choice->op->getNumResults() > 0
                     ? choice->op->getResult(0)
                 : choice->op ? Value()
                              : function.getArgument(choice->argument);
    int64_t item = items - 1;
    if (made)
      for (Operation *user : made.getUsers())
        if (auto it = itemOf.find(user); it != itemOf.end())
          item = std::min(item, it->second);
    if (choice->op) {
      itemOf[choice->op] = item;
      // What parameters alone make for the backward (a norm's broadcast
      // scale) is kept with its reader's activations.
      if (!keptOf.empty() && !isa<func::ReturnOp>(choice->op))
        activationBytes[item] += getKeptBytes(*choice);
    } else if (function.getArgAttr(choice->argument, nn::kParamAttrName)) {
      largestParameterBytes[item] =
          std::max(largestParameterBytes[item], choice->resultBytes);
    } else {
      inputBytes[item] += choice->resultBytes;
    }
    add(*choice, item);
  }
  // The backward measured: what it holds beside the kept values while it
  // runs an item's part, less what it has freed of the item's own.
  if (!keptOf.empty()) {
    SmallVector<double> freed(items, 0);
    for (const TrainStepActivations::BackwardOp &op : activations.backward) {
      for (auto [made, bytes] : op.freed)
        if (auto it = itemOf.find(modelOps[made]); it != itemOf.end())
          freed[it->second] += bytes;
      auto it = itemOf.find(modelOps[op.part]);
      if (it == itemOf.end())
        continue;
      int64_t item = it->second;
      auto [device, whole] = shares[item];
      double share = whole > 0 ? device / whole : 1;
      transientBytes[item] =
          std::max(transientBytes[item], (op.liveBytes - freed[item]) * share);
      pipelinedTransientBytes[item] =
          std::max(pipelinedTransientBytes[item], op.liveBytes * share);
    }
  }
  llvm::SetVector<Operation *> forward = getForwardOps(function);
  for (const llvm::SetVector<Operation *> &core : getAttentionCores(forward)) {
    double bytes = 0;
    for (Operation *op : core) {
      bool handedOn = llvm::any_of(op->getUsers(), [&](Operation *user) {
        return forward.contains(user) && !core.contains(user);
      });
      const ShardingChoice *choice = choiceOf.lookup(op);
      auto it = itemOf.find(op);
      if (handedOn || !choice || it == itemOf.end())
        continue;
      coreBytes[it->second] += getKeptBytes(*choice);
      coreSeconds[it->second] += choice->seconds + choice->edgeSeconds;
      bytes += getKeptBytes(*choice);
    }
    if (auto it = itemOf.find(core.front()); it != itemOf.end())
      largestCoreBytes[it->second] =
          std::max(largestCoreBytes[it->second], bytes);
  }
}

/// The first op of each pipeline stage after the first when `function`,
/// solved as `solution` (before applyShardings writes it), is cut into
/// `stages` at its forward's layer boundaries, balanced on its items' step
/// seconds. Empty where the forward has fewer layers than stages.
static SmallVector<Operation *>
getMeshStageStarts(func::FuncOp function, const ShardingSolution &solution,
                   int64_t stages) {
  StageItems items(function, solution);
  if (static_cast<int64_t>(items.size()) < stages)
    return {};
  StageCuts cuts = balanceStages(items.seconds, stages);
  SmallVector<Operation *> starts;
  for (int64_t item : llvm::drop_begin(cuts.starts))
    starts.push_back(items.starts[item]);
  return starts;
}

ShardingSolverOptions
tessera::getMeshSolverOptions(const ShardingSolverOptions &options, int64_t pp,
                              int64_t microbatches, int64_t zeroStage) {
  ShardingSolverOptions mesh = options;
  mesh.axes.clear();
  mesh.zeroStage = zeroStage;
  // The search prices a train step's activations as it keeps them.
  if (options.training)
    mesh.keepActivations = false;
  if (pp == 1 && microbatches == 1)
    return mesh;
  mesh.microbatches = microbatches;
  mesh.batchAxes = {"dp"};
  return mesh;
}

/// The first dim of every ranked data argument of `function` divides by
/// this (0: none has one).
static int64_t getBatch(func::FuncOp function) {
  int64_t batch = 0;
  for (BlockArgument arg : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (type && type.getRank() > 0 &&
        !function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      batch = std::gcd(batch, type.getDimSize(0));
  }
  return batch;
}

/// `model` on `dist.mesh @mesh ["dp"=dp, "tp"=tp]` in place of its meshes
/// and annotations, and its function's shardings solved there (not yet
/// written).
static llvm::Expected<ShardingSolution>
solveOnMesh(ModuleOp model, const MachineModel &machine, int64_t dp, int64_t tp,
            const ShardingSolverOptions &options) {
  func::FuncOp function = getModelFunction(model);
  if (!function)
    return llvm::createStringError("the model has no function");
  MLIRContext *context = model.getContext();
  context->loadDialect<dist::DistDialect>();
  // The plan's mesh replaces whatever the model was annotated for.
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  for (auto mesh : llvm::make_early_inc_range(model.getOps<dist::MeshOp>()))
    mesh.erase();
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    function.removeArgAttr(i, attrName);
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    function.removeResultAttr(i, StringAttr::get(context, attrName));
  function.walk([](dist::ShardingConstraintOp constraint) {
    constraint.replaceAllUsesWith(constraint.getInput());
    constraint.erase();
  });
  OpBuilder builder = OpBuilder::atBlockBegin(model.getBody());
  auto mesh = dist::MeshOp::create(builder, model.getLoc(), "mesh",
                                   builder.getStrArrayAttr({"dp", "tp"}),
                                   builder.getDenseI64ArrayAttr({dp, tp}));
  ShardingSolverOptions all = options;
  all.axes.clear();
  return solveShardings(function, mesh, machine, all);
}

namespace {
/// A solution in pipeline stages, and the first op of each stage after the
/// first.
struct StagedSolution {
  ShardingSolution solution;
  SmallVector<Operation *> starts;
};
} // namespace

/// solveOnMesh in `stages` pipeline stages: solved once with the model
/// state of all stages in their devices' memory, cut where that solution's
/// step seconds balance (getMeshStageStarts), and solved again with each
/// stage's state in its device's memory.
static llvm::Expected<StagedSolution>
solveStages(ModuleOp model, const MachineModel &machine, int64_t dp, int64_t tp,
            const ShardingSolverOptions &options, int64_t stages) {
  ShardingSolverOptions all = options;
  double memoryLimit = options.memoryLimitBytes.value_or(machine.memoryBytes);
  all.memoryLimitBytes = memoryLimit * stages;
  llvm::Expected<ShardingSolution> first =
      solveOnMesh(model, machine, dp, tp, all);
  if (!first || stages == 1)
    return first ? llvm::Expected<StagedSolution>(
                       StagedSolution{std::move(*first), {}})
                 : first.takeError();
  SmallVector<Operation *> starts =
      getMeshStageStarts(getModelFunction(model), *first, stages);
  if (static_cast<int64_t>(starts.size()) + 1 != stages)
    return llvm::createStringError(
        llvm::formatv("the forward has too few layer boundaries for {0} "
                      "pipeline stages",
                      stages));
  ShardingSolverOptions staged = options;
  staged.memoryLimitBytes = memoryLimit;
  staged.stageStarts = starts;
  llvm::Expected<ShardingSolution> solution =
      solveOnMesh(model, machine, dp, tp, staged);
  if (!solution)
    return solution.takeError();
  return StagedSolution{std::move(*solution), std::move(starts)};
}

llvm::Expected<ShardingSolution> tessera::applyMeshSharding(
    ModuleOp model, const MachineModel &machine, int64_t dp, int64_t tp,
    const ShardingSolverOptions &options, int64_t stages) {
  llvm::Expected<StagedSolution> staged =
      solveStages(model, machine, dp, tp, options, stages);
  if (!staged)
    return staged.takeError();
  Builder builder(model.getContext());
  for (auto [stage, op] : llvm::enumerate(staged->starts))
    op->setAttr(dist::DistDialect::kStageAttrName,
                builder.getI64IntegerAttr(stage + 1));
  applyShardings(getModelFunction(model), *model.getOps<dist::MeshOp>().begin(),
                 staged->solution);
  return std::move(staged->solution);
}

/// Per item, the layer that full recomputation (getRecomputedLayers)
/// remakes it in, numbered in program order, or -1 outside every layer.
static SmallVector<int64_t> getItemLayers(func::FuncOp function,
                                          const StageItems &items) {
  SmallVector<Operation *> body;
  for (Operation &op : function.front().without_terminator())
    body.push_back(&op);
  SmallVector<int64_t> layerOf(items.size(), -1);
  for (auto [layer, ops] :
       llvm::enumerate(getRecomputedLayers(getDataOps(function, body))))
    for (Operation *op : ops)
      if (auto it = items.itemOf.find(op); it != items.itemOf.end())
        layerOf[it->second] = layer;
  return layerOf;
}

/// Prices `plan`'s train step, cut into its stages at `starts` and run on
/// its schedule, recomputing as it says: the memory of the rank that holds
/// the most (its stages' model state, its largest parameter's gradient as
/// the backward makes it beside the stored ones, the activations of each
/// stage's microbatches in flight, getStagesInFlight, and the largest
/// recomputed layer's as its backward remakes them), and with stages the
/// step: the slowest rank's with the schedule's bubble, and each
/// microbatch's activations forward and their gradients back at each cut,
/// as the GPT plans price them. A recomputed layer keeps what it hands on
/// and runs its forward (a third of its step) again. Under ZB-H1 (but on
/// the first stage, whose W unit runs its whole backward) what the weight
/// gradients read is held to the W unit, and what B makes for them from B.
static void priceTrainStep(MeshShardingPlan &plan, const StageItems &items,
                           ArrayRef<int64_t> layerOf,
                           ArrayRef<Operation *> starts,
                           const MachineModel &machine,
                           double objectiveSeconds) {
  int64_t pp = plan.pp, m = plan.microbatches, stages = plan.getNumStages();
  bool full = plan.recompute == Recompute::Full;
  bool selective = plan.recompute == Recompute::Selective;
  bool weightApart = plan.schedule == PipelineSchedule::ZeroBubbleH1;
  // Stage s holds items [cuts[s], cuts[s + 1]).
  SmallVector<int64_t> cuts = {0};
  for (Operation *start : starts)
    cuts.push_back(llvm::find(items.starts, start) - items.starts.begin());
  cuts.push_back(items.size());
  // One rank holding one microbatch in flight without a pipeline.
  SmallVector<RankInFlight> ranks = {{{0, StageInFlight{1, 1, 0, 0, 0, 0}}}};
  if (pp > 1)
    ranks = getStagesInFlight({pp, m, plan.virtualStages, plan.schedule});
  struct StagePrice {
    double seconds = 0, state = 0, gradient = 0, held = 0, transient = 0;
  };
  SmallVector<StagePrice> prices(stages);
  double recomputed = 0, crossing = 0;
  for (int64_t stage = 0; stage < stages; ++stage) {
    StagePrice &price = prices[stage];
    // Per microbatch: what the stage keeps outside recomputed layers and
    // what its weight gradients read of it, what recomputed layers hand on
    // and what their weight gradients read of the remade values, and what
    // B makes for W. What a stage receives its backward reads (a weight
    // gradient, or the first layer's recomputation).
    double kept = 0, read = 0, handedOn = 0, remadeRead = 0, made = 0;
    if (stage > 0)
      kept = read = items.outputBytes[cuts[stage] - 1] / m;
    // The backward runs each item's part beside what it remakes for it (the
    // item's recomputed layer, its piece on this stage, or its largest
    // attention core), having freed what the later items kept (a pipeline
    // keeps them to the end of its schedule).
    SmallVector<double> keptAfter(items.size(), 0);
    double after = 0;
    for (int64_t item = cuts[stage + 1] - 2; item >= cuts[stage]; --item) {
      if (!full || layerOf[item + 1] < 0)
        after += items.activationBytes[item + 1] / m;
      keptAfter[item] = after;
    }
    double layerBytes = 0, layerTransient = 0;
    for (int64_t item = cuts[stage]; item < cuts[stage + 1]; ++item) {
      price.seconds += items.seconds[item];
      price.state += items.stateBytes[item] + items.inputBytes[item];
      price.gradient =
          std::max(price.gradient, items.largestParameterBytes[item]);
      made += items.weightMadeBytes[item] / m;
      double transient = pp > 1
                             ? items.pipelinedTransientBytes[item] / m
                             : items.transientBytes[item] / m - keptAfter[item];
      bool remade = full && layerOf[item] >= 0;
      if (!remade) {
        kept += items.activationBytes[item] / m;
        read += items.weightReadBytes[item] / m;
        if (selective) {
          // The attention cores' values are remade, one core at a time.
          kept -= items.coreBytes[item] / m;
          recomputed += items.coreSeconds[item] / 3;
          price.seconds += items.coreSeconds[item] / 3;
          transient += items.largestCoreBytes[item] / m;
        }
        price.transient = std::max(price.transient, transient);
        continue;
      }
      // A third of the item's step again: its forward.
      recomputed += items.seconds[item] / 3;
      price.seconds += items.seconds[item] / 3;
      remadeRead += items.weightReadBytes[item] / m;
      layerBytes += items.activationBytes[item] / m;
      layerTransient = std::max(layerTransient, transient);
      // The layer (its piece on this stage) ends here.
      if (item + 1 == cuts[stage + 1] || layerOf[item + 1] != layerOf[item]) {
        handedOn += items.outputBytes[item] / m;
        price.transient =
            std::max(price.transient, layerBytes + layerTransient);
        layerBytes = layerTransient = 0;
      }
    }
    // What the stage sends the next, per microbatch.
    double sent = 0;
    if (stage + 1 < stages) {
      crossing = std::max(crossing, items.outputBytes[cuts[stage + 1] - 1]);
      sent = items.outputBytes[cuts[stage + 1] - 1] / m;
    }
    for (const RankInFlight &rank : ranks)
      for (auto [onRank, inFlight] : rank) {
        if (onRank != stage)
          continue;
        if (!weightApart)
          price.held = inFlight.forwardToBackward * (kept + handedOn);
        else if (stage == 0)
          price.held = inFlight.forwardToWeight * (kept + handedOn);
        else
          price.held = inFlight.forwardToBackward * (kept - read + handedOn) +
                       inFlight.forwardToWeight * read +
                       inFlight.backwardToWeight * (made + remadeRead);
        price.held += inFlight.forwardSent * sent;
      }
  }
  plan.memoryBytes = 0;
  double slowest = 0;
  for (const RankInFlight &rank : ranks) {
    StagePrice total;
    for (auto [stage, inFlight] : rank) {
      const StagePrice &price = prices[stage];
      total.seconds += price.seconds;
      total.state += price.state;
      total.held += price.held;
      total.gradient = std::max(total.gradient, price.gradient);
      total.transient = std::max(total.transient, price.transient);
    }
    slowest = std::max(slowest, total.seconds);
    plan.memoryBytes =
        std::max(plan.memoryBytes,
                 total.state + total.gradient + total.held + total.transient);
  }
  if (pp == 1) {
    plan.stepSeconds = objectiveSeconds + recomputed;
    return;
  }
  double p2p = getCollectiveSeconds(machine, CollectiveKind::AllGather,
                                    2 * crossing / m, {2, plan.dp * plan.tp});
  plan.stepSeconds = slowest * (1 + getBubbleFraction(plan.schedule, pp, m,
                                                      plan.virtualStages)) +
                     2 * p2p * (m * plan.virtualStages + pp - 1);
}

MeshShardingSearch tessera::searchMeshShardings(
    ModuleOp model, const MachineModel &machine, int64_t devices,
    const ShardingSolverOptions &options, const MeshShardingPins &pins,
    const TrainStepActivations &activations) {
  MeshShardingSearch search;
  SmallVector<int64_t> zeroStages(pins.zeroStages);
  if (zeroStages.empty())
    zeroStages.push_back(options.zeroStage);
  auto pinned = [](std::optional<int64_t> pin, int64_t value) {
    return !pin || *pin == value;
  };
  auto fail = [&](std::string reason) {
    ++search.failed;
    if (search.firstFailure.empty())
      search.firstFailure = std::move(reason);
  };
  func::FuncOp function = getModelFunction(model);
  // Selective recomputation remakes attention cores; without one it is no
  // plan of its own.
  bool hasCores =
      function && !getAttentionCores(getForwardOps(function)).empty();
  if (pins.recompute == Recompute::Selective && !hasCores) {
    search.firstFailure =
        "selective recomputation finds no attention core (a product, softmax "
        "and product) in the model: give --recompute none or full, or let "
        "the search choose";
    return search;
  }
  int64_t batch = function ? getBatch(function) : 0;
  double memoryLimit = options.memoryLimitBytes.value_or(machine.memoryBytes);
  for (int64_t dp = 1; dp <= devices; ++dp) {
    for (int64_t tp = 1; dp * tp <= devices; ++tp) {
      if (devices % (dp * tp) || !pinned(pins.dp, dp) || !pinned(pins.tp, tp))
        continue;
      int64_t pp = devices / dp / tp;
      // Stages and microbatches split a train step's batch on "dp".
      if (!pinned(pins.pp, pp) || (pp > 1 && !options.training))
        continue;
      SmallVector<int64_t> microbatches;
      for (int64_t m = 1; m <= std::max<int64_t>(1, batch / dp); ++m)
        if (pinned(pins.microbatches, m) &&
            (m == 1 || (options.training && batch % (dp * m) == 0)))
          microbatches.push_back(m);
      for (int64_t zero : zeroStages) {
        // ZeRO shards over dp; without it there is nothing to shard.
        if (zero > 0 && dp == 1 && zero != zeroStages.front())
          continue;
        for (int64_t m : microbatches) {
          int64_t zeroStage = dp > 1 ? zero : 0;
          // Interleaved 1F1B runs two stages per rank, and needs the
          // microbatches to be a multiple of the ranks.
          for (int64_t v : {1, 2}) {
            if (v == 2 && (pp == 1 || m % pp))
              continue;
            SmallVector<PipelineSchedule> schedules = {
                PipelineSchedule::OneFOneB};
            if (v == 2)
              schedules = {PipelineSchedule::Interleaved};
            else if (pp > 1)
              schedules = {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB,
                           PipelineSchedule::ZeroBubbleH1};
            llvm::erase_if(schedules, [&](PipelineSchedule schedule) {
              return pins.schedule && *pins.schedule != schedule;
            });
            if (schedules.empty())
              continue;
            ShardingSolverOptions meshOptions =
                getMeshSolverOptions(options, pp, m, zeroStage);
            OwningOpRef<ModuleOp> copy(cast<ModuleOp>(model->clone()));
            llvm::Expected<StagedSolution> staged =
                solveStages(*copy, machine, dp, tp, meshOptions, pp * v);
            if (!staged) {
              ++search.considered;
              fail(llvm::toString(staged.takeError()));
              continue;
            }
            const ShardingSolution &solution = staged->solution;
            // A train step's memory is priced here (a forward's is the
            // solver's), for each recomputation and schedule.
            func::FuncOp solved = getModelFunction(*copy);
            std::optional<StageItems> items;
            SmallVector<int64_t> layerOf;
            if (options.training) {
              items.emplace(solved, solution, activations);
              layerOf = getItemLayers(solved, *items);
            }
            for (Recompute recompute :
                 {Recompute::None, Recompute::Selective, Recompute::Full}) {
              if ((pins.recompute && *pins.recompute != recompute) ||
                  (recompute != Recompute::None && !options.training) ||
                  (recompute == Recompute::Selective && !hasCores))
                continue;
              for (PipelineSchedule schedule : schedules) {
                ++search.considered;
                MeshShardingPlan plan;
                plan.dp = dp;
                plan.tp = tp;
                plan.pp = pp;
                plan.microbatches = m;
                plan.zero = zeroStage;
                plan.schedule = schedule;
                plan.virtualStages = v;
                plan.recompute = recompute;
                plan.stepSeconds = solution.objectiveSeconds;
                plan.reshardBytes = solution.reshardBytes;
                plan.memoryBytes = solution.memoryBytes;
                plan.variables = solution.variables;
                plan.solveSeconds = solution.solveSeconds;
                if (items) {
                  priceTrainStep(plan, *items, layerOf, staged->starts, machine,
                                 solution.objectiveSeconds);
                  if (plan.memoryBytes > memoryLimit) {
                    fail(llvm::formatv(
                        "dp={0} tp={1} pp={2} in {3} microbatches ({4}, "
                        "recompute={5}) holds {6:f3} GB on a device, over "
                        "its {7:f3} GB",
                        dp, tp, pp, m,
                        getEnumName(kPipelineScheduleNames, schedule),
                        getEnumName(kRecomputeNames, recompute),
                        plan.memoryBytes / 1e9, memoryLimit / 1e9));
                    continue;
                  }
                }
                search.plans.push_back(plan);
              }
            }
          }
        }
      }
    }
  }
  if (search.considered == 0)
    search.firstFailure = llvm::formatv(
        "no dp x tp x pp mesh of {0} devices matches the pins: dp x tp x pp "
        "makes the devices, stages pipeline a train step only, and the "
        "microbatches must divide a dp replica's batch ({1})",
        devices, batch);
  // Fastest first; of plans as fast (to six digits: solves of one
  // program on one mesh differ in rounding), the fewest stages,
  // microbatches and ZeRO stage, which the cost model prices no faster,
  // then the least memory (1F1B before GPipe).
  auto key = [](const MeshShardingPlan &plan) {
    double scale = std::pow(
        10.0, 5 - std::floor(std::log10(std::max(plan.stepSeconds, 1e-300))));
    return std::make_tuple(std::round(plan.stepSeconds * scale) / scale,
                           plan.pp, plan.microbatches, plan.zero,
                           plan.memoryBytes);
  };
  llvm::stable_sort(search.plans,
                    [&](const MeshShardingPlan &a, const MeshShardingPlan &b) {
                      return key(a) < key(b);
                    });
  return search;
}
