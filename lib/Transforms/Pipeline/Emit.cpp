//===- Emit.cpp - Each pipeline rank's program ----------------------------===//
//
// The last phase of --tessera-pipeline: one function per pipeline rank, with
// the arguments it reads, the pre ops it needs once, one unit per (kind,
// stage) it runs (which its schedule runs per microbatch) with the unit's
// receives and sends, the post ops on the accumulated sums after the
// schedule (split in two parts without a flush), its results and their
// attributes, and its `dist.schedule`.
//
//===----------------------------------------------------------------------===//

#include "PipelineState.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

#include "mlir/IR/IRMapping.h"

#include <functional>
#include <string>

using namespace mlir;
using namespace tessera;
using namespace tessera::pipeline;

/// The sharding `attr` without the microbatch axis.
static Attribute dropMicrobatchAxis(Attribute attr) {
  auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr);
  if (!sharding)
    return attr;
  MLIRContext *context = sharding.getContext();
  SmallVector<dist::DimShardingAttr> dims;
  for (dist::DimShardingAttr dim : sharding.getDims()) {
    SmallVector<StringAttr> axes;
    for (StringAttr axis : dim.getAxes())
      if (axis.getValue() != kMicrobatchAxis)
        axes.push_back(axis);
    dims.push_back(dist::DimShardingAttr::get(context, axes, dim.getIsOpen(),
                                              dim.getPriority()));
  }
  return dist::ShardingAttr::get(
      context, sharding.getMesh(), dims, sharding.getReplicatedAxes(),
      sharding.getUnreducedAxes(), sharding.getFlatAxes());
}

/// Whether a pre op reads an argument (its value differs from step to
/// step): with 2BW each unit that reads it makes it for its own step.
static bool readsArguments(PipelineState &state, Operation *op) {
  auto [it, inserted] = state.argumentReaders.try_emplace(op, false);
  if (!inserted)
    return it->second;
  bool reads = llvm::any_of(op->getOperands(), [&](Value operand) {
    Operation *def = operand.getDefiningOp();
    return !def || readsArguments(state, def);
  });
  state.argumentReaders[op] = reads;
  return reads;
}

static ArrayRef<NamedAttribute> getAttrs(DictionaryAttr dict) {
  return dict ? dict.getValue() : ArrayRef<NamedAttribute>();
}

namespace {

/// Emits one rank's program, step by step, in the order the steps create
/// its ops.
class RankEmitter {
public:
  RankEmitter(PipelineState &state, int64_t rank)
      : state(state), rank(rank), context(state.function.getContext()),
        builder(state.function), loc(state.function.getLoc()),
        meshName(FlatSymbolRefAttr::get(state.mesh.getSymNameAttr())),
        axisName(builder.getStringAttr(kPipelineAxis)),
        microbatches(state.spec.microbatches) {}

  FailureOr<func::FuncOp> emit();

private:
  // The function and its arguments.
  void findArgumentsAndResults();
  void createFunction();
  void setArgumentAttributes();
  void setResultAttributes();

  // What is made once, or again where it is read.
  bool isRemade(Operation *op);
  Value remakeIn(Value value, IRMapping &into, DenseMap<Value, Value> &made);
  void emitPreOps();

  // The units.
  void collectTemplates();
  LogicalResult emitUnits();
  LogicalResult emitUnit(size_t index);
  LogicalResult runUnitOps(size_t index, DenseMap<Value, Value> &slices,
                           DenseMap<Value, Value> &remade);
  void nameFrom(Operation *last, StringRef name);

  // The transfers.
  Value createRecv(const Message &message);
  dist::SendOp createSend(const Message &message, Value value);
  void waitFor(int64_t event);

  // After the schedule.
  Value sumTerms(Value value);
  void emitGradientNorm(Operation *root);
  void emitMicrobatchReduction(dist::AllReduceOp reduce);
  void findDeferredOps();
  bool isDeferred(const Event &event) const;
  LogicalResult emitPostOps(bool deferred, DenseMap<Value, Value> &remade);
  LogicalResult emitPost(bool deferred);
  LogicalResult emitAfterSchedule();
  void emitReturn();

  PipelineState &state;
  int64_t rank;
  MLIRContext *context;
  OpBuilder builder;
  Location loc;
  FlatSymbolRefAttr meshName;
  StringAttr axisName;
  int64_t microbatches;

