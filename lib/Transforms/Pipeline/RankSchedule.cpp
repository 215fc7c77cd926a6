//===- RankSchedule.cpp - The pipeline's waits and dist.schedule ----------===//
//
// The phases of --tessera-pipeline that time the program: with a flush, the
// simulation that places each send's wait and finds deadlocks; without one
// (PipeDream, 2BW), the checks of what one step cannot share with the next;
// and the `dist.schedule` of each rank's program, which the runtime runs
// (getRunsPerStep reads it back).
//
//===----------------------------------------------------------------------===//

#include "PipelineState.h"

#include "dialects/NN/IR/NNOps.h"
#include "tessera/Support/EnumNames.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

#include "mlir/IR/Builders.h"

#include <map>

using namespace mlir;
using namespace tessera;
using namespace tessera::pipeline;

int64_t pipeline::findTemplate(ArrayRef<UnitTemplate> templates,
                               const PipelineUnit &unit) {
  return llvm::find_if(templates,
                       [&](const UnitTemplate &candidate) {
                         return candidate.kind == unit.kind &&
                                candidate.stage == unit.stage;
                       }) -
         templates.begin();
}

int64_t pipeline::getPostAfter(const PipelineState &state, int64_t rank) {
  for (int64_t index = state.units[rank].size() - 1; index >= 0; --index)
    if (state.units[rank][index].stepOffset < 0)
      return index;
  return -1;
}

/// Without a flush: how many of `rank`'s updates the weights its steps
/// read lag them. 2BW's steps read the weights of the step before;
/// PipeDream's read the rank's latest, which lag as many updates as the
/// rank's backwards lag its forwards.
static int64_t getWeightDelay(const PipelineState &state, int64_t rank) {
  return state.spec.schedule == PipelineSchedule::TwoBW
             ? 1
             : getWarmupUnits(state.spec, rank, /*hasBackward=*/true);
}

/// Each step reads a version of the weights that it stashed
/// (--weight-stash), so that the next step's forwards need not wait for
/// this step's updates.
static LogicalResult checkWeightsStashed(PipelineState &state, StringRef name) {
  func::FuncOp function = state.function;
  for (BlockArgument arg : function.getArguments()) {
    auto param = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       nn::kParamAttrName);
    if (!param)
      continue;
    for (Operation *user : arg.getUsers())
      if (!isa<func::ReturnOp>(user) &&
          state.classes.lookup(user) != OpClass::Post)
        return user->emitError("the ")
               << name
               << " schedule runs each step at a stashed version of the "
                  "weights: parameter '"
               << param.getValue()
               << "' is read by the forward or backward (compile with "
                  "--weight-stash)";
  }
  return success();
}

/// The ranks that finish a step in the next run update it there, right
/// after its last backward: what their forwards sum over the microbatches
/// would by then hold the next step's terms. Nor may their post ops read a
/// forward value of their own: it would be the run's step's, not the step
/// they finish (PipeDream's steps of one microbatch read them unsummed).
static LogicalResult checkForwardValuesOfStep(PipelineState &state,
                                              StringRef name) {
  for (Value value : state.accumulated) {
    Operation *def = value.getDefiningOp();
    int64_t rank = state.getRank(state.stageOf.lookup(def));
    if (state.forwardOps.contains(def) && getPostAfter(state, rank) >= 0)
      return def->emitError("the ")
             << name
             << " schedule sums forward values over the microbatches only on "
                "the last pipeline rank; this one's is made on rank "
             << rank << " (a loss term of an earlier stage)";
  }
  for (Operation &op : state.body->without_terminator()) {
    if (state.classes.lookup(&op) != OpClass::Post)
      continue;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !state.forwardOps.contains(def))
        continue;
      int64_t rank = state.getRank(state.stageOf.lookup(def));
      if (getPostAfter(state, rank) >= 0 && state.getRanks(&op).count(rank))
        return def->emitError("the ")
               << name
               << " schedule finishes a step on this rank a run later, "
                  "after the next step's forward: its updates cannot read "
                  "this forward value (made on rank "
               << rank << ")";
    }
  }
  return success();
}

