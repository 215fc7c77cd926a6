//===- Plan.cpp - Loading and validating plans ----------------------------===//

#include "tessera/runtime/Plan.h"

#include "tessera/runtime/Manifest.h"

#include "PlanChecksum.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

using namespace tessera;
using namespace tessera::runtime;

DType runtime::getDType(plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return DType::F32;
  case plan::F64:
    return DType::F64;
  case plan::F16:
    return DType::F16;
  case plan::BF16:
    return DType::BF16;
  case plan::I32:
    return DType::I32;
  case plan::I64:
    return DType::I64;
  case plan::I1:
    return DType::I1;
  default:
    return DType::F32;
  }
}

Mesh runtime::getMesh(const plan::Plan &plan) {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  for (const plan::Mesh::Axis &axis : plan.mesh().axes()) {
    names.push_back(axis.name());
    sizes.push_back(axis.size());
  }
  return Mesh(std::move(names), std::move(sizes));
}

static KernelAttrs
getAttrs(const google::protobuf::Map<std::string, plan::AttrValue> &planAttrs) {
  KernelAttrs attrs;
  for (const auto &[name, value] : planAttrs) {
    switch (value.value_case()) {
    case plan::AttrValue::kI:
      attrs.ints[name] = value.i();
      break;
    case plan::AttrValue::kF:
      attrs.floats[name] = value.f();
      break;
    case plan::AttrValue::kInts:
      attrs.lists[name].assign(value.ints().values().begin(),
                               value.ints().values().end());
      break;
    case plan::AttrValue::kDense:
      attrs.bytes[name] = value.dense();
      break;
    case plan::AttrValue::VALUE_NOT_SET:
      break;
    }
  }
  return attrs;
}

KernelAttrs runtime::getKernelAttrs(const plan::Kernel &kernel) {
  KernelAttrs attrs = getAttrs(kernel.attrs());
  for (const plan::FusedStep &planStep : kernel.fused_steps()) {
    FusedStep &step = attrs.fusedSteps.emplace_back();
    step.op = planStep.op();
    step.operands.assign(planStep.operands().begin(),
                         planStep.operands().end());
    step.attrs = getAttrs(planStep.attrs());
    step.dtype = getDType(planStep.dtype());
  }
  attrs.fusedResults.assign(kernel.fused_results().begin(),
                            kernel.fused_results().end());
  return attrs;
}

const plan::Program *runtime::getProgramOfRank(const plan::Plan &plan,
                                               int64_t rank) {
  for (const plan::Program &program : plan.programs())
    for (int64_t r : program.ranks())
      if (r == rank)
        return &program;
  return nullptr;
}

Status runtime::parseConsistency(const std::string &text,
                                 Consistency &consistency) {
  if (text == "sync" || text == "async") {
    consistency = {text == "sync" ? plan::SYNC : plan::ASYNC, 0};
    return Status::success();
  }
  const std::string prefix = "ssp=";
  if (text.compare(0, prefix.size(), prefix) == 0) {
    std::string bound = text.substr(prefix.size());
    char *end = nullptr;
    errno = 0;
    long long staleness = std::strtoll(bound.c_str(), &end, 10);
    if (!bound.empty() && *end == '\0' && errno == 0 && staleness >= 0 &&
        staleness <= kMaxSteps) {
      consistency = {plan::SSP, staleness};
      return Status::success();
    }
  }
  return invalidArgument("expects sync, async or ssp=K (K steps, at least "
                         "0), got '" +
                         text + "'");
}

std::string runtime::formatConsistency(const Consistency &consistency) {
  switch (consistency.mode) {
  case plan::ASYNC:
    return "async";
  case plan::SSP:
    return "ssp=" + std::to_string(consistency.staleness);
  default:
    return "sync";
  }
}

Expected<plan::Plan> runtime::loadPlan(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return dataError("cannot open plan '" + path + "'");
  std::stringstream bytes;
  bytes << file.rdbuf();
  // Binary as compile writes it, or text (compile --text).
  plan::Plan plan;
  if (!plan.ParseFromString(bytes.str())) {
    // The text parser reports its errors through a logger of its own.
    google::protobuf::TextFormat::Parser parser;
    class Silent : public google::protobuf::io::ErrorCollector {
    public:
      void AddError(int, google::protobuf::io::ColumnNumber,
                    const std::string &) override {}
    } silent;
    parser.RecordErrorsTo(&silent);
    plan.Clear();
    if (!parser.ParseFromString(bytes.str(), &plan))
      return dataError("'" + path +
                       "' is not a Tessera plan (it does not parse)");
  }
  if (plan.checksum() != 0) {
    uint64_t computed = plan::computeChecksum(plan);
    if (computed != plan.checksum()) {
      char text[80];
      std::snprintf(text, sizeof text,
                    "%016llx and its contents hash to %016llx",
                    static_cast<unsigned long long>(plan.checksum()),
                    static_cast<unsigned long long>(computed));
      return dataError("plan '" + path + "' is damaged: its checksum says " +
                       text +
                       " (a plan edited by hand loads without its checksum)");
    }
  }
  if (Status error = validatePlan(plan); !error.ok())
    return error.withPrefix("invalid plan '" + path + "': ");
  return plan;
}

/// The most steps a steady program's entries lag its run: one per pipeline
/// rank at most.
static constexpr int64_t kMaxStepLag = kMaxDevices;

namespace {

/// Validates one program; every message names where it looked.
class ProgramValidator {
public:
  ProgramValidator(const plan::Program &program, const Mesh &mesh,
                   int64_t index)
      : program(program), mesh(mesh),
        where("program " + std::to_string(index)) {}

  Status run();

private:
  Status checkBuffer(int64_t id, const std::string &what) const;
  Status checkCollective(const plan::Collective &collective) const;
  Status checkAxisIndex(const plan::AxisIndex &axisIndex) const;
  Status checkTransfer(const plan::SendRecv &transfer) const;
  Status checkMemoryPlan() const;
  /// Checks that buffer `b` is a piece of an argument's or result's global
  /// shape as its dim (and flat) axes lay it out.
  template <typename Message>
  Status checkLayout(const Message &message, const plan::Buffer &b,
                     const std::string &what) const;
  /// Checks the units and the schedule: units in order, each run once per
  /// microbatch, slots in range.
  Status checkSchedule() const;
  /// The unit instruction `index` belongs to (-1: none).
  int64_t getUnitOf(int64_t index) const;
  /// Checks a kernel's tensors and attributes as its kernel will (the
  /// buffers exist by now): every attribute the kernel reads must be in the
  /// plan, which carries the op's defaults too.
  Status checkKernelInstruction(const plan::Kernel &kernel) const;
  const plan::Buffer &buffer(int64_t id) const { return program.buffers(id); }
  /// The buffer whose bytes `id` names: itself, or what it is a view of.
  int64_t getRoot(int64_t id) const {
    return buffer(id).has_view_of() ? buffer(id).view_of() : id;
  }

  const plan::Program &program;
  const Mesh &mesh;
  std::string where;
  std::vector<bool> defined;
  std::vector<bool> freed;
  /// Per buffer, the instructions that define and free it (-1: argument /
  /// never freed).
  std::vector<int64_t> definedAt, freedAt;
  /// Collectives started on a stream and not yet waited for, by event: the
  /// buffers they read and write.
  std::map<int64_t, std::pair<int64_t, int64_t>> inFlight;
  std::set<int64_t> usedEvents;
};

} // namespace