  /// The arguments this rank reads (in their order), and the results it
  /// returns: indices into the function's.
  SmallVector<unsigned> args, results;
  func::FuncOp stage;
  Block *block = nullptr;
  /// The step's values that every part of the program reads: the
  /// arguments, the pre ops' results, and (after the schedule) the sums
  /// and the post ops' results.
  IRMapping shared;
  /// Per argument of the function, its index in this rank's.
  DenseMap<unsigned, unsigned> argIndex;

  /// The units: one per (kind, stage) this rank runs, and per unit the
  /// index in the schedule of its run on microbatch 0.
  SmallVector<UnitTemplate> templates;
  SmallVector<int64_t> firstRun;
  /// One run's values, and the unit that made each.
  IRMapping mapping;
  DenseMap<Value, int64_t> madeBy;
  /// The accumulated values' sums over the microbatches.
  DenseMap<Value, Value> sums;
  /// Per tag this rank sends in its units: its send's number among them.
  DenseMap<int64_t, int64_t> sendNumber;
  SmallVector<std::string> unitNames;

  /// After the schedule: the last op of the units, the sends in flight (per
  /// message), and without a flush the post ops that finish the step
  /// before.
  Operation *lastOfUnits = nullptr;
  SmallVector<Value> inFlight;
  bool updatesLater = false;
  llvm::DenseSet<Operation *> deferredOps;
};

} // namespace

FailureOr<func::FuncOp> RankEmitter::emit() {
  findArgumentsAndResults();
  createFunction();
  emitPreOps();
  collectTemplates();
  if (failed(emitUnits()) || failed(emitAfterSchedule()))
    return failure();
  SmallVector<StringRef> names(unitNames.begin(), unitNames.end());
  setSchedule(state, stage, rank, templates, names, sendNumber);
  emitReturn();
  setArgumentAttributes();
  setResultAttributes();
  return stage;
}

/// The arguments this rank reads, in their order, and its results: the
/// updates of arguments this rank holds, and what this rank makes (the loss
/// on the last stage's rank).
void RankEmitter::findArgumentsAndResults() {
  func::FuncOp function = state.function;
  llvm::SetVector<unsigned> used;
  for (Operation &op : state.body->without_terminator()) {
    if (!state.getRanks(&op).count(rank))
      continue;
    for (Value operand : op.getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand))
        used.insert(arg.getArgNumber());
  }
  auto returnOp = cast<func::ReturnOp>(state.body->getTerminator());
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    if (auto updates = function.getResultAttrOfType<IntegerAttr>(
            index, nn::kUpdatesAttrName)) {
      // An argument returned as is (a parameter, its stash's next value)
      // is returned where the argument it updates is read.
      Operation *def = operand.getDefiningOp();
      if (def ? state.getRanks(def).count(rank)
              : used.contains(updates.getInt())) {
        used.insert(updates.getInt());
        if (auto arg = dyn_cast<BlockArgument>(operand))
          used.insert(arg.getArgNumber());
        results.push_back(index);
      }
      continue;
    }
    // A metric (the gradient norm, made on every rank) is returned by each
    // rank that makes it, so that the rank that logs the loss has it too.
    Operation *def = operand.getDefiningOp();
    int64_t maker = def ? *state.getRanks(def).begin() : 0;
    bool metric = function.getResultAttr(index, nn::kMetricAttrName) && def &&
                  state.getRanks(def).count(rank);
    if (maker == rank || metric)
      results.push_back(index);
  }
  args.assign(used.begin(), used.end());
  llvm::sort(args);
}

