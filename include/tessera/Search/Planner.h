//===- Planner.h - The DP/TP/PP plan search ----------------------*- C++
//-*-===//
//
// Estimates a training plan of a GPT-style model on a machine (step time,
// memory per device, FLOPs, MFU) and searches every factorization of the
// devices into DP x TP x PP with the ZeRO stage, microbatches, schedule,
// recomputation and sequence parallelism.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SEARCH_PLANNER_H
#define TESSERA_SEARCH_PLANNER_H

#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/PipelineSchedule.h"
#include "tessera/Search/ShardingSolver.h"

#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <functional>
#include <limits>
#include <optional>
#include <string>

namespace tessera {

/// A value the train step keeps for its backward: result `result` of the
/// `op`-th of the model's ops (in program order, annotations and
/// collectives aside), which is a `name`.
struct KeptValue {
  int64_t op;
  unsigned result;
  mlir::OperationName name;
};

/// How the cost model prices an op (see OpCost).
enum class OpClass { Gemm, FusedAttention, MemoryBound };

/// Ops of the model's forward that the cost model prices alike, as one
/// device runs them at the model's batch: each by its own roofline from its
/// CostOpInterface FLOPs and bytes (a GEMM at getGemmEfficiency of its
/// shape), the backward from the forward (a GEMM's two products, fused
/// attention's 2.5 times the FLOPs, a memory-bound op's bytes twice). Views
/// (reshapes, broadcasts the next kernel reads in place) cost nothing.
struct OpCost {
  /// The op's name: the breakdown's row for a memory-bound op.
  std::string name;
  OpClass kind = OpClass::MemoryBound;
  /// A GEMM's products (nn.dot): its batch dims, the rest of lhs (m), of
  /// rhs (n) and the contracted dims (k).
  GemmShape gemm;
  double flops = 0, bytes = 0;
  /// Whether Megatron-LM's tensor parallelism splits it: the projections
  /// (a GEMM's larger of n and k, or its batch of heads), attention, the
  /// MLP's width, the LM head and its logits (on the vocabulary); not the
  /// residual stream's ops (norms, residual adds, dropout of h wide
  /// values), which sequence parallelism splits instead (their rows).
  bool tensorSplit = true;
  /// Whether it reads the data (its work scales with the batch), not only
  /// parameters.
  bool perBatch = true;
  /// Whether it reads or makes unfused attention's [s, s] scores: what
  /// selective recomputation runs again.
  bool scores = false;
  /// Whether it is in a repeated block: what full recomputation runs again.
  bool inBlock = false;
  int64_t count = 1;
};

/// The ops of `function`'s forward by OpCost, alike ones counted once.
llvm::SmallVector<OpCost> getOpCosts(mlir::func::FuncOp function,
                                     int64_t hidden, int64_t seq);

/// What the search needs of a model: its transformer shape, read from a
/// GPT-style nn program (tessera model gpt), and its forward FLOPs summed
/// over its ops' CostOpInterface.
struct ModelShape {
  int64_t layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0, batch = 0;
  int64_t parameters = 0;
  /// Whether the LM head reads the token embedding: its gradient then has
  /// two terms, which the compiled step reduces one by one (but at ZeRO-1,
  /// which sums them while they are pending).
  bool tiedEmbedding = false;
  /// Whether attention is nn.attention, which keeps no [s, s] scores for
  /// the backward.
  bool fusedAttention = false;
  /// Whether unfused attention drops its probabilities (nn.dropout of an
  /// nn.softmax): the values' gradient then reads the dropped [s, s]
  /// probabilities beside the softmax's (the mask is drawn again, not
  /// kept).
  bool attentionDropout = false;
  /// Whether blocks drop their outputs (nn.dropout of anything but a
  /// softmax): the gradient of the MLP's dropped output splits the fused
  /// backward around it, one s b h more at its peak.
  bool outputDropout = false;
  /// Forward FLOPs of one global batch.
  double forwardFlops = 0;
  /// What the train step keeps of a block for its backward on one device
  /// without recomputation, in elements of s b h (getKeptPerBlock: the
  /// values of its forward ops that a backward op reads); 0 where not
  /// measured. The activation estimate scales by it over what its GPT
  /// formula keeps there, so that a block of another structure (a Llama's
  /// SwiGLU, RoPE and GQA) is priced as built.
  double keptPerLayer = 0;
  /// The values the one-device train step keeps, whose bytes a layout's
  /// partitioned program gives per device (PartitionedLayout::keptBytes).
  llvm::SmallVector<KeptValue> keptValues;
  /// The forward's FLOPs of each item the pipeline pass may cut between,
  /// as its ops count them on one device (getItemFlops): the
  /// half-layers (the attention block and the MLP, the embeddings with the
  /// first) and the LM head; empty where the model does not cut so. The
  /// stage cuts scale GPT's formula by them, item by item.
  llvm::SmallVector<double> itemFlops;
  /// The forward's ops as the cost model prices them (getOpCosts), at the
  /// model's element type (`elementBytes`); empty where not read from a
  /// program (GPT's formula prices compute then).
  llvm::SmallVector<OpCost> opCosts;
  double elementBytes = 4;
  /// The parameter tensors (each a gradient the step reduces).
  int64_t parameterTensors = 0;
  /// A mixture of experts (nn.moe_dispatch): its layers, the experts of
  /// each, the elements of the experts' weights (getExpertParameters, split
  /// over "ep") and the expert slots each token's layer dispatches
  /// (experts x capacity / sequence: a layer's all_to_all moves that many
  /// hidden vectors per token). Zero without experts.
  int64_t moeLayers = 0, experts = 0, expertParameters = 0;
  double expertSlotsPerToken = 0;
  /// The fused attention's keys' width (kv heads x head dim: the hidden
  /// size without grouped-query attention), and whether it is causal.
  int64_t keyHidden = 0;
  bool causalAttention = false;
};

/// Reads the shape of a GPT-style model; fails naming what it cannot find.
llvm::Expected<ModelShape> getModelShape(mlir::ModuleOp module);

enum class Precision { Mixed, BF16, FP32 };
inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {"mixed", Precision::Mixed, "bf16 compute, f32 master weights and state"},
    {"bf16", Precision::BF16, "bf16 throughout"},
    {"fp32", Precision::FP32, "f32 throughout"}};