/// PipeDream's stages run a step at versions of their weights as many
/// updates apart as their ranks are from the last: a parameter that two
/// ranks read (an embedding tied to the head) would need both.
static LogicalResult checkWeightsOnOneRank(PipelineState &state) {
  func::FuncOp function = state.function;
  for (BlockArgument arg : function.getArguments())
    if (auto param = function.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), nn::kVersionOfAttrName)) {
      std::set<int64_t> ranks;
      for (Operation *user : arg.getUsers())
        if (state.classes.lookup(user) != OpClass::Post)
          ranks.insert(state.getRanks(user).begin(),
                       state.getRanks(user).end());
      if (ranks.size() > 1)
        return function.emitError("the pipedream schedule updates each "
                                  "stage's weights at its own pace: "
                                  "parameter '")
               << param.getValue() << "' is read on pipeline ranks "
               << *ranks.begin() << " and " << *ranks.rbegin()
               << " (a tied embedding; use the 2bw schedule)";
    }
  return success();
}

LogicalResult pipeline::checkSteady(PipelineState &state) {
  StringRef name = getEnumName(kPipelineScheduleNames, state.spec.schedule);
  if (failed(checkWeightsStashed(state, name)))
    return failure();
  if (!state.normRoots.empty())
    return state.normRoots.front()->emitError("the ")
           << name
           << " schedule updates each stage when its own backwards are "
              "done: a gradient norm over all stages (--clip-grad, "
              "--loss-scale) needs them all at once";
  if (failed(checkForwardValuesOfStep(state, name)))
    return failure();
  if (state.spec.schedule == PipelineSchedule::PipeDream)
    return checkWeightsOnOneRank(state);
  return success();
}

LogicalResult pipeline::simulate(PipelineState &state) {
  SmallVector<int64_t> receivers = llvm::map_to_vector(
      state.messages, [](const Message &message) { return message.to; });
  TransferSimulation simulation = simulateTransfers(state.events, receivers);
  if (simulation.deadlockedRank)
    return state.function.emitError("the pipeline schedule deadlocks at "
                                    "pipeline rank ")
           << *simulation.deadlockedRank
           << " (a receive whose send never comes)";
  state.waitAfter = std::move(simulation.waitAfter);
  return success();
}

namespace {

/// Where `rank`'s unit sends are waited for, and until which entry each
/// stage's microbatch holds its slot.
struct SendWaits {
  /// Per entry of the schedule, the (send number, microbatch) pairs waited
  /// for after it.
  SmallVector<SmallVector<int64_t>> waits;
  /// Per (stage, microbatch), the last entry that reads its values.
  std::map<std::pair<int64_t, int64_t>, int64_t> lastEntry;
};

/// The `dist.schedule` tables of one rank's program.
struct ScheduleTables {
  /// Per entry: its unit template, microbatch and slot.
  SmallVector<int64_t> entries;
  /// Per send waited for: the entry after which, its number, its
  /// microbatch.
  SmallVector<int64_t> sendWaits;
  /// Per entry, the step it runs (its unit's step offset).
  SmallVector<int64_t> entrySteps;
};

} // namespace

/// After which entry each unit send is waited for: the entry of the event
/// the simulation placed it after, or (after the schedule) the last.
static SendWaits placeSendWaits(const PipelineState &state, int64_t rank,
                                const DenseMap<int64_t, int64_t> &sendNumber) {
  ArrayRef<Unit> schedule = state.units[rank];
  ArrayRef<Event> events = state.events[rank];
  int64_t entries = schedule.size();
  SendWaits result;
  result.waits.resize(entries);
  for (auto [index, unit] : llvm::enumerate(schedule)) {
    int64_t &last = result.lastEntry[{unit.stage, unit.microbatch}];
    last = std::max<int64_t>(last, index);
  }
  for (const Event &event : events) {
    if (event.kind != Event::Send || event.unit < 0)
      continue;
    const Message &message = state.messages[event.message];
    int64_t after = state.waitAfter[event.message];
    int64_t entry = after >= 0 && events[after].unit >= 0 ? events[after].unit
                                                          : entries - 1;
    int64_t number = sendNumber.lookup(message.tag);
    result.waits[entry].append({number, message.microbatch});
    const Unit &sender = schedule[event.unit];
    // A sent value that a later unit reads holds its microbatch's slot
    // until the wait.
    bool readLater =
        llvm::any_of(message.value.getUsers(), [&](Operation *user) {
          auto it = state.stageOf.find(user);
          return it != state.stageOf.end() &&
                 state.getRank(it->second) == rank &&
                 (it->second != sender.stage ||
                  state.getKind(user) != sender.kind);
        });
    if (readLater) {
      int64_t &last = result.lastEntry[{sender.stage, sender.microbatch}];
      last = std::max(last, entry);
    }
  }
  return result;
}

