//===- ShardingSolver.h - Per-op shardings as an integer program -*- C++
//-*-===//
//
// Alpa's intra-operator pass (Zheng et al., OSDI 2022) on Tessera's factor
// rules: each op chooses how the mesh axes split its factors, each function
// argument how they split its dims; the choices pay compute divided by the
// split and, on every edge, the partitioner's reshards forward and their
// gradients' backward, priced on a machine; the model state and the
// activations must fit a device. COIN-OR CBC solves it. Identical blocks
// share their variables, so that the program is as large as one block.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SEARCH_SHARDINGSOLVER_H
#define TESSERA_SEARCH_SHARDINGSOLVER_H

#include "tessera/Analysis/MachineModel.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct ShardingSolverOptions {
  /// The mesh axes the solver assigns; every axis of the mesh when empty.
  /// The others are left to propagation, and not priced.
  llvm::SmallVector<std::string> axes;
  /// Price the backward and the optimizer's state too: the gradients'
  /// reshards, twice the forward's compute, and per parameter byte its
  /// weight, its gradient and `optimizerBytesPerParameterByte` of
  /// optimizer state.
  bool training = true;
  /// AdamW's two moments.
  double optimizerBytesPerParameterByte = 2;
  /// ZeRO over `zeroAxes` (--tessera-zero): the parameters' optimizer state
  /// (stage 1), gradients (2) and weights (3) stored split over them, which
  /// then split no parameter's dims; stage 3 gathers each weight for the
  /// forward and again for the backward. The gradients' reduce-scatter and
  /// the updated weights' gather of stages 1 and 2 move what the
  /// all-reduce they replace moves.
  int64_t zeroStage = 0;
  llvm::SmallVector<std::string> zeroAxes = {"dp"};
  /// What the model state and the activations (every forward value, kept
  /// for the backward when training) may take per device; the machine's
  /// device memory when unset.
  std::optional<double> memoryLimitBytes;
  /// Count the activations against the limit (else the model state alone:
  /// the plan search prices the activations of its microbatches itself).
  bool keepActivations = true;
  /// Solve the repeated blocks of the model once (their variables shared).
  bool shareBlocks = true;
  /// Data parallelism: these solved axes split the batch and nothing else,
  /// and the other solved axes never split it. The batch is the first dim of
  /// each data argument (a ranked argument that is not a parameter) and the
  /// dims the ops make of it (their results' dims led by the factor of an
  /// operand's batch dim). Where a value has a batch dim, the batch axes
  /// split it when they divide it. So the program is data parallel over
  /// them, as microbatching and ZeRO over them need.
  llvm::SmallVector<std::string> batchAxes;
};

/// One way to shard an op or an argument.
struct ShardingAlternative {
  /// The axes of each of the op's factors (empty for an argument).
  FactorAxes factorAxes;
  /// The sharding of each result (of the argument).
  llvm::SmallVector<TensorSharding> results;
};

/// What the solver chose for one op or function argument.
struct ShardingChoice {
  /// The op, or null for the function's argument `argument`.
  mlir::Operation *op = nullptr;
  int64_t argument = -1;
  ShardingAlternative chosen;
  /// The results as the op computes them, partial over its split
  /// reductions: the solver completes them into `chosen`'s.
  llvm::SmallVector<TensorSharding> partialResults;
  /// Its compute and own reshards (partial sums completed).
  double seconds = 0;
  /// Whether the op follows its operand's producer (a pointwise op merged
  /// into it), and so has no choice of its own.
  bool follows = false;
  /// The cheapest other choice, every other op kept as chosen (with those
  /// that follow it, and its copies in the other blocks), and how much more
  /// the program then costs per copy; none without another choice.
  std::optional<ShardingAlternative> runnerUp;
  double runnerUpExtraSeconds = 0;
};

