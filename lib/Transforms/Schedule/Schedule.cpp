//===- Schedule.cpp - Overlap communication with compute (--tessera-schedule) //
//
// Runs on a partitioned program. Two steps:
//
//  1. Bucketing: runs of small reduce_scatters (along dim 0) or all_reduces
//     of one kind over one group become one collective over their
//     concatenation: fewer, larger messages.
//  2. Overlap: every collective is started on the communication stream
//     (`dist.stream`) as early as its operand and the in-flight limits
//     allow, and completed (`dist.wait`) just before its first read, or
//     earlier when later collectives need the room. At most `prefetch`
//     collectives are in flight, and a collective is not started ahead of
//     its place while the results in flight would pass `memory-limit`.
//
// A parameter's all_gather (ZeRO-3) thus runs during the previous layer's
// compute, and a gradient's reduce_scatter during the next layer's backward.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Layouts.h"
#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

#include <limits>

namespace tessera {
#define GEN_PASS_DEF_SCHEDULEPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-schedule"

using namespace mlir;
using namespace tessera;

namespace {

int64_t getTensorBytes(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

//===----------------------------------------------------------------------===//
// Bucketing
//===----------------------------------------------------------------------===//

/// Collectives that may share a bucket: one kind, reduction, mesh and group,
/// and element type. Reduce-scatters only along dim 0, where every device's
/// piece of each member is contiguous once the member is viewed as
/// [group, rest].
std::optional<std::string> getBucketKey(Operation *op) {
  auto type = cast<RankedTensorType>(op->getOperand(0).getType());
  std::string key;
  llvm::raw_string_ostream os(key);
  if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
    os << "all_reduce " << stringifyReductionKind(reduce.getKind());
  } else if (auto scatter = dyn_cast<dist::ReduceScatterOp>(op)) {
    if (scatter.getDim() != 0)
      return std::nullopt;
    os << "reduce_scatter " << stringifyReductionKind(scatter.getKind());
  } else {
    return std::nullopt;
  }
  auto collective = cast<dist::CollectiveOpInterface>(op);
  os << " " << collective.getMeshAttr() << " " << collective.getMeshAxes()
     << " " << type.getElementType();
  return key;
}

/// Replaces `members` (in program order, one bucket key) by one collective
/// over their concatenation, at the place of the last. Each member becomes
/// a [rows, n] view (rows = the group size for a reduce_scatter, 1 for an
/// all_reduce), the views are concatenated along dim 1, and each result is
/// sliced back out and reshaped.
void emitBucket(ArrayRef<Operation *> members, int64_t groupSize) {
  Operation *last = members.back();
  OpBuilder builder(last);
  Location loc = last->getLoc();
  bool scatter = isa<dist::ReduceScatterOp>(last);
  int64_t rows = scatter ? groupSize : 1;
  Type element =
      cast<RankedTensorType>(last->getOperand(0).getType()).getElementType();
  SmallVector<Value> views;
  SmallVector<int64_t> widths;
  for (Operation *member : members) {
    Value input = member->getOperand(0);
    int64_t width =
        cast<RankedTensorType>(input.getType()).getNumElements() / rows;
    widths.push_back(width);
    views.push_back(nn::ReshapeOp::create(
        builder, loc, RankedTensorType::get({rows, width}, element), input));
  }
  Value packed = nn::ConcatOp::create(builder, loc, views, 1);
  int64_t total = cast<RankedTensorType>(packed.getType()).getDimSize(1);
  Operation *combined;
  if (auto scatterOp = dyn_cast<dist::ReduceScatterOp>(last))
    combined = dist::ReduceScatterOp::create(
        builder, loc, RankedTensorType::get({1, total}, element), packed,
        scatterOp.getMeshAttr(), scatterOp.getMeshAxes(),
        builder.getI64IntegerAttr(0), scatterOp.getKindAttr());
  else
    combined = dist::AllReduceOp::create(
        builder, loc, packed, cast<dist::AllReduceOp>(last).getMeshAttr(),
        cast<dist::AllReduceOp>(last).getMeshAxes(),
        cast<dist::AllReduceOp>(last).getKindAttr());
  int64_t offset = 0;
  for (auto [member, width] : llvm::zip(members, widths)) {
    Value piece =
        nn::SliceOp::create(builder, loc, combined->getResult(0),
                            builder.getDenseI64ArrayAttr({0, offset}),
                            builder.getDenseI64ArrayAttr({1, offset + width}));
    offset += width;
    member->getResult(0).replaceAllUsesWith(nn::ReshapeOp::create(
        builder, loc, member->getResult(0).getType(), piece));
  }
  for (Operation *member : members)
    member->erase();
}

//===----------------------------------------------------------------------===//
// Parameter gathers by unit
//===----------------------------------------------------------------------===//

/// Replaces `members` (all_gathers of parameters over one group, in program
/// order) by one all_gather of their concatenation at the first member:
/// each input viewed as [1, n], the gathered [group, sum n] sliced per
/// member and laid back out along its gather dim.
void emitGatherBucket(ArrayRef<dist::AllGatherOp> members, int64_t group) {
  dist::AllGatherOp first = members.front();
  OpBuilder builder(first);
  Location loc = first.getLoc();
  Type element = first.getInput().getType().getElementType();
  SmallVector<Value> views;
  SmallVector<int64_t> widths;
  for (dist::AllGatherOp member : members) {
    int64_t width = member.getInput().getType().getNumElements();
    widths.push_back(width);
    views.push_back(nn::ReshapeOp::create(
        builder, loc, RankedTensorType::get({1, width}, element),
        member.getInput()));
  }
  Value packed = nn::ConcatOp::create(builder, loc, views, 1);
  int64_t total = cast<RankedTensorType>(packed.getType()).getDimSize(1);
  Value gathered = dist::AllGatherOp::create(
      builder, loc, RankedTensorType::get({group, total}, element), packed,
      first.getMeshAttr(), first.getMeshAxes(), builder.getI64IntegerAttr(0));
  int64_t offset = 0;
  for (auto [index, width] : llvm::enumerate(widths)) {
    dist::AllGatherOp member = members[index];
    Value piece = nn::SliceOp::create(
        builder, loc, gathered, builder.getDenseI64ArrayAttr({0, offset}),
        builder.getDenseI64ArrayAttr({group, offset + width}));
    offset += width;
    member.getResult().replaceAllUsesWith(
        unstackRows(builder, loc, piece, member.getInput().getType().getShape(),
                    member.getDim()));
  }
  for (dist::AllGatherOp member : members)
    member.erase();
}

//===----------------------------------------------------------------------===//
// Overlap
//===----------------------------------------------------------------------===//

/// Where a collective starts and completes, as positions in the block's
/// original order: it is placed just before the op at that position.
struct Placement {
  Operation *op;
  int64_t start, wait;
  int64_t bytes;
  bool async = false;
};

/// Whether `op` starts a unit of a pipeline stage (or the ops after its
/// schedule): nothing in flight crosses it.
bool startsPipelineUnit(Operation &op) {
  return op.hasAttr(dist::DistDialect::kUnitAttrName);
}

struct SchedulePass : tessera::impl::SchedulePassBase<SchedulePass> {
  using SchedulePassBase::SchedulePassBase;

