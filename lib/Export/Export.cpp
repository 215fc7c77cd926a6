//===- Export.cpp - Plan export (--tessera-export) ------------------------===//
//
// Writes the function of a module (or its pipeline stages' functions, one
// program each) as the versioned protobuf plan that the runtime executes:
// buffers, kernels, collectives, transfers, frees, arguments, results and a
// static memory plan. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/OptimizerOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/IndexBound.h"
#include "tessera/Analysis/MemoryCategories.h"
#include "tessera/Analysis/MemoryPlan.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Transforms/Autodiff/ClipGradients.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

#include "PlanChecksum.h"
#include "plan.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/ToolOutputFile.h"

namespace tessera {
#define GEN_PASS_DEF_EXPORTPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-export"

using namespace mlir;
using namespace tessera;

namespace {

/// Builds the program of one function.
class PlanBuilder {
public:
  PlanBuilder(func::FuncOp function, dist::MeshOp mesh)
      : function(function), mesh(mesh) {}

  /// Fills `program`, which `ranks` run.
  LogicalResult build(plan::Program &program, ArrayRef<int64_t> ranks);

private:
  FailureOr<int64_t> getBuffer(Value value);
  int64_t addBuffer(Value value);
  LogicalResult addKernel(Operation *op, plan::Instruction &instruction);
  LogicalResult addCollective(Operation *op, plan::Instruction &instruction);
  LogicalResult addTransfer(Operation *op, plan::Instruction &instruction);
  /// Writes the global shape, dim axes and flat axes of a program argument
  /// or result (a plan::Argument or plan::Result) of type `local`, sharded
  /// as `attr`; `globalShape` is the dist.global_shape of a flat one and
  /// `unpaddedShape` the dist.unpadded_shape of a padded one.
  template <typename Message>
  void setSharding(Attribute attr, Attribute globalShape,
                   Attribute unpaddedShape, RankedTensorType local,
                   Message *message);
  /// The global shape its pieces tile (padded, if it is), the dim axes and
  /// the flat axes.
  template <typename Message>
  void setTiledShape(Attribute attr, Attribute globalShape,
                     RankedTensorType local, Message *message);
  /// With a pipeline schedule (`dist.schedule`): writes the program's
  /// schedule and gives each buffer its lifetime over the units and its
  /// copies (returned per buffer; 1 without a schedule).
  FailureOr<SmallVector<int64_t>> setSchedule(DictionaryAttr schedule);
  /// With a schedule without a flush (2BW): the copies of `copies`, and the
  /// lifetimes, of what lives from one run into the next (the arguments of
  /// two steps, the sums over microbatches, a slot per microbatch of what
  /// units make for later ones, and what updates run amid units make for
  /// the end of the run).
  FailureOr<SmallVector<int64_t>>
  setSteadyLifetimes(SmallVector<int64_t> copies,
                     const DenseMap<int64_t, int64_t> &stageSlots,
                     DenseI64ArrayAttr stages);
  /// The copies by microbatch that cross-unit buffer `id` (made in `unit`)
  /// needs: the most of its lifetimes that overlap; 0 when they do not keep
  /// the microbatch order (or a reader is outside the units).
  int64_t
  getRingCopies(int64_t id, int64_t unit,
                const DenseMap<std::pair<int64_t, int64_t>, int64_t> &entryOf,
                const DenseMap<std::pair<int64_t, int64_t>, int64_t> &waitOf);

