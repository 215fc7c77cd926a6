//===- PipelineState.h - What --tessera-pipeline's phases share -*- C++ -*-===//
//
// The state of --tessera-pipeline on one function, which its phases fill in
// order, and the phases themselves: classify the ops (Classify.cpp), assign
// them stages and ranks (AssignStages.cpp), plan the transfers between
// ranks (PlanTransfers.cpp), place their waits (RankSchedule.cpp) and emit
// each rank's program (Emit.cpp). Pipeline.cpp runs them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_PIPELINE_PIPELINESTATE_H
#define TESSERA_LIB_TRANSFORMS_PIPELINE_PIPELINESTATE_H

#include "dialects/Dist/IR/DistOps.h"
#include "tessera/Analysis/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

#include <set>

namespace tessera::pipeline {

// Short names for the schedule's pieces, which the phases use throughout.
using UnitKind = PipelineUnitKind;
using Unit = PipelineUnit;
using Event = PipelineEvent;

/// When an op runs: once before the microbatches (pre), on each microbatch
/// (body), or once after them on their sums (post).
enum class OpClass { Pre, Body, Post };

/// A tensor that one rank sends to another: a body value on a microbatch,
/// or (microbatch -1) a value accumulated over all of them. The sends of
/// one value to one rank share a tag: a channel delivers in order.
struct Message {
  mlir::Value value;
  int64_t microbatch;
  int64_t from, to, tag;
};

/// A unit of a rank's program, which its schedule runs once per microbatch.
struct UnitTemplate {
  UnitKind kind;
  int64_t stage;
};

/// The index in `templates` of the unit that `unit` runs.
int64_t findTemplate(llvm::ArrayRef<UnitTemplate> templates,
                     const PipelineUnit &unit);

/// Whether `op` is an all_reduce over the microbatch axis.
bool isMicrobatchReduction(mlir::Operation *op);

/// What the phases know of the function being pipelined; each phase reads
/// what the ones before it filled in.
struct PipelineState {
  PipelineState(mlir::func::FuncOp function, dist::MeshOp mesh,
                PipelineSpec spec)
      : function(function), mesh(mesh), spec(spec) {}

  /// PipeDream and PipeDream-2BW: no flush between steps, a run also
  /// finishing steps before.
  bool isSteady() const { return tessera::isSteady(spec.schedule); }
  bool isData(mlir::Value value) const {
    auto arg = llvm::dyn_cast<mlir::BlockArgument>(value);
    return arg && dataArgs.contains(arg.getArgNumber());
  }
  bool isBody(mlir::Value value) const {
    mlir::Operation *op = value.getDefiningOp();
    return op && classes.lookup(op) == OpClass::Body;
  }
  int64_t getRank(int64_t stage) const { return stage % spec.ranks; }
  /// The kind of unit a body op runs in.
  UnitKind getKind(mlir::Operation *op) const {
    return forwardOps.contains(op)  ? UnitKind::Forward
           : weightOps.contains(op) ? UnitKind::Weight
                                    : UnitKind::Backward;
  }
  /// The ranks an op runs on.
  const std::set<int64_t> &getRanks(mlir::Operation *op) { return ranksOf[op]; }