  void runOnOperation() override {
    if (prefetch < 0 || bucketBytes < 0 || memoryLimit < 0) {
      emitError(getOperation().getLoc(),
                "--tessera-schedule takes prefetch, bucket-bytes and "
                "memory-limit of 0 or more");
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      if (!llvm::hasSingleElement(function.getBody())) {
        function.emitError("--tessera-schedule expects a single-block body");
        return signalPassFailure();
      }
      Block &block = function.front();
      if (llvm::any_of(block, [](Operation &op) {
            return isa<dist::ShardingConstraintOp>(op);
          })) {
        function.emitError("--tessera-schedule runs on a partitioned program "
                           "(run --tessera-partition first)");
        return signalPassFailure();
      }
      if (gatherUnits)
        gatherByUnit(block);
      if (bucketBytes > 0)
        bucket(block);
      if (prefetch > 0)
        overlap(block);
    }
  }

  int64_t getGroupSize(Operation *op) {
    auto collective = cast<dist::CollectiveOpInterface>(op);
    auto mesh = SymbolTable::lookupNearestSymbolFrom<dist::MeshOp>(
        op, collective.getMeshAttr());
    return mesh ? collective.getGroupSize(mesh) : 1;
  }

  /// Runs of parameter all_gathers of one unit over one group (as ZeRO-3
  /// reads its parameters; another unit's gather ends a run) become one
  /// all_gather at the run's first member: the unit's parameters arrive
  /// together, as FSDP gathers a wrapped module.
  void gatherByUnit(Block &block) {
    SmallVector<dist::AllGatherOp> run;
    std::string runKey;
    auto flush = [&]() {
      if (run.size() > 1)
        emitGatherBucket(run, getGroupSize(run.front()));
      run.clear();
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      // A unit's first op stays (a bucket replaces its members).
      if (startsPipelineUnit(op)) {
        flush();
        continue;
      }
      auto gather = dyn_cast<dist::AllGatherOp>(op);
      StringRef name = gather ? getParamName(gather.getInput()) : StringRef();
      // A unit's flat buffer is gathered as it is, without a copy.
      if (name.empty() || getFlatBuffer(gather.getInput()))
        continue;
      std::string key;
      llvm::raw_string_ostream os(key);
      os << getParameterUnit(name) << " " << gather.getMeshAttr() << " "
         << gather.getMeshAxes() << " "
         << gather.getInput().getType().getElementType();
      // The bucket stands at its first member: every input must be there.
      Operation *def = gather.getInput().getDefiningOp();
      if (key != runKey ||
          (def && !run.empty() && !def->isBeforeInBlock(run.front())))
        flush();
      runKey = key;
      run.push_back(gather);
    }
    flush();
  }