Status ProgramValidator::checkBuffer(int64_t id,
                                     const std::string &what) const {
  if (id < 0 || id >= program.buffers_size())
    return invalidPlan(what + " names buffer " + std::to_string(id) +
                       ", expected < " +
                       std::to_string(program.buffers_size()));
  return Status::success();
}

Status
ProgramValidator::checkKernelInstruction(const plan::Kernel &kernel) const {
  // The checks read no element, but a tensor without memory is an error to
  // them: any address stands in for the arena's.
  static uint8_t standIn;
  std::vector<Tensor> tensors;
  tensors.reserve(kernel.inputs_size() + kernel.outputs_size());
  auto add = [&](int64_t id) {
    const plan::Buffer &b = buffer(id);
    tensors.push_back(Tensor{
        getDType(b.dtype()), {b.shape().begin(), b.shape().end()}, &standIn});
    return &tensors.back();
  };
  for (const plan::FusedStep &step : kernel.fused_steps())
    if (step.dtype() == plan::DTYPE_UNSPECIFIED ||
        !plan::DType_IsValid(step.dtype()))
      return invalidPlan(kernel.op() + ": a fused step '" + step.op() +
                         "' has no element type");
  std::vector<const Tensor *> inputs;
  std::vector<Tensor *> outputs;
  for (int64_t id : kernel.inputs())
    inputs.push_back(add(id));
  for (int64_t id : kernel.outputs())
    outputs.push_back(add(id));
  return checkKernel(kernel.op(), getKernelAttrs(kernel), inputs, outputs);
}

static std::string
shapeText(const google::protobuf::RepeatedField<int64_t> &s) {
  return formatShape({s.begin(), s.end()});
}

Status
ProgramValidator::checkAxisIndex(const plan::AxisIndex &axisIndex) const {
  for (const plan::DimAxes &group : axisIndex.groups()) {
    std::set<std::string> seen;
    for (const std::string &axis : group.axes()) {
      if (mesh.getAxisIndex(axis) < 0 &&
          (axis != kMicrobatchAxis || program.units().empty()))
        return invalidPlan("axis_index names unknown mesh axis \"" + axis +
                           "\"");
      if (!seen.insert(axis).second)
        return invalidPlan("axis_index names mesh axis \"" + axis +
                           "\" twice in a group");
    }
  }
  if (Status error = checkBuffer(axisIndex.output(), "axis_index"); !error.ok())
    return error;
  const plan::Buffer &out = buffer(axisIndex.output());
  if (out.dtype() != plan::I64 || out.shape_size() != 1 ||
      out.shape(0) != axisIndex.groups_size())
    return invalidPlan("axis_index writes a buffer of " +
                       std::to_string(axisIndex.groups_size()) +
                       " i64 elements, got " + shapeText(out.shape()) + " of " +
                       plan::DType_Name(out.dtype()));
  return Status::success();
}

Status
ProgramValidator::checkCollective(const plan::Collective &collective) const {
  const std::string name = plan::CollectiveKind_Name(collective.kind());
  if (collective.kind() == plan::COLLECTIVE_UNSPECIFIED ||
      !plan::CollectiveKind_IsValid(collective.kind()))
    return invalidPlan("unknown collective kind " +
                       std::to_string(collective.kind()));
  if (collective.mesh_axes().empty())
    return invalidPlan(name + " names no mesh axis");
  std::set<std::string> seen;
  int64_t groupSize = 1;
  for (const std::string &axis : collective.mesh_axes()) {
    int64_t index = mesh.getAxisIndex(axis);
    if (index < 0)
      return invalidPlan(name + " names unknown mesh axis \"" + axis + "\"");
    if (!seen.insert(axis).second)
      return invalidPlan(name + " names mesh axis \"" + axis + "\" twice");
    groupSize *= mesh.getAxisSizes()[index];
  }
  for (int64_t id : {collective.input(), collective.output()})
    if (Status error = checkBuffer(id, name); !error.ok())
      return error;
  const plan::Buffer &in = buffer(collective.input());
  const plan::Buffer &out = buffer(collective.output());
  if (in.dtype() != out.dtype())
    return invalidPlan(name + " changes the dtype");
  if (in.shape_size() != out.shape_size())
    return invalidPlan(name + " changes the rank");
  int64_t rank = in.shape_size();
  auto checkDim = [&](int64_t dim) -> Status {
    if (dim < 0 || dim >= rank)
      return invalidPlan(name + " dim " + std::to_string(dim) +
                         " is out of range for rank " + std::to_string(rank));
    return Status::success();
  };
  std::vector<int64_t> expected(in.shape().begin(), in.shape().end());
  auto divide = [&](int64_t dim) -> Status {
    if (expected[dim] % groupSize != 0)
      return invalidPlan(name + " dim " + std::to_string(dim) + " of size " +
                         std::to_string(expected[dim]) +
                         " is not divisible by the group size " +
                         std::to_string(groupSize));
    expected[dim] /= groupSize;
    return Status::success();
  };
  Status error;
  switch (collective.kind()) {
  case plan::ALL_GATHER:
    if (!(error = checkDim(collective.dim())).ok())
      return error;
    expected[collective.dim()] *= groupSize;
    break;
  case plan::REDUCE_SCATTER:
  case plan::ALL_SLICE:
    if (!(error = checkDim(collective.dim())).ok() ||
        !(error = divide(collective.dim())).ok())
      return error;
    break;
  case plan::ALL_TO_ALL:
    if (!(error = checkDim(collective.dim())).ok() ||
        !(error = checkDim(collective.concat_dim())).ok() ||
        !(error = divide(collective.dim())).ok())
      return error;
    expected[collective.concat_dim()] *= groupSize;
    break;
  case plan::BROADCAST:
    if (collective.root() < 0 || collective.root() >= groupSize)
      return invalidPlan(name + " root " + std::to_string(collective.root()) +
                         " is out of range for group size " +
                         std::to_string(groupSize));
    break;
  case plan::COLLECTIVE_PERMUTE: {
    const auto &pairs = collective.source_target_pairs();
    if (pairs.size() % 2 != 0)
      return invalidPlan(name + " has an odd number of pair indices");
    for (int64_t index : pairs)
      if (index < 0 || index >= groupSize)
        return invalidPlan(name + " index " + std::to_string(index) +
                           " is out of range for group size " +
                           std::to_string(groupSize));
    break;
  }
  default:
    break;
  }
  if (collective.kind() == plan::ALL_REDUCE ||
      collective.kind() == plan::REDUCE_SCATTER) {
    if (collective.reduction() == plan::REDUCTION_UNSPECIFIED ||
        !plan::ReductionKind_IsValid(collective.reduction()))
      return invalidPlan(name + " has no reduction kind");
  }
  if (!std::equal(expected.begin(), expected.end(), out.shape().begin()))
    return invalidPlan(name + " of " + shapeText(in.shape()) +
                       " over a group of " + std::to_string(groupSize) +
                       " cannot give " + shapeText(out.shape()));
  return Status::success();
}

