//===- CostGraph.cpp - The auto-sharding ILP's graph ------------------------===//
//
// The nodes of a function and the edges between them: blocks that share
// variables, followers merged into their producers, the sums of gradients,
// and the reshard cost of an edge between its ends' choices.
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

} // namespace tessera::autosharding
