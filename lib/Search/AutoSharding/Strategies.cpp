//===- Strategies.cpp - The auto-sharding ILP's strategies ------------------===//
//
// Each node's strategies: the shardings its sharding rule's factors may
// take over the solved axes (or replicated where it has no rule), each
// priced by its compute, its own reshards and the memory it holds.
//
//===----------------------------------------------------------------------===//

#include "CostGraph.h"

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

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

using namespace mlir;
using namespace tessera;

namespace tessera::autosharding {

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

} // namespace tessera::autosharding