/// The function, before the one pipelined, with its arguments: a data
/// argument holds the local batch of all microbatches.
void RankEmitter::createFunction() {
  func::FuncOp function = state.function;
  stage = func::FuncOp::create(
      builder, loc, (function.getSymName() + "_stage" + Twine(rank)).str(),
      builder.getFunctionType({}, {}));
  stage->setAttr(dist::DistDialect::kPipelineRankAttrName,
                 builder.getI64IntegerAttr(rank));
  if (function->hasAttr(dist::DistDialect::kPartitionedAttrName))
    stage->setAttr(dist::DistDialect::kPartitionedAttrName,
                   builder.getUnitAttr());
  block = stage.addEntryBlock();
  builder.setInsertionPointToStart(block);
  for (unsigned index : args) {
    BlockArgument arg = function.getArgument(index);
    Type type = arg.getType();
    if (state.dataArgs.contains(index)) {
      auto tensor = cast<RankedTensorType>(type);
      if (tensor.getRank() > 0) {
        SmallVector<int64_t> shape(tensor.getShape());
        shape[0] *= microbatches;
        type = tensor.clone(shape);
      }
    }
    argIndex[index] = block->getNumArguments();
    shared.map(arg, block->addArgument(type, arg.getLoc()));
  }
}

/// A splat constant or a broadcast that only the units read is made in
/// each unit that reads it, not held for the whole step: a bias broadcast
/// to a microbatch's activations is as large as they are, and cheap to
/// make again.
bool RankEmitter::isRemade(Operation *op) {
  // Without a flush a run holds two steps' units (and the updates of the
  // step before): what a pre op makes from the arguments is made for
  // each of them.
  if (state.isSteady() && state.classes.lookup(op) == OpClass::Pre &&
      readsArguments(state, op))
    return true;
  auto constant = dyn_cast<nn::ConstantOp>(op);
  return state.classes.lookup(op) == OpClass::Pre &&
         (isa<nn::BroadcastOp>(op) ||
          (constant && constant.getValue().isSplat())) &&
         llvm::all_of(op->getUsers(), [&](Operation *user) {
           return state.classes.lookup(user) == OpClass::Body;
         });
}

/// `value`, a remade op's result, made here (its operands first).
Value RankEmitter::remakeIn(Value value, IRMapping &into,
                            DenseMap<Value, Value> &made) {
  if (Value local = made.lookup(value))
    return local;
  Operation *def = value.getDefiningOp();
  for (Value operand : def->getOperands())
    if (Operation *inner = operand.getDefiningOp(); inner && isRemade(inner))
      into.map(operand, remakeIn(operand, into, made));
  Value local = builder.clone(*def, into)
                    ->getResult(cast<OpResult>(value).getResultNumber());
  made[value] = local;
  return local;
}

/// The pre ops, once.
void RankEmitter::emitPreOps() {
  for (Operation &op : state.body->without_terminator())
    if (state.classes.lookup(&op) == OpClass::Pre &&
        state.getRanks(&op).count(rank) && !isRemade(&op))
      builder.clone(op, shared);
}

/// The units: one per (kind, stage) this rank runs, each once, for the
/// schedule to run per microbatch. Forwards by stage up, then backwards
/// and weight units by stage down: every value is made before it is read.
void RankEmitter::collectTemplates() {
  ArrayRef<Unit> schedule = state.units[rank];
  for (const Unit &unit : schedule)
    if (findTemplate(templates, unit) == static_cast<int64_t>(templates.size()))
      templates.push_back({unit.kind, unit.stage});
  llvm::stable_sort(
      templates, [](const UnitTemplate &left, const UnitTemplate &right) {
        auto key = [](const UnitTemplate &unit) {
          return std::make_pair(static_cast<int>(unit.kind),
                                unit.kind == UnitKind::Forward ? unit.stage
                                                               : -unit.stage);
        };
        return key(left) < key(right);
      });
  // Each unit's run on microbatch 0: its events are the unit's transfers.
  firstRun.assign(templates.size(), -1);
  for (auto [index, unit] : llvm::enumerate(schedule))
    if (unit.microbatch == 0)
      firstRun[findTemplate(templates, unit)] = index;
}

static std::string getUnitName(const UnitTemplate &unit) {
  StringRef kind = unit.kind == UnitKind::Forward    ? "F"
                   : unit.kind == UnitKind::Backward ? "B"
                                                     : "W";
  return (kind + Twine(unit.stage)).str();
}

/// Names the first op made after `last` (views and constraints make no
/// instruction, the exporter looks further).
void RankEmitter::nameFrom(Operation *last, StringRef name) {
  Operation *first = last             ? last->getNextNode()
                     : block->empty() ? nullptr
                                      : &block->front();
  if (first)
    first->setAttr(dist::DistDialect::kUnitAttrName,
                   builder.getStringAttr(name));
}

