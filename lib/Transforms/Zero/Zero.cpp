//===- Zero.cpp - ZeRO stages 1-3 as shardings (--tessera-zero) -----------===//
//
// ZeRO as shardings rather than a rewrite. Each stage splits one more part of
// the model state of every optimizer update with state (OptimizerOpInterface:
// AdamW) over the data-parallel axes, on the leading dim where the group
// divides it and stored flat (padded, FSDP's FlatParameter) where not:
//
//  1. the state (AdamW's moments); the gradient is pinned to their split
//     just before the update, so the whole gradient lives until then;
//  2. also the gradient, pinned where it is complete: its partial sums are
//     reduce-scattered at once and the whole gradient dies there;
//  3. also the parameter at rest; every phase (forward, backward) that reads
//     it gathers it first, or one gather serves both
//     (reshard-after-forward=false).
//
// First, a unit's parameters (a block's) and each of their states become
// one flat buffer (packUnits), which the model reads through views.
// Propagation and partitioning then derive the collectives, and the export's
// liveness frees what is no longer read. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Layouts.h"
#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

namespace tessera {
#define GEN_PASS_DEF_ZEROPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-zero"

using namespace mlir;
using namespace tessera;

namespace {

/// The sharding an argument is annotated with, or open.
TensorSharding getArgSharding(func::FuncOp function, BlockArgument arg) {
  auto type = cast<RankedTensorType>(arg.getType());
  if (auto attr = function.getArgAttrOfType<dist::ShardingAttr>(
          arg.getArgNumber(), dist::DistDialect::kShardingAttrName))
    return TensorSharding::fromAttr(attr);
  return TensorSharding::getOpen(type.getRank());
}

/// The first and last users of `uses` (all in one block).
std::pair<Operation *, Operation *>
getFirstAndLastUser(ArrayRef<OpOperand *> uses) {
  Operation *first = uses.front()->getOwner(), *last = first;
  for (OpOperand *use : uses) {
    if (use->getOwner()->isBeforeInBlock(first))
      first = use->getOwner();
    if (last->isBeforeInBlock(use->getOwner()))
      last = use->getOwner();
  }
  return {first, last};
}

/// Pins the uses in `uses` (of one value, all in one block) to `sharding`
/// with one constraint placed before the first of them; returns it.
Value pinUses(ArrayRef<OpOperand *> uses, dist::ShardingAttr sharding) {
  if (uses.empty())
    return {};
  Operation *first = getFirstAndLastUser(uses).first;
  OpBuilder builder(first);
  Value pinned = dist::ShardingConstraintOp::create(
      builder, first->getLoc(), uses.front()->get(), sharding);
  for (OpOperand *use : uses)
    use->set(pinned);
  return pinned;
}

/// How stage 3 reads a parameter in the backward pass.
struct Regather {
  enum Kind {
    /// Gathered again from the shard at rest (FSDP's FULL_SHARD).
    FromShard,
    /// The forward's gather is kept (SHARD_GRAD_OP).
    KeepForward,
    /// The forward's gather is cut to a split over `innerAxes` after its
    /// last forward read and gathered over those alone (FSDP2's
    /// reshard_after_forward=int: a smaller, faster group).
    FromInnerGroup,
  } kind;
  AxisList innerAxes;
};

/// A parameter of a unit's flat buffer: its update, and the parameter and
/// optimizer state that the update reads (arguments of the train step).
struct Member {
  OptimizerOpInterface update;
  BlockArgument param;
  SmallVector<BlockArgument> state;
};

/// The member of type `type` at `offset` of a unit's buffer `unit` ([S],
/// or [rows, S] with the member split on `dim` over the rows' axes): its
/// elements (its piece of each row) sliced out and laid out as the member
/// again: a view of the buffer.
Value readMember(OpBuilder &builder, Location loc, Value unit, int64_t offset,
                 RankedTensorType type, int64_t dim, int64_t rows) {
  int64_t piece = type.getNumElements() / rows;
  if (rows == 1)
    return reshapeTo(
        builder, loc,
        nn::SliceOp::create(builder, loc, unit,
                            builder.getDenseI64ArrayAttr({offset}),
                            builder.getDenseI64ArrayAttr({offset + piece})),
        type.getShape());
  Value value = nn::SliceOp::create(
      builder, loc, unit, builder.getDenseI64ArrayAttr({0, offset}),
      builder.getDenseI64ArrayAttr({rows, offset + piece}));
  SmallVector<int64_t> pieceShape(type.getShape());
  pieceShape[dim] /= rows;
  return unstackRows(builder, loc, value, pieceShape, dim);
}

/// A member's gradient `grad` as a unit's buffer holds it: flat ([n]), or
/// split on `dim` over the rows' axes, its piece of each row ([rows, n /
/// rows]).
Value toRows(OpBuilder &builder, Location loc, Value grad, int64_t dim,
             int64_t rows) {
  if (rows == 1)
    return reshapeTo(builder, loc, grad,
                     {cast<RankedTensorType>(grad.getType()).getNumElements()});
  return stackRows(builder, loc, grad, dim, rows);
}

/// Sets `dist.source_index` on each argument and result of `function` that
/// has none to its position: the runtime generates and reads every input
/// of the step by its index in the step as written, and packing moves them.
void stampSourceIndices(func::FuncOp function) {
  Builder builder(function.getContext());
  StringRef name = dist::DistDialect::kSourceIndexAttrName;
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
    if (!function.getArgAttr(i, name))
      function.setArgAttr(i, name, builder.getI64IntegerAttr(i));
  for (unsigned i = 0, e = function.getNumResults(); i < e; ++i)
    if (!function.getResultAttr(i, name))
      function.setResultAttr(i, name, builder.getI64IntegerAttr(i));
}

/// What a flat buffer says of one member argument or result: its name, the
/// shape it has in the step and its index there, and the dim that the
/// buffer's row axes split (-1: none).
DictionaryAttr describeMember(MLIRContext *context, DictionaryAttr attrs,
                              Type type, StringRef name, int64_t dim) {
  Builder builder(context);
  SmallVector<NamedAttribute> entries = {
      builder.getNamedAttr("name", builder.getStringAttr(name)),
      builder.getNamedAttr("shape",
                           builder.getDenseI64ArrayAttr(
                               cast<RankedTensorType>(type).getShape())),
      builder.getNamedAttr("source",
                           attrs.get(dist::DistDialect::kSourceIndexAttrName))};
  if (dim >= 0)
    entries.push_back(
        builder.getNamedAttr("dim", builder.getI64IntegerAttr(dim)));
  return builder.getDictionaryAttr(entries);
}

/// The one dim of `sharding` that axes of more than one device split
/// (-1: none), or failure where several do.
FailureOr<int64_t> getSplitDim(const TensorSharding &sharding,
                               const MeshShape &mesh) {
  int64_t split = -1;
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.dims)) {
    if (mesh.getGroupSize(dimSharding.axes) == 1)
      continue;
    if (split >= 0)
      return failure();
    split = dim;
  }
  return split;
}