Status ProgramValidator::checkMemoryPlan() const {
  // Buffers live from their definition to their free; two live at once must
  // not overlap in the arena.
  struct Interval {
    int64_t start, end, offset, bytes, id;
  };
  std::vector<Interval> intervals;
  int64_t last = program.instructions_size();
  for (int64_t id = 0; id < program.buffers_size(); ++id) {
    const plan::Buffer &b = buffer(id);
    if (b.has_view_of())
      continue; // checked against its buffer in run()
    int64_t bytes = getNumElements({b.shape().begin(), b.shape().end()}) *
                    getDTypeBytes(getDType(b.dtype()));
    // The slots' extent and the end are summed without overflow: a plan's
    // numbers may be anything.
    int64_t slotBytes = 0, end = 0;
    bool overflows = b.slots() > 1 &&
                     (__builtin_mul_overflow(
                          b.slots() - 1, b.slot_stride_bytes(), &slotBytes) ||
                      __builtin_add_overflow(bytes, slotBytes, &bytes));
    overflows =
        overflows ||
        (b.step_slots() > 1 &&
         (__builtin_mul_overflow(b.step_slots() - 1, b.step_slot_stride_bytes(),
                                 &slotBytes) ||
          __builtin_add_overflow(bytes, slotBytes, &bytes)));
    if (overflows || b.arena_offset_bytes() < 0 ||
        __builtin_add_overflow(b.arena_offset_bytes(), bytes, &end) ||
        end > program.arena_bytes())
      return invalidPlan(
          "buffer " + std::to_string(id) + " at offset " +
          std::to_string(b.arena_offset_bytes()) + " with " +
          (overflows ? std::string("more than 2^63") : std::to_string(bytes)) +
          " bytes lies outside the arena of " +
          std::to_string(program.arena_bytes()) + " bytes");
    intervals.push_back({definedAt[id], freedAt[id] < 0 ? last : freedAt[id],
                         b.arena_offset_bytes(), bytes, id});
  }
  std::sort(
      intervals.begin(), intervals.end(),
      [](const Interval &a, const Interval &b) { return a.offset < b.offset; });
  // Sweep by offset: an interval overlaps in memory only with those that
  // start before it ends; check their lifetimes.
  for (size_t i = 0; i < intervals.size(); ++i)
    for (size_t j = i + 1;
         j < intervals.size() &&
         intervals[j].offset < intervals[i].offset + intervals[i].bytes;
         ++j) {
      const Interval &a = intervals[i], &b = intervals[j];
      if (a.bytes == 0 || b.bytes == 0)
        continue;
      // A buffer written in place of another takes over its bytes.
      auto overwrites = [&](const Interval &x, const Interval &y) {
        return buffer(x.id).has_overwrites() &&
               buffer(x.id).overwrites() == y.id;
      };
      // A concat's input made in place lies in its result.
      auto placedIn = [&](const Interval &x, const Interval &y) {
        return buffer(x.id).has_placed_in() && buffer(x.id).placed_in() == y.id;
      };
      if (overwrites(a, b) || overwrites(b, a) || placedIn(a, b) ||
          placedIn(b, a))
        continue;
      if (a.start <= b.end && b.start <= a.end)
        return invalidPlan("buffers " + std::to_string(a.id) + " and " +
                           std::to_string(b.id) +
                           " overlap in the arena while both live");
    }
  return Status::success();
}

int64_t ProgramValidator::getUnitOf(int64_t index) const {
  for (int unit = 0; unit < program.units_size(); ++unit)
    if (index >= program.units(unit).begin() &&
        index < program.units(unit).end())
      return unit;
  return -1;
}

Status ProgramValidator::checkSchedule() const {
  if (program.units().empty()) {
    if (!program.schedule().empty())
      return invalidPlan("the program has a schedule but no units");
    return Status::success();
  }
  int64_t m = program.microbatches();
  if (m < 1)
    return invalidPlan("a program with units needs 1 or more microbatches, "
                       "got " +
                       std::to_string(m));
  int64_t previousEnd = 0;
  for (int unit = 0; unit < program.units_size(); ++unit) {
    const plan::Unit &u = program.units(unit);
    if (u.begin() < previousEnd || u.end() < u.begin() ||
        u.end() > program.instructions_size())
      return invalidPlan("unit " + std::to_string(unit) + " ('" + u.name() +
                         "') spans instructions [" + std::to_string(u.begin()) +
                         ", " + std::to_string(u.end()) +
                         "), expected a range after the previous unit's");
    previousEnd = u.end();
  }
  int64_t slots = 1;
  for (const plan::Buffer &b : program.buffers())
    slots = std::max<int64_t>(slots, b.slots());
  // Each unit runs once per microbatch; a slot is reused only by a later
  // microbatch.
  std::set<std::pair<int64_t, int64_t>> runs;
  for (int index = 0; index < program.schedule_size(); ++index) {
    const plan::ScheduleEntry &entry = program.schedule(index);
    std::string at = "schedule entry " + std::to_string(index);
    if (entry.unit() < 0 || entry.unit() >= program.units_size())
      return invalidPlan(at + " names unit " + std::to_string(entry.unit()) +
                         " of " + std::to_string(program.units_size()));
    if (entry.microbatch() < 0 || entry.microbatch() >= m)
      return invalidPlan(at + " runs microbatch " +
                         std::to_string(entry.microbatch()) + " of " +
                         std::to_string(m));
    if (entry.slot() < 0 || entry.slot() >= slots)
      return invalidPlan(at + " uses slot " + std::to_string(entry.slot()) +
                         " of " + std::to_string(slots));
    if (entry.step_offset() != 0 &&
        (!program.steady() || entry.step_offset() > 0 ||
         entry.step_offset() < -kMaxStepLag))
      return invalidPlan(
          at + " runs step offset " + std::to_string(entry.step_offset()) +
          ", expected 0 (or from -" + std::to_string(kMaxStepLag) +
          " to 0 in a steady program)");
    if (!runs.insert({entry.unit(), entry.microbatch()}).second)
      return invalidPlan(at + " runs unit '" +
                         program.units(entry.unit()).name() +
                         "' on microbatch " +
                         std::to_string(entry.microbatch()) + " a second time");
  }
  // m is compared first: the product of a huge count would overflow.
  if (m > static_cast<int64_t>(runs.size()) ||
      static_cast<int64_t>(runs.size()) != program.units_size() * m)
    return invalidPlan("the schedule runs " + std::to_string(runs.size()) +
                       " units, expected each of " +
                       std::to_string(program.units_size()) + " on each of " +
                       std::to_string(m) + " microbatches");
  int64_t unitsEnd = program.units().rbegin()->end();
  if ((program.deferred_begin() != 0 || program.deferred_end() != 0) &&
      (!program.steady() || program.deferred_begin() < unitsEnd ||
       program.deferred_end() < program.deferred_begin() ||
       program.deferred_end() > program.instructions_size()))
    return invalidPlan("the deferred instructions [" +
                       std::to_string(program.deferred_begin()) + ", " +
                       std::to_string(program.deferred_end()) +
                       ") are not a range after the units of a steady "
                       "program");
  if (program.weight_delay() != 0 &&
      (!program.steady() || program.weight_delay() < 0 ||
       program.weight_delay() > kMaxStepLag))
    return invalidPlan("the weights lag the step by " +
                       std::to_string(program.weight_delay()) +
                       " updates, expected 0 (or up to " +
                       std::to_string(kMaxStepLag) + " in a steady program)");
  if (program.has_update_after_entry() &&
      (!program.steady() || program.update_after_entry() < 0 ||
       program.update_after_entry() >= program.schedule_size()))
    return invalidPlan("the updates run after schedule entry " +
                       std::to_string(program.update_after_entry()) +
                       ", expected an entry of a steady program");
  // Every run of a unit's send is waited for once, by its entry or a later
  // one.
  std::set<std::pair<int64_t, int64_t>> started;
  for (int index = 0; index < program.schedule_size(); ++index) {
    const plan::ScheduleEntry &entry = program.schedule(index);
    const plan::Unit &unit = program.units(entry.unit());
    for (int64_t i = unit.begin(); i < unit.end(); ++i)
      if (program.instructions(i).has_send_recv() &&
          program.instructions(i).send_recv().is_send() &&
          program.instructions(i).stream() != 0)
        started.insert({i, entry.microbatch()});
    for (const plan::SendRun &send : entry.wait_sends())
      if (!started.erase({send.instruction(), send.microbatch()}))
        return invalidPlan(
            "schedule entry " + std::to_string(index) +
            " waits for the send of instruction " +
            std::to_string(send.instruction()) + " on microbatch " +
            std::to_string(send.microbatch()) + ", which is not in flight");
  }
  if (!started.empty())
    return invalidPlan(
        "the send of instruction " + std::to_string(started.begin()->first) +
        " on microbatch " + std::to_string(started.begin()->second) +
        " is never waited for");
  return Status::success();
}