struct ShardingSolution {
  /// The solved mesh axes, major to minor.
  llvm::SmallVector<mlir::StringAttr> axes;
  /// Whether its constraints in the body stay open to axes the mesh gains
  /// later, the solved axes a value does not use marked replicated: with
  /// batch axes, the microbatches' axis then joins the batch from the data
  /// arguments (--tessera-microbatch); the arguments stay closed.
  bool openToOtherAxes = false;
  /// The chosen shardings' price: a step's compute and reshards.
  double objectiveSeconds = 0;
  /// What its collectives move per device, forward and backward: the full
  /// buffers, as getReshardCost counts them.
  double reshardBytes = 0;
  double memoryBytes = 0;
  /// The integer program's size and solve.
  int64_t variables = 0, constraints = 0;
  double solveSeconds = 0;
  bool optimal = false;
  /// Ops and arguments, and how many nodes have variables of their own
  /// (the blocks' copies share their first block's, pointwise ops follow
  /// their producer; the sums of gradients have theirs).
  int64_t nodes = 0, distinctNodes = 0;
  /// The repeated blocks that share variables (0: none).
  int64_t sharedBlocks = 0;
  /// One per argument (ranked tensors) and op, in program order.
  std::vector<ShardingChoice> choices;
  /// The operand shardings consumers need that differ from their producer's
  /// result: the solver reshards them there.
  llvm::DenseMap<mlir::OpOperand *, TensorSharding> operands;
};

/// Solves the shardings of `function` on `mesh`; the function's annotations
/// (arguments, results, dist.sharding_constraint) are hard constraints.
/// Fails naming the cause: an unknown axis, a program no choice fits in
/// memory, a solver failure.
llvm::Expected<ShardingSolution>
solveShardings(mlir::func::FuncOp function, dist::MeshOp mesh,
               const MachineModel &machine,
               const ShardingSolverOptions &options);

/// Writes `solution` as annotations: each argument's dist.sharding, a
/// dist.sharding_constraint on each op's result and where a consumer needs
/// another sharding. With every mesh axis solved the dims are closed (but
/// the constraints of a solution open to other axes); otherwise they stay
/// open to the other axes, and the solved axes a value does not use are
/// marked replicated.
void applyShardings(mlir::func::FuncOp function, dist::MeshOp mesh,
                    const ShardingSolution &solution);

/// What explain=true says of a choice: `sharded #dist.sharding<@mesh, [{},
/// {"tp"}]> (k={"tp"}) at 12.000 us; runner-up ... costs 3.000 us more`.
std::string describeChoice(const ShardingChoice &choice, dist::MeshOp mesh);

/// One mesh shape's solution: the model on `dist.mesh @mesh ["dp"=dp,
/// "tp"=tp]`, both axes solved (the names are the plan's; the solver gives
/// either axis to any dim).
struct MeshShardingPlan {
  int64_t dp = 1, tp = 1;
  /// The ZeRO stage over "dp" it was solved with.
  int64_t zero = 0;
  /// The solution's objective: a step's compute and collectives, one after
  /// the other.
  double stepSeconds = 0;
  double reshardBytes = 0, memoryBytes = 0;
  int64_t variables = 0;
  double solveSeconds = 0;
};

struct MeshShardingSearch {
  /// The shapes that fit, fastest first.
  llvm::SmallVector<MeshShardingPlan> plans;
  int64_t considered = 0;
  /// Shapes the solver found no sharding for (none fits in memory), and
  /// the first one's reason.
  int64_t failed = 0;
  std::string firstFailure;
};

/// Solves `model`'s function on every dp x tp factorization of `devices`
/// (each on a copy of the model, see applyMeshSharding), with each ZeRO
/// stage of `zeroStages` where dp > 1 (options.zeroStage when empty); of
/// equally fast plans, the lower stage first.
MeshShardingSearch searchMeshShardings(mlir::ModuleOp model,
                                       const MachineModel &machine,
                                       int64_t devices,
                                       const ShardingSolverOptions &options,
                                       llvm::ArrayRef<int64_t> zeroStages = {});

/// Puts `model` on `dist.mesh @mesh ["dp"=dp, "tp"=tp]` in place of its
/// meshes and annotations, solves its function's shardings there and writes
/// them (applyShardings).
llvm::Expected<ShardingSolution>
applyMeshSharding(mlir::ModuleOp model, const MachineModel &machine, int64_t dp,
                  int64_t tp, const ShardingSolverOptions &options);

} // namespace tessera

#endif // TESSERA_SEARCH_SHARDINGSOLVER_H