  func::FuncOp function;
  dist::MeshOp mesh;
  plan::Program *program = nullptr;
  DenseMap<Value, int64_t> buffers;
  /// Per buffer, its value and the instruction that defines it (-1: an
  /// argument) and the last that reads it.
  SmallVector<Value> values;
  /// The buffer each view (an nn.reshape's result) shares bytes with.
  DenseMap<int64_t, int64_t> viewOf;
  /// The event each collective started on a stream signals when done.
  DenseMap<Operation *, int64_t> startEvents;
  SmallVector<int64_t> firstUse, lastUse;
  /// With a schedule: the unit being exported (-1: before or after the
  /// units), and per buffer the unit that makes it, whether another place
  /// reads it, and the number of the unit send that reads it (-1: none).
  int64_t currentUnit = -1;
  SmallVector<int64_t> madeInUnit, sentBy;
  SmallVector<bool> readElsewhere;
  /// Per buffer, the other units that read it (-1: outside the units).
  SmallVector<SmallVector<int64_t, 2>> readInUnits;
  /// The instruction of each unit send, by number.
  SmallVector<int64_t> sendInstructions;
  /// Per buffer: bytes apart of a microbatch's rows (views of a batch).
  DenseMap<int64_t, int64_t> microbatchStride;
  /// Per optimizer update: its instruction, and the buffers of each old
  /// parameter or state with the buffer of its new value.
  SmallVector<std::pair<int64_t, SmallVector<std::pair<int64_t, int64_t>>>>
      updates;
  /// Per padding (an nn.concat of a value and zeros, as a flat piece is
  /// padded): its instruction, the buffer of the value and that of
  /// the padded result.
  SmallVector<std::tuple<int64_t, int64_t, int64_t>> paddings;
  /// Per other concatenation of runs of bytes (along its outermost dim of
  /// more than one element: a unit's gradient, its members' in a row): its
  /// instruction, the buffer of the result and those of the inputs.
  SmallVector<std::tuple<int64_t, int64_t, SmallVector<int64_t>>> concats;
  /// Splat constants made again for each kernel that reads them, and the
  /// kernel the latest copy is for.
  DenseSet<Value> remade;
  DenseMap<Value, Operation *> remadeFor;
  bool isRemadeConstant(Operation &op);
};

} // namespace

static plan::DType getPlanDType(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (element.isF32())
    return plan::F32;
  if (element.isF64())
    return plan::F64;
  if (element.isF16())
    return plan::F16;
  if (element.isBF16())
    return plan::BF16;
  if (element.isInteger(1))
    return plan::I1;
  if (element.isInteger(32))
    return plan::I32;
  if (element.isInteger(64))
    return plan::I64;
  return plan::DTYPE_UNSPECIFIED;
}

static void setBreakdown(const MemoryBreakdown &bytes,
                         plan::MemoryBreakdown &breakdown) {
  breakdown.set_parameter_bytes(bytes[MemoryCategory::Parameter]);
  breakdown.set_gradient_bytes(bytes[MemoryCategory::Gradient]);
  breakdown.set_optimizer_state_bytes(bytes[MemoryCategory::OptimizerState]);
  breakdown.set_activation_bytes(bytes[MemoryCategory::Activation]);
  breakdown.set_communication_bytes(bytes[MemoryCategory::Communication]);
}

int64_t PlanBuilder::addBuffer(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t id = program->buffers_size();
  plan::Buffer *buffer = program->add_buffers();
  buffer->set_id(id);
  buffer->set_dtype(getPlanDType(type));
  for (int64_t size : type.getShape())
    buffer->add_shape(size);
  buffers[value] = id;
  values.push_back(value);
  firstUse.push_back(program->instructions_size());
  lastUse.push_back(program->instructions_size());
  madeInUnit.push_back(currentUnit);
  readElsewhere.push_back(false);
  readInUnits.emplace_back();
  sentBy.push_back(-1);
  return id;
}

FailureOr<int64_t> PlanBuilder::getBuffer(Value value) {
  auto it = buffers.find(value);
  if (it == buffers.end())
    return failure();
  lastUse[it->second] = program->instructions_size();
  if (madeInUnit[it->second] != currentUnit) {
    readElsewhere[it->second] = true;
    if (!llvm::is_contained(readInUnits[it->second], currentUnit))
      readInUnits[it->second].push_back(currentUnit);
  }
  return it->second;
}

/// The raw little-endian elements of a constant; i1 unpacked to bytes.
static std::string getConstantBytes(DenseElementsAttr elements) {
  if (elements.getElementType().isInteger(1)) {
    std::string bytes;
    for (bool value : elements.getValues<bool>())
      bytes.push_back(value ? 1 : 0);
    return bytes;
  }
  ArrayRef<char> raw = elements.getRawData();
  return std::string(raw.begin(), raw.end());
}

/// Whether `op` is a splat constant that only kernels read (no view,
/// collective, transfer or result).
bool PlanBuilder::isRemadeConstant(Operation &op) {
  auto constant = dyn_cast<nn::ConstantOp>(op);
  if (!constant || !constant.getValue().isSplat())
    return false;
  return llvm::all_of(op.getUsers(), [](Operation *user) {
    return isa_and_nonnull<nn::NNDialect>(user->getDialect()) &&
           !isa<nn::ReshapeOp, nn::TransposeOp, nn::SliceOp>(user);
  });
}

/// Writes every attribute `op` holds into `attrs`, defaults included: an
/// op's DefaultValuedAttrs are set when it is created
/// (populateDefaultProperties), and the runtime has no defaults of its own,
/// so the op definition stays their one source. The runtime's validator
/// rejects a kernel without one.
static LogicalResult
addAttributes(Operation *op,
              google::protobuf::Map<std::string, plan::AttrValue> &attrs) {
  for (NamedAttribute attr : op->getAttrs()) {
    // Optional operands' counts are the kernel's inputs themselves; the
    // global norm's mark is for the passes, not the kernel.
    if (attr.getName() == dist::DistDialect::kShardingAttrName ||
        attr.getName() == dist::DistDialect::kUnitAttrName ||
        attr.getName() == kGlobalNormAttrName ||
        attr.getName() == "operandSegmentSizes")
      continue;
    plan::AttrValue value;
    Attribute a = attr.getValue();
    if (auto integer = dyn_cast<IntegerAttr>(a)) {
      value.set_i(integer.getValue().getSExtValue());
    } else if (auto floating = dyn_cast<FloatAttr>(a)) {
      value.set_f(floating.getValueAsDouble());
    } else if (auto array = dyn_cast<DenseI64ArrayAttr>(a)) {
      // Set the list even when it is empty: dims = [] is an attribute too.
      plan::IntList *list = value.mutable_ints();
      for (int64_t element : array.asArrayRef())
        list->add_values(element);
    } else if (auto elements = dyn_cast<DenseElementsAttr>(a)) {
      value.set_dense(getConstantBytes(elements));
    } else {
      return op->emitError("cannot export attribute '")
             << attr.getName().getValue() << "'";
    }
    attrs[attr.getName().str()] = value;
  }
  return success();
}

/// An nn.fused op's body as its kernel's steps: values are numbered from
/// the kernel's inputs (the body's arguments) on, then one per step.
static LogicalResult addFusedSteps(nn::FusedOp fused, plan::Kernel &kernel) {
  Block &body = fused.getBody().front();
  DenseMap<Value, int64_t> ids;
  for (BlockArgument arg : body.getArguments())
    ids[arg] = arg.getArgNumber();
  for (Operation &op : body.without_terminator()) {
    plan::FusedStep *step = kernel.add_fused_steps();
    step->set_op(op.getName().getStringRef().str());
    for (Value operand : op.getOperands())
      step->add_operands(ids.lookup(operand));
    if (failed(addAttributes(&op, *step->mutable_attrs())))
      return failure();
    step->set_dtype(getPlanDType(op.getResultTypes()[0]));
    ids[op.getResult(0)] =
        fused.getNumOperands() + kernel.fused_steps_size() - 1;
  }
  for (Value value : body.getTerminator()->getOperands())
    kernel.add_fused_results(ids.lookup(value));
  return success();
}

LogicalResult PlanBuilder::addKernel(Operation *op,
                                     plan::Instruction &instruction) {
  plan::Kernel *kernel = instruction.mutable_kernel();
  kernel->set_op(op->getName().getStringRef().str());
  for (Value operand : op->getOperands()) {
    FailureOr<int64_t> id = getBuffer(operand);
    if (failed(id))
      return op->emitError("cannot export: operand is not a tensor buffer");
    kernel->add_inputs(*id);
  }
  if (auto fused = dyn_cast<nn::FusedOp>(op))
    return addFusedSteps(fused, *kernel);
  return addAttributes(op, *kernel->mutable_attrs());
}

static plan::ReductionKind getPlanReduction(dist::ReductionKind kind) {
  switch (kind) {
  case dist::ReductionKind::sum:
    return plan::SUM;
  case dist::ReductionKind::max:
    return plan::MAX;
  case dist::ReductionKind::min:
    return plan::MIN;
  case dist::ReductionKind::avg:
    return plan::AVG;
  }
  return plan::REDUCTION_UNSPECIFIED;
}

LogicalResult PlanBuilder::addCollective(Operation *op,
                                         plan::Instruction &instruction) {
  auto collectiveOp = cast<dist::CollectiveOpInterface>(op);
  plan::Collective *collective = instruction.mutable_collective();
  for (Attribute axis : collectiveOp.getMeshAxes())
    collective->add_mesh_axes(cast<StringAttr>(axis).str());
  FailureOr<int64_t> input = getBuffer(op->getOperand(0));
  if (failed(input))
    return op->emitError("cannot export: operand is not a tensor buffer");
  collective->set_input(*input);
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](dist::AllReduceOp c) {
        collective->set_kind(plan::ALL_REDUCE);
        collective->set_reduction(getPlanReduction(c.getKind()));
      })
      .Case([&](dist::AllGatherOp c) {
        collective->set_kind(plan::ALL_GATHER);
        collective->set_dim(c.getDim());
      })
      .Case([&](dist::ReduceScatterOp c) {
        collective->set_kind(plan::REDUCE_SCATTER);
        collective->set_dim(c.getDim());
        collective->set_reduction(getPlanReduction(c.getKind()));
      })
      .Case([&](dist::AllToAllOp c) {
        collective->set_kind(plan::ALL_TO_ALL);
        collective->set_dim(c.getSplitDim());
        collective->set_concat_dim(c.getConcatDim());
      })
      .Case([&](dist::AllSliceOp c) {
        collective->set_kind(plan::ALL_SLICE);
        collective->set_dim(c.getDim());
      })
      .Case([&](dist::BroadcastOp c) {
        collective->set_kind(plan::BROADCAST);
        collective->set_root(c.getRoot());
      })
      .Case([&](dist::CollectivePermuteOp c) {
        collective->set_kind(plan::COLLECTIVE_PERMUTE);
        for (int64_t index : c.getPairs())
          collective->add_source_target_pairs(index);
      });
  return success();
}