/// The local shape of a piece of `globalShape` split by `dimAxes`, or a
/// message naming what does not fit.
static Status getPieceShape(const std::vector<int64_t> &globalShape,
                            const std::vector<std::vector<std::string>> &dims,
                            const Mesh &mesh, const std::string &what,
                            std::vector<int64_t> &shape) {
  if (dims.size() != globalShape.size())
    return invalidPlan(what + " has " + std::to_string(dims.size()) +
                       " dim axes for a global shape of rank " +
                       std::to_string(globalShape.size()));
  shape = globalShape;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t group = 1;
    for (const std::string &axis : dims[d]) {
      int64_t index = mesh.getAxisIndex(axis);
      if (index < 0)
        return invalidPlan(what + " names unknown mesh axis \"" + axis + "\"");
      group *= mesh.getAxisSizes()[index];
    }
    if (globalShape[d] < 0 || globalShape[d] % group != 0)
      return invalidPlan(what + " dim " + std::to_string(d) + " of size " +
                         std::to_string(globalShape[d]) +
                         " does not split evenly over " +
                         std::to_string(group) + " devices");
    shape[d] = globalShape[d] / group;
  }
  return Status::success();
}

template <typename Message>
Status ProgramValidator::checkLayout(const Message &message,
                                     const plan::Buffer &b,
                                     const std::string &what) const {
  PieceLayout layout = getLayout(message);
  std::vector<int64_t> shape,
      tiled(message.global_shape().begin(), message.global_shape().end());
  if (!layout.paddedShape.empty()) {
    bool covers = layout.paddedShape.size() == tiled.size();
    for (size_t d = 0; covers && d < tiled.size(); ++d)
      covers = layout.paddedShape[d] >= tiled[d];
    if (!covers)
      return invalidPlan(what + " has padded shape " +
                         shapeText(message.padded_shape()) +
                         " that does not cover its global shape " +
                         shapeText(message.global_shape()));
    tiled = layout.paddedShape;
  }
  if (Status error = getPieceShape(tiled, layout.dimAxes, mesh, what, shape);
      !error.ok())
    return error;
  if (int64_t parts = layout.microbatchesMajor; parts != 0) {
    if (parts < 0 || shape.empty() || shape[0] % parts != 0)
      return invalidPlan(
          what + " holds " + std::to_string(parts) +
          " microbatches major in dim 0, which do not split " +
          (shape.empty()
               ? std::string("a piece of rank 0")
               : "its piece of " + std::to_string(shape[0]) + " rows"));
    if (!layout.flatAxes.empty() || !layout.paddedShape.empty())
      return invalidPlan(what + " holds microbatches major in dim 0 and is "
                                "stored flat or padded");
  }
  if (!layout.flatAxes.empty()) {
    for (const std::string &axis : layout.flatAxes)
      if (mesh.getAxisIndex(axis) < 0)
        return invalidPlan(what + " names unknown mesh axis \"" + axis + "\"");
    int64_t group = mesh.getGroup(0, layout.flatAxes).size;
    std::optional<int64_t> elements = getCheckedNumElements(shape);
    if (!elements || *elements > std::numeric_limits<int64_t>::max() - group)
      return invalidPlan(what + " has a piece of more elements than int64 "
                                "counts");
    shape = {(*elements + group - 1) / group};
  }
  if (!message.members().empty()) {
    // Each row holds each member's piece (all of it in a 1-d buffer).
    int64_t rank = message.global_shape_size();
    int64_t rows = rank == 2 ? message.global_shape(0) : 1, elements = 0;
    bool split = true;
    for (const plan::Member &member : message.members()) {
      int64_t pieces = 1;
      for (const plan::DimAxes &dim : member.dim_axes()) {
        for (const std::string &axis : dim.axes())
          if (mesh.getAxisIndex(axis) < 0)
            return invalidPlan(what + " member '" + member.name() +
                               "' names unknown mesh axis \"" + axis + "\"");
        if (dim.axes_size() > 0 &&
            __builtin_mul_overflow(
                pieces,
                mesh.getGroup(0, {dim.axes().begin(), dim.axes().end()}).size,
                &pieces))
          return invalidPlan(what + " member '" + member.name() +
                             "' is split into more pieces than int64 counts");
      }
      split &= pieces == rows;
      std::optional<int64_t> count = getCheckedNumElements(
          {member.global_shape().begin(), member.global_shape().end()});
      if (!count ||
          __builtin_add_overflow(elements, *count / pieces, &elements))
        return invalidPlan(what + " member '" + member.name() +
                           "' has global shape " +
                           shapeText(member.global_shape()) +
                           ", whose elements int64 does not count");
    }
    if (rank < 1 || rank > 2 || !split ||
        message.global_shape(rank - 1) != elements)
      return invalidPlan(what + " of global shape " +
                         shapeText(message.global_shape()) +
                         " is not its members' " + std::to_string(elements) +
                         " elements in a row");
  }
  if (!std::equal(shape.begin(), shape.end(), b.shape().begin(),
                  b.shape().end())) {
    google::protobuf::RepeatedField<int64_t> piece(shape.begin(), shape.end());
    return invalidPlan(what + " has local shape " + shapeText(b.shape()) +
                       ", not its piece " + shapeText(piece) +
                       " of global shape " + shapeText(message.global_shape()));
  }
  return Status::success();
}

