//===- StageCuts.cpp - Layers, repeated blocks and pipeline stage cuts ----===//

#include "tessera/Analysis/StageCuts.h"

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace tessera;

llvm::SmallVector<int64_t>
tessera::getLayerBoundaries(llvm::ArrayRef<mlir::Operation *> ops) {
  int64_t n = ops.size();
  llvm::DenseMap<mlir::Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  // Per position, the change in the values live across it. Scalars do not
  // count: a layer's load-balancing loss, added to the loss at the end,
  // crosses every later boundary but is no layer's activation.
  llvm::SmallVector<int64_t> crossing(n + 1, 0);
  for (auto [i, op] : llvm::enumerate(ops)) {
    for (mlir::Value result : op->getResults()) {
      if (auto type = dyn_cast<mlir::RankedTensorType>(result.getType());
          type && type.getRank() == 0)
        continue;
      int64_t last = i;
      for (mlir::Operation *user : result.getUsers())
        if (auto it = position.find(user); it != position.end())
          last = std::max(last, it->second);
      // Live across the boundaries i+1 .. last.
      crossing[i + 1] += 1;
      crossing[last + 1] -= 1;
    }
  }
  llvm::SmallVector<int64_t> boundaries = {0};
  for (int64_t i = 1, live = crossing[0]; i < n; ++i) {
    live += crossing[i];
    if (live <= 1)
      boundaries.push_back(i);
  }
  return boundaries;
}

llvm::SmallVector<Operation *>
tessera::getDataOps(func::FuncOp function, llvm::ArrayRef<Operation *> ops) {
  llvm::DenseSet<Value> data;
  for (BlockArgument arg : function.getArguments())
    if (!function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      data.insert(arg);
  llvm::SmallVector<Operation *> read;
  for (Operation *op : ops) {
    if (llvm::none_of(op->getOperands(),
                      [&](Value value) { return data.contains(value); }))
      continue;
    read.push_back(op);
    data.insert(op->result_begin(), op->result_end());
  }
  return read;
}

llvm::SmallVector<llvm::SmallVector<Operation *>>
tessera::findRepeatedBlocks(func::FuncOp function) {
  llvm::SmallVector<Operation *> ops;
  for (Operation &op : function.front().without_terminator())
    ops.push_back(&op);
  return findRepeatedBlocks(getDataOps(function, ops));
}

/// The ops, cut where one value they make crosses (a layer boundary, as the
/// pipeline pass cuts), give a sequence of segments, each known by its ops
/// and their result types; the blocks are the most repetitions of one run
/// of segments, back to back, that cover the most segments.
llvm::SmallVector<llvm::SmallVector<Operation *>>
tessera::findRepeatedBlocks(llvm::ArrayRef<Operation *> ops) {
  // Each segment's signature, numbered: equal numbers, equal structure.
  llvm::SmallVector<int64_t> boundaries = getLayerBoundaries(ops);
  boundaries.push_back(ops.size());
  llvm::StringMap<int64_t> signatures;
  llvm::SmallVector<int64_t> segments;
  for (size_t k = 0; k + 1 < boundaries.size(); ++k) {
    std::string signature;
    llvm::raw_string_ostream os(signature);
    for (int64_t i = boundaries[k]; i < boundaries[k + 1]; ++i)
      os << ops[i]->getName() << ops[i]->getResultTypes() << ";";
    segments.push_back(
        signatures.try_emplace(signature, signatures.size()).first->second);
  }
  int64_t count = segments.size(), best = 0, bestStart = 0, bestPeriod = 0,
          covered = 0;
  for (int64_t period = 1; 2 * period <= count; ++period)
    for (int64_t start = 0; start + 2 * period <= count; ++start) {
      auto repeats = [&](int64_t k) {
        return std::equal(segments.begin() + start,
                          segments.begin() + start + period,
                          segments.begin() + start + k * period);
      };
      int64_t runs = 1;
      while (start + (runs + 1) * period <= count && repeats(runs))
        ++runs;
      if (runs >= 2 && runs * period > covered) {
        covered = runs * period;
        best = runs;
        bestStart = start;
        bestPeriod = period;
      }
    }
  llvm::SmallVector<llvm::SmallVector<Operation *>> blocks;
  for (int64_t run = 0; run < best; ++run) {
    int64_t first = bestStart + run * bestPeriod;
    blocks.emplace_back(ops.begin() + boundaries[first],
                        ops.begin() + boundaries[first + bestPeriod]);
  }
  return blocks;
}

llvm::SmallVector<llvm::SmallVector<Operation *>>
tessera::getRecomputedLayers(llvm::ArrayRef<Operation *> ops) {
  llvm::SmallVector<llvm::SmallVector<Operation *>> layers =
      findRepeatedBlocks(ops);
  if (!layers.empty())
    return layers;
  llvm::SmallVector<int64_t> boundaries = getLayerBoundaries(ops);
  boundaries.push_back(ops.size());
  for (size_t k = 0; k + 1 < boundaries.size(); ++k)
    layers.emplace_back(ops.begin() + boundaries[k],
                        ops.begin() + boundaries[k + 1]);
  return layers;
}

StageCuts tessera::balanceStages(llvm::ArrayRef<double> costs, int64_t stages) {
  int64_t n = costs.size();
  llvm::SmallVector<double> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][i]: the least max-stage cost of the first i items in k stages;
  // from[k][i]: where the last of those stages starts.
  llvm::SmallVector<llvm::SmallVector<double>> best(
      stages + 1, llvm::SmallVector<double>(n + 1, kInf));
  llvm::SmallVector<llvm::SmallVector<int64_t>> from(
      stages + 1, llvm::SmallVector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t k = 1; k <= stages; ++k)
    for (int64_t i = k; i <= n; ++i)
      for (int64_t j = k - 1; j < i; ++j) {
        double cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (cost < best[k][i]) {
          best[k][i] = cost;
          from[k][i] = j;
        }
      }
  StageCuts cuts;
  cuts.maxStageCost = best[stages][n];
  cuts.starts.assign(stages, 0);
  for (int64_t k = stages, i = n; k > 0; --k) {
    cuts.starts[k - 1] = from[k][i];
    i = from[k][i];
  }
  return cuts;
}