/// How a plan lays the model out on its dp x tp mesh.
enum class TensorLayout {
  /// Megatron-LM's split found from the dataflow (annotateMegatron), with
  /// sequence parallelism where the plan has it.
  Megatron,
  /// Each op's sharding solved by the ILP (solveShardings) with the batch
  /// on dp and tp free elsewhere (getLayoutSolverOptions).
  Solved,
};
inline constexpr EnumName<TensorLayout> kTensorLayoutNames[] = {
    {"megatron", TensorLayout::Megatron,
     "Megatron-LM's split, found from the dataflow"},
    {"ilp", TensorLayout::Solved,
     "each op's sharding solved by the ILP, the batch on dp"}};

struct PlanChoice {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t microbatches = 1;
  int64_t zero = 0;
  /// ZeRO-3: gather parameters again for the backward (true), or keep the
  /// forward's gathers until the backward reads them (false).
  bool reshardAfterForward = true;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int64_t virtualStages = 1;
  Recompute recompute = Recompute::None;
  bool sequenceParallel = false;
  Precision precision = Precision::Mixed;
  TensorLayout layout = TensorLayout::Megatron;
  /// The ILP's layout: the share of device memory its model state is
  /// solved in. The solver does not see the activations; where the whole
  /// memory left no room for them in any plan, the search solves the
  /// state into less.
  double layoutMemoryShare = 1;
  /// The overlap schedule (--overlap): gradient reductions overlap the
  /// backward, in buckets of `bucketBytes` (0: each its own), and ZeRO-3's
  /// gathers the compute before their readers. The search prices the
  /// compile's options; it does not choose them.
  bool overlap = false;
  int64_t bucketBytes = 0;
  /// Expert parallelism: the experts split over an "ep" axis of this many
  /// devices, which splits the batch with dp (annotateExpertParallel); 1
  /// without experts. The mesh is dp x ep x tp x pp.
  int64_t ep = 1;
  /// Context parallelism: the sequence split over a "cp" axis of this many
  /// devices between dp and tp, attention computed by ring attention
  /// (annotateContextParallel's "ring"). The mesh is dp x cp x tp x pp.
  int64_t cp = 1;