Status ProgramValidator::run() {
  auto fail = [&](const std::string &message) {
    return invalidPlan(where + ": " + message);
  };
  int64_t numBuffers = program.buffers_size();
  // The steps a steady program's run reaches back to (its entries' offsets
  // are checked with the schedule).
  int64_t lag = program.deferred_end() > program.deferred_begin() ? 1 : 0;
  for (const plan::ScheduleEntry &entry : program.schedule())
    if (entry.step_offset() < 0 && entry.step_offset() >= -kMaxStepLag)
      lag = std::max<int64_t>(lag, -entry.step_offset());
  defined.assign(numBuffers, false);
  freed.assign(numBuffers, false);
  definedAt.assign(numBuffers, -1);
  freedAt.assign(numBuffers, -1);
  for (int64_t id = 0; id < numBuffers; ++id) {
    const plan::Buffer &b = buffer(id);
    if (b.id() != id)
      return fail("buffer #" + std::to_string(id) + " has id " +
                  std::to_string(b.id()));
    if (b.dtype() == plan::DTYPE_UNSPECIFIED || !plan::DType_IsValid(b.dtype()))
      return fail("buffer " + std::to_string(id) + " has no dtype");
    int64_t elements = 1;
    for (int64_t size : b.shape()) {
      if (size < 0)
        return fail("buffer " + std::to_string(id) + " has a negative size");
      if (size > 0 && elements > (int64_t(1) << 40) / size)
        return fail("buffer " + std::to_string(id) + " of shape " +
                    shapeText(b.shape()) +
                    " has more than 2^40 elements, the most a plan's buffer "
                    "holds");
      elements *= size;
    }
    if (b.slots() < 0 ||
        (b.slots() > 1 &&
         b.slot_stride_bytes() < elements * getDTypeBytes(getDType(b.dtype()))))
      return fail("buffer " + std::to_string(id) + " has " +
                  std::to_string(b.slots()) + " slots " +
                  std::to_string(b.slot_stride_bytes()) +
                  " bytes apart, closer than its size");
    if (b.slots() > 1 && b.has_view_of())
      return fail("view buffer " + std::to_string(id) +
                  " has slots (its buffer's are its own)");
    if (b.step_slots() < 0 || (b.step_slots() > 1 && !program.steady()) ||
        (b.step_slots() > 1 &&
         (b.has_view_of() || b.slots() > 1 ||
          b.step_slot_stride_bytes() <
              elements * getDTypeBytes(getDType(b.dtype())))))
      return fail("buffer " + std::to_string(id) + " has " +
                  std::to_string(b.step_slots()) +
                  " step slots, expected them only on a steady program's "
                  "buffer that is neither a view nor slotted, each at least "
                  "its size apart");
    if (b.step_slots() > 1 && b.step_slots() <= lag)
      return fail("buffer " + std::to_string(id) + " has " +
                  std::to_string(b.step_slots()) +
                  " step slots, but the program's runs reach back " +
                  std::to_string(lag) + " steps");
    if (b.has_overwrites()) {
      int64_t of = b.overwrites();
      if (of < 0 || of >= id || buffer(of).has_view_of() || b.has_view_of() ||
          buffer(of).has_overwrites() || buffer(of).dtype() != b.dtype() ||
          buffer(of).arena_offset_bytes() != b.arena_offset_bytes() ||
          b.slots() > 1 || buffer(of).slots() > 1)
        return fail("buffer " + std::to_string(id) + " overwrites buffer " +
                    std::to_string(of) +
                    ", expected an earlier buffer of its dtype and arena "
                    "offset, neither a view nor slotted");
    }
    if (b.has_placed_in()) {
      int64_t in = b.placed_in();
      int64_t bytes = elements * getDTypeBytes(getDType(b.dtype()));
      // The later buffer is not checked yet: its size is counted here
      // without overflow, and the offsets compared without sums.
      std::optional<int64_t> inElements;
      int64_t inArenaOffset = 0;
      if (in > id && in < program.buffers_size()) {
        inElements = getCheckedNumElements(
            {buffer(in).shape().begin(), buffer(in).shape().end()});
        inArenaOffset = buffer(in).arena_offset_bytes();
      }
      if (!inElements || *inElements > (int64_t(1) << 40) ||
          buffer(in).has_view_of() || buffer(in).has_placed_in() ||
          b.has_view_of() || b.slots() > 1 || buffer(in).slots() > 1 ||
          buffer(in).dtype() != b.dtype() || b.placed_offset_bytes() < 0 ||
          b.placed_offset_bytes() >
              *inElements * getDTypeBytes(getDType(b.dtype())) - bytes ||
          inArenaOffset < 0 || b.arena_offset_bytes() < 0 ||
          b.arena_offset_bytes() - b.placed_offset_bytes() != inArenaOffset)
        return fail("buffer " + std::to_string(id) + " is placed in buffer " +
                    std::to_string(in) +
                    ", expected a later buffer of its dtype, neither a view "
                    "nor placed nor slotted, that holds it at its arena "
                    "offset");
    }
    if (!b.has_view_of()) {
      if (b.microbatch_stride_bytes() != 0 || b.view_offset_bytes() != 0)
        return fail("buffer " + std::to_string(id) +
                    " has a microbatch stride or view offset but is not a "
                    "view");
      continue;
    }
    // A view: the same bytes as an earlier buffer that is not a view.
    std::string view = "view buffer " + std::to_string(id);
    int64_t of = b.view_of();
    if (of < 0 || of >= id || buffer(of).has_view_of())
      return fail(view + " is a view of " + std::to_string(of) +
                  ", expected an earlier buffer that is not a view");
    const plan::Buffer &root = buffer(of);
    // A microbatch's rows are a 1/m part of the batch, m parts in a row.
    int64_t parts = 1;
    if (b.microbatch_stride_bytes() != 0) {
      parts = program.microbatches();
      if (parts < 1 || b.microbatch_stride_bytes() !=
                           elements * getDTypeBytes(getDType(b.dtype())))
        return fail(view + " has a microbatch stride of " +
                    std::to_string(b.microbatch_stride_bytes()) +
                    " bytes, expected its size in a program of microbatches");
    }
    // Its elements are all of the root's, or a run of them from its view
    // offset.
    // (Compared without sums or products that a plan's numbers overflow.)
    int64_t rootElements =
        getNumElements({root.shape().begin(), root.shape().end()});
    int64_t elementBytes = getDTypeBytes(getDType(b.dtype()));
    int64_t offset = b.view_offset_bytes(), whole = 0, arenaOffset = 0;
    if (root.dtype() != b.dtype() || offset < 0 || offset % elementBytes ||
        (parts > 1
             ? offset != 0 || __builtin_mul_overflow(elements, parts, &whole) ||
                   rootElements != whole
             : offset / elementBytes > rootElements - elements) ||
        __builtin_add_overflow(root.arena_offset_bytes(), offset,
                               &arenaOffset) ||
        arenaOffset != b.arena_offset_bytes())
      return fail(view + " differs from buffer " + std::to_string(of) +
                  " in dtype, size or arena offset");
  }
  if (Status error = checkSchedule(); !error.ok())
    return fail(error.message());
  for (int64_t rank : program.ranks())
    if (rank < 0 || rank >= mesh.getNumDevices())
      return fail("rank " + std::to_string(rank) + " is not in the mesh of " +
                  std::to_string(mesh.getNumDevices()) + " devices");

  for (const plan::Argument &argument : program.arguments()) {
    std::string what = "argument '" + argument.name() + "'";
    if (Status error = checkBuffer(argument.buffer(), what); !error.ok())
      return fail(error.message());
    const plan::Buffer &b = buffer(argument.buffer());
    if (b.has_view_of())
      return fail(what + " is a view buffer");
    if (defined[argument.buffer()])
      return fail(what + " reuses buffer " + std::to_string(argument.buffer()));
    defined[argument.buffer()] = true;
    if (argument.dtype() != b.dtype())
      return fail(what + " and its buffer differ in dtype");
    if (Status error = checkLayout(argument, b, what); !error.ok())
      return fail(error.message());
  }

  for (int64_t index = 0; index < program.instructions_size(); ++index) {
    const plan::Instruction &instruction = program.instructions(index);
    std::string at = "instruction " + std::to_string(index);
    std::vector<int64_t> reads, writes;
    if (instruction.has_kernel()) {
      const plan::Kernel &kernel = instruction.kernel();
      if (Expected<const OpInfo *> found = findOp(kernel.op()); !found.ok())
        return fail(at + ": " + found.message());
      reads.assign(kernel.inputs().begin(), kernel.inputs().end());
      writes.assign(kernel.outputs().begin(), kernel.outputs().end());
      at += " (" + kernel.op() + ")";
    } else if (instruction.has_collective()) {
      const plan::Collective &collective = instruction.collective();
      reads = {collective.input()};
      writes = {collective.output()};
      if (Status error = checkCollective(collective); !error.ok())
        return fail(at + ": " + error.message());
    } else if (instruction.has_send_recv()) {
      const plan::SendRecv &transfer = instruction.send_recv();
      if (Status error = checkTransfer(transfer); !error.ok())
        return fail(at + ": " + error.message());
      (transfer.is_send() ? reads : writes) = {transfer.buffer()};
      at += transfer.is_send() ? " (send)" : " (recv)";
    } else if (instruction.has_accumulate()) {
      const plan::Accumulate &accumulate = instruction.accumulate();
      reads = {accumulate.input()};
      writes = {accumulate.accumulator()};
      for (int64_t id : {accumulate.input(), accumulate.accumulator()})
        if (Status error = checkBuffer(id, at + " (accumulate)"); !error.ok())
          return fail(error.message());
      const plan::Buffer &in = buffer(accumulate.input());
      const plan::Buffer &sum = buffer(accumulate.accumulator());
      if (getUnitOf(index) < 0)
        return fail(at + " accumulates outside the units");
      if (in.dtype() != sum.dtype() ||
          !std::equal(in.shape().begin(), in.shape().end(), sum.shape().begin(),
                      sum.shape().end()))
        return fail(at + " accumulates a buffer of another dtype or shape");
      at += " (accumulate)";
    } else if (instruction.has_axis_index()) {
      const plan::AxisIndex &axisIndex = instruction.axis_index();
      if (Status error = checkAxisIndex(axisIndex); !error.ok())
        return fail(at + ": " + error.message());
      writes = {axisIndex.output()};
      at += " (axis_index)";
    } else if (instruction.wait_events().empty()) {
      return fail(at + " is empty");
    }
    // Events: a collective on a stream signals one; a wait completes it.
    for (int64_t event : instruction.wait_events()) {
      auto it = inFlight.find(event);
      if (it == inFlight.end())
        return fail(at + " waits for event " + std::to_string(event) +
                    ", which no collective in flight signals");
      inFlight.erase(it);
    }
    if (instruction.stream() != 0 || !instruction.signal_events().empty()) {
      bool startable =
          instruction.has_collective() ||
          (instruction.has_send_recv() && instruction.send_recv().is_send());
      if (!startable || instruction.stream() < 1 ||
          instruction.signal_events_size() != 1)
        return fail(at + ": only a collective or a send may run on a stream "
                         "other than 0, and it signals one event");
      int64_t event = instruction.signal_events(0);
      if (!usedEvents.insert(event).second)
        return fail(at + " signals event " + std::to_string(event) +
                    " a second time");
    }
    for (int64_t &id : reads) {
      if (Status error = checkBuffer(id, at + " reads"); !error.ok())
        return fail(error.message());
      id = getRoot(id);
    }
    for (int64_t id : writes)
      if (checkBuffer(id, at + " writes").ok() && buffer(id).has_view_of())
        return fail(at + " writes view buffer " + std::to_string(id));
    for (const auto &[event, io] : inFlight)
      for (int64_t id : reads)
        if (id == io.second)
          return fail(at + " reads buffer " + std::to_string(id) +
                      " before the wait for event " + std::to_string(event));
    for (int64_t id : reads) {
      if (!defined[id])
        return fail(at + " reads buffer " + std::to_string(id) +
                    " before it is written");
      if (freed[id])
        return fail(at + " reads buffer " + std::to_string(id) +
                    " after it is freed");
    }
    for (int64_t id : writes) {
      if (Status error = checkBuffer(id, at + " writes"); !error.ok())
        return fail(error.message());
      if (defined[id])
        return fail(at + " writes buffer " + std::to_string(id) +
                    " a second time");
      defined[id] = true;
      definedAt[id] = index;
    }
    if (instruction.has_kernel())
      if (Status error = checkKernelInstruction(instruction.kernel());
          !error.ok())
        return fail(at + ": " + error.message());
    // A unit's sends are waited for by the schedule (checkSchedule).
    bool scheduledSend = instruction.has_send_recv() &&
                         instruction.send_recv().is_send() &&
                         getUnitOf(index) >= 0;
    if (instruction.stream() != 0 && !scheduledSend)
      inFlight[instruction.signal_events(0)] = {
          reads.empty() ? -1 : reads.front(),
          writes.empty() ? -1 : writes.front()};
    // Units run many times: what a unit starts on a stream ends in it (its
    // sends aside), and nothing in flight before the units is waited in one.
    bool unitEnds = false;
    for (const plan::Unit &unit : program.units())
      unitEnds |= index + 1 == unit.begin() || index + 1 == unit.end();
    if (unitEnds && !inFlight.empty())
      return fail("event " + std::to_string(inFlight.begin()->first) +
                  " is in flight across the boundary of a unit after " + at);
    for (int64_t id : instruction.frees()) {
      if (Status error = checkBuffer(id, at + " frees"); !error.ok())
        return fail(error.message());
      if (buffer(id).has_view_of())
        return fail(at + " frees view buffer " + std::to_string(id) +
                    " (its buffer is freed instead)");
      for (const auto &[event, io] : inFlight)
        if (id == io.first || id == io.second)
          return fail(at + " frees buffer " + std::to_string(id) +
                      " while the collective of event " +
                      std::to_string(event) + " uses it");
      if (!defined[id] || freed[id])
        return fail(at + " frees buffer " + std::to_string(id) +
                    " that is not live");
      freed[id] = true;
      freedAt[id] = index;
    }
  }
  if (!inFlight.empty())
    return fail("event " + std::to_string(inFlight.begin()->first) +
                " is never waited for");
  for (int64_t id = 0; id < numBuffers; ++id)
    if (buffer(id).has_overwrites() &&
        (!defined[id] || freedAt[buffer(id).overwrites()] != definedAt[id]))
      return fail("buffer " + std::to_string(id) + " overwrites buffer " +
                  std::to_string(buffer(id).overwrites()) +
                  ", which the instruction that writes it does not free");
  for (const plan::Result &result : program.results()) {
    if (Status error = checkBuffer(result.buffer(), "a result"); !error.ok())
      return fail(error.message());
    int64_t root = getRoot(result.buffer());
    if (!defined[root] || freed[root])
      return fail("result buffer " + std::to_string(result.buffer()) +
                  " is not live at the end");
    if (result.has_updates_argument()) {
      int64_t target = result.updates_argument();
      if (target < 0 || target >= program.arguments_size())
        return fail("result buffer " + std::to_string(result.buffer()) +
                    " updates argument " + std::to_string(target) +
                    ", which does not exist");
      const plan::Buffer &argument = buffer(program.arguments(target).buffer());
      const plan::Buffer &updated = buffer(result.buffer());
      if (argument.dtype() != updated.dtype() ||
          !std::equal(argument.shape().begin(), argument.shape().end(),
                      updated.shape().begin(), updated.shape().end()))
        return fail("result buffer " + std::to_string(result.buffer()) +
                    " updates argument '" + program.arguments(target).name() +
                    "' but differs in dtype or local shape");
    }
    if (Status error =
            checkLayout(result, buffer(result.buffer()),
                        "result buffer " + std::to_string(result.buffer()));
        !error.ok())
      return fail(error.message());
  }
  if (Status error = checkMemoryPlan(); !error.ok())
    return fail(error.message());
  return Status::success();
}