LogicalResult PlanBuilder::addTransfer(Operation *op,
                                       plan::Instruction &instruction) {
  plan::SendRecv *transfer = instruction.mutable_send_recv();
  if (auto send = dyn_cast<dist::SendOp>(op)) {
    FailureOr<int64_t> input = getBuffer(send.getInput());
    if (failed(input))
      return op->emitError("cannot export: operand is not a tensor buffer");
    transfer->set_is_send(true);
    transfer->set_buffer(*input);
    transfer->set_mesh_axis(send.getMeshAxis().str());
    transfer->set_peer(send.getPeer());
    transfer->set_tag(send.getTag());
    // The result is the operand in flight: the same bytes.
    buffers[send.getResult()] = *input;
    if (currentUnit >= 0) {
      sentBy[viewOf.lookup_or(*input, *input)] = sendInstructions.size();
      sendInstructions.push_back(program->instructions_size());
    }
    return success();
  }
  auto recv = cast<dist::RecvOp>(op);
  transfer->set_buffer(addBuffer(recv.getResult()));
  transfer->set_mesh_axis(recv.getMeshAxis().str());
  transfer->set_peer(recv.getPeer());
  transfer->set_tag(recv.getTag());
  return success();
}

/// Fills the global shape and per-dim axes of an argument or result from its
/// `dist.sharding` (none: replicated).
template <typename Message>
void PlanBuilder::setSharding(Attribute attr, Attribute globalShape,
                              Attribute unpaddedShape, RankedTensorType local,
                              Message *message) {
  setTiledShape(attr, globalShape, local, message);
  // The pieces tile the padded shape; the global tensor is the one before
  // padding.
  auto unpadded = dyn_cast_or_null<DenseI64ArrayAttr>(unpaddedShape);
  if (!unpadded)
    return;
  *message->mutable_padded_shape() = message->global_shape();
  message->clear_global_shape();
  for (int64_t size : unpadded.asArrayRef())
    message->add_global_shape(size);
}

template <typename Message>
void PlanBuilder::setTiledShape(Attribute attr, Attribute globalShape,
                                RankedTensorType local, Message *message) {
  auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr);
  auto flatShape = dyn_cast_or_null<DenseI64ArrayAttr>(globalShape);
  if (sharding && flatShape) {
    for (StringAttr axis : sharding.getFlatAxes())
      message->add_flat_axes(axis.str());
    for (auto [size, dim] :
         llvm::zip(flatShape.asArrayRef(), sharding.getDims())) {
      message->add_global_shape(size);
      plan::DimAxes *axes = message->add_dim_axes();
      for (StringAttr axis : dim.getAxes())
        axes->add_axes(axis.str());
    }
    return;
  }
  for (auto [dim, size] : llvm::enumerate(local.getShape())) {
    plan::DimAxes *axes = message->add_dim_axes();
    int64_t group = 1;
    if (sharding && mesh) {
      for (StringAttr axis : sharding.getDims()[dim].getAxes()) {
        axes->add_axes(axis.str());
        group *= mesh.getAxisSize(axis.getValue()).value_or(1);
      }
    }
    message->add_global_shape(size * group);
  }
}

/// Lists the members of a unit's flat buffer (`dist.members`), if `attr`
/// is there; a member split over the buffer's row axes (the axes of dim 0
/// of `sharding`) on its `dim` has them there.
template <typename Message>
static void setMembers(Attribute attr, Attribute sharding, Message *message) {
  auto members = dyn_cast_or_null<ArrayAttr>(attr);
  if (!members)
    return;
  auto unit = dyn_cast_or_null<dist::ShardingAttr>(sharding);
  for (Attribute member : members) {
    auto dict = cast<DictionaryAttr>(member);
    plan::Member *planMember = message->add_members();
    planMember->set_name(dict.getAs<StringAttr>("name").str());
    ArrayRef<int64_t> shape =
        dict.getAs<DenseI64ArrayAttr>("shape").asArrayRef();
    for (int64_t size : shape)
      planMember->add_global_shape(size);
    planMember->set_source_index(dict.getAs<IntegerAttr>("source").getInt());
    auto dim = dict.getAs<IntegerAttr>("dim");
    if (!dim || !unit)
      continue;
    for (int64_t d = 0, e = shape.size(); d < e; ++d) {
      plan::DimAxes *axes = planMember->add_dim_axes();
      if (d == dim.getInt())
        for (StringAttr axis : unit.getDims().front().getAxes())
          axes->add_axes(axis.str());
    }
  }
}

/// Where the elements of `op`, an nn.slice, start in its operand's, if
/// they are a contiguous run of them (leading dims of one index, then a cut
/// dim, then whole dims), as a unit's member is of its gathered buffer or a
/// gathered flat piece of its padding: a view, no copy. Not of a
/// microbatch's rows, whose bytes are strided.
static std::optional<int64_t> getContiguousSliceOffset(Operation &op) {
  auto slice = dyn_cast<nn::SliceOp>(op);
  if (!slice)
    return std::nullopt;
  ArrayRef<int64_t> shape = slice.getInput().getType().getShape();
  ArrayRef<int64_t> start = slice.getStart(), limit = slice.getLimit();
  size_t cut = 0;
  while (cut + 1 < shape.size() && limit[cut] - start[cut] == 1)
    ++cut;
  for (size_t d = cut + 1; d < shape.size(); ++d)
    if (start[d] != 0 || limit[d] != shape[d])
      return std::nullopt;
  int64_t offset = 0, stride = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    offset += start[d] * stride;
    stride *= shape[d];
  }
  return offset;
}

int64_t PlanBuilder::getRingCopies(
    int64_t id, int64_t unit,
    const DenseMap<std::pair<int64_t, int64_t>, int64_t> &entryOf,
    const DenseMap<std::pair<int64_t, int64_t>, int64_t> &waitOf) {
  // Microbatch k's copy lives from the entry that makes it to the last that
  // reads it, or after which the send of it is waited for.
  int64_t m = program->microbatches();
  int64_t lastEntry = program->schedule_size() - 1;
  SmallVector<int64_t> start(m), end(m);
  for (int64_t k = 0; k < m; ++k) {
    auto made = entryOf.find({unit, k});
    if (made == entryOf.end())
      return 0;
    start[k] = end[k] = made->second;
    for (int64_t reader : readInUnits[id]) {
      auto read = entryOf.find({reader, k});
      if (reader < 0 || read == entryOf.end())
        return 0;
      end[k] = std::max(end[k], read->second);
    }
    if (sentBy[id] >= 0)
      end[k] = std::max(end[k], waitOf.lookup_or({sentBy[id], k}, lastEntry));
    // Copy k mod n is free again only if the lifetimes keep the microbatch
    // order.
    if (k > 0 && (start[k] < start[k - 1] || end[k] < end[k - 1]))
      return 0;
  }
  int64_t copies = 1;
  for (int64_t k = 0, first = 0; k < m; ++k) {
    while (end[first] < start[k])
      ++first;
    copies = std::max(copies, k - first + 1);
  }
  return copies;
}

