//===- CostGraph.h - The auto-sharding ILP's nodes and edges ----*- C++ -*-===//
//
// The per-op sharding program's graph (after Alpa's intra-op pass): a node
// per op and function argument with its strategies (Strategies.cpp), each
// priced by compute, reshards and memory, and edges that price a value's
// reshard between a producer's and a consumer's choices (CostGraph.cpp).
// SolveShardings.cpp turns the graph into an integer program; nothing here
// knows the solver.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_SEARCH_AUTOSHARDING_COSTGRAPH_H
#define TESSERA_LIB_SEARCH_AUTOSHARDING_COSTGRAPH_H

#include "tessera/Search/ShardingSolver.h"

#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "tessera/Analysis/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::autosharding {

using namespace mlir;

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

/// The element type's name in the machine model ("bf16", "fp16", "fp32").
StringRef getDtypeName(Type type);

/// `sharding` seen by the solver: only the solved axes.
TensorSharding restrictTo(const TensorSharding &sharding,
                          ArrayRef<StringAttr> axes);

/// The shardings a tensor of `shape` may take from `base` (what its
/// annotation fixes): each solved axis `base` does not use on one of its
/// open dims that it divides, or on none. Closed dims.
SmallVector<TensorSharding> getTensorShardings(ArrayRef<int64_t> shape,
                                               const TensorSharding &base,
                                               ArrayRef<StringAttr> axes,
                                               const MeshShape &mesh);

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


} // namespace tessera::autosharding

#endif // TESSERA_LIB_SEARCH_AUTOSHARDING_COSTGRAPH_H