Status ProgramValidator::checkTransfer(const plan::SendRecv &transfer) const {
  std::string what = transfer.is_send() ? "send" : "recv";
  int64_t axis = mesh.getAxisIndex(transfer.mesh_axis());
  if (axis < 0)
    return invalidPlan(what + " names unknown mesh axis \"" +
                       transfer.mesh_axis() + "\"");
  int64_t size = mesh.getAxisSizes()[axis];
  if (transfer.peer() < 0 || transfer.peer() >= size)
    return invalidPlan(what + " peer " + std::to_string(transfer.peer()) +
                       " is not a coordinate of axis \"" +
                       transfer.mesh_axis() + "\" (size " +
                       std::to_string(size) + ")");
  if (transfer.tag() < 0 || transfer.tag() > 32767)
    return invalidPlan(what + " tag " + std::to_string(transfer.tag()) +
                       " is outside [0, 32767]");
  for (int64_t rank : program.ranks())
    if (rank >= 0 && rank < mesh.getNumDevices() &&
        mesh.getCoordinates(rank)[axis] == transfer.peer())
      return invalidPlan(what + " on rank " + std::to_string(rank) +
                         " names itself");
  return Status::success();
}

std::vector<std::pair<int64_t, plan::Argument>>
tessera::runtime::getStepTensors(const plan::Argument &argument,
                                 int64_t index) {
  std::vector<std::pair<int64_t, plan::Argument>> tensors;
  if (argument.members().empty()) {
    tensors.emplace_back(argument.has_source_index() ? argument.source_index()
                                                     : index,
                         argument);
    return tensors;
  }
  for (const plan::Member &member : argument.members()) {
    plan::Argument one = argument;
    one.clear_members();
    one.set_name(member.name());
    *one.mutable_global_shape() = member.global_shape();
    tensors.emplace_back(member.source_index(), std::move(one));
  }
  return tensors;
}