  /// The replicas of the dense layers: dp x ep x cp, each running a share of
  /// the step's tokens (ep splits the batch with dp, cp the sequence).
  int64_t getDataParallel() const { return dp * ep * cp; }
};

/// Where a step's time goes: the terms sum to the step time.
struct StepBreakdown {
  /// Compute on the slowest pipeline stage over the step's microbatches,
  /// forward and backward, by op class: "gemm", "attention" (fused) and
  /// each memory-bound op by name (nn.layer_norm, nn.softmax, ...).
  llvm::SmallVector<std::pair<std::string, double>> compute;
  /// The forward run again by recomputation; the kernels' launches.
  double recompute = 0, launch = 0;
  /// Communication on the critical path: TP's collectives, the pipeline's
  /// sends, the data-parallel reductions and gathers the backward does not
  /// hide.
  double tpExposed = 0, ppExposed = 0, dpExposed = 0;
  /// Expert parallelism's all_to_all (tokens to experts and back), between
  /// the ops that make and read them: exposed.
  double epExposed = 0;
  /// Context parallelism's: the ring's transfers the attention blocks do
  /// not hide.
  double cpExposed = 0;
  /// The pipeline's idle time; the optimizer's update; the per-step fixed
  /// cost (Efficiency::stepSeconds).
  double bubble = 0, optimizer = 0, fixed = 0;

  double getComputeSeconds() const;
  double getTotalSeconds() const;
};

struct PlanEstimate {
  PlanChoice choice;
  StepBreakdown breakdown;
  double stepTimeSeconds = 0;
  double computeSeconds = 0, tpCommSeconds = 0, dpCommSeconds = 0,
         ppCommSeconds = 0, epCommSeconds = 0, cpCommSeconds = 0,
         bubbleFraction = 0;
  /// Bytes each device sends per step in data-parallel collectives, as a
  /// ring moves them: an all-reduce of N bytes over p devices sends
  /// 2 N (p-1)/p, a reduce-scatter or all-gather N (p-1)/p.
  double dpTrafficBytes = 0;
  /// The slowest pipeline stage's compute over the average (1: balanced).
  double stageImbalance = 1;
  double paramBytes = 0, gradBytes = 0, optimizerBytes = 0, activationBytes = 0,
         peakMemoryBytes = 0;
  double modelFlopsPerStep = 0, hardwareFlopsPerStep = 0;
  /// Model and hardware FLOPs utilization: the step's model FLOPs (three
  /// forwards) and hardware FLOPs (and what recomputation adds) over the
  /// devices' peak for the step time.
  double tflopsPerDevice = 0, mfu = 0, hfu = 0;
  bool fits = false;
};

/// One collective of a partitioned forward program, and how many times the
/// program runs it (once per block that makes it).
struct CollectiveUse {
  CollectiveKind kind;
  /// The full buffer (see getCollectiveSeconds).
  double bytes;
  DeviceGroup group;
  int64_t count = 1;
};

/// What the train step built from `module` holds for its backward
/// (TrainStepActivations); empty where none is built of it.
/// searchMeshShardings prices activations by it.
TrainStepActivations getTrainStepActivations(mlir::ModuleOp module);