LogicalResult RankEmitter::emitUnits() {
  mapping = shared;
  for (size_t index = 0; index < templates.size(); ++index)
    if (failed(emitUnit(index)))
      return failure();
  return success();
}

/// The unit `index` as its run on microbatch 0 has it: its receives, its
/// ops and its sends.
LogicalResult RankEmitter::emitUnit(size_t index) {
  unitNames.push_back(getUnitName(templates[index]));
  Operation *last = block->empty() ? nullptr : &block->back();
  DenseMap<Value, Value> slices, remade;
  for (const Event &event : state.events[rank]) {
    if (event.unit != firstRun[index])
      continue;
    if (event.kind == Event::Compute) {
      if (failed(runUnitOps(index, slices, remade)))
        return failure();
      continue;
    }
    const Message &message = state.messages[event.message];
    if (event.kind == Event::Recv) {
      Value received = createRecv(message);
      mapping.map(message.value, received);
      madeBy[message.value] = index;
      continue;
    }
    createSend(message, mapping.lookup(message.value));
    int64_t number = sendNumber.size();
    sendNumber[message.tag] = number;
  }
  nameFrom(last, unitNames.back());
  return success();
}

/// The body ops of the unit `index`, on one microbatch's slices of the data
/// (`slices`) and with the remade pre values made in the unit (`remade`);
/// an accumulated result is summed over the microbatches.
LogicalResult RankEmitter::runUnitOps(size_t index,
                                      DenseMap<Value, Value> &slices,
                                      DenseMap<Value, Value> &remade) {
  const UnitTemplate &unit = templates[index];
  for (Operation *op : state.bodyOps) {
    if (state.stageOf.lookup(op) != unit.stage ||
        state.getKind(op) != unit.kind)
      continue;
    for (Value operand : op->getOperands()) {
      if (state.isData(operand) && microbatches > 1) {
        Value &slice = slices[operand];
        if (!slice)
          slice = dist::MicrobatchSliceOp::create(
              builder, operand.getLoc(), operand.getType(),
              shared.lookup(operand), builder.getI64IntegerAttr(microbatches));
        mapping.map(operand, slice);
        continue;
      }
      if (Operation *def = operand.getDefiningOp(); def && isRemade(def)) {
        mapping.map(operand, remakeIn(operand, mapping, remade));
        continue;
      }
      auto maker = madeBy.find(operand);
      if (maker != madeBy.end() && templates[maker->second].stage != unit.stage)
        return op->emitError("cannot run pipeline stage ")
               << unit.stage << " as a loop: it reads a value of stage "
               << templates[maker->second].stage
               << " on the same rank without a transfer";
      if (!mapping.lookupOrNull(operand))
        return op->emitError("internal error: pipeline rank ")
               << rank << " has no value for an operand";
    }
    Operation *clone = builder.clone(*op, mapping);
    clone->removeAttr(dist::DistDialect::kStageAttrName);
    for (auto [result, value] :
         llvm::zip(op->getResults(), clone->getResults())) {
      madeBy[result] = index;
      if (!state.accumulated.contains(result))
        continue;
      sums[result] =
          microbatches > 1
              ? Value(dist::AccumulateOp::create(builder, op->getLoc(), value))
              : Value(value);
    }
  }
  return success();
}

/// A message's receive.
Value RankEmitter::createRecv(const Message &message) {
  return dist::RecvOp::create(builder, loc, message.value.getType(), meshName,
                              axisName, builder.getI64IntegerAttr(message.from),
                              builder.getI64IntegerAttr(message.tag));
}

/// A message's send of `value`, started on the communication stream.
dist::SendOp RankEmitter::createSend(const Message &message, Value value) {
  auto send = dist::SendOp::create(builder, loc, value, meshName, axisName,
                                   builder.getI64IntegerAttr(message.to),
                                   builder.getI64IntegerAttr(message.tag));
  send->setAttr(dist::DistDialect::kStreamAttrName,
                builder.getI64IntegerAttr(1));
  return send;
}

/// The waits, after `event` (-1: at the end of the program), of this
/// rank's sends of accumulated values that the simulation placed there.
void RankEmitter::waitFor(int64_t event) {
  for (auto [index, message] : llvm::enumerate(state.messages))
    if (message.from == rank && message.microbatch < 0 &&
        state.waitAfter[index] == event)
      dist::WaitOp::create(builder, loc, inFlight[index]);
}