  mlir::func::FuncOp function;
  dist::MeshOp mesh;
  PipelineSpec spec;
  mlir::Block *body = nullptr;
  llvm::DenseSet<unsigned> dataArgs;
  llvm::DenseMap<mlir::Operation *, OpClass> classes;
  /// Body ops in program order, and the forward ones among them.
  llvm::SmallVector<mlir::Operation *> bodyOps;
  llvm::SetVector<mlir::Operation *> forwardOps;
  /// The parameters' gathers (and their views) moved into the forward
  /// units: they run where they are read.
  llvm::DenseSet<mlir::Operation *> forwardGathers;
  /// With ZB-H1: the backward ops that make no gradient another stage reads
  /// (weight gradients), which run in their own units.
  llvm::DenseSet<mlir::Operation *> weightOps;
  llvm::DenseMap<mlir::Operation *, int64_t> stageOf;
  llvm::DenseMap<mlir::Operation *, std::set<int64_t>> ranksOf;
  /// Body values read by post ops or returned: summed over microbatches on
  /// the rank that makes them.
  llvm::SetVector<mlir::Value> accumulated;
  /// Gradient clipping's norms (the nn.sqrt that --tessera-clip-gradients
  /// marks and each update reads as its grad_norm), the ops of the sums
  /// under them (nn.add and dist.all_reduce of scalars) and their terms
  /// (nn.sum_squares of a gradient): each rank sums the terms of the
  /// gradients its updates read, and the ranks' sums meet in one all_reduce
  /// over the pipeline axis.
  llvm::SetVector<mlir::Operation *> normRoots;
  llvm::DenseSet<mlir::Operation *> normSums, normTerms;
  llvm::SmallVector<Message> messages;
  /// Per rank, the schedule's units and the events that run them.
  llvm::SmallVector<llvm::SmallVector<Unit>> units;
  llvm::SmallVector<llvm::SmallVector<Event>> events;
  /// Per message, the event of its sender after which its send is waited
  /// (-1: at the end of the program).
  llvm::SmallVector<int64_t> waitAfter;
  /// Whether a pre op reads an argument, as the emitter has found so far
  /// (see readsArguments in Emit.cpp).
  llvm::DenseMap<mlir::Operation *, bool> argumentReaders;
};

//===----------------------------------------------------------------------===//
// Classify.cpp
//===----------------------------------------------------------------------===//

/// Finds the gradient norms by --tessera-clip-gradients' mark, and the sums
/// and terms under them; fails on a norm an update reads that carries no
/// mark, or that is not the square root of a sum of nn.sum_squares.
mlir::LogicalResult findGradientNorms(PipelineState &state);
/// Classifies each op as pre (once, before the microbatches), body (per
/// microbatch) or post (once, after them), and finds the body values that
/// accumulate over microbatches; fails on what cannot be split so.
mlir::LogicalResult classify(PipelineState &state);
/// Finds the forward ops among the body ops: those the loss depends on.
void findForward(PipelineState &state);

//===----------------------------------------------------------------------===//
// AssignStages.cpp
//===----------------------------------------------------------------------===//

/// With ZeRO-3: moves the parameters' gathers that one phase reads from the
/// pre ops into the body; whether it moved any.
bool moveGathersIntoUnits(PipelineState &state);
/// Cuts the forward ops into stages, and places the gathers moved into the
/// forward units at the stages that read them.
mlir::LogicalResult cutStages(PipelineState &state);
/// Places the backward ops at stages: gradients flow to earlier ones.
mlir::LogicalResult assignBackward(PipelineState &state);
/// With ZB-H1: finds the backward ops that make only weight gradients.
void splitWeightGradients(PipelineState &state);
/// The ranks each op runs on: a body op its stage's, a pre or post op
/// those of its readers.
void assignRanks(PipelineState &state);

//===----------------------------------------------------------------------===//
// PlanTransfers.cpp
//===----------------------------------------------------------------------===//

/// Each rank's schedule, the messages between ranks and each rank's events
/// (its units' receives, runs and sends, then what comes after them).
mlir::LogicalResult planMessages(PipelineState &state);

//===----------------------------------------------------------------------===//
// RankSchedule.cpp
//===----------------------------------------------------------------------===//

/// Without a flush: places no waits, and fails on what a step cannot share
/// with the next.
mlir::LogicalResult checkSteady(PipelineState &state);
/// With a flush: simulates the events to place each send's wait; fails
/// where the schedule deadlocks.
mlir::LogicalResult simulate(PipelineState &state);
/// With 2BW: the index in `rank`'s schedule of its last backward of the
/// step before, after which its deferred post ops run (-1: it runs none;
/// they run after its last entry).
int64_t getPostAfter(const PipelineState &state, int64_t rank);
/// Sets `dist.schedule` on `rank`'s function: its units, its schedule
/// with the slots of each stage's microbatches, and where the units'
/// sends (numbered by `sendNumber` from their tags) are waited for.
void setSchedule(const PipelineState &state, mlir::func::FuncOp stage,
                 int64_t rank, llvm::ArrayRef<UnitTemplate> templates,
                 llvm::ArrayRef<llvm::StringRef> unitNames,
                 const llvm::DenseMap<int64_t, int64_t> &sendNumber);

//===----------------------------------------------------------------------===//
// Emit.cpp
//===----------------------------------------------------------------------===//

/// Creates `rank`'s program, before the function: its arguments, the pre
/// ops, one unit per (kind, stage) it runs, the post ops and the schedule.
mlir::FailureOr<mlir::func::FuncOp> emit(PipelineState &state, int64_t rank);

} // namespace tessera::pipeline

#endif // TESSERA_LIB_TRANSFORMS_PIPELINE_PIPELINESTATE_H