/// The sharding solver's options for the layout of `choice`
/// (TensorLayout::Solved) of `model`: a train step's in its precision (its
/// state per parameter whatever the program's types), every axis
/// solved, "dp" splitting the batch only; its model state, without ZeRO,
/// in the choice's layoutMemoryShare of device memory (the search prices
/// the activations and ZeRO per plan):
/// each pipeline stage's in its own, cut as the search cuts a decoder of
/// `shape`, or, without a shape or a decoder's items, every stage's in
/// memory times the stages.
ShardingSolverOptions getLayoutSolverOptions(mlir::ModuleOp model,
                                             const MachineModel &machine,
                                             const PlanChoice &choice,
                                             const ModelShape *shape);

/// Annotates `model` for the layout of `choice` on `dist.mesh @mesh
/// ["dp"=dp, "tp"=tp]`, in place of its meshes and annotations (Megatron's
/// with sequence parallelism when the choice has it). The solved layout
/// (getLayoutSolverOptions, of `shape`) fails where the solver does.
llvm::Error annotateLayout(mlir::ModuleOp model, const MachineModel &machine,
                           const PlanChoice &choice, const ModelShape *shape);

/// A model's program, which the search prices as the compiler partitions
/// it.
struct LayoutProgram {
  mlir::ModuleOp module;
  /// Propagates and partitions an annotated copy of `module` in place, as
  /// the compiler's sharding stages do; fails where they fail. The search
  /// does not link the pass pipelines: its caller passes them in
  /// (lib/Pipelines' partitionAnnotated).
  std::function<mlir::LogicalResult(mlir::ModuleOp)> partition;
};

/// A layout as the compiler builds it on a dp x tp mesh: the model
/// annotated (annotateLayout), propagated and partitioned.
struct PartitionedLayout {
  /// The forward's collectives.
  llvm::SmallVector<CollectiveUse> forward;
  /// Per device: the forward's FLOPs (CostOpInterface), the parameters'
  /// elements, the bytes of the values the ops make and of those the train
  /// step keeps for the backward (0 where not found).
  double flops = 0, parameters = 0, valueBytes = 0, keptBytes = 0;
  /// The elements of parameters its forward gathers (all_gather of a
  /// parameter), per device: their copies and whole gradients are priced
  /// as model state.
  double gatheredParameters = 0;
  /// The layout's FLOPs, parameters and kept values (all values where
  /// those are not found) per device over Megatron's on the same mesh,
  /// which the search's formulas describe (1 for Megatron's own): the
  /// estimate scales its compute, model state and activations by them.
  double computeScale = 1, parameterScale = 1, activationScale = 1;
};

/// `program` partitioned for the layout of `choice` on its dp x tp (without
/// sequence parallelism), the bytes of `shape`'s kept values measured
/// there (none without it), the ILP's layout solved for `shape`. Fails
/// for a model the layout does not fit. Both layouts split each repeated
/// block alike (the ILP's blocks share their variables): a model of three
/// or more, annotated whole, is partitioned cut to its first block and to
/// its first two, and the second block's share counted once per later
/// block (the whole program of a 128-layer GPT gives the same figures, at a
/// sixtieth of the time), unless `wholeModel`.
llvm::Expected<PartitionedLayout>
partitionLayout(const LayoutProgram &program, const MachineModel &machine,
                const PlanChoice &choice, const ModelShape *shape = nullptr,
                bool wholeModel = false);

/// How the pipeline pass may cut a GPT for a plan: under `tp`-way TP, with
/// or without sequence parallelism, and between layers only
/// (`wholeLayers`: recomputing them whole, the backward reads nothing in
/// them; with ZeRO's units, a block's parameters are one buffer) or also
/// between a layer's attention and its MLP.
struct StageCutShape {
  int64_t tp = 1;
  bool sequenceParallel = false, wholeLayers = false;
  static StageCutShape get(const PlanChoice &choice);
};

/// The slowest pipeline stage's compute over the average when the pipeline
/// pass cuts the layers into `stages` for `shape`: balanceStages over the
/// forward's FLOPs (as the pass counts them) of the half-layers or layers,
/// and of the LM head.
double getStageImbalance(const ModelShape &model, int64_t stages,
                         const StageCutShape &shape = {});