/// A gradient norm: this rank's sum of the terms it is the first to make
/// (a gradient tied across stages is read on several), within the stage
/// summed as the partitioner sums them, then over the pipeline axis.
Value RankEmitter::sumTerms(Value value) {
  Operation *def = value.getDefiningOp();
  if (state.normTerms.contains(def))
    return *state.getRanks(def).begin() == rank ? shared.lookup(value)
                                                : Value();
  if (auto add = dyn_cast<nn::AddOp>(def)) {
    Value lhs = sumTerms(add.getLhs());
    Value rhs = sumTerms(add.getRhs());
    if (!lhs || !rhs)
      return lhs ? lhs : rhs;
    return nn::AddOp::create(builder, def->getLoc(), lhs, rhs);
  }
  auto reduce = cast<dist::AllReduceOp>(def);
  Value input = sumTerms(reduce.getInput());
  if (!input)
    return Value();
  return dist::AllReduceOp::create(
      builder, def->getLoc(), input, reduce.getMeshAttr(),
      reduce.getMeshAxesAttr(), reduce.getKindAttr());
}

void RankEmitter::emitGradientNorm(Operation *root) {
  Value sum = sumTerms(root->getOperand(0));
  auto scalar = cast<RankedTensorType>(root->getResult(0).getType());
  if (!sum)
    sum = nn::ConstantOp::create(
        builder, root->getLoc(),
        DenseElementsAttr::get(scalar, builder.getF32FloatAttr(0.0f)));
  if (state.spec.ranks > 1)
    sum = dist::AllReduceOp::create(
        builder, root->getLoc(), sum, meshName,
        builder.getArrayAttr({axisName}),
        dist::ReductionKindAttr::get(context, dist::ReductionKind::sum));
  shared.map(root->getResult(0),
             nn::SqrtOp::create(builder, root->getLoc(), sum).getResult());
}

/// An all_reduce over the microbatch axis of an accumulated value: the
/// sum is there already (a mean divides it by the microbatches), and the
/// other axes, if any, are reduced over still.
void RankEmitter::emitMicrobatchReduction(dist::AllReduceOp reduce) {
  Location reduceLoc = reduce.getLoc();
  Value value = shared.lookup(reduce.getInput());
  if (reduce.getKind() == dist::ReductionKind::avg && microbatches > 1) {
    auto type = cast<RankedTensorType>(value.getType());
    auto scale = nn::ConstantOp::create(
        builder, reduceLoc,
        DenseElementsAttr::get(
            type,
            builder.getFloatAttr(type.getElementType(),
                                 1.0 / static_cast<double>(microbatches))));
    value = nn::MulOp::create(builder, reduceLoc, value, scale);
  }
  SmallVector<Attribute> axes;
  for (Attribute axis : reduce.getMeshAxes())
    if (cast<StringAttr>(axis).getValue() != kMicrobatchAxis)
      axes.push_back(axis);
  if (!axes.empty())
    value = dist::AllReduceOp::create(
        builder, reduceLoc, value, reduce.getMeshAttr(),
        builder.getArrayAttr(axes), reduce.getKindAttr());
  shared.map(reduce.getResult(), value);
}

/// Without a flush (2BW) the post ops of a run split in two: those that
/// finish the step before (deferred: on a rank that runs backwards of the
/// step before, all of them, after its last such backward; on the last
/// rank, those that read another rank's sums, at the end) and the rest,
/// the run's own (the loss, the last rank's other updates, its sends),
/// at the end. A rank that updates the step before sends its sums there,
/// and waits for the sends at the end; the last rank sends at the end and
/// waits in the next run's deferred part, where the sums are read.
void RankEmitter::findDeferredOps() {
  updatesLater = state.isSteady() && getPostAfter(state, rank) >= 0;
  if (!state.isSteady())
    return;
  DenseSet<Value> received;
  for (const Message &message : state.messages)
    if (message.to == rank && message.microbatch < 0)
      received.insert(message.value);
  for (Operation &op : state.body->without_terminator()) {
    if (state.classes.lookup(&op) != OpClass::Post ||
        !state.getRanks(&op).count(rank))
      continue;
    if (updatesLater || llvm::any_of(op.getOperands(), [&](Value operand) {
          Operation *def = operand.getDefiningOp();
          return received.contains(operand) ||
                 (def && deferredOps.contains(def));
        }))
      deferredOps.insert(&op);
  }
}

