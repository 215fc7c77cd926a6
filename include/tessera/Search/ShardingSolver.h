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

#include "tessera/Analysis/CostModel.h"
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
  /// Pipeline stages: the first op of each stage after the first, in the
  /// function's order. The memory limit then holds for each stage's device:
  /// the values its ops make and the state of the parameters its ops read
  /// first.
  llvm::SmallVector<mlir::Operation *> stageStarts;
  /// Count the activations against the limit (else the model state alone:
  /// the plan search prices the activations of its microbatches itself).
  bool keepActivations = true;
  /// A step in this many microbatches (gradient accumulation, pipeline
  /// stages): each op's compute and each reshard is priced at a
  /// microbatch's size (the batch dims split), that many times, and so are
  /// ZeRO-3's gathers; a parameter's gradient is reduced once per step
  /// (but per microbatch from ZeRO-2).
  int64_t microbatches = 1;
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
  /// The reshards on the edges into it (its operands', and their
  /// gradients' back), at both ends' choices; those into a sum of
  /// gradients fall on the op or argument that feeds it.
  double edgeSeconds = 0;
  /// Per device: an argument's model state as stored (its weight, gradient
  /// and optimizer state when trained), an op's results.
  double stateBytes = 0, resultBytes = 0;
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

/// One plan of per-op shardings: the model on `dist.mesh @mesh ["dp"=dp,
/// "tp"=tp]`, both axes solved (the names are the plan's; the solver gives
/// either axis to any dim), its step in `microbatches` and, with `pp`
/// pipeline ranks, solved and cut into getNumStages() stages as
/// applyMeshSharding does and run along "pp" on `schedule`.
struct MeshShardingPlan {
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
  /// The ZeRO stage over "dp" it was solved with.
  int64_t zero = 0;
  /// The pipeline's schedule and stages per rank (2 for interleaved 1F1B).
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int64_t virtualStages = 1;
  /// What the backward recomputes, as --tessera-recompute finds it:
  /// nothing, the attention cores (selective) or each layer from its input
  /// (full).
  Recompute recompute = Recompute::None;
  /// The step: its compute and collectives one after the other (the
  /// parameters' reshards once per microbatch, a third of each recomputed
  /// layer's again); with stages, the slowest rank's with its schedule's
  /// bubble and the transfers between stages.
  double stepSeconds = 0;
  /// The collectives' bytes; the fullest device's model state and
  /// activations (those of the microbatches its stage holds).
  double reshardBytes = 0, memoryBytes = 0;
  int64_t variables = 0;
  double solveSeconds = 0;

  int64_t getNumStages() const { return pp * virtualStages; }
};

/// What a model's train step holds for its backward, measured on the step
/// built from it (getTrainStepActivations), per model op of its function
/// (its body's ops in program order, the dist dialect's aside).
struct TrainStepActivations {
  /// The op's results (the first 64) that the backward reads: what the
  /// forward keeps, nothing recomputed.
  llvm::SmallVector<uint64_t> kept;
  /// The backward, op by op, on one device, unsharded: the model op whose
  /// part it runs (the last whose kept values it read), the bytes of its
  /// own values live there (gradients and temporaries, not the parameters'
  /// gradients it hands the optimizer), and the kept values whose last
  /// reader it is, by model op.
  struct BackwardOp {
    int64_t part = 0;
    double liveBytes = 0;
    llvm::SmallVector<std::pair<int64_t, double>> freed;
  };
  llvm::SmallVector<BackwardOp> backward;
};

struct MeshShardingSearch {
  /// The plans that fit, fastest first.
  llvm::SmallVector<MeshShardingPlan> plans;
  int64_t considered = 0;
  /// Plans with no sharding or cut that fits in memory, and the first
  /// one's reason (or, where no mesh matches the pins, why).
  int64_t failed = 0;
  std::string firstFailure;
};

/// What searchMeshShardings may choose; unset, it searches.
struct MeshShardingPins {
  std::optional<int64_t> dp, tp, pp, microbatches;
  /// Each ZeRO stage searched where dp > 1 (the options' when empty).
  llvm::SmallVector<int64_t> zeroStages;
  std::optional<PipelineSchedule> schedule;
  std::optional<Recompute> recompute;
};

/// The solver's options for one plan's mesh, with ZeRO at `zeroStage`:
/// `options` as given for a step of one microbatch on one stage; for a
/// train step the model state alone against the memory (the search prices
/// the activations as the step keeps them); with microbatches or stages,
/// priced in `microbatches`, "dp" splitting the batch only (as they split
/// it further).
ShardingSolverOptions getMeshSolverOptions(const ShardingSolverOptions &options,
                                           int64_t pp, int64_t microbatches,
                                           int64_t zeroStage);

/// Solves `model`'s function on every dp x tp x pp factorization of
/// `devices` (each on a copy of the model, see applyMeshSharding), with
/// each ZeRO stage and, for a train step, each number of microbatches
/// dividing the batch on a device (its data arguments' first dim), each
/// recomputation (none, selective where the model has an attention core,
/// full) and the pipelines of `pp` ranks that its layer boundaries allow
/// (solved in stages, see applyMeshSharding): GPipe, 1F1B and ZB-H1, and
/// interleaved 1F1B in two stages per rank where the microbatches are a
/// multiple of the ranks. A train step's activations are what
/// `activations` measures (where empty: every result kept, and the
/// backward holding twice an op's largest value beside them). Of equally
/// fast plans, the fewest stages, microbatches and ZeRO stage first, then
/// the least memory.
MeshShardingSearch
searchMeshShardings(mlir::ModuleOp model, const MachineModel &machine,
                    int64_t devices, const ShardingSolverOptions &options,
                    const MeshShardingPins &pins = {},
                    const TrainStepActivations &activations = {});

/// Puts `model` on `dist.mesh @mesh ["dp"=dp, "tp"=tp]` in place of its
/// meshes and annotations, solves its function's shardings there and writes
/// them (applyShardings). With `stages`, it is solved in pipeline stages:
/// once with all stages' model state in their devices' memory, cut at the
/// forward's layer boundaries where that solution's step seconds (each
/// op's compute and reshards, an argument's with its first reader)
/// balance, and again with each stage's state in its device's memory; the
/// first op of each stage after the first is marked with dist.stage.
llvm::Expected<ShardingSolution>
applyMeshSharding(mlir::ModuleOp model, const MachineModel &machine, int64_t dp,
                  int64_t tp, const ShardingSolverOptions &options,
                  int64_t stages = 1);

} // namespace tessera

#endif // TESSERA_SEARCH_SHARDINGSOLVER_H