/// The parameters a device of the largest of `pp` pipeline stages holds
/// under `tp`-way tensor parallelism, as the compiler lays out a GPT:
/// Megatron-LM's split (q, k, v, the first MLP weight and their biases by
/// columns, the output projections by rows; their biases, the layer norms
/// and the embeddings whole), the embeddings on the first stage, the final
/// layer norm and the LM head (the token embedding again, when tied) on the
/// last. A model of another shape splits evenly.
double getDeviceParameters(const ModelShape &model, int64_t pp,
                           const StageCutShape &shape = {});

/// What a pipelined plan's activations depend on but its recomputation,
/// sequence parallelism and precision: per stage of the pipeline pass's
/// cut, its attention and MLP half-layers; per rank, its stages, each with
/// the microbatches it holds in flight under the schedule.
struct PipelineActivationLayout {
  llvm::SmallVector<std::array<int64_t, 2>> halves;
  llvm::SmallVector<RankInFlight> ranks;
};

/// The layout of `choice`'s tp, pp, microbatches and schedule (empty
/// without a pipeline); `ranks`, if given, is getStagesInFlight of its
/// pipeline (the same at every TP).
PipelineActivationLayout getPipelineActivationLayout(
    const ModelShape &model, const PlanChoice &choice,
    const llvm::SmallVector<RankInFlight> *ranks = nullptr);

/// The estimate of one plan (which must divide the model: see search);
/// `stageImbalance` saves recomputing getStageImbalance for its stages, and
/// `layout` getPipelineActivationLayout for its pipeline. With
/// `partitioned`, the forward's collectives come from the partitioned
/// program (partitionLayout of the choice's layout) rather than Megatron's
/// formula, and its scales apply.
PlanEstimate estimatePlan(const ModelShape &model, const MachineModel &machine,
                          const PlanChoice &choice,
                          std::optional<double> stageImbalance = std::nullopt,
                          const PartitionedLayout *partitioned = nullptr,
                          const PipelineActivationLayout *layout = nullptr);

/// Choices the user pinned; unset ones are searched.
struct SearchResult;

struct SearchPins {
  std::optional<int64_t> dp, tp, pp, microbatches, zero, ep, cp;
  std::optional<TensorLayout> layout;
  std::optional<bool> reshardAfterForward;
  std::optional<PipelineSchedule> schedule;
  /// Whether the search may pick an asynchronous schedule (2BW, whose steps
  /// read the weights of the step before): only where the user allows it
  /// (--allow-async) or pins it.
  bool allowAsync = false;
  /// The interleaved schedule's chunks per stage (2 unless pinned).
  std::optional<int64_t> virtualStages;
  std::optional<Recompute> recompute;
  std::optional<bool> sequenceParallel;
  Precision precision = Precision::Mixed;
  /// The overlap schedule the plans are compiled with (PlanChoice).
  bool overlap = false;
  int64_t bucketBytes = 0;
  /// How many dp x tp shapes with tp the ILP's layout is solved on: those
  /// of this many fastest template plans, or every shape (0). Each is a
  /// solve and two partitions: on a large machine every shape takes most
  /// of the search.
  int64_t ilpShapes = 4;
  /// Called as the search goes (after every 64 plans considered) with what
  /// it has so far: a caller's progress line.
  std::function<void(const SearchResult &)> progress;
};

struct SearchResult {
  /// Feasible plans (within device memory), fastest first.
  llvm::SmallVector<PlanEstimate, 0> plans;
  int64_t considered = 0;
  int64_t overMemory = 0;
  /// The fastest feasible plan's step so far (infinity: none yet).
  double bestStepSeconds = std::numeric_limits<double>::infinity();
  /// Why the ILP's layout failed on the first shape it failed on (none
  /// where it was solved on every shape it was tried on).
  std::string solveFailure;
};

/// Fails unless `devices` is between 1 and what `machine` holds.
llvm::Error checkDeviceCount(const MachineModel &machine, int64_t devices);