/// Checks that the programs' arguments that stand for one argument of the
/// unpipelined step (one source index) agree on what it is, so that every
/// stage builds the same global input.
static Status checkSourcesAgree(const plan::Plan &plan) {
  std::map<int64_t, plan::Argument> sources;
  for (int index = 0; index < plan.programs_size(); ++index) {
    for (const plan::Argument &held : plan.programs(index).arguments()) {
      for (const auto &[source, argument] : getStepTensors(held, -1)) {
        if (source < 0)
          continue;
        auto [it, inserted] = sources.emplace(source, argument);
        const plan::Argument &first = it->second;
        if (!inserted && (first.name() != argument.name() ||
                          first.role() != argument.role() ||
                          first.dtype() != argument.dtype() ||
                          first.index_bound() != argument.index_bound() ||
                          !std::equal(first.global_shape().begin(),
                                      first.global_shape().end(),
                                      argument.global_shape().begin(),
                                      argument.global_shape().end())))
          return invalidPlan(
              "program " + std::to_string(index) + ": argument '" +
              argument.name() + "' (source index " + std::to_string(source) +
              ") differs from another program's in name, role, dtype, "
              "global shape or index bound");
      }
    }
  }
  // A weight stash starts as its parameter's input.
  for (const auto &[source, argument] : sources) {
    if (argument.role() != plan::WEIGHT_STASH)
      continue;
    auto param = sources.find(argument.version_of_source());
    if (param == sources.end() || param->second.role() != plan::PARAM ||
        param->second.dtype() != argument.dtype() ||
        !std::equal(param->second.global_shape().begin(),
                    param->second.global_shape().end(),
                    argument.global_shape().begin(),
                    argument.global_shape().end()))
      return invalidPlan("the weight stash '" + argument.name() +
                         "' is no version of a parameter of its dtype and "
                         "global shape (source index " +
                         std::to_string(argument.version_of_source()) + ")");
  }
  return Status::success();
}

/// The world rank at the other end of `transfer` on `rank`.
static int64_t getPeerRank(const plan::SendRecv &transfer, const Mesh &mesh,
                           int64_t rank) {
  std::vector<int64_t> coordinates = mesh.getCoordinates(rank);
  coordinates[mesh.getAxisIndex(transfer.mesh_axis())] = transfer.peer();
  return mesh.getRank(coordinates);
}

std::vector<std::pair<int64_t, int64_t>>
runtime::getTransferChannels(const plan::Plan &plan) {
  Mesh mesh = getMesh(plan);
  std::set<std::pair<int64_t, int64_t>> channels;
  for (const plan::Program &program : plan.programs())
    for (int64_t rank : program.ranks())
      for (const plan::Instruction &instruction : program.instructions())
        if (instruction.has_send_recv() && instruction.send_recv().is_send())
          channels.insert(
              {rank, getPeerRank(instruction.send_recv(), mesh, rank)});
  return {channels.begin(), channels.end()};
}

/// The transfers of `program` in the order a run makes them.
static std::vector<const plan::SendRecv *>
getTransfersInRunOrder(const plan::Program &program) {
  std::vector<const plan::SendRecv *> transfers;
  forEachRunStep(
      program,
      [&](RunStep step) {
        if (program.instructions(step.instruction).has_send_recv())
          transfers.push_back(
              &program.instructions(step.instruction).send_recv());
      },
      [](int64_t) {});
  return transfers;
}

/// Checks that the receives on each channel come in the order of its sends
/// (tags in the same order): NCCL matches a receive to the oldest send of
/// its channel, not by tag, and MPI one of the same tag.
static Status checkTransferOrder(const plan::Plan &plan, const Mesh &mesh) {
  // Per (sender, receiver): the tags sent, and the tags received, in order.
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> sent, received;
  for (const plan::Program &program : plan.programs()) {
    std::vector<const plan::SendRecv *> transfers =
        getTransfersInRunOrder(program);
    for (int64_t rank : program.ranks()) {
      for (const plan::SendRecv *transfer : transfers) {
        const plan::SendRecv &t = *transfer;
        int64_t peer = getPeerRank(t, mesh, rank);
        if (t.is_send())
          sent[{rank, peer}].push_back(t.tag());
        else
          received[{peer, rank}].push_back(t.tag());
      }
    }
  }
  for (const auto &[channel, tags] : sent) {
    if (received[channel] == tags)
      continue;
    auto text = [](const std::vector<int64_t> &list) {
      std::string joined;
      for (int64_t tag : list)
        joined += (joined.empty() ? "" : ", ") + std::to_string(tag);
      return "[" + joined + "]";
    };
    return invalidPlan("rank " + std::to_string(channel.second) +
                       " receives tags " + text(received[channel]) +
                       " from rank " + std::to_string(channel.first) +
                       ", which sends " + text(tags) +
                       ": receives must come in the order of the sends");
  }
  return Status::success();
}

