//===- PlanTransfers.cpp - The pipeline's messages between ranks ----------===//
//
// The phase of --tessera-pipeline that plans what crosses between ranks:
// each rank's schedule of units, one message per body value, microbatch and
// reading rank (received by the first unit there that reads it), one per
// accumulated value that post ops read on another rank, and each rank's
// events in the order its program runs them.
//
//===----------------------------------------------------------------------===//

#include "PipelineState.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace tessera;
using namespace tessera::pipeline;

namespace {

/// One rank's transfers: per unit, the messages it receives first and
/// sends last, and the messages of the accumulated values after the
/// schedule.
struct RankTransfers {
  DenseMap<int64_t, SmallVector<int64_t>> recvs, sends;
  SmallVector<int64_t> postSends, postRecvs;
};

/// Where each rank runs each (kind, stage, microbatch) in its schedule.
class UnitPositions {
public:
  explicit UnitPositions(ArrayRef<SmallVector<Unit>> units) {
    for (const SmallVector<Unit> &rankUnits : units)
      for (auto [index, unit] : llvm::enumerate(rankUnits))
        positions[{static_cast<int64_t>(unit.kind), unit.stage,
                   unit.microbatch}] = index;
  }

  int64_t lookup(UnitKind kind, int64_t stage, int64_t microbatch) const {
    return positions.lookup({static_cast<int64_t>(kind), stage, microbatch});
  }

private:
  DenseMap<std::tuple<int64_t, int64_t, int64_t>, int64_t> positions;
};

} // namespace

/// Per rank other than `from` that reads `result`, the first unit there
/// that reads it (its kind and stage).
static std::map<int64_t, std::pair<UnitKind, int64_t>>
getReaderUnits(const PipelineState &state, const UnitPositions &positions,
               Value result, int64_t from) {
  std::map<int64_t, std::pair<UnitKind, int64_t>> readers;
  auto position = [&](std::pair<UnitKind, int64_t> unit) {
    return positions.lookup(unit.first, unit.second, 0);
  };
  for (Operation *user : result.getUsers()) {
    auto it = state.stageOf.find(user);
    if (it == state.stageOf.end() || state.getRank(it->second) == from)
      continue;
    std::pair<UnitKind, int64_t> reader = {state.getKind(user), it->second};
    auto [entry, inserted] =
        readers.try_emplace(state.getRank(it->second), reader);
    if (!inserted && position(reader) < position(entry->second))
      entry->second = reader;
  }
  return readers;
}

/// The messages of the body values that other ranks read, one per
/// microbatch, sent by the unit that makes the value and received by the
/// first unit that reads it; each value and reading rank takes the next of
/// the tags counted by `tag`.
static void planBodyMessages(PipelineState &state,
                             MutableArrayRef<RankTransfers> transfers,
                             int64_t &tag) {
  UnitPositions positions(state.units);
  for (Operation *op : state.bodyOps) {
    int64_t stage = state.stageOf.lookup(op);
    int64_t from = state.getRank(stage);
    UnitKind kind = state.getKind(op);
    for (Value result : op->getResults()) {
      for (auto [to, reader] : getReaderUnits(state, positions, result, from)) {
        for (int64_t microbatch = 0; microbatch < state.spec.microbatches;
             ++microbatch) {
          int64_t index = state.messages.size();
          state.messages.push_back({result, microbatch, from, to, tag});
          transfers[from]
              .sends[positions.lookup(kind, stage, microbatch)]
              .push_back(index);
          transfers[to]
              .recvs[positions.lookup(reader.first, reader.second, microbatch)]
              .push_back(index);
        }
        ++tag;
      }
    }
  }
}

/// After the microbatches: the messages of the accumulated values that
/// post ops read on other ranks, each with a tag of its own.
static void planPostMessages(PipelineState &state,
                             MutableArrayRef<RankTransfers> transfers,
                             int64_t &tag) {
  for (Value value : state.accumulated) {
    int64_t from = state.getRank(state.stageOf.lookup(value.getDefiningOp()));
    std::set<int64_t> readers;
    for (Operation *user : value.getUsers())
      if (state.classes.lookup(user) == OpClass::Post)
        readers.insert(state.ranksOf[user].begin(), state.ranksOf[user].end());
    for (int64_t to : readers) {
      if (to == from)
        continue;
      int64_t index = state.messages.size();
      state.messages.push_back({value, -1, from, to, tag++});
      transfers[from].postSends.push_back(index);
      transfers[to].postRecvs.push_back(index);
    }
  }
}

/// Each rank's events in program order: per unit its receives, its run and
/// its sends; then the accumulated values' sends and receives and the post
/// ops.
static void orderEvents(PipelineState &state,
                        ArrayRef<RankTransfers> transfers) {
  state.events.resize(state.spec.ranks);
  for (int64_t rank = 0; rank < state.spec.ranks; ++rank) {
    SmallVector<Event> &events = state.events[rank];
    const RankTransfers &rankTransfers = transfers[rank];
    for (int64_t unit = 0;
         unit < static_cast<int64_t>(state.units[rank].size()); ++unit) {
      for (int64_t message : rankTransfers.recvs.lookup(unit))
        events.push_back({Event::Recv, message, unit});
      events.push_back({Event::Compute, -1, unit});
      for (int64_t message : rankTransfers.sends.lookup(unit))
        events.push_back({Event::Send, message, unit});
    }
    for (int64_t message : rankTransfers.postSends)
      events.push_back({Event::Send, message, -1});
    for (int64_t message : rankTransfers.postRecvs)
      events.push_back({Event::Recv, message, -1});
    events.push_back({Event::Compute, -1, -1});
  }
}

LogicalResult pipeline::planMessages(PipelineState &state) {
  bool hasBackward = state.forwardOps.size() < state.bodyOps.size();
  for (int64_t rank = 0; rank < state.spec.ranks; ++rank)
    state.units.push_back(getPipelineSchedule(state.spec, rank, hasBackward));
  SmallVector<RankTransfers> transfers(state.spec.ranks);
  int64_t tag = 0;
  planBodyMessages(state, transfers, tag);
  planPostMessages(state, transfers, tag);
  // MPI guarantees tags up to 32767: one per value that crosses.
  if (tag > 32767)
    return state.function.emitError("the pipeline sends ")
           << tag << " distinct values between ranks, more than the 32768 "
           << "tags MPI guarantees";
  orderEvents(state, transfers);
  return success();
}