bool RankEmitter::isDeferred(const Event &event) const {
  if (!state.isSteady())
    return false;
  if (event.kind == Event::Recv)
    return true;
  return event.kind == Event::Send && updatesLater;
}

/// The post ops of the part `deferred`, once, on the sums; `remade` holds
/// what pre ops make from the arguments for the part's step.
LogicalResult RankEmitter::emitPostOps(bool deferred,
                                       DenseMap<Value, Value> &remade) {
  for (Value value : state.accumulated)
    if (Value sum = sums.lookup(value))
      shared.map(value, sum);
  for (Operation &op : state.body->without_terminator()) {
    if (state.classes.lookup(&op) != OpClass::Post ||
        !state.getRanks(&op).count(rank) ||
        (state.isSteady() && deferredOps.contains(&op) != deferred))
      continue;
    if (state.normSums.contains(&op))
      continue;
    if (state.normRoots.contains(&op)) {
      emitGradientNorm(&op);
      continue;
    }
    if (isMicrobatchReduction(&op)) {
      emitMicrobatchReduction(cast<dist::AllReduceOp>(op));
      continue;
    }
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp(); def && isRemade(def))
        shared.map(operand, remakeIn(operand, shared, remade));
    for (Value operand : op.getOperands())
      if (!shared.contains(operand))
        return op.emitError("internal error: pipeline rank ")
               << rank << " has no value for an operand";
    builder.clone(op, shared);
  }
  return success();
}

/// One part of what comes after the schedule (without a flush, the part
/// `deferred`; with one, all of it): the accumulated values' transfers and
/// the post ops, with the waits of the sends placed among them.
LogicalResult RankEmitter::emitPost(bool deferred) {
  // What pre ops make from the arguments is made for each part's step.
  DenseMap<Value, Value> postRemade;
  for (auto [index, event] : llvm::enumerate(state.events[rank])) {
    if (event.unit >= 0 ||
        (event.kind != Event::Compute && isDeferred(event) != deferred))
      continue;
    if (event.kind == Event::Recv) {
      const Message &message = state.messages[event.message];
      sums[message.value] = createRecv(message);
    } else if (event.kind == Event::Send) {
      const Message &message = state.messages[event.message];
      inFlight[event.message] = createSend(message, sums.lookup(message.value));
    } else if (failed(emitPostOps(deferred, postRemade))) {
      return failure();
    }
    waitFor(index);
  }
  return success();
}

/// After the schedule: the accumulated values' transfers and the post ops,
/// once. Their sends are waited for where the simulation placed them.
LogicalResult RankEmitter::emitAfterSchedule() {
  lastOfUnits = block->empty() ? nullptr : &block->back();
  inFlight.assign(state.messages.size(), Value());
  findDeferredOps();
  if (!state.isSteady()) {
    if (failed(emitPost(false)))
      return failure();
    waitFor(-1);
    nameFrom(lastOfUnits, dist::kUpdateUnitName);
    return success();
  }
  // In the program, the part whose sends the other waits for comes
  // first: on a rank that updates amid its units, the deferred part (its
  // sends are waited for at the run's end, in its own part); on the last
  // rank its own part (its sends are waited for in the next run's deferred
  // part, which the runtime runs there before the rank's own).
  bool first = updatesLater;
  if (failed(emitPost(first)))
    return failure();
  Operation *middle = block->empty() ? nullptr : &block->back();
  if (failed(emitPost(!first)))
    return failure();
  waitFor(-1);
  Operation *last = block->empty() ? nullptr : &block->back();
  StringRef own = dist::kUpdateUnitName,
            deferred = dist::kDeferredUpdateUnitName;
  if (middle != lastOfUnits)
    nameFrom(lastOfUnits, first ? deferred : own);
  if (last != middle)
    nameFrom(middle, first ? own : deferred);
  return success();
}