/// Checks that every send of every rank has the matching receive (same
/// tag, dtype and shape) on its peer and the other way round, so that no
/// run waits forever for a transfer that never comes.
static Status checkTransfersMatch(const plan::Plan &plan, const Mesh &mesh) {
  // Per rank: its program; per program: (send?, axis, peer, tag) -> buffer.
  std::vector<int> programOf(mesh.getNumDevices(), -1);
  for (int index = 0; index < plan.programs_size(); ++index)
    for (int64_t rank : plan.programs(index).ranks())
      programOf[rank] = index;
  using Key = std::tuple<bool, std::string, int64_t, int64_t>;
  std::vector<std::map<Key, const plan::Buffer *>> transfers(
      plan.programs_size());
  for (int index = 0; index < plan.programs_size(); ++index) {
    const plan::Program &program = plan.programs(index);
    for (const plan::Instruction &instruction : program.instructions()) {
      if (!instruction.has_send_recv())
        continue;
      const plan::SendRecv &t = instruction.send_recv();
      Key key{t.is_send(), t.mesh_axis(), t.peer(), t.tag()};
      if (!transfers[index].emplace(key, &program.buffers(t.buffer())).second)
        return invalidPlan("program " + std::to_string(index) + " has two " +
                           (t.is_send() ? "sends" : "receives") + " with tag " +
                           std::to_string(t.tag()) + " to peer " +
                           std::to_string(t.peer()));
    }
  }
  for (int64_t rank = 0; rank < mesh.getNumDevices(); ++rank) {
    std::vector<int64_t> coordinates = mesh.getCoordinates(rank);
    for (const auto &[key, buffer] : transfers[programOf[rank]]) {
      const auto &[isSend, axisName, peer, tag] = key;
      int64_t axis = mesh.getAxisIndex(axisName);
      std::vector<int64_t> peerCoordinates = coordinates;
      peerCoordinates[axis] = peer;
      int64_t peerRank = mesh.getRank(peerCoordinates);
      const auto &theirs = transfers[programOf[peerRank]];
      auto match = theirs.find(Key{!isSend, axisName, coordinates[axis], tag});
      std::string what = std::string(isSend ? "send" : "receive") +
                         " with tag " + std::to_string(tag) + " from rank " +
                         std::to_string(rank) + " to rank " +
                         std::to_string(peerRank);
      if (match == theirs.end())
        return invalidPlan("the " + what + " has no matching " +
                           (isSend ? "receive" : "send"));
      if (match->second->dtype() != buffer->dtype() ||
          !std::equal(buffer->shape().begin(), buffer->shape().end(),
                      match->second->shape().begin(),
                      match->second->shape().end()))
        return invalidPlan("the " + what +
                           " and its match differ in dtype or shape");
    }
  }
  return Status::success();
}

/// Checks a parameter-server plan: the servers' plan is valid, neither side
/// holds a collective or transfer (the workers and servers meet only in
/// pushes and pulls), and the two agree on every parameter and gradient.
static Status checkParameterServer(const plan::Plan &plan) {
  const plan::ParameterServer &server = plan.parameter_server();
  const plan::Plan &servers = server.servers();
  if (servers.has_parameter_server())
    return invalidPlan("the parameter servers' plan has servers of its own");
  if (Status error = validatePlan(servers); !error.ok())
    return error.withPrefix("the parameter servers' plan: ");
  if (!plan::Consistency_IsValid(server.consistency()) ||
      server.staleness() < 0)
    return invalidPlan("the parameter servers' consistency is not one of "
                       "sync, async and ssp=K");
  if (plan.programs_size() != 1 || servers.programs_size() != 1)
    return invalidPlan("a parameter-server plan has one program for the "
                       "workers and one for the servers");
  auto exchanges = [](const plan::Program &program) {
    return std::any_of(
        program.instructions().begin(), program.instructions().end(),
        [](const plan::Instruction &instruction) {
          return instruction.has_collective() || instruction.has_send_recv();
        });
  };
  const plan::Program &worker = plan.programs(0);
  const plan::Program &update = servers.programs(0);
  if (exchanges(worker) || exchanges(update))
    return invalidPlan(
        "the parameter-server plan's " +
        std::string(exchanges(worker) ? "workers'" : "servers'") +
        " program holds a collective or transfer: its ranks "
        "meet only in the servers' pushes and pulls");
  // The workers' parameters and gradients by name.
  std::map<std::string, const plan::Argument *> params;
  std::map<std::string, const plan::Result *> gradients;
  for (const plan::Argument &argument : worker.arguments()) {
    if (argument.role() == plan::PARAM)
      params[argument.name()] = &argument;
    else if (argument.role() != plan::DATA && argument.role() != plan::STEP)
      return invalidPlan("the workers' argument '" + argument.name() +
                         "' is optimizer state, which the servers hold");
  }
  for (const plan::Result &result : worker.results())
    if (!result.grad_of().empty())
      gradients[result.grad_of()] = &result;
  auto same = [](const auto &a, const auto &b) {
    return std::equal(a.global_shape().begin(), a.global_shape().end(),
                      b.global_shape().begin(), b.global_shape().end());
  };
  std::set<std::string> served;
  for (const plan::Argument &argument : update.arguments()) {
    const std::string &name = argument.name();
    if (argument.role() == plan::PARAM) {
      auto found = params.find(name);
      if (found == params.end() || !same(*found->second, argument) ||
          found->second->dtype() != argument.dtype())
        return invalidPlan("the servers' parameter '" + name +
                           "' is no parameter of the workers of its dtype "
                           "and shape");
      served.insert(name);
    } else if (argument.role() == plan::GRADIENT) {
      auto found = gradients.find(name);
      if (found == gradients.end() || !same(*found->second, argument) ||
          worker.buffers(found->second->buffer()).dtype() !=
              update.buffers(argument.buffer()).dtype())
        return invalidPlan("the servers' gradient of '" + name +
                           "' is no gradient the workers return of its "
                           "dtype and shape");
    } else if (argument.role() == plan::DATA) {
      return invalidPlan("the servers' argument '" + name +
                         "' is data, which only the workers read");
    }
  }
  for (const auto &[name, param] : params)
    if (!served.count(name))
      return invalidPlan("the workers' parameter '" + name +
                         "' is on no server");
  for (const auto &[name, gradient] : gradients)
    if (!params.count(name) || !same(*gradient, *params.at(name)))
      return invalidPlan("the workers' gradient of '" + name +
                         "' is of no parameter of its shape");
  return Status::success();
}

Status runtime::validatePlan(const plan::Plan &plan) {
  if (plan.format_version() != plan::PLAN_FORMAT_VERSION)
    return invalidPlan(
        "format version " + std::to_string(plan.format_version()) +
        " is not this runtime's " + std::to_string(plan::PLAN_FORMAT_VERSION));
  std::set<std::string> names;
  for (const plan::Mesh::Axis &axis : plan.mesh().axes()) {
    if (axis.name().empty() || !names.insert(axis.name()).second)
      return invalidPlan("mesh axis names must be unique and non-empty");
    if (axis.size() < 1 || axis.size() > kMaxDevices)
      return invalidPlan("mesh axis \"" + axis.name() + "\" has size " +
                         std::to_string(axis.size()));
  }
  Mesh mesh = getMesh(plan);
  int64_t devices = 1;
  for (int64_t size : mesh.getAxisSizes())
    if ((devices *= size) > kMaxDevices)
      return invalidPlan("the mesh has more than 2^20 devices");
  if (plan.programs().empty())
    return invalidPlan("the plan has no program");
  std::set<int64_t> ranks;
  for (int index = 0; index < plan.programs_size(); ++index) {
    for (int64_t rank : plan.programs(index).ranks())
      if (!ranks.insert(rank).second)
        return invalidPlan("rank " + std::to_string(rank) +
                           " runs two programs");
    if (Status error =
            ProgramValidator(plan.programs(index), mesh, index).run();
        !error.ok())
      return error;
  }
  if (static_cast<int64_t>(ranks.size()) != mesh.getNumDevices())
    return invalidPlan("the programs cover " + std::to_string(ranks.size()) +
                       " ranks of a mesh of " +
                       std::to_string(mesh.getNumDevices()));
  if (Status error = checkSourcesAgree(plan); !error.ok())
    return error;
  if (Status error = checkTransfersMatch(plan, mesh); !error.ok())
    return error;
  if (Status error = checkTransferOrder(plan, mesh); !error.ok())
    return error;
  if (Status error = checkManifest(plan); !error.ok())
    return error;
  return plan.has_parameter_server() ? checkParameterServer(plan)
                                     : Status::success();
}