/// One dp x tp x pp (x ep, with experts; x cp) factorization of the
/// devices.
struct PlanMesh {
  int64_t dp, tp, pp;
  int64_t ep = 1, cp = 1;
};

/// The meshes searchPlans searches: each dp x tp x pp of `devices` that
/// `pins` allow, with tp dividing the heads, pp at most the layers, dp
/// dividing the batch and the pinned microbatches a dp replica's batch; for
/// a model with experts also dp x ep (ep dividing the experts, dp x ep the
/// batch; ep > 1 without a pipeline or microbatches); for a model with
/// fused attention (without dropout) and without experts also dp x cp (cp
/// dividing the sequence).
llvm::SmallVector<PlanMesh>
getPlanMeshes(const ModelShape &model, int64_t devices, const SearchPins &pins);

/// Fails, naming the pins and what the model allows, where no mesh of
/// `devices` is left to search (or ilpShapes is negative).
llvm::Error checkSearchPins(const ModelShape &model, int64_t devices,
                            const SearchPins &pins);

/// Searches every plan for `devices` devices: DP x TP x PP factorizations
/// (TP dividing the heads, PP at most the layers; DP split into dp x ep
/// for a model with experts, see getPlanMeshes), ZeRO 0-3, microbatch
/// counts dividing the per-replica batch, GPipe / 1F1B / ZB-H1 / interleaved (2
/// chunks), no / selective / full recomputation, and sequence parallelism
/// with TP. Plans over device memory are dropped.
///
/// With a `program`, each dp x tp shape is priced as partitioned
/// (partitionLayout; Megatron's formula where that fails), in two layouts
/// where tp > 1: Megatron's (the template) and the ILP's, which joins the
/// search where it differs from the template (else the template's plans
/// without sequence parallelism are the ILP's).
SearchResult searchPlans(const ModelShape &model, const MachineModel &machine,
                         int64_t devices, const SearchPins &pins,
                         const LayoutProgram *program = nullptr);

/// `model` at a global batch of `batch` sequences: what its ops do per
/// sequence scaled (the ops that read the data; a GEMM's rows or batch).
ModelShape withBatch(const ModelShape &model, int64_t batch);

enum class ScalingMode { Strong, Weak };
inline constexpr EnumName<ScalingMode> kScalingModeNames[] = {
    {"strong", ScalingMode::Strong, "the global batch fixed (Amdahl)"},
    {"weak", ScalingMode::Weak, "the batch per device fixed (Gustafson)"}};

/// The best plan at one device count of a scaling curve.
struct ScalingPoint {
  int64_t devices = 0, batch = 0;
  /// None where no plan fits.
  std::optional<PlanEstimate> plan;
  /// Sequences per second; over the first count's (the speedup, scaled
  /// under weak scaling); the speedup over the devices' ratio.
  double throughput = 0, speedup = 0, efficiency = 0;
};

struct ScalingCurve {
  ScalingMode mode = ScalingMode::Strong;
  llvm::SmallVector<ScalingPoint, 0> points;
  /// The serial fraction of the mode's law fitted to the speedups:
  /// Amdahl's (strong), Gustafson's (weak).
  double serialFraction = 0;
};

/// The best plan (searchPlans, Megatron's layout by its formulas) of
/// `model` at each of `devices` (ascending, the first the baseline): under
/// strong scaling at the model's batch, under weak scaling at its batch
/// times the devices over the first count's (each count a multiple of the
/// first). Fails naming a count the machine or pins do not allow.
llvm::Expected<ScalingCurve> getScalingCurve(const ModelShape &model,
                                             const MachineModel &machine,
                                             llvm::ArrayRef<int64_t> devices,
                                             ScalingMode mode,
                                             const SearchPins &pins);

} // namespace tessera

// Their options read the names of the tables above.
TESSERA_ENUM_OPTION_PARSER(tessera::ScalingMode);
TESSERA_ENUM_OPTION_PARSER(tessera::Precision);
TESSERA_ENUM_OPTION_PARSER(tessera::TensorLayout);

#endif // TESSERA_SEARCH_PLANNER_H