/// The entries of `rank`'s schedule with their slots: per stage, the lowest
/// free one from a microbatch's first unit until its last entry (or the
/// wait of its last send) is done.
static ScheduleTables buildTables(const PipelineState &state, int64_t rank,
                                  ArrayRef<UnitTemplate> templates,
                                  SendWaits &waits) {
  ArrayRef<Unit> schedule = state.units[rank];
  std::map<std::pair<int64_t, int64_t>, int64_t> slotOf;
  std::map<int64_t, std::set<int64_t>> busy;
  std::multimap<int64_t, std::pair<int64_t, int64_t>> releases;
  ScheduleTables tables;
  for (auto [index, unit] : llvm::enumerate(schedule)) {
    std::pair<int64_t, int64_t> key = {unit.stage, unit.microbatch};
    tables.entrySteps.push_back(unit.stepOffset);
    // Without a flush a microbatch's values live from one run into the
    // next: each has its own slot.
    auto [it, inserted] =
        slotOf.try_emplace(key, state.isSteady() ? unit.microbatch : 0);
    if (inserted && !state.isSteady()) {
      std::set<int64_t> &taken = busy[unit.stage];
      while (taken.count(it->second))
        ++it->second;
      taken.insert(it->second);
      releases.emplace(waits.lastEntry[key], key);
    }
    tables.entries.append(
        {findTemplate(templates, unit), unit.microbatch, it->second});
    ArrayRef<int64_t> entryWaits = waits.waits[index];
    for (size_t i = 0; i < entryWaits.size(); i += 2)
      tables.sendWaits.append(
          {static_cast<int64_t>(index), entryWaits[i], entryWaits[i + 1]});
    auto [first, end] = releases.equal_range(index);
    for (auto release = first; release != end; ++release)
      busy[release->second.first].erase(slotOf[release->second]);
  }
  return tables;
}

void pipeline::setSchedule(const PipelineState &state, func::FuncOp stage,
                           int64_t rank, ArrayRef<UnitTemplate> templates,
                           ArrayRef<StringRef> unitNames,
                           const DenseMap<int64_t, int64_t> &sendNumber) {
  SendWaits waits = placeSendWaits(state, rank, sendNumber);
  ScheduleTables tables = buildTables(state, rank, templates, waits);
  Builder builder(stage.getContext());
  SmallVector<int64_t> stages = llvm::map_to_vector(
      templates, [](const UnitTemplate &unit) { return unit.stage; });
  SmallVector<NamedAttribute> attrs = {
      builder.getNamedAttr("microbatches",
                           builder.getI64IntegerAttr(state.spec.microbatches)),
      builder.getNamedAttr("units", builder.getStrArrayAttr(unitNames)),
      builder.getNamedAttr("unit_stages", builder.getDenseI64ArrayAttr(stages)),
      builder.getNamedAttr("entries",
                           builder.getDenseI64ArrayAttr(tables.entries)),
      builder.getNamedAttr("send_waits",
                           builder.getDenseI64ArrayAttr(tables.sendWaits))};
  if (state.isSteady())
    llvm::append_range(
        attrs,
        ArrayRef<NamedAttribute>{
            builder.getNamedAttr("steady", builder.getUnitAttr()),
            builder.getNamedAttr(
                "entry_steps", builder.getDenseI64ArrayAttr(tables.entrySteps)),
            builder.getNamedAttr("post_after", builder.getI64IntegerAttr(
                                                   getPostAfter(state, rank))),
            builder.getNamedAttr(
                "weight_delay",
                builder.getI64IntegerAttr(getWeightDelay(state, rank)))});
  stage->setAttr(dist::DistDialect::kScheduleAttrName,
                 builder.getDictionaryAttr(attrs));
}

DenseMap<Operation *, int64_t> tessera::getRunsPerStep(func::FuncOp function) {
  DenseMap<Operation *, int64_t> runs;
  auto schedule = function->getAttrOfType<DictionaryAttr>(
      dist::DistDialect::kScheduleAttrName);
  int64_t microbatches =
      schedule ? schedule.getAs<IntegerAttr>("microbatches").getInt() : 1;
  auto units = schedule ? schedule.getAs<ArrayAttr>("units") : ArrayAttr();
  int64_t current = 1;
  for (Operation &op : function.getBody().front()) {
    if (auto name =
            op.getAttrOfType<StringAttr>(dist::DistDialect::kUnitAttrName))
      current = units && llvm::is_contained(units, name) ? microbatches : 1;
    op.walk([&](Operation *nested) { runs[nested] = current; });
  }
  return runs;
}