struct ZeroPass : tessera::impl::ZeroPassBase<ZeroPass> {
  using ZeroPassBase::ZeroPassBase;

  void runOnOperation() override {
    if (stage == ZeroStage::None)
      return;
    WalkResult result = getOperation().walk([&](func::FuncOp function) {
      return failed(shard(function)) ? WalkResult::interrupt()
                                     : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  FailureOr<AxisList> getAxes(func::FuncOp function, const MeshShape &mesh) {
    SmallVector<std::string> names(dataAxes.begin(), dataAxes.end());
    // By default "dp", and "cp" and "ep" where the mesh has them: context
    // parallelism splits the sequence and expert parallelism the batch, so
    // the dense parameters' gradients sum over them too (the experts' over
    // "dp" alone, the axes left them), and their state shards over them as
    // Megatron-LM's distributed optimizer shards over dp x cp.
    if (names.empty()) {
      names.push_back("dp");
      for (StringRef axis : {"cp", "ep"})
        if (llvm::is_contained(mesh.getAxes(),
                               StringAttr::get(&getContext(), axis)))
          names.push_back(axis.str());
    }
    AxisList axes;
    for (const std::string &name : names) {
      StringAttr axis = StringAttr::get(&getContext(), name);
      if (!llvm::is_contained(mesh.getAxes(), axis))
        return function.emitError("ZeRO axis \"")
               << name << "\" is not an axis of mesh " << mesh.getName();
      // An axis appears at most once in a sharding (the sharding syntax).
      if (llvm::is_contained(axes, axis))
        return function.emitError("ZeRO axis \"")
               << name << "\" is given twice";
      axes.push_back(axis);
    }
    return axes;
  }

  LogicalResult shard(func::FuncOp function) {
    // ZeRO shards optimizer state: updates without any (SGD) keep their
    // layout.
    SmallVector<OptimizerOpInterface> updates;
    for (auto update : function.getOps<OptimizerOpInterface>())
      if (!update.getState().empty())
        updates.push_back(update);
    if (updates.empty())
      return success();
    FailureOr<dist::MeshOp> meshOp = getFunctionMesh(function);
    if (failed(meshOp))
      return failure();
    if (!*meshOp)
      return function.emitError(
          "ZeRO needs a mesh: annotate the train step's data-parallel axis");
    MeshShape mesh(*meshOp);
    FailureOr<AxisList> axes = getAxes(function, mesh);
    if (failed(axes))
      return failure();
    if (units) {
      packUnits(function, mesh);
      updates.clear();
      for (auto update : function.getOps<OptimizerOpInterface>())
        if (!update.getState().empty())
          updates.push_back(update);
    }
    llvm::SetVector<Operation *> forward;
    Regather regather{Regather::FromShard, {}};
    if (stage >= ZeroStage::Parameters) {
      forward = getForwardOps(function);
      FailureOr<Regather> parsed = getRegather(function, mesh, *axes);
      if (failed(parsed))
        return failure();
      regather = *parsed;
    }

    for (OptimizerOpInterface update : updates) {
      auto param = dyn_cast<BlockArgument>(update.getParameter());
      SmallVector<BlockArgument> state;
      for (Value value : update.getState())
        state.push_back(dyn_cast<BlockArgument>(value));
      if (!param || param.getOwner() != &function.front() ||
          llvm::is_contained(state, BlockArgument()))
        return update.emitError("ZeRO expects the parameter and optimizer "
                                "state of ")
               << update->getName() << " to be arguments of the train step";
      // The leading dim when the data-parallel group divides its pieces
      // (after the axes that already split it, which stay major): a
      // device's share of the piece is then one contiguous block, gathered
      // without a copy. Otherwise the piece is stored flat, padded to a
      // multiple of the group (FSDP's FlatParameter), which is the same
      // block where the dim divides. A scalar keeps replicated state.
      //
      // The state splits over the ZeRO axes that do not split the parameter
      // already: an expert's weights, split over "ep", over the rest of the
      // data-parallel axes ("dp"), as their gradients are summed over those
      // alone. A parameter every ZeRO axis splits keeps its layout.
      TensorSharding sharding = getArgSharding(function, param);
      AxisList zeroAxes;
      for (StringAttr axis : *axes)
        if (!sharding.usesAxis(axis))
          zeroAxes.push_back(axis);
      if (zeroAxes.empty())
        continue;
      int64_t devices = mesh.getGroupSize(zeroAxes);
      ArrayRef<int64_t> shape =
          cast<RankedTensorType>(param.getType()).getShape();
      // A unit's buffer is stored flat even where the group divides it (the
      // same split then): its gradient, a concatenation of partial sums,
      // stays partial until it is stored, and is reduce-scattered there.
      bool packed =
          function.getArgAttr(param.getArgNumber(),
                              dist::DistDialect::kMembersAttrName) != nullptr;
      bool leading =
          !shape.empty() && !packed &&
          (shape[0] / mesh.getGroupSize(sharding.dims[0].axes)) % devices == 0;
      LLVM_DEBUG(llvm::dbgs() << "zero-" << static_cast<int>(stage.getValue())
                              << ": parameter #" << param.getArgNumber()
                              << (shape.empty() ? " kept whole (a scalar)"
                                  : leading     ? " split on dim 0"
                                                : " stored flat")
                              << "\n");
      FlatSymbolRefAttr meshName = mesh.getName();
      // Whole over the ZeRO axes, other dims propagating as before: how the
      // model reads the parameter.
      TensorSharding whole = sharding;
      llvm::append_range(whole.replicated, zeroAxes);
      dist::ShardingAttr wholeAttr = whole.toAttr(meshName);
      if (shape.empty()) {
        function.setArgAttr(param.getArgNumber(),
                            dist::DistDialect::kShardingAttrName, wholeAttr);
        continue;
      }
      TensorSharding split = sharding;
      if (leading) {
        llvm::append_range(split.dims[0].axes, zeroAxes);
        split.dims[0].isOpen = false;
      } else {
        split.flat = zeroAxes;
      }
      dist::ShardingAttr splitAttr = split.toAttr(meshName);
      for (BlockArgument value : state)
        function.setArgAttr(value.getArgNumber(),
                            dist::DistDialect::kShardingAttrName, splitAttr);

      Value grad = update.getGradient();
      OpBuilder builder(update);
      if (stage >= ZeroStage::Gradients) {
        if (Operation *producer = grad.getDefiningOp())
          builder.setInsertionPointAfter(producer);
        else
          builder.setInsertionPointToStart(&function.front());
      }
      // Stage 1 keeps the gradient whole: its partial sums over the ZeRO
      // axes are summed over the microbatches first and reduce-scattered
      // once, right before the update.
      Value pinned = grad;
      if (stage == ZeroStage::OptimizerState) {
        TensorSharding partial = sharding;
        partial.unreduced.assign(zeroAxes.begin(), zeroAxes.end());
        pinned = dist::ShardingConstraintOp::create(
            builder, grad.getLoc(), pinned, partial.toAttr(meshName));
      }
      update.getGradientOperand().set(dist::ShardingConstraintOp::create(
          builder, grad.getLoc(), pinned, splitAttr));

      // With mixed precision the f32 master weight is optimizer state (the
      // ZeRO paper's K = 12 counts it), so stages 1 and 2 split it with the
      // moments too: the model reads its 16-bit cast, gathered once per step
      // and kept for the backward, as the paper keeps the 16-bit parameters
      // whole.
      bool master = isMasterWeight(param);
      if (stage < ZeroStage::Parameters && !master) {
        function.setArgAttr(param.getArgNumber(),
                            dist::DistDialect::kShardingAttrName, wholeAttr);
        continue;
      }
      Regather reads = stage < ZeroStage::Parameters
                           ? Regather{Regather::KeepForward, {}}
                           : regather;
      llvm::erase_if(reads.innerAxes, [&](StringAttr axis) {
        return !llvm::is_contained(zeroAxes, axis);
      });
      function.setArgAttr(param.getArgNumber(),
                          dist::DistDialect::kShardingAttrName, splitAttr);
      TensorSharding inner = whole;
      llvm::erase_if(inner.replicated, [&](StringAttr axis) {
        return llvm::is_contained(reads.innerAxes, axis);
      });
      if (leading) {
        llvm::append_range(inner.dims[0].axes, reads.innerAxes);
        inner.dims[0].isOpen = false;
      } else {
        inner.flat = reads.innerAxes;
      }
      gatherForUses(param, update, forward, reads, wholeAttr,
                    inner.toAttr(meshName));
    }
    return success();
  }

  /// The key of the flat buffer that `update`'s parameter and state may
  /// share with others of its unit, or none. A unit's members share the
  /// update (its op and attributes: one update serves them all), the
  /// element types, the mesh axes they are replicated over, the axes that
  /// split one dim of each (none, or TP's: then the buffer has a row of
  /// pieces per device of them), and the way the model reads them
  /// (directly, or through one 16-bit cast); their new values are only
  /// returned.
  std::optional<std::string> getUnitKey(func::FuncOp function,
                                        const MeshShape &mesh,
                                        OptimizerOpInterface update) {
    auto param = dyn_cast<BlockArgument>(update.getParameter());
    if (!param || param.getOwner() != &function.front())
      return std::nullopt;
    StringRef name = getParamName(param);
    TensorSharding sharding = getArgSharding(function, param);
    FailureOr<int64_t> split = getSplitDim(sharding, mesh);
    if (name.empty() || !sharding.flat.empty() || !sharding.unreduced.empty() ||
        failed(split))
      return std::nullopt;
    for (Value result : update->getResults())
      if (!result.hasOneUse() || !isa<func::ReturnOp>(*result.user_begin()) ||
          !function.getResultAttr(result.use_begin()->getOperandNumber(),
                                  nn::kUpdatesAttrName))
        return std::nullopt;
    std::string key;
    llvm::raw_string_ostream os(key);
    os << getParameterUnit(name) << " " << update->getName() << " "
       << update->getAttrDictionary() << " " << formatAxes(sharding.replicated)
       << " split by "
       << (*split >= 0 ? formatAxes(sharding.dims[*split].axes) : "none");
    for (OpOperand &operand : update->getOpOperands()) {
      Value value = operand.get();
      if (value == param || &operand == &update.getGradientOperand() ||
          llvm::is_contained(update.getState(), value)) {
        auto arg = dyn_cast<BlockArgument>(value);
        if (value != update.getGradient() &&
            (!arg || arg.getOwner() != &function.front()))
          return std::nullopt;
        os << " " << getElementTypeOrSelf(value.getType());
      } else {
        // Read alike by every member (the step counter).
        os << " " << value.getAsOpaquePointer();
      }
    }
    if (isMasterWeight(param)) {
      Type narrow;
      for (Operation *user : param.getUsers())
        if (auto read = dyn_cast<nn::CastOp>(user)) {
          if (narrow && narrow != read.getType().getElementType())
            return std::nullopt;
          narrow = read.getType().getElementType();
        }
      os << " read as " << narrow;
    }
    return key;
  }

  /// FSDP's FlatParameter: the parameters of each unit (and each of their
  /// optimizer states) that getUnitKey matches, two or more, become one
  /// 1-d argument, their elements one after another in argument order, and
  /// their updates one update of it. The model reads each member as a view
  /// of it (slice, reshape; of its 16-bit cast with mixed precision), one
  /// per phase it is read in, so that stage 3 gathers the unit once per
  /// phase; the update reads the concatenation of the members' gradients.
  /// The unit's argument and result list their members (`dist.members`),
  /// by the index each has in the step as written (`dist.source_index`,
  /// which every argument and result then carries).
  void packUnits(func::FuncOp function, const MeshShape &mesh) {
    // By key, in the order of their first member.
    SmallVector<std::pair<std::string, SmallVector<Member>>> units;
    llvm::StringMap<size_t> unitOf;
    for (auto update : function.getOps<OptimizerOpInterface>()) {
      if (update.getState().empty())
        continue;
      std::optional<std::string> key = getUnitKey(function, mesh, update);
      if (!key)
        continue;
      Member member{update, cast<BlockArgument>(update.getParameter()), {}};
      for (Value state : update.getState())
        member.state.push_back(cast<BlockArgument>(state));
      auto [it, added] = unitOf.try_emplace(*key, units.size());
      if (added)
        units.emplace_back(*key, SmallVector<Member>());
      units[it->second].second.push_back(std::move(member));
    }
    llvm::erase_if(units,
                   [](const auto &unit) { return unit.second.size() < 2; });
    if (units.empty())
      return;
    stampSourceIndices(function);
    llvm::SetVector<Operation *> forward = getForwardOps(function);
    unsigned numArgs = function.getNumArguments();
    llvm::BitVector erasedArgs(numArgs),
        erasedResults(function.getNumResults());
    DenseMap<int64_t, int64_t> unitArgOf;
    SmallVector<std::pair<Value, DictionaryAttr>> unitResults;
    for (auto &[key, members] : units)
      packUnit(function, members, mesh, forward, unitArgOf, unitResults);
    for (auto &[key, members] : units)
      for (Member &member : members) {
        erasedArgs.set(member.param.getArgNumber());
        for (BlockArgument state : member.state)
          erasedArgs.set(state.getArgNumber());
        for (Value result : member.update->getResults())
          erasedResults.set(result.getUses().begin()->getOperandNumber());
      }

    // The return: the results kept, then the units'; the updated arguments
    // by their index once the members' are erased.
    MLIRContext *context = function.getContext();
    Builder builder(context);
    erasedArgs.resize(function.getNumArguments());
    SmallVector<int64_t> newIndex;
    for (unsigned i = 0, e = function.getNumArguments(), erased = 0; i < e;
         ++i) {
      newIndex.push_back(i - erased);
      erased += erasedArgs.test(i);
    }
    auto returnOp = cast<func::ReturnOp>(function.front().getTerminator());
    SmallVector<Value> returned;
    SmallVector<DictionaryAttr> resultAttrs;
    for (auto [index, operand] : llvm::enumerate(returnOp.getOperands()))
      if (!erasedResults.test(index)) {
        returned.push_back(operand);
        resultAttrs.push_back(function.getResultAttrDict(index));
      }
    for (auto &[value, attrs] : unitResults) {
      returned.push_back(value);
      resultAttrs.push_back(attrs);
    }
    for (DictionaryAttr &attrs : resultAttrs) {
      if (!attrs)
        continue;
      auto updates = attrs.getAs<IntegerAttr>(nn::kUpdatesAttrName);
      if (!updates)
        continue;
      NamedAttrList list(attrs);
      int64_t arg = unitArgOf.lookup_or(updates.getInt(), updates.getInt());
      list.set(nn::kUpdatesAttrName, builder.getI64IntegerAttr(newIndex[arg]));
      attrs = list.getDictionary(context);
    }
    OpBuilder after(returnOp);
    func::ReturnOp::create(after, returnOp.getLoc(), returned);
    returnOp.erase();
    // The members' updates, and the casts their reads no longer use.
    for (auto &[key, members] : units)
      for (Member &member : members) {
        member.update->erase();
        for (Operation *read :
             llvm::make_early_inc_range(member.param.getUsers()))
          read->erase();
      }
    (void)function.eraseArguments(erasedArgs);
    function.setType(FunctionType::get(context, function.getArgumentTypes(),
                                       TypeRange(ValueRange(returned))));
    function.setAllResultAttrs(resultAttrs);
  }

  /// Packs one unit (see packUnits): adds its arguments, reads each member
  /// from them, and updates them at once. `unitArgOf` maps each member
  /// argument to the unit's argument that holds it; `unitResults` gains the
  /// new update's results and their attributes.
  void packUnit(func::FuncOp function, MutableArrayRef<Member> members,
                const MeshShape &mesh,
                const llvm::SetVector<Operation *> &forward,
                DenseMap<int64_t, int64_t> &unitArgOf,
                SmallVector<std::pair<Value, DictionaryAttr>> &unitResults) {
    MLIRContext *context = function.getContext();
    Block &block = function.front();
    Member &first = members.front();
    Location loc = first.update.getLoc();
    OpBuilder builder(context);
    StringRef paramName = getParamName(first.param);
    std::string unit = getParameterUnit(paramName).str();
    FlatSymbolRefAttr meshName = mesh.getName();
    // Split by TP (one dim of each member over the same axes), the buffer
    // holds a row per device of those axes: each member's piece, in a row.
    TensorSharding firstSharding = getArgSharding(function, first.param);
    int64_t firstSplit = *getSplitDim(firstSharding, mesh);
    AxisList rowAxes;
    if (firstSplit >= 0)
      rowAxes = firstSharding.dims[firstSplit].axes;
    int64_t rows = mesh.getGroupSize(rowAxes);
    SmallVector<int64_t> offsets, splitDims;
    int64_t total = 0;
    for (Member &member : members) {
      offsets.push_back(total);
      splitDims.push_back(
          rows > 1 ? *getSplitDim(getArgSharding(function, member.param), mesh)
                   : -1);
      total += cast<RankedTensorType>(member.param.getType()).getNumElements() /
               rows;
    }
    SmallVector<int64_t> unitShape = {total};
    if (rows > 1)
      unitShape.insert(unitShape.begin(), rows);
    auto flatOf = [&](Type type) {
      return RankedTensorType::get(unitShape, getElementTypeOrSelf(type));
    };
    auto getName = [&](BlockArgument arg) {
      for (StringRef attr : {nn::kParamAttrName, nn::kStateAttrName})
        if (auto name =
                function.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr))
          return name.getValue();
      return StringRef();
    };
    // The unit's argument for the members' `argOf`: named as the first
    // member's, with the unit for the parameter.
    auto addArgument = [&](function_ref<BlockArgument(Member &)> argOf,
                           StringRef nameAttr) {
      BlockArgument front = argOf(first);
      StringRef name = getName(front);
      std::string unitName = name.consume_front(paramName)
                                 ? unit + name.str()
                                 : unit + "." + name.str();
      SmallVector<Attribute> described;
      for (auto [member, dim] : llvm::zip(members, splitDims)) {
        BlockArgument arg = argOf(member);
        described.push_back(
            describeMember(context, function.getArgAttrDict(arg.getArgNumber()),
                           arg.getType(), getName(arg), dim));
      }
      NamedAttrList attrs;
      attrs.set(nameAttr, builder.getStringAttr(unitName));
      attrs.set(dist::DistDialect::kMembersAttrName,
                builder.getArrayAttr(described));
      unsigned index = function.getNumArguments();
      (void)function.insertArgument(index, flatOf(front.getType()),
                                    attrs.getDictionary(context), loc);
      for (Member &member : members)
        unitArgOf[argOf(member).getArgNumber()] = index;
      return function.getArgument(index);
    };
    BlockArgument param = addArgument(
        [](Member &member) { return member.param; }, nn::kParamAttrName);
    // Replicated over the axes its members are, its rows split by theirs.
    TensorSharding whole = TensorSharding::getReplicated(unitShape.size());
    whole.replicated = firstSharding.replicated;
    if (rows > 1)
      whole.dims[0].axes = rowAxes;
    function.setArgAttr(param.getArgNumber(),
                        dist::DistDialect::kShardingAttrName,
                        whole.toAttr(meshName));
    SmallVector<BlockArgument> state;
    for (size_t i = 0; i < first.state.size(); ++i)
      state.push_back(addArgument(
          [&](Member &member) { return member.state[i]; }, nn::kStateAttrName));

    // Reads: a view per member and phase, before the phase's first read.
    Value read = param;
    if (isMasterWeight(first.param)) {
      auto narrow = cast<nn::CastOp>(
          *llvm::find_if(first.param.getUsers(), llvm::IsaPred<nn::CastOp>));
      builder.setInsertionPointToStart(&block);
      read = nn::CastOp::create(builder, loc, flatOf(narrow.getType()), param);
    }
    for (auto [member, offset, dim] : llvm::zip(members, offsets, splitDims)) {
      auto type = cast<RankedTensorType>(member.param.getType());
      SmallVector<Value> reads = {member.param};
      if (read != param) {
        reads.clear();
        for (Operation *user : member.param.getUsers())
          if (isa<nn::CastOp>(user))
            reads.push_back(user->getResult(0));
      }
      for (Value value : reads) {
        SmallVector<OpOperand *> phases[2];
        for (OpOperand &use : value.getUses())
          if (use.getOwner() != member.update.getOperation())
            phases[forward.contains(use.getOwner()) ? 0 : 1].push_back(&use);
        for (ArrayRef<OpOperand *> uses : phases) {
          if (uses.empty())
            continue;
          builder.setInsertionPoint(getFirstAndLastUser(uses).first);
          Value view = readMember(builder, loc, read, offset, type, dim, rows);
          for (OpOperand *use : uses)
            use->set(view);
        }
      }
    }

    // The gradient, once the last member's is made.
    Operation *last = nullptr;
    for (Member &member : members)
      if (Operation *producer = member.update.getGradient().getDefiningOp())
        if (!last || last->isBeforeInBlock(producer))
          last = producer;
    if (last)
      builder.setInsertionPointAfter(last);
    else
      builder.setInsertionPointToStart(&block);
    SmallVector<Value> pieces;
    for (auto [member, dim] : llvm::zip(members, splitDims))
      pieces.push_back(
          toRows(builder, loc, member.update.getGradient(), dim, rows));
    Value grad =
        nn::ConcatOp::create(builder, loc, pieces, unitShape.size() - 1);

    OperationState merged(loc, first.update->getName());
    for (OpOperand &operand : first.update->getOpOperands()) {
      Value value = operand.get();
      if (&operand == &first.update.getGradientOperand())
        value = grad;
      else if (value == first.param)
        value = param;
      else if (auto it = llvm::find(first.state, value);
               it != first.state.end())
        value = state[it - first.state.begin()];
      merged.addOperands(value);
    }
    merged.addAttributes(first.update->getAttrs());
    for (Type type : first.update->getResultTypes())
      merged.addTypes(flatOf(type));
    // Where the members' last update was: after the gradient, and where
    // the step updates (stage 1 reduce-scatters there).
    Operation *lastUpdate = first.update;
    for (Member &member : members)
      if (lastUpdate->isBeforeInBlock(member.update))
        lastUpdate = member.update;
    builder.setInsertionPoint(lastUpdate);
    Operation *update = builder.create(merged);
    for (auto [index, result] : llvm::enumerate(update->getResults())) {
      SmallVector<Attribute> described;
      DictionaryAttr attrs;
      for (auto [member, dim] : llvm::zip(members, splitDims)) {
        Value old = member.update->getResult(index);
        unsigned position = old.getUses().begin()->getOperandNumber();
        attrs = function.getResultAttrDict(position);
        described.push_back(describeMember(
            context, attrs, old.getType(),
            getName(function.getArgument(
                attrs.getAs<IntegerAttr>(nn::kUpdatesAttrName).getInt())),
            dim));
      }
      NamedAttrList list(attrs);
      list.erase(dist::DistDialect::kSourceIndexAttrName);
      list.erase(dist::DistDialect::kShardingAttrName);
      list.set(dist::DistDialect::kMembersAttrName,
               builder.getArrayAttr(described));
      unitResults.push_back({result, list.getDictionary(context)});
    }
  }

  /// reshard-after-forward for this mesh: true, false, or a group size
  /// that the trailing ZeRO axes make up.
  FailureOr<Regather> getRegather(func::FuncOp function, const MeshShape &mesh,
                                  const AxisList &axes) {
    const ReshardAfterForward &reshard = reshardAfterForward;
    if (reshard.kind == ReshardAfterForward::Kind::Shard)
      return Regather{Regather::FromShard, {}};
    if (reshard.kind == ReshardAfterForward::Kind::Keep)
      return Regather{Regather::KeepForward, {}};
    int64_t size = reshard.groupSize;
    if (size == 1)
      return Regather{Regather::KeepForward, {}};
    std::string sizes;
    for (size_t first = 0; first < axes.size(); ++first) {
      AxisList trailing(axes.begin() + first, axes.end());
      int64_t group = mesh.getGroupSize(trailing);
      if (group == size)
        return first == 0 ? Regather{Regather::FromShard, {}}
                          : Regather{Regather::FromInnerGroup, trailing};
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(group);
    }
    return function.emitError("reshard-after-forward=")
           << size << " is not a group the trailing ZeRO axes make up (they "
           << "give " << sizes << ")";
  }

  /// Pins every read of a parameter split at rest (but the update's own) to
  /// the whole layout: one gather before the forward's first read, and for
  /// the backward's reads what `regather` says. A parameter read through
  /// nn.cast (mixed precision) is gathered after the cast, in the narrow
  /// type.
  void gatherForUses(BlockArgument param, OptimizerOpInterface update,
                     const llvm::SetVector<Operation *> &forward,
                     const Regather &regather, dist::ShardingAttr wholeAttr,
                     dist::ShardingAttr innerAttr) {
    SmallVector<Value> reads = {param};
    for (Operation *user : param.getUsers())
      if (isa<nn::CastOp>(user))
        reads.push_back(user->getResult(0));
    for (Value read : reads) {
      SmallVector<OpOperand *> forwardUses, backwardUses;
      for (OpOperand &use : read.getUses()) {
        Operation *user = use.getOwner();
        if (user == update.getOperation() ||
            (read == param && isa<nn::CastOp>(user)))
          continue;
        (forward.contains(user) ? forwardUses : backwardUses).push_back(&use);
      }
      if (regather.kind == Regather::KeepForward) {
        llvm::append_range(forwardUses, backwardUses);
        backwardUses.clear();
      }
      Value gathered = pinUses(forwardUses, wholeAttr);
      // The smaller group's piece, cut after the last forward read, is what
      // the backward gathers from; only when the backward comes after.
      if (regather.kind == Regather::FromInnerGroup && gathered &&
          !backwardUses.empty()) {
        Operation *lastForward = getFirstAndLastUser(forwardUses).second;
        Operation *firstBackward = getFirstAndLastUser(backwardUses).first;
        if (lastForward->isBeforeInBlock(firstBackward)) {
          OpBuilder builder(lastForward->getContext());
          builder.setInsertionPointAfter(lastForward);
          Value piece = dist::ShardingConstraintOp::create(
              builder, lastForward->getLoc(), gathered, innerAttr);
          for (OpOperand *use : backwardUses)
            use->set(piece);
        }
      }
      pinUses(backwardUses, wholeAttr);
    }
  }
};
} // namespace