/// The results, and the function's type from them.
void RankEmitter::emitReturn() {
  func::FuncOp function = state.function;
  auto returnOp = cast<func::ReturnOp>(state.body->getTerminator());
  // A weight stash's next value is its parameter (the step's weights);
  // where the update is deferred (it updates the step before) that is the
  // updated one: the next run's step reads it. So it is under PipeDream,
  // whose steps read their rank's latest weights.
  auto getReturned = [&](unsigned index) -> Value {
    Value operand = returnOp.getOperand(index);
    auto param = dyn_cast<BlockArgument>(operand);
    if (!param || !state.isSteady())
      return operand;
    for (auto [other, value] : llvm::enumerate(returnOp.getOperands()))
      if (auto updates = function.getResultAttrOfType<IntegerAttr>(
              other, nn::kUpdatesAttrName);
          updates && updates.getInt() == param.getArgNumber() &&
          (deferredOps.contains(value.getDefiningOp()) ||
           state.spec.schedule == PipelineSchedule::PipeDream))
        return value;
    return operand;
  };
  SmallVector<Value> returned;
  for (unsigned index : results)
    returned.push_back(shared.lookup(getReturned(index)));
  func::ReturnOp::create(builder, returnOp.getLoc(), returned);
  stage.setType(builder.getFunctionType(block->getArgumentTypes(),
                                        TypeRange(ValueRange(returned))));
}

/// Each argument and result keeps the index it has in the step as written
/// (the ZeRO pass's packing may have set it), or else gets the cut one's;
/// a unit's flat buffer has its members'.
static void setSourceIndex(NamedAttrList &attrs, Builder &builder,
                           int64_t index) {
  if (!attrs.get(dist::DistDialect::kSourceIndexAttrName) &&
      !attrs.get(dist::DistDialect::kMembersAttrName))
    attrs.set(dist::DistDialect::kSourceIndexAttrName,
              builder.getI64IntegerAttr(index));
}

/// The arguments' attributes, their shardings without the microbatch axis.
void RankEmitter::setArgumentAttributes() {
  func::FuncOp function = state.function;
  StringRef shardingName = dist::DistDialect::kShardingAttrName;
  for (auto [local, index] : llvm::enumerate(args)) {
    NamedAttrList attrs;
    for (NamedAttribute attr : getAttrs(function.getArgAttrDict(index)))
      attrs.push_back(attr.getName() == shardingName
                          ? NamedAttribute(attr.getName(),
                                           dropMicrobatchAxis(attr.getValue()))
                          : attr);
    // The microbatch axis first on the batch of more than itself: the
    // microbatches are major in a rank's piece.
    if (auto sharding =
            function.getArgAttrOfType<dist::ShardingAttr>(index, shardingName);
        sharding && microbatches > 1 && !sharding.getDims().empty()) {
      ArrayRef<StringAttr> batch = sharding.getDims().front().getAxes();
      if (batch.size() > 1 && batch.front().getValue() == kMicrobatchAxis)
        attrs.set(dist::DistDialect::kMicrobatchesMajorAttrName,
                  builder.getI64IntegerAttr(microbatches));
    }
    setSourceIndex(attrs, builder, index);
    stage.setArgAttrs(local, attrs.getDictionary(context));
  }
}

/// The results' attributes: their shardings without the microbatch axis,
/// and the arguments they update by their index in this rank's.
void RankEmitter::setResultAttributes() {
  func::FuncOp function = state.function;
  StringRef shardingName = dist::DistDialect::kShardingAttrName;
  for (auto [local, index] : llvm::enumerate(results)) {
    NamedAttrList attrs;
    for (NamedAttribute attr : getAttrs(function.getResultAttrDict(index))) {
      if (attr.getName() == shardingName)
        attrs.append(attr.getName(), dropMicrobatchAxis(attr.getValue()));
      else if (attr.getName() == nn::kUpdatesAttrName)
        attrs.append(attr.getName(),
                     builder.getI64IntegerAttr(argIndex.lookup(
                         cast<IntegerAttr>(attr.getValue()).getInt())));
      else
        attrs.push_back(attr);
    }
    setSourceIndex(attrs, builder, index);
    stage.setResultAttrs(local, attrs.getDictionary(context));
  }
}

FailureOr<func::FuncOp> pipeline::emit(PipelineState &state, int64_t rank) {
  return RankEmitter(state, rank).emit();
}