FailureOr<SmallVector<int64_t>>
PlanBuilder::setSteadyLifetimes(SmallVector<int64_t> copies,
                                const DenseMap<int64_t, int64_t> &stageSlots,
                                DenseI64ArrayAttr stages) {
  int64_t count = program->buffers_size();
  int64_t unitsEnd = program->units(program->units_size() - 1).end();
  bool updatesLater = program->has_update_after_entry();
  int64_t deferredBegin = program->deferred_begin();
  bool lateDeferred =
      !updatesLater && program->deferred_end() > program->deferred_begin();
  // The microbatches the rank holds at once, numbered through the whole run
  // (step s's microbatch k is s m + k): from its latest forward to the
  // backward it runs.
  int64_t m = program->microbatches(), inFlight = 1,
          latest = std::numeric_limits<int64_t>::min(), lag = 0;
  for (const plan::ScheduleEntry &entry : program->schedule()) {
    int64_t index = entry.step_offset() * m + entry.microbatch();
    latest = std::max(latest, index);
    inFlight = std::max(inFlight, latest - index + 1);
    lag = std::max<int64_t>(lag, -entry.step_offset());
  }
  // A run reads arguments of its own step and of steps as far back as its
  // lag: the deferred part's, at least the step before.
  if (program->deferred_end() > program->deferred_begin())
    lag = std::max<int64_t>(lag, 1);
  auto persist = [&](int64_t id) {
    firstUse[id] = std::min<int64_t>(firstUse[id], 0);
    lastUse[id] = std::numeric_limits<int64_t>::max();
  };
  // A copy per step in flight (`copies` of them, by the step's number),
  // for all the runs.
  auto perStep = [&](int64_t id, int64_t copies) {
    int64_t bytes =
        getTensorBytes(cast<RankedTensorType>(values[id].getType()));
    if (copies > 1) {
      program->mutable_buffers(id)->set_step_slots(copies);
      program->mutable_buffers(id)->set_step_slot_stride_bytes((bytes + 63) /
                                                               64 * 64);
    }
    persist(id);
  };
  for (int64_t id = 0; id < count; ++id) {
    plan::Buffer &buffer = *program->mutable_buffers(id);
    if (buffer.has_view_of())
      continue;
    Value value = values[id];
    // A step's data, step counter and weight stash: one copy per step from
    // the run's back to its lag.
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      unsigned number = arg.getArgNumber();
      if (!function.getArgAttr(number, nn::kParamAttrName) &&
          (!function.getArgAttr(number, nn::kStateAttrName) ||
           function.getArgAttr(number, nn::kVersionOfAttrName) ||
           function.getArgAttrOfType<StringAttr>(number, nn::kStateAttrName)
                   .getValue() == "step"))
        perStep(id, lag + 1);
      continue;
    }
    bool accumulator =
        isa_and_nonnull<dist::AccumulateOp>(value.getDefiningOp());
    int64_t unit = madeInUnit[id];
    // A sum over microbatches: one copy per step. The last rank's deferred
    // part reads a step's sum while the next step's is made; a rank that
    // updates amid its units sends a step's sum from there, and the next
    // step's is made before the send is waited for.
    if (accumulator) {
      if (lag > 1)
        return function.emitError("cannot export: a sum over microbatches "
                                  "in a program whose runs lag by ")
               << lag << " steps (its copies alternate by step parity)";
      perStep(id, 2);
      continue;
    }
    // What the units read but do not make lives over all of their runs
    // (and over the updates, which may run amid them). The updates run amid
    // the next step's units: what they make for the end of the run is kept
    // from the units' values.
    if (unit < 0) {
      if (readElsewhere[id])
        lastUse[id] = updatesLater ? std::numeric_limits<int64_t>::max()
                                   : std::max(lastUse[id], unitsEnd);
      if (updatesLater && firstUse[id] >= unitsEnd &&
          lastUse[id] == std::numeric_limits<int64_t>::max())
        persist(id);
      // The last rank runs its deferred part (after its own in the program)
      // first, for the step before: what its own part reads lives to the
      // end, and what its own part makes for the deferred part lives into
      // the next run.
      if (lateDeferred && lastUse[id] >= unitsEnd) {
        if (firstUse[id] >= unitsEnd && firstUse[id] < deferredBegin &&
            lastUse[id] >= deferredBegin)
          persist(id);
        else if (firstUse[id] < unitsEnd)
          lastUse[id] = std::numeric_limits<int64_t>::max();
      }
      continue;
    }
    if (!readElsewhere[id] && sentBy[id] < 0)
      continue; // read in its own unit's run only
    // With a microbatch a step, what only the post ops read (a gradient) is
    // read after its unit in the same run, for the same step.
    if (m == 1 && sentBy[id] < 0 &&
        llvm::all_of(readInUnits[id], [](int64_t unit) { return unit < 0; }))
      continue;
    // A value a later unit reads is held from its microbatch's forward to
    // its backward: as in 1F1B, by as many microbatches as the rank holds
    // between them (`inFlight`), in a ring by the microbatch's index in the
    // whole run (across steps). A value sent is held until
    // the run's end, where its send is waited for: a slot per microbatch
    // (the entries' slot is their microbatch).
    bool sent = sentBy[id] >= 0;
    copies[id] = sent ? stageSlots.lookup(stages[unit]) : inFlight;
    persist(id);
    if (copies[id] > 1) {
      int64_t bytes = getTensorBytes(cast<RankedTensorType>(value.getType()));
      buffer.set_slots(copies[id]);
      buffer.set_slot_stride_bytes((bytes + 63) / 64 * 64);
      buffer.set_slot_by_microbatch(!sent);
    }
  }
  return copies;
}