  /// Gathers collectives smaller than bucket-bytes into one open bucket per
  /// key, in program order. A bucket is emitted at its last member once it
  /// holds bucket-bytes, or before an op reads one of its members (the
  /// bucket's results come at its last member's place).
  void bucket(Block &block) {
    llvm::MapVector<StringRef, SmallVector<Operation *>> open;
    llvm::StringMap<int64_t> openBytes;
    llvm::StringSet<> keys;
    auto flush = [&](StringRef key) {
      SmallVector<Operation *> members = open.lookup(key);
      if (members.size() > 1)
        emitBucket(members, getGroupSize(members.front()));
      open.erase(key);
      openBytes.erase(key);
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (startsPipelineUnit(op))
        for (StringRef key : llvm::to_vector(llvm::make_first_range(open)))
          flush(key);
      SmallVector<StringRef> read;
      for (auto &entry : open)
        if (llvm::any_of(op.getOperands(), [&](Value operand) {
              return llvm::is_contained(entry.second, operand.getDefiningOp());
            }))
          read.push_back(entry.first);
      for (StringRef key : read)
        flush(key);
      if (!isa<dist::CollectiveOpInterface>(op) || startsPipelineUnit(op))
        continue;
      std::optional<std::string> opKey = getBucketKey(&op);
      int64_t bytes = getTensorBytes(op.getOperand(0));
      if (!opKey || bytes >= bucketBytes)
        continue;
      StringRef key = keys.insert(*opKey).first->getKey();
      open[key].push_back(&op);
      if ((openBytes[key] += bytes) >= bucketBytes)
        flush(key);
    }
    for (StringRef key : llvm::to_vector(llvm::make_first_range(open)))
      flush(key);
  }

