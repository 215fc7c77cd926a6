//===- SolveShardings.cpp - The auto-sharding ILP, built and solved ---------===//
//
// The program (after Alpa's intra-op pass): a binary x per node (op or
// function argument) and strategy, one per node; on an edge whose two ends
// each have several distinct shardings, a continuous y per pair of the
// producer's result sharding and the consumer's operand need, tied to the
// x's by transport constraints (its rows and columns sum to the x's), so
// that the y of the chosen pair is 1 and the edge costs its reshards.
//
//===----------------------------------------------------------------------===//

#include "CostGraph.h"
#include "Solver.h"

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
using namespace tessera::autosharding;

/// How long the solver may search before the best sharding found is taken.
constexpr int kSolveSeconds = 30;

/// Bytes in the largest unit they fill: 1.50 GB, 820.00 KB.
static std::string formatBytes(double bytes) {
  if (bytes >= 1e9)
    return llvm::formatv("{0:F2} GB", bytes / 1e9).str();
  if (bytes >= 1e6)
    return llvm::formatv("{0:F2} MB", bytes / 1e6).str();
  return llvm::formatv("{0:F2} KB", bytes / 1e3).str();
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

  // The integer program, in microseconds (the solver's tolerances are
  // absolute).
  constexpr double kScale = 1e6;
  IntegerProgram ilp;
  auto addColumn = [&](double cost, bool integer) {
    return ilp.addColumn(cost * kScale, integer);
  };
  auto addRow = [&](ArrayRef<int> columns, ArrayRef<double> values,
                    double lower, double upper) {
    ilp.addRow(columns, values, lower, upper);
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
      ilp.objective[column] += n * seconds * kScale;
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
      addRow(memoryColumns[stage], memoryValues[stage], -IntegerProgram::kUnbounded,
             memoryLimit);
  }

  llvm::Expected<IntegerSolution> solved =
      solveIntegerProgram(ilp, kSolveSeconds);
  if (!solved)
    return llvm::createStringError(
        llvm::formatv("the sharding program on {0} cannot be solved: {1}",
                      formatAxes(axes), llvm::toString(solved.takeError()))
            .str());
  const IntegerSolution &result = *solved;
  const std::vector<double> &values = result.values;
  if (values.empty())
    return llvm::createStringError(
        result.infeasible
            ? llvm::formatv("no sharding on {0} fits in {1} per device",
                            formatAxes(axes), formatBytes(memoryLimit))
                  .str()
            : llvm::formatv("the solver found no sharding in {0} s",
                            kSolveSeconds)
                  .str());

  ShardingSolution solution;
  solution.axes = axes;
  solution.openToOtherAxes = !options.batchAxes.empty();
  solution.variables = ilp.objective.size();
  solution.constraints = ilp.rows.size();
  solution.optimal = result.optimal;
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
