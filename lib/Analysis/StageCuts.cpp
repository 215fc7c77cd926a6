//===- StageCuts.cpp - Balanced pipeline stage cuts -----------------------===//

#include "tessera/Analysis/StageCuts.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <limits>

using namespace tessera;

llvm::SmallVector<int64_t>
tessera::getLayerBoundaries(llvm::ArrayRef<mlir::Operation *> ops) {
  int64_t n = ops.size();
  llvm::DenseMap<mlir::Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  // Per position, the change in the values live across it.
  llvm::SmallVector<int64_t> crossing(n + 1, 0);
  for (auto [i, op] : llvm::enumerate(ops)) {
    for (mlir::Value result : op->getResults()) {
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