FailureOr<SmallVector<int64_t>>
PlanBuilder::setSchedule(DictionaryAttr schedule) {
  int64_t count = program->buffers_size();
  SmallVector<int64_t> copies(count, 1);
  if (!schedule)
    return copies;
  auto microbatches = schedule.getAs<IntegerAttr>("microbatches");
  auto stages = schedule.getAs<DenseI64ArrayAttr>("unit_stages");
  auto entries = schedule.getAs<DenseI64ArrayAttr>("entries");
  auto waits = schedule.getAs<DenseI64ArrayAttr>("send_waits");
  auto entrySteps = schedule.getAs<DenseI64ArrayAttr>("entry_steps");
  auto postAfter = schedule.getAs<IntegerAttr>("post_after");
  bool steady = static_cast<bool>(schedule.get("steady"));
  int64_t units = program->units_size();
  auto malformed = [&](const Twine &why) {
    return function.emitError("cannot export: malformed '")
           << dist::DistDialect::kScheduleAttrName << "': " << why;
  };
  if (units == 0 || static_cast<int64_t>(stages.size()) != units ||
      entries.size() % 3 != 0 || waits.size() % 3 != 0)
    return malformed("expects one stage per unit and triples");
  if (steady &&
      (!entrySteps || !postAfter ||
       static_cast<int64_t>(entrySteps.size()) * 3 !=
           static_cast<int64_t>(entries.size()) ||
       postAfter.getInt() < -1 || postAfter.getInt() * 3 >= entries.size()))
    return malformed("expects a step per entry and where the updates run");
  program->set_steady(steady);
  if (steady && postAfter.getInt() >= 0)
    program->set_update_after_entry(postAfter.getInt());
  if (steady)
    if (auto delay = schedule.getAs<IntegerAttr>("weight_delay"))
      program->set_weight_delay(delay.getInt());
  int64_t m = microbatches.getInt();
  program->set_microbatches(m);
  // The slots each stage uses.
  DenseMap<int64_t, int64_t> stageSlots;
  for (int64_t i = 0; i < entries.size(); i += 3) {
    int64_t unit = entries[i], microbatch = entries[i + 1],
            slot = entries[i + 2];
    if (unit < 0 || unit >= units || microbatch < 0 || microbatch >= m ||
        slot < 0)
      return malformed("entry " + Twine(i / 3) + " is out of range");
    int64_t &slots = stageSlots[stages[unit]];
    slots = std::max(slots, slot + 1);
    plan::ScheduleEntry *entry = program->add_schedule();
    entry->set_unit(unit);
    entry->set_microbatch(microbatch);
    entry->set_slot(slot);
    if (steady)
      entry->set_step_offset(entrySteps[i / 3]);
  }
  // Where each (unit, microbatch) runs and each (send, microbatch) is
  // waited for, by entry.
  DenseMap<std::pair<int64_t, int64_t>, int64_t> entryOf, waitOf;
  for (auto [index, entry] : llvm::enumerate(program->schedule()))
    entryOf[{entry.unit(), entry.microbatch()}] = index;
  for (int64_t i = 0; i < waits.size(); i += 3) {
    int64_t entry = waits[i], send = waits[i + 1];
    if (entry < 0 || entry >= program->schedule_size() || send < 0 ||
        send >= static_cast<int64_t>(sendInstructions.size()))
      return malformed("send wait " + Twine(i / 3) + " is out of range");
    waitOf[{send, waits[i + 2]}] = entry;
    plan::SendRun *run = program->mutable_schedule(entry)->add_wait_sends();
    run->set_instruction(sendInstructions[send]);
    run->set_microbatch(waits[i + 2]);
  }

  // Without a flush a run also finishes earlier steps: what units make for
  // later units, the sums over microbatches and the arguments of the steps
  // in flight live from one run into the next.
  if (steady)
    return setSteadyLifetimes(copies, stageSlots, stages);
  // The units run many times between unitsBegin and unitsEnd: what lives
  // across runs, or is read in them but made outside, lives over all of it.
  bool bySlot = false;
  int64_t unitsBegin = program->units(0).begin();
  int64_t unitsEnd = program->units(units - 1).end();
  for (int64_t id = 0; id < count; ++id) {
    plan::Buffer &buffer = *program->mutable_buffers(id);
    if (buffer.has_view_of())
      continue;
    bool accumulator =
        isa_and_nonnull<dist::AccumulateOp>(values[id].getDefiningOp());
    int64_t unit = madeInUnit[id];
    if (unit < 0 || accumulator) {
      if (accumulator)
        firstUse[id] = unitsBegin;
      if (readElsewhere[id] || accumulator)
        lastUse[id] = std::max(lastUse[id], unitsEnd);
      continue;
    }
    if (!readElsewhere[id] && sentBy[id] < 0)
      continue; // read in its own unit's run only
    // A value later units read (or a send still reads) has a ring of copies
    // by microbatch, as many as its lifetimes overlap; one whose lifetimes
    // do not follow the microbatch order lives in its entry's slot.
    int64_t byMicrobatch = getRingCopies(id, unit, entryOf, waitOf);
    copies[id] =
        byMicrobatch > 0 ? byMicrobatch : stageSlots.lookup(stages[unit]);
    firstUse[id] = unitsBegin;
    lastUse[id] = std::max(lastUse[id], unitsEnd);
    if (copies[id] > 1) {
      int64_t bytes =
          getTensorBytes(cast<RankedTensorType>(values[id].getType()));
      buffer.set_slots(copies[id]);
      buffer.set_slot_stride_bytes((bytes + 63) / 64 * 64);
      buffer.set_slot_by_microbatch(byMicrobatch > 0);
      bySlot = bySlot || byMicrobatch == 0;
    }
  }
  // The entries' slots only address what lives in them.
  if (!bySlot)
    for (plan::ScheduleEntry &entry : *program->mutable_schedule())
      entry.set_slot(0);
  return copies;
}