  void overlap(Block &block) {
    DenseMap<Operation *, int64_t> position;
    SmallVector<Operation *> order;
    for (Operation &op : block) {
      position[&op] = order.size();
      order.push_back(&op);
    }
    int64_t end = order.size() - 1; // the terminator
    // A pipeline stage's units run once per microbatch: what a unit starts
    // completes in it. Per position, where its unit begins and ends.
    SmallVector<int64_t> unitBegin(order.size()), unitEnd(order.size());
    for (int64_t at = 0, begin = 0; at <= end; ++at) {
      if (startsPipelineUnit(*order[at]))
        begin = at;
      unitBegin[at] = begin;
    }
    for (int64_t at = end, next = end; at >= 0; --at) {
      unitEnd[at] = next;
      if (startsPipelineUnit(*order[at]))
        next = at;
    }
    DenseMap<Operation *, Placement *> placementOf;
    SmallVector<Placement> placements;
    for (Operation *op : order)
      if (isa<dist::CollectiveOpInterface>(op) && getGroupSize(op) > 1 &&
          !op->getResult(0).use_empty())
        placements.push_back({op, 0, 0, getTensorBytes(op->getResult(0))});
    for (Placement &p : placements)
      placementOf[p.op] = &p;

    // In program order: start after the operand is ready and after the wait
    // of the prefetch-th collective before (at most `prefetch` in flight);
    // complete before the first read and before the place of the
    // prefetch-th collective after.
    SmallVector<Placement *> started;
    for (auto [index, p] : llvm::enumerate(placements)) {
      int64_t original = position[p.op];
      int64_t ready = 0;
      Value input = p.op->getOperand(0);
      if (Operation *def = input.getDefiningOp()) {
        auto it = placementOf.find(def);
        ready = it != placementOf.end() && it->second->async
                    ? it->second->wait
                    : position[def] + 1;
      }
      int64_t firstRead = end;
      for (Operation *user : p.op->getResult(0).getUsers())
        firstRead = std::min(firstRead, position[user]);
      firstRead = std::min(firstRead, unitEnd[original]);
      int64_t start = std::max(ready, unitBegin[original]);
      if (started.size() >= static_cast<size_t>(prefetch))
        start = std::max(start, started[started.size() - prefetch]->wait);
      // Ahead of its place, a start holds its result's memory early.
      if (memoryLimit > 0)
        while (start < original &&
               getInFlightBytes(started, start, firstRead) + p.bytes >
                   memoryLimit)
          ++start;
      int64_t wait = firstRead;
      if (index + prefetch < placements.size())
        wait = std::min(
            wait, std::max(position[placements[index + prefetch].op], start));
      if (start >= wait)
        continue; // nothing to overlap: stays blocking
      p.start = start;
      p.wait = wait;
      p.async = true;
      started.push_back(&p);
    }

    // Rebuild the block: before each original op, the waits placed there,
    // then the starts.
    MLIRContext *context = &getContext();
    SmallVector<SmallVector<Placement *>> waitsAt(order.size()),
        startsAt(order.size());
    for (Placement *p : started) {
      waitsAt[p->wait].push_back(p);
      startsAt[p->start].push_back(p);
    }
    Operation *terminator = block.getTerminator();
    for (auto [index, op] : llvm::enumerate(order)) {
      for (Placement *p : waitsAt[index]) {
        OpBuilder builder(terminator);
        Value result = p->op->getResult(0);
        auto wait = dist::WaitOp::create(builder, p->op->getLoc(), result);
        result.replaceAllUsesExcept(wait, wait);
      }
      for (Placement *p : startsAt[index]) {
        p->op->setAttr(dist::DistDialect::kStreamAttrName,
                       IntegerAttr::get(IntegerType::get(context, 64), 1));
        p->op->moveBefore(terminator);
      }
      // A start placed at a unit's first op is the unit's first op now.
      StringRef unitName = dist::DistDialect::kUnitAttrName;
      if (!startsAt[index].empty() && op->hasAttr(unitName) &&
          startsAt[index].front()->op != op) {
        startsAt[index].front()->op->setAttr(unitName, op->getAttr(unitName));
        op->removeAttr(unitName);
      }
      auto it = placementOf.find(op);
      if (it != placementOf.end() && it->second->async)
        continue; // moved as a start
      if (op != terminator)
        op->moveBefore(terminator);
    }
  }

  /// The largest sum of result bytes of collectives in flight at a position
  /// of [from, to].
  static int64_t getInFlightBytes(ArrayRef<Placement *> started, int64_t from,
                                  int64_t to) {
    int64_t most = 0;
    for (int64_t at = from; at <= to; ++at) {
      int64_t bytes = 0;
      for (Placement *p : started)
        if (p->start <= at && at < p->wait)
          bytes += p->bytes;
      most = std::max(most, bytes);
    }
    return most;
  }
};
} // namespace