LogicalResult PlanBuilder::build(plan::Program &result,
                                 ArrayRef<int64_t> ranks) {
  program = &result;
  for (int64_t rank : ranks)
    program->add_ranks(rank);
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  StringRef sourceName = dist::DistDialect::kSourceIndexAttrName;
  StringRef globalShapeName = dist::DistDialect::kGlobalShapeAttrName;
  StringRef unpaddedName = dist::DistDialect::kUnpaddedShapeAttrName;
  StringRef membersName = dist::DistDialect::kMembersAttrName;

  // A program sharded but not partitioned would run its global shapes as
  // each device's pieces: the partitioner drops the ops' shardings and the
  // constraints, so any left that split a value over devices say so.
  auto splits = [&](Attribute attr) {
    auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr);
    return sharding && mesh &&
           llvm::any_of(sharding.getDims(), [&](dist::DimShardingAttr dim) {
             return llvm::any_of(dim.getAxes(), [&](StringAttr axis) {
               return mesh.getAxisSize(axis.getValue()).value_or(1) > 1;
             });
           });
  };
  WalkResult unpartitioned = function.walk([&](Operation *op) {
    Attribute attr;
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op))
      attr = constraint.getSharding();
    else if (auto perResult = op->getAttrOfType<ArrayAttr>(attrName))
      if (const Attribute *split = llvm::find_if(perResult, splits);
          split != perResult.end())
        attr = *split;
    if (!splits(attr))
      return WalkResult::advance();
    op->emitError("cannot export: the program is sharded but not "
                  "partitioned; run --tessera-partition first (or "
                  "--tessera-strip-sharding for one device)");
    return WalkResult::interrupt();
  });
  if (unpartitioned.wasInterrupted())
    return failure();
  // Annotated arguments and results alone (nothing propagated yet) say so
  // too, unless the partitioner made this function.
  if (!function->hasAttr(dist::DistDialect::kPartitionedAttrName)) {
    auto check = [&](ArrayAttr attrs, StringRef what) -> LogicalResult {
      if (!attrs)
        return success();
      for (auto [index, dict] :
           llvm::enumerate(attrs.getAsRange<DictionaryAttr>()))
        if (dict && splits(dict.get(attrName)))
          return function.emitError("cannot export: ")
                 << what << " #" << index
                 << " is sharded but the program is not partitioned; run "
                    "--tessera-partition first (or --tessera-strip-sharding "
                    "for one device)";
      return success();
    };
    if (failed(check(function.getArgAttrsAttr(), "argument")) ||
        failed(check(function.getResAttrsAttr(), "result")))
      return failure();
  }

  for (BlockArgument arg : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return function.emitError("cannot export argument #")
             << arg.getArgNumber() << " of type " << arg.getType();
    plan::Argument *argument = program->add_arguments();
    argument->set_buffer(addBuffer(arg));
    firstUse.back() = -1;
    auto param = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       nn::kParamAttrName);
    auto state = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       nn::kStateAttrName);
    // A parameter server's gradient of a parameter.
    auto gradOf = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        nn::kGradOfAttrName);
    argument->set_name(param    ? param.str()
                       : state  ? state.str()
                       : gradOf ? gradOf.str()
                                : "arg" + std::to_string(arg.getArgNumber()));
    argument->set_is_param(static_cast<bool>(param));
    argument->set_role(
        param ? plan::PARAM
        : state
            ? (state.getValue() == "step" ? plan::STEP : plan::OPTIMIZER_STATE)
        : gradOf ? plan::GRADIENT
                 : plan::DATA);
    // A weight stash starts as its parameter's input, which the runtime
    // finds by the parameter's index in the step.
    if (auto versionOf = function.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), nn::kVersionOfAttrName)) {
      auto stashed = llvm::find_if(function.getArguments(), [&](auto other) {
        return function.getArgAttr(other.getArgNumber(), nn::kParamAttrName) ==
               versionOf;
      });
      if (stashed == function.args_end())
        return function.emitError("cannot export the weight stash '")
               << argument->name() << "': the program has no parameter '"
               << versionOf.getValue() << "'";
      auto source = function.getArgAttrOfType<IntegerAttr>(
          (*stashed).getArgNumber(), sourceName);
      argument->set_role(plan::WEIGHT_STASH);
      argument->set_version_of_source(source ? source.getInt()
                                             : (*stashed).getArgNumber());
    }
    argument->set_dtype(getPlanDType(type));
    argument->set_index_bound(getIndexBound(arg));
    setSharding(function.getArgAttr(arg.getArgNumber(), attrName),
                function.getArgAttr(arg.getArgNumber(), globalShapeName),
                function.getArgAttr(arg.getArgNumber(), unpaddedName), type,
                argument);
    if (auto source = function.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                             sourceName))
      argument->set_source_index(source.getInt());
    if (auto major = function.getArgAttrOfType<IntegerAttr>(
            arg.getArgNumber(), dist::DistDialect::kMicrobatchesMajorAttrName))
      argument->set_microbatches_major(major.getInt());
    setMembers(function.getArgAttr(arg.getArgNumber(), membersName),
               function.getArgAttr(arg.getArgNumber(), attrName), argument);
  }

  auto schedule = function->getAttrOfType<DictionaryAttr>(
      dist::DistDialect::kScheduleAttrName);
  SmallVector<StringRef> unitNames;
  if (schedule)
    for (Attribute name : schedule.getAs<ArrayAttr>("units"))
      unitNames.push_back(cast<StringAttr>(name).getValue());
  // A unit spans the instructions made from its first op to the next
  // unit's (or "update"'s). A unit without ops (a first stage's input
  // gradients) has no first op: it is empty where the next begins.
  auto addUnitsUpTo = [&](int64_t unit) {
    while (program->units_size() < unit) {
      plan::Unit *planUnit = program->add_units();
      planUnit->set_name(unitNames[program->units_size() - 1].str());
      planUnit->set_begin(program->instructions_size());
      planUnit->set_end(program->instructions_size());
    }
  };
  auto endUnit = [&] {
    if (currentUnit >= 0)
      program->mutable_units(currentUnit)
          ->set_end(program->instructions_size());
    currentUnit = -1;
  };
  // A steady program's post ops in two parts: the deferred one's
  // instructions (see plan.proto's Program.deferred_begin).
  int64_t deferredBegin = -1, deferredEnd = -1;
  for (Operation &op : function.getBody().front()) {
    auto name = op.getAttrOfType<StringAttr>(dist::DistDialect::kUnitAttrName);
    if (name && name.getValue() == dist::kDeferredUpdateUnitName)
      deferredBegin = program->instructions_size();
    else if (name && name.getValue() == dist::kUpdateUnitName &&
             deferredBegin >= 0)
      deferredEnd = program->instructions_size();
    if (name && schedule) {
      endUnit();
      auto it = llvm::find(unitNames, name.getValue());
      if (it - unitNames.begin() < program->units_size())
        return op.emitError("cannot export: unit '")
               << name.getValue() << "' is out of the order of "
               << dist::DistDialect::kScheduleAttrName << "'s units";
      addUnitsUpTo(it - unitNames.begin());
      if (it != unitNames.end()) {
        currentUnit = program->units_size();
        plan::Unit *planUnit = program->add_units();
        planUnit->set_name(name.str());
        planUnit->set_begin(program->instructions_size());
      }
    }
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      endUnit();
      if (deferredBegin >= 0) {
        program->set_deferred_begin(deferredBegin);
        program->set_deferred_end(
            deferredEnd >= 0 ? deferredEnd : program->instructions_size());
      }
      if (schedule)
        addUnitsUpTo(unitNames.size());
      for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
        FailureOr<int64_t> id = getBuffer(operand);
        if (failed(id))
          return returnOp.emitError("cannot export result #") << index;
        plan::Result *planResult = program->add_results();
        planResult->set_buffer(*id);
        if (auto updates = function.getResultAttrOfType<IntegerAttr>(
                index, nn::kUpdatesAttrName))
          planResult->set_updates_argument(updates.getInt());
        if (auto metric = function.getResultAttrOfType<StringAttr>(
                index, nn::kMetricAttrName))
          planResult->set_metric(metric.str());
        if (auto gradOf = function.getResultAttrOfType<StringAttr>(
                index, nn::kGradOfAttrName))
          planResult->set_grad_of(gradOf.str());
        setSharding(function.getResultAttr(index, attrName),
                    function.getResultAttr(index, globalShapeName),
                    function.getResultAttr(index, unpaddedName),
                    cast<RankedTensorType>(operand.getType()), planResult);
        if (auto source =
                function.getResultAttrOfType<IntegerAttr>(index, sourceName))
          planResult->set_source_index(source.getInt());
        setMembers(function.getResultAttr(index, membersName),
                   function.getResultAttr(index, attrName), planResult);
        // Results stay live to the end.
        lastUse[*id] = std::numeric_limits<int64_t>::max();
      }
      continue;
    }
    if (auto wait = dyn_cast<dist::WaitOp>(op)) {
      // The started collective's output, readable from here; its input
      // stays live until here too (the collective reads it until done).
      Operation *start = wait.getInput().getDefiningOp();
      auto event = startEvents.find(start);
      FailureOr<int64_t> output = getBuffer(wait.getInput());
      if (event == startEvents.end() || failed(output) ||
          failed(getBuffer(start->getOperand(0))))
        return wait.emitError("cannot export: not the wait of a started "
                              "collective or send");
      plan::Instruction instruction;
      instruction.add_wait_events(event->second);
      *program->add_instructions() = std::move(instruction);
      buffers[wait.getResult()] = *output;
      continue;
    }
    auto isStrided = [&](Value value) {
      auto it = buffers.find(value);
      return it != buffers.end() && microbatchStride.lookup(it->second) != 0;
    };
    std::optional<int64_t> sliceOffset = getContiguousSliceOffset(op);
    if (isa<nn::ReshapeOp, dist::MicrobatchSliceOp>(op) ||
        (isa<nn::TransposeOp>(op) && isUnitDimView(&op)) ||
        (sliceOffset && !isStrided(op.getOperand(0)))) {
      // A view of the operand's bytes (a microbatch's rows of it, or a run
      // of them): no copy, no instruction. The operand lives as long as the
      // view is read (see below).
      FailureOr<int64_t> input = getBuffer(op.getOperand(0));
      if (failed(input))
        return op.emitError("cannot export: operand is not a buffer");
      int64_t root = viewOf.lookup_or(*input, *input);
      int64_t id = addBuffer(op.getResult(0));
      program->mutable_buffers(id)->set_view_of(root);
      viewOf[id] = root;
      int64_t offsetBytes = program->buffers(*input).view_offset_bytes();
      if (sliceOffset)
        offsetBytes +=
            *sliceOffset * getTensorBytes(RankedTensorType::get(
                               {1}, getElementTypeOrSelf(op.getResult(0))));
      program->mutable_buffers(id)->set_view_offset_bytes(offsetBytes);
      int64_t stride = microbatchStride.lookup(*input);
      if (isa<dist::MicrobatchSliceOp>(op))
        stride = getTensorBytes(cast<RankedTensorType>(op.getResultTypes()[0]));
      if (stride) {
        microbatchStride[id] = stride;
        program->mutable_buffers(id)->set_microbatch_stride_bytes(stride);
      }
      continue;
    }
    if (auto accumulate = dyn_cast<dist::AccumulateOp>(op)) {
      FailureOr<int64_t> input = getBuffer(accumulate.getInput());
      if (failed(input) || currentUnit < 0)
        return op.emitError("cannot export: expects to accumulate a buffer "
                            "of a pipeline unit");
      plan::Instruction instruction;
      instruction.mutable_accumulate()->set_input(*input);
      instruction.mutable_accumulate()->set_accumulator(
          addBuffer(accumulate.getResult()));
      *program->add_instructions() = std::move(instruction);
      continue;
    }
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op)) {
      // Only unpartitioned programs hold constraints: the value is its
      // operand.
      FailureOr<int64_t> id = getBuffer(constraint.getInput());
      if (failed(id))
        return constraint.emitError("cannot export: operand is not a buffer");
      buffers[constraint.getResult()] = *id;
      continue;
    }
    if (isa<dist::SendOp, dist::RecvOp>(op)) {
      plan::Instruction instruction;
      if (failed(addTransfer(&op, instruction)))
        return failure();
      if (auto stream = op.getAttrOfType<IntegerAttr>(
              dist::DistDialect::kStreamAttrName)) {
        int64_t event = startEvents.size();
        startEvents[&op] = event;
        instruction.set_stream(stream.getInt());
        instruction.add_signal_events(event);
      }
      *program->add_instructions() = std::move(instruction);
      continue;
    }
    if (auto axisIndex = dyn_cast<dist::AxisIndexOp>(op)) {
      plan::Instruction instruction;
      plan::AxisIndex *planIndex = instruction.mutable_axis_index();
      for (unsigned group = 0; group < axisIndex.getGroups().size(); ++group) {
        plan::DimAxes *axes = planIndex->add_groups();
        for (StringRef axis : axisIndex.getGroup(group))
          axes->add_axes(axis.str());
      }
      planIndex->set_output(addBuffer(axisIndex.getResult()));
      *program->add_instructions() = std::move(instruction);
      continue;
    }
    bool isKernel = op.getDialect() && isa<nn::NNDialect>(op.getDialect());
    bool isCollective = isa<dist::CollectiveOpInterface>(op);
    if (!isKernel && !isCollective)
      return op.emitError("cannot export '")
             << op.getName() << "': plans run only nn ops, dist collectives "
             << "and transfers";
    if (!llvm::all_of(op.getResultTypes(), llvm::IsaPred<RankedTensorType>))
      return op.emitError("cannot export an op with non-tensor results");
    // A splat constant that only kernels read is made again right before
    // each of them, so it lives for that kernel alone (a GELU gradient's
    // constants are as large as the activations): made once, it would live
    // from its definition to its last reader.
    if (isRemadeConstant(op)) {
      remade.insert(op.getResult(0));
      continue;
    }
    for (Value operand : llvm::to_vector(op.getOperands())) {
      if (!remade.contains(operand) || remadeFor.lookup(operand) == &op)
        continue;
      plan::Instruction make;
      if (failed(addKernel(operand.getDefiningOp(), make)))
        return failure();
      make.mutable_kernel()->add_outputs(addBuffer(operand));
      *program->add_instructions() = std::move(make);
      remadeFor[operand] = &op;
    }
    plan::Instruction instruction;
    if (failed(isKernel ? addKernel(&op, instruction)
                        : addCollective(&op, instruction)))
      return failure();
    for (Value value : op.getResults()) {
      int64_t id = addBuffer(value);
      if (isKernel)
        instruction.mutable_kernel()->add_outputs(id);
      else
        instruction.mutable_collective()->set_output(id);
    }
    // An update's results are its parameter and state, new: in the order
    // of its inputs (OptimizerOpInterface).
    if (auto update = dyn_cast<OptimizerOpInterface>(op)) {
      SmallVector<Value> old = {update.getParameter()};
      llvm::append_range(old, update.getState());
      auto &pairs =
          updates.emplace_back(program->instructions_size(), 0).second;
      for (auto [before, after] : llvm::zip(old, op.getResults()))
        pairs.push_back({buffers.lookup(before), buffers.lookup(after)});
    }
    // Along its outermost dim of more than one element: each input's
    // bytes are one run of the result's.
    if (auto concat = dyn_cast<nn::ConcatOp>(op);
        concat &&
        llvm::all_of(concat.getType().getShape().take_front(concat.getDim()),
                     [](int64_t size) { return size == 1; })) {
      if (llvm::all_of(concat.getInputs().drop_front(), [](Value input) {
            return isa_and_nonnull<nn::ConstantOp>(input.getDefiningOp());
          })) {
        int64_t input = buffers.lookup(concat.getInputs().front());
        paddings.push_back({program->instructions_size(),
                            viewOf.lookup_or(input, input),
                            buffers.lookup(concat.getResult())});
      } else {
        SmallVector<int64_t> inputs;
        for (Value input : concat.getInputs())
          inputs.push_back(buffers.lookup(input));
        concats.push_back({program->instructions_size(),
                           buffers.lookup(concat.getResult()), inputs});
      }
    }
    if (auto stream =
            op.getAttrOfType<IntegerAttr>(dist::DistDialect::kStreamAttrName)) {
      int64_t event = startEvents.size();
      startEvents[&op] = event;
      instruction.set_stream(stream.getInt());
      instruction.add_signal_events(event);
    }
    *program->add_instructions() = std::move(instruction);
  }

  // Each buffer is freed by the last instruction that reads it (or, if none
  // does, by the one that writes it); results live to the end.
  int64_t steps = program->instructions_size();
  DenseMap<Value, MemoryCategory> categories = getMemoryCategories(function);
  SmallVector<BufferLifetime> lifetimes;
  // A buffer lives as long as its views are read.
  for (auto [view, root] : viewOf) {
    lastUse[root] = std::max(lastUse[root], lastUse[view]);
    firstUse[view] = firstUse[root];
    readElsewhere[root] = readElsewhere[root] || readElsewhere[view];
    for (int64_t unit : readInUnits[view])
      if (!llvm::is_contained(readInUnits[root], unit))
        readInUnits[root].push_back(unit);
  }
  FailureOr<SmallVector<int64_t>> copies = setSchedule(schedule);
  if (failed(copies))
    return failure();
  // An update writes the new parameter and state over the old where the
  // update reads them last (all updates are elementwise): the memory plan
  // holds one copy, as frameworks update in place.
  // A padding writes the value's elements where they are and the zeros
  // after them, where the value's buffer is grown to hold them: the padded
  // copy of a flat gradient costs no memory.
  DenseMap<int64_t, int64_t> overwrites;
  SmallVector<int64_t> plannedLast(lastUse);
  auto overwrite = [&](int64_t instruction, int64_t before, int64_t after) {
    if (viewOf.contains(before) || viewOf.contains(after) ||
        lastUse[before] != instruction || (*copies)[before] != 1 ||
        (*copies)[after] != 1 || overwrites.contains(before) ||
        program->buffers(before).dtype() != program->buffers(after).dtype())
      return;
    overwrites[after] = before;
    plannedLast[before] = lastUse[after];
    program->mutable_buffers(after)->set_overwrites(before);
  };
  for (auto &[instruction, pairs] : updates)
    for (auto [before, after] : pairs)
      overwrite(instruction, before, after);
  for (auto [instruction, before, after] : paddings)
    overwrite(instruction, before, after);
  // A buffer holds what overwrites it.
  DenseMap<int64_t, int64_t> grownBytes;
  auto getBytes = [&](int64_t id) {
    const plan::Buffer &buffer = program->buffers(id);
    return getTensorBytes(RankedTensorType::get(
        SmallVector<int64_t>(buffer.shape().begin(), buffer.shape().end()),
        getElementTypeOrSelf(values[id].getType())));
  };
  // A concatenation's input made for it (read last there, all of its
  // buffer, which is neither an argument nor shared) is made where the
  // result holds it, which then lives from the first such input's making:
  // the concat copies nothing of it, and a unit's gradient costs no more
  // than its members'.
  DenseMap<int64_t, std::pair<int64_t, int64_t>> placed;
  DenseSet<int64_t> targets;
  auto isPlain = [&](int64_t id) {
    return !viewOf.contains(id) && (*copies)[id] == 1 &&
           !microbatchStride.contains(id) && !overwrites.contains(id) &&
           !placed.contains(id);
  };
  for (auto &[instruction, result, inputs] : concats) {
    if (!isPlain(result))
      continue;
    int64_t offset = 0;
    for (int64_t input : inputs) {
      int64_t root = viewOf.lookup_or(input, input);
      int64_t bytes = getBytes(input);
      if (isPlain(root) &&
          !llvm::is_contained(llvm::make_second_range(overwrites), root) &&
          firstUse[root] >= 0 && lastUse[root] == instruction &&
          getBytes(root) == bytes &&
          program->buffers(input).view_offset_bytes() == 0 &&
          program->buffers(root).dtype() == program->buffers(result).dtype() &&
          !targets.contains(root)) {
        targets.insert(result);
        placed[root] = {result, offset};
        firstUse[result] = std::min(firstUse[result], firstUse[root]);
        program->mutable_buffers(root)->set_placed_in(result);
        program->mutable_buffers(root)->set_placed_offset_bytes(offset);
      }
      offset += bytes;
    }
  }
  for (auto [after, before] : overwrites)
    grownBytes[before] = std::max(getBytes(before), getBytes(after));
  for (int64_t id = 0; id < program->buffers_size(); ++id) {
    int64_t last = lastUse[id];
    bool isResult = last == std::numeric_limits<int64_t>::max();
    bool isView = viewOf.contains(id);
    if (!isResult && !isView && last < steps)
      program->mutable_instructions(last)->add_frees(id);
    last = plannedLast[id];
    isResult = last == std::numeric_limits<int64_t>::max();
    const plan::Buffer &buffer = program->buffers(id);
    int64_t bytes = isView || overwrites.contains(id) || placed.contains(id)
                        ? 0
                        : grownBytes.lookup_or(id, getBytes(id));
    if (!isView && (*copies)[id] > 1)
      bytes = (*copies)[id] * buffer.slot_stride_bytes();
    if (buffer.step_slots() > 1)
      bytes = buffer.step_slots() * buffer.step_slot_stride_bytes();
    MemoryCategory category =
        categories.lookup_or(values[id], MemoryCategory::Activation);
    lifetimes.push_back(
        {bytes, firstUse[id], isResult ? steps : last, category});
  }
  MemoryPlan memory = planMemory(lifetimes);
  setBreakdown(memory.peakBreakdown, *program->mutable_peak_memory());
  setBreakdown(memory.categoryPeaks, *program->mutable_category_peaks());
  // Views and placed inputs lie in buffers with their own offsets.
  auto getOffset = [&](int64_t id) {
    return memory.offsetsBytes[overwrites.lookup_or(id, id)];
  };
  for (int64_t id = 0; id < program->buffers_size(); ++id) {
    int64_t root = viewOf.lookup_or(id, id);
    int64_t offset = getOffset(root);
    if (auto it = placed.find(root); it != placed.end())
      offset = getOffset(it->second.first) + it->second.second;
    program->mutable_buffers(id)->set_arena_offset_bytes(
        offset + program->buffers(id).view_offset_bytes());
  }
  program->set_arena_bytes(memory.arenaBytes);
  return success();
}

namespace {
struct ExportPass : tessera::impl::ExportPassBase<ExportPass> {
  using ExportPassBase::ExportPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal())
        functions.push_back(function);
    StringRef rankName = dist::DistDialect::kPipelineRankAttrName;
    if (functions.empty() ||
        (functions.size() > 1 &&
         !llvm::all_of(functions, [&](func::FuncOp function) {
           return function->hasAttr(rankName);
         }))) {
      module.emitError("expects one function to export, or one per pipeline "
                       "rank ('")
          << rankName << "'), got " << functions.size() << " functions";
      return signalPassFailure();
    }
    auto rankOf = [&](func::FuncOp function) -> int64_t {
      auto rank = function->getAttrOfType<IntegerAttr>(rankName);
      return rank ? rank.getInt() : 0;
    };
    llvm::stable_sort(functions, [&](func::FuncOp a, func::FuncOp b) {
      return rankOf(a) < rankOf(b);
    });
    dist::MeshOp mesh;
    for (func::FuncOp function : functions) {
      FailureOr<dist::MeshOp> found = getFunctionMesh(function);
      if (failed(found))
        return signalPassFailure();
      if (*found && mesh && *found != mesh) {
        function.emitError("the pipeline stages name different meshes");
        return signalPassFailure();
      }
      if (*found)
        mesh = *found;
    }
    // Pipeline stages that shard nothing (one microbatch, no other axis)
    // name no mesh: theirs is the module's, which holds the pipeline axis.
    if (!mesh && functions.size() > 1) {
      auto meshes = llvm::to_vector(module.getOps<dist::MeshOp>());
      if (meshes.size() == 1)
        mesh = meshes.front();
    }

    plan::Plan plan;
    plan.set_format_version(plan::PLAN_FORMAT_VERSION);
    StringRef source = functions.front().getSymName();
    if (functions.size() > 1)
      source.consume_back("_stage0");
    plan.set_source_model(source.str());
    SmallVector<int64_t> sizes;
    if (mesh) {
      for (auto [name, size] :
           llvm::zip(mesh.getAxisNames(), mesh.getShape())) {
        plan::Mesh::Axis *axis = plan.mutable_mesh()->add_axes();
        axis->set_name(cast<StringAttr>(name).str());
        axis->set_size(size);
        sizes.push_back(size);
      }
    }
    // Each program runs on all ranks, or on those at its coordinate of the
    // pipeline axis.
    std::optional<int64_t> pipelineAxis =
        mesh ? mesh.getAxisIndex(kPipelineAxis) : std::nullopt;
    int64_t stages = pipelineAxis ? sizes[*pipelineAxis] : 1;
    int64_t stride = 1;
    for (int64_t axis = sizes.size() - 1; pipelineAxis && axis > *pipelineAxis;
         --axis)
      stride *= sizes[axis];
    int64_t devices = 1;
    for (int64_t size : sizes)
      devices *= size;
    for (auto [index, function] : llvm::enumerate(functions)) {
      bool pipelined = functions.size() > 1;
      if (pipelined && (rankOf(function) != static_cast<int64_t>(index) ||
                        stages != static_cast<int64_t>(functions.size()))) {
        function.emitError("cannot export: expects one function per "
                           "coordinate of the mesh axis \"")
            << kPipelineAxis << "\", got " << functions.size()
            << " for a size of " << stages;
        return signalPassFailure();
      }
      SmallVector<int64_t> ranks;
      for (int64_t rank = 0; rank < devices; ++rank)
        if (!pipelined || rank / stride % stages == static_cast<int64_t>(index))
          ranks.push_back(rank);
      if (failed(
              PlanBuilder(function, mesh).build(*plan.add_programs(), ranks)))
        return signalPassFailure();
    }

    plan.set_checksum(plan::computeChecksum(plan));
    std::string bytes = plan::serializePlan(plan, text);
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(output, &error);
    if (bytes.empty() || !file) {
      module.emitError("cannot write the plan: ") << error;
      return signalPassFailure();
    }
    file->os() << bytes;
    file->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace
