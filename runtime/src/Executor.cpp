//===- Executor.cpp - Runs one rank's program of a plan -------------------===//

#include "tessera/runtime/Executor.h"

#include "Json.h"

#include "tessera/runtime/HostMemory.h"
#include "tessera/runtime/Manifest.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

using namespace tessera;
using namespace tessera::runtime;

Executor::Executor(const plan::Program &program, const Mesh &mesh,
                   Communicator &communicator, Device *device)
    : program(program), mesh(mesh), communicator(communicator),
      ownDevice(device ? nullptr : createCpuDevice()),
      device(device ? *device : *ownDevice) {
  loadStatus = load();
}

Status Executor::load() {
  kernels.resize(program.instructions_size());
  for (int index = 0; index < program.instructions_size(); ++index) {
    const plan::Instruction &instruction = program.instructions(index);
    std::string at = "instruction " + std::to_string(index) + ": ";
    if (instruction.has_kernel()) {
      const plan::Kernel &kernel = instruction.kernel();
      Expected<const Kernel *> found = device.findKernel(kernel.op());
      if (!found.ok())
        return found.getStatus().withPrefix(at);
      kernels[index].kernel = *found;
      kernels[index].attrs = getKernelAttrs(kernel);
    } else if (instruction.has_collective() &&
               instruction.collective().kind() == plan::ALL_SLICE &&
               !sliceKernel) {
      Expected<const Kernel *> found = device.findKernel(OpId::Slice);
      if (!found.ok())
        return found.getStatus().withPrefix(at);
      sliceKernel = *found;
    } else if (instruction.has_accumulate() && !addKernel) {
      Expected<const Kernel *> found = device.findKernel(OpId::Add);
      if (!found.ok())
        return found.getStatus().withPrefix(at);
      addKernel = *found;
    } else if (instruction.has_axis_index() && !constantKernel) {
      Expected<const Kernel *> found = device.findKernel(OpId::Constant);
      if (!found.ok())
        return found.getStatus().withPrefix(at);
      constantKernel = *found;
    }
  }
  return Status::success();
}

/// Whether buffer `id`'s bytes move with the unit run.
static bool movesWithRun(const plan::Program &program, int64_t id) {
  const plan::Buffer &buffer = program.buffers(id);
  const plan::Buffer &root =
      buffer.has_view_of() ? program.buffers(buffer.view_of()) : buffer;
  return root.slots() > 1 || root.step_slots() > 1 ||
         buffer.microbatch_stride_bytes() != 0;
}

void Executor::bindBuffers() {
  // The buffers a steady program's deferred part writes.
  madeDeferred.assign(program.buffers_size(), false);
  for (int64_t index = program.deferred_begin();
       program.steady() && index < program.deferred_end(); ++index) {
    const plan::Instruction &instruction = program.instructions(index);
    std::vector<int64_t> outputs;
    if (instruction.has_kernel())
      outputs.assign(instruction.kernel().outputs().begin(),
                     instruction.kernel().outputs().end());
    else if (instruction.has_collective())
      outputs.push_back(instruction.collective().output());
    else if (instruction.has_send_recv() && !instruction.send_recv().is_send())
      outputs.push_back(instruction.send_recv().buffer());
    for (int64_t id : outputs) {
      const plan::Buffer &buffer = program.buffers(id);
      madeDeferred[buffer.has_view_of() ? buffer.view_of() : id] = true;
    }
    deferredEvents.insert(instruction.signal_events().begin(),
                          instruction.signal_events().end());
  }
  perRun.assign(program.instructions_size(), false);
  for (int index = 0; index < program.instructions_size(); ++index) {
    LoadedKernel &loaded = kernels[index];
    if (!loaded.kernel)
      continue;
    const plan::Kernel &kernel = program.instructions(index).kernel();
    for (const auto *ids : {&kernel.inputs(), &kernel.outputs()})
      for (int64_t id : *ids)
        if (movesWithRun(program, id))
          perRun[index] = true;
    loaded.inputs.clear();
    loaded.outputs.clear();
    for (int64_t id : kernel.inputs())
      loaded.inputs.push_back(getBuffer(id));
    for (int64_t id : kernel.outputs())
      loaded.outputs.push_back(getBuffer(id));
    // The pointers are taken once the vectors are complete, so that they
    // stay valid.
    loaded.inputPointers.clear();
    loaded.outputPointers.clear();
    for (Tensor &tensor : loaded.inputs)
      loaded.inputPointers.push_back(&tensor);
    for (Tensor &tensor : loaded.outputs)
      loaded.outputPointers.push_back(&tensor);
  }
}

Executor::~Executor() {
  for (void *memory : carried)
    if (memory)
      this->device.deallocate(memory);
  if (arena)
    this->device.deallocate(arena);
}

Tensor Executor::getBuffer(int64_t id, const UnitRun &run) {
  const plan::Buffer &buffer = program.buffers(id);
  const plan::Buffer &root =
      buffer.has_view_of() ? program.buffers(buffer.view_of()) : buffer;
  Tensor tensor;
  tensor.dtype = getDType(buffer.dtype());
  tensor.shape.assign(buffer.shape().begin(), buffer.shape().end());
  int64_t offset = buffer.arena_offset_bytes() +
                   run.microbatch * buffer.microbatch_stride_bytes();
  // A steady program's ring runs on across steps: its microbatches are
  // numbered through the whole run of steps.
  int64_t microbatch =
      program.steady() ? run.step * program.microbatches() + run.microbatch
                       : run.microbatch;
  if (root.slots() > 1)
    offset +=
        (root.slot_by_microbatch() ? microbatch % root.slots() : run.slot) *
        root.slot_stride_bytes();
  if (root.step_slots() > 1)
    offset += run.step % root.step_slots() * root.step_slot_stride_bytes();
  tensor.data = static_cast<uint8_t *>(arena) + offset;
  return tensor;
}

static Reduction getReduction(plan::ReductionKind kind) {
  switch (kind) {
  case plan::MAX:
    return Reduction::Max;
  case plan::MIN:
    return Reduction::Min;
  case plan::AVG:
    return Reduction::Avg;
  default:
    return Reduction::Sum;
  }
}

Pending Executor::startCollective(const plan::Collective &collective,
                                  const UnitRun &run) {
  Tensor in = getBuffer(collective.input(), run);
  Tensor out = getBuffer(collective.output(), run);
  Axes axes(collective.mesh_axes().begin(), collective.mesh_axes().end());
  switch (collective.kind()) {
  case plan::ALL_REDUCE:
    return communicator.startAllReduce(
        in, out, getReduction(collective.reduction()), axes);
  case plan::ALL_GATHER:
    return communicator.startAllGather(in, out, collective.dim(), axes);
  case plan::REDUCE_SCATTER:
    return communicator.startReduceScatter(
        in, out, collective.dim(), getReduction(collective.reduction()), axes);
  case plan::ALL_TO_ALL:
    return communicator.startAllToAll(in, out, collective.dim(),
                                      collective.concat_dim(), axes);
  case plan::BROADCAST:
    return communicator.startBroadcast(in, out, collective.root(), axes);
  case plan::COLLECTIVE_PERMUTE:
    return communicator.startCollectivePermute(
        in, out,
        {collective.source_target_pairs().begin(),
         collective.source_target_pairs().end()},
        axes);
  case plan::ALL_SLICE: {
    // Local: this rank's index in the group picks its piece, which the
    // device slices out.
    Group group = mesh.getGroup(communicator.getRank(), axes);
    KernelAttrs attrs;
    std::vector<int64_t> &start = attrs.lists["start"];
    start.assign(in.getRank(), 0);
    start[collective.dim()] = group.index * out.shape[collective.dim()];
    std::vector<int64_t> &limit = attrs.lists["limit"];
    limit = in.shape;
    limit[collective.dim()] =
        start[collective.dim()] + out.shape[collective.dim()];
    return makeFinishedCollective(
        device.runKernel(*sliceKernel, attrs, {&in}, {&out}));
  }
  default:
    return makeFinishedCollective(invalidPlan("unknown collective"));
  }
}

static std::string getCollectiveName(const plan::Collective &collective) {
  return "dist." + getCollectiveKindName(collective.kind());
}

void Executor::record(TraceEvent event) {
  if (!tracing)
    return;
  if (event.step == 0)
    event.step = runs;
  trace.push_back(std::move(event));
}

double
Executor::getMicroseconds(std::chrono::steady_clock::time_point when) const {
  return std::chrono::duration<double, std::micro>(when - epoch).count();
}

Status Executor::finish(InFlight &started) {
  if (Status error = started.pending->wait(); !error.ok())
    return error;
  // It ran on its stream from its start until it was seen complete (by the
  // communicator's progress thread), or until now.
  double end = getMicroseconds();
  if (auto done = started.pending->getCompletionTime())
    end = std::min(end, getMicroseconds(*done));
  record({started.name, started.stream, started.start, end, started.instruction,
          started.microbatch});
  return Status::success();
}

/// This rank's index in each group: its mesh coordinates, and the running
/// microbatch along "mb".
Status Executor::runAxisIndex(const plan::AxisIndex &axisIndex,
                              const UnitRun &run) {
  std::vector<int64_t> coordinates =
      mesh.getCoordinates(communicator.getRank());
  std::vector<int64_t> values;
  for (const plan::DimAxes &group : axisIndex.groups()) {
    int64_t value = 0;
    for (const std::string &axis : group.axes()) {
      int64_t index = mesh.getAxisIndex(axis);
      if (index < 0)
        value = value * program.microbatches() + run.microbatch;
      else
        value = value * mesh.getAxisSizes()[index] + coordinates[index];
    }
    values.push_back(value);
  }
  KernelAttrs attrs;
  attrs.bytes["value"].assign(reinterpret_cast<const char *>(values.data()),
                              values.size() * sizeof(int64_t));
  Tensor out = getBuffer(axisIndex.output(), run);
  return device.runKernel(*constantKernel, attrs, {}, {&out});
}

Status Executor::runInstructions(int64_t begin, int64_t end,
                                 const UnitRun &run) {
  Status error;
  for (int64_t index = begin; index < end; ++index) {
    const plan::Instruction &instruction = program.instructions(index);
    auto at = [&] {
      return "instruction " + std::to_string(index) +
             (run.inUnit
                  ? " (microbatch " + std::to_string(run.microbatch) + ")"
                  : std::string());
    };
    double start = getMicroseconds();
    int64_t microbatch = run.inUnit ? run.microbatch : -1;
    for (int64_t event : instruction.wait_events()) {
      auto it = inFlight.find(event);
      // A steady program's first runs (and a drain past the last step) skip
      // the deferred part, and so the sends it starts.
      if (it == inFlight.end() && deferredSkipped &&
          deferredEvents.count(event))
        continue;
      if (it == inFlight.end())
        return invalidPlan(at() + ": event " + std::to_string(event) +
                           " was never started");
      if (!(error = finish(it->second)).ok())
        return error.withPrefix(at() + ": ");
      inFlight.erase(it);
    }
    if (!instruction.wait_events().empty())
      record({"wait", 0, start, getMicroseconds()});
    if (instruction.has_send_recv()) {
      const plan::SendRecv &transfer = instruction.send_recv();
      Tensor buffer = getBuffer(transfer.buffer(), run);
      std::vector<int64_t> peer = mesh.getCoordinates(communicator.getRank());
      peer[mesh.getAxisIndex(transfer.mesh_axis())] = transfer.peer();
      int64_t peerRank = mesh.getRank(peer);
      Pending pending =
          transfer.is_send()
              ? communicator.startSend(buffer, peerRank, transfer.tag())
              : communicator.startRecv(buffer, peerRank, transfer.tag());
      std::string name = std::string(transfer.is_send() ? "send" : "recv") +
                         " tag " + std::to_string(transfer.tag());
      if (instruction.stream() != 0) {
        InFlight started{std::move(pending),   start, name,
                         instruction.stream(), index, microbatch};
        if (run.inUnit)
          sendsInFlight[{index, run.microbatch}] = std::move(started);
        else
          inFlight[instruction.signal_events(0)] = std::move(started);
        continue;
      }
      if (!(error = pending->wait()).ok())
        return error.withPrefix(at() + " (" + name + "): ");
      record({name, 0, start, getMicroseconds(), index, microbatch});
      continue;
    }
    if (instruction.has_collective() && instruction.stream() != 0) {
      const plan::Collective &collective = instruction.collective();
      inFlight[instruction.signal_events(0)] = {
          startCollective(collective, run),
          start,
          getCollectiveName(collective),
          instruction.stream(),
          index,
          microbatch};
      continue;
    }
    if (instruction.has_kernel()) {
      LoadedKernel &loaded = kernels[index];
      if (perRun[index]) {
        const plan::Kernel &kernel = instruction.kernel();
        for (int i = 0; i < kernel.inputs_size(); ++i)
          loaded.inputs[i].data = getBuffer(kernel.inputs(i), run).data;
        for (int i = 0; i < kernel.outputs_size(); ++i)
          loaded.outputs[i].data = getBuffer(kernel.outputs(i), run).data;
      }
      error = device.runKernel(*loaded.kernel, loaded.attrs,
                               loaded.inputPointers, loaded.outputPointers);
      // A traced kernel is waited for, so that its span is its run and not
      // the time to queue it (a GPU's started collectives run on).
      if (tracing && error.ok())
        error = device.synchronize();
      record({loaded.kernel->getOp(), 0, start, getMicroseconds(), index,
              microbatch});
    } else if (instruction.has_collective()) {
      error = startCollective(instruction.collective(), run)->wait();
      if (!error.ok())
        error = error.withPrefix(describeCommunication(program, instruction) +
                                 ": ");
      record({getCollectiveName(instruction.collective()), 0, start,
              getMicroseconds(), index, microbatch});
    } else if (instruction.has_accumulate()) {
      const plan::Accumulate &accumulate = instruction.accumulate();
      Tensor input = getBuffer(accumulate.input(), run);
      Tensor sum = getBuffer(accumulate.accumulator(), run);
      std::vector<bool>::reference started =
          accumulated[accumulate.accumulator() * kAccumulatorCopies +
                      (program.steady() ? run.step % kAccumulatorCopies : 0)];
      if (started) {
        error = device.runKernel(*addKernel, {}, {&sum, &input}, {&sum});
      } else {
        error = device.copyWithin(sum.data, input.data, sum.getBytes());
        started = true;
      }
      record({"accumulate", 0, start, getMicroseconds(), index, microbatch});
    } else if (instruction.has_axis_index()) {
      error = runAxisIndex(instruction.axis_index(), run);
      record({"axis_index", 0, start, getMicroseconds(), index, microbatch});
    }
    if (!error.ok())
      return error.withPrefix(at() + ": ");
  }
  return Status::success();
}

Status Executor::run(const std::vector<OwnedTensor> &arguments,
                     std::vector<OwnedTensor> &results,
                     const std::vector<bool> &wanted) {
  return runStep(&arguments, results, wanted);
}

int64_t Executor::getLag() const {
  int64_t lag = 0;
  for (const plan::ScheduleEntry &entry : program.schedule())
    lag = std::max<int64_t>(lag, -entry.step_offset());
  return hasDeferredWork() ? std::max<int64_t>(lag, 1) : 0;
}

Status Executor::drain(std::vector<OwnedTensor> &results,
                       const std::vector<bool> &wanted) {
  if (!hasDeferredWork() || runs == 0 || lastStep < 0)
    return invalidArgument("drain follows a run of a program that leaves "
                           "work to the next");
  // Each drain finishes the backwards and updates of one more step.
  for (int64_t k = 0, lag = getLag(); k < lag; ++k)
    if (Status error = runStep(nullptr, results, wanted); !error.ok())
      return error;
  lastStep = -1;
  return Status::success();
}

Status Executor::runStep(const std::vector<OwnedTensor> *arguments,
                         std::vector<OwnedTensor> &results,
                         const std::vector<bool> &wanted) {
  if (!loadStatus.ok())
    return loadStatus;
  ++runs;
  bool draining = !arguments;
  if (arguments &&
      static_cast<int>(arguments->size()) != program.arguments_size())
    return invalidArgument(
        "the program takes " + std::to_string(program.arguments_size()) +
        " arguments, got " + std::to_string(arguments->size()));
  // The run's step, from 0: the copy of what has one per step.
  UnitRun now;
  now.step = runs - 1;
  if (!draining)
    lastStep = now.step;
  // Whether a run (or a drain) runs a part of step `step`: a steady
  // program's entries and deferred part lag its step by up to `lag`.
  int64_t lag = getLag();
  auto hasStep = [&](int64_t step) { return step >= 0 && step <= lastStep; };
  Status error;
  // 64 bytes of slack keep every view inside the arena when the memory plan
  // packs buffers to the last byte (getArenaAllocation counts them).
  if (!arena) {
    PlannedAllocation whole = getArenaAllocation(program);
    if (!(error = device.allocate(whole.bytes, arena)).ok())
      return error.withPrefix("cannot allocate " + whole.description +
                              " on " + device.getName() + ": ");
    bindBuffers();
  }
  carried.resize(program.arguments_size(), nullptr);
  updatedInPlace.resize(program.arguments_size(), false);
  for (int i = 0; i < program.arguments_size() && arguments; ++i) {
    if (updatedInPlace[i])
      continue;
    Tensor buffer = getBuffer(program.arguments(i).buffer(), now);
    if ((*arguments)[i].view.getBytes() != buffer.getBytes())
      return invalidArgument(
          "argument '" + program.arguments(i).name() + "' has " +
          std::to_string((*arguments)[i].view.getBytes()) +
          " bytes, expected " + std::to_string(buffer.getBytes()));
    error = carried[i]
                ? device.copyWithin(buffer.data, carried[i], buffer.getBytes())
                : device.copyToDevice(buffer.data, (*arguments)[i].view.data,
                                      buffer.getBytes());
    if (!error.ok())
      return error.withPrefix("argument '" + program.arguments(i).name() +
                              "': ");
  }
  // A steady program's sends of sums run on into the next run, where its
  // deferred part waits for them.
  if (!program.steady())
    inFlight.clear();
  sendsInFlight.clear();
  // Sums over microbatches, per step parity: a steady program's run on into
  // the next run and start again after the deferred part that reads them.
  if (!program.steady() || accumulated.empty())
    accumulated.assign(kAccumulatorCopies * program.buffers_size(), false);
  int64_t steps = program.instructions_size();
  // The instructions after the units: a steady program's deferred part
  // finishes the step `lag` before (after an entry, or after the entries);
  // the rest are the run's own. The first `lag` runs have no such step: the
  // results the deferred part makes are not carried.
  int64_t post =
      program.units().empty() ? steps : program.units().rbegin()->end();
  int64_t deferredBegin = program.deferred_begin(),
          deferredEnd = program.deferred_end();
  if (!program.steady() || deferredEnd <= deferredBegin)
    deferredBegin = deferredEnd = steps;
  bool deferredRan = false;
  deferredSkipped = false;
  auto runPart = [&](int64_t begin, int64_t end, int64_t step) -> Status {
    UnitRun at = now;
    at.step = step;
    double start = getMicroseconds();
    if (Status error = runInstructions(begin, end, at); !error.ok())
      return error;
    if (begin < end)
      record(
          {"update", kUnitTrack, start, getMicroseconds(), -1, -1, step + 1});
    return Status::success();
  };
  auto runDeferred = [&]() -> Status {
    int64_t step = now.step - lag;
    deferredSkipped = !hasStep(step);
    if (!deferredSkipped) {
      if (Status error = runPart(deferredBegin, deferredEnd, step); !error.ok())
        return error;
      deferredRan = true;
      for (int64_t id = 0; id < program.buffers_size(); ++id)
        accumulated[id * kAccumulatorCopies + step % kAccumulatorCopies] =
            false;
    }
    return Status::success();
  };
  auto runOwn = [&]() -> Status {
    if (Status error = runPart(post, deferredBegin, now.step); !error.ok())
      return error;
    return runPart(deferredEnd, steps, now.step);
  };
  if (program.units().empty()) {
    if (!(error = runInstructions(0, steps, now)).ok())
      return error;
  } else {
    if (!(error = runInstructions(0, program.units(0).begin(), now)).ok())
      return error;
    int64_t updateAfter =
        program.has_update_after_entry() ? program.update_after_entry() : -1;
    for (int index = 0; index < program.schedule_size(); ++index) {
      const plan::ScheduleEntry &entry = program.schedule(index);
      const plan::Unit &unit = program.units(entry.unit());
      // A drain runs only what the last run left of its step.
      int64_t step = now.step + entry.step_offset();
      if (hasStep(step)) {
        UnitRun run = now;
        run.microbatch = entry.microbatch();
        run.slot = entry.slot();
        run.inUnit = true;
        run.step = step;
        double start = getMicroseconds();
        if (!(error = runInstructions(unit.begin(), unit.end(), run)).ok())
          return error.withPrefix(unit.name() + "." +
                                  std::to_string(entry.microbatch()) + ": ");
        // A unit without instructions (a first stage's input gradients)
        // leaves no trace.
        if (unit.end() > unit.begin()) {
          TraceEvent event{unit.name() + "." +
                               std::to_string(entry.microbatch()),
                           kUnitTrack,
                           start,
                           getMicroseconds(),
                           -1,
                           entry.microbatch(),
                           step + 1};
          if (program.steady())
            event.version = std::max<int64_t>(step - program.weight_delay(), 0);
          record(std::move(event));
        }
      }
      // Without updates amid the entries, a steady program's deferred part
      // runs after the last, before its sends are waited for: the rank
      // before reads those in its next run, after its own deferred part,
      // which may send this one what it reads.
      if (program.steady() && updateAfter < 0 &&
          index + 1 == program.schedule_size() && !(error = runDeferred()).ok())
        return error;
      for (const plan::SendRun &send : entry.wait_sends()) {
        auto it = sendsInFlight.find({send.instruction(), send.microbatch()});
        // A steady program's entry waits for its sends of the run's step
        // and of steps before, which its first runs or a drain skip.
        if (it == sendsInFlight.end() && program.steady() &&
            (now.step < lag || draining))
          continue;
        if (it == sendsInFlight.end())
          return invalidPlan(
              "the schedule waits for the send of instruction " +
              std::to_string(send.instruction()) + " on microbatch " +
              std::to_string(send.microbatch()) + ", which was never started");
        if (!(error = finish(it->second)).ok())
          return error.withPrefix("instruction " +
                                  std::to_string(send.instruction()) + ": ");
        sendsInFlight.erase(it);
      }
      if (index == updateAfter && !(error = runDeferred()).ok())
        return error;
    }
    if (!draining && !(error = runOwn()).ok())
      return error;
  }
  // A drain waits for the deferred part's sends, which a run waits for in
  // its own part: the drain is the last use of the plan.
  for (auto &[event, started] : inFlight)
    if (draining && !(error = finish(started)).ok())
      return error.withPrefix("event " + std::to_string(event) + ": ");
  if (draining)
    inFlight.clear();
  if (!inFlight.empty() && !program.steady())
    return invalidPlan("event " + std::to_string(inFlight.begin()->first) +
                       " is never waited for");
  if (!sendsInFlight.empty())
    return invalidPlan("the send of instruction " +
                       std::to_string(sendsInFlight.begin()->first.first) +
                       " on microbatch " +
                       std::to_string(sendsInFlight.begin()->first.second) +
                       " is never waited for");
  // Kernels report errors that depend on data (a label outside the
  // vocabulary) when the device catches up.
  if (!(error = device.synchronize()).ok())
    return error;
  // Whether this run made result `index`: a steady program's deferred
  // part makes its results only when it ran, its own part not in a drain.
  auto isValid = [&](int index) {
    const plan::Buffer &made = program.buffers(program.results(index).buffer());
    int64_t root =
        made.has_view_of() ? made.view_of() : program.results(index).buffer();
    return madeDeferred[root] ? deferredRan || !program.steady() : !draining;
  };
  // The updates stay on the device for the next run: where the memory plan
  // wrote one over its argument, in the arena already. (The copies out and
  // back in of a GPT's parameters and AdamW moments cost 4% of its step.)
  for (int i = 0; i < program.results_size() && carryUpdates; ++i) {
    const plan::Result &result = program.results(i);
    if (!result.has_updates_argument())
      continue;
    if (!isValid(i))
      continue;
    Tensor buffer = getBuffer(result.buffer(), now);
    Tensor argument =
        getBuffer(program.arguments(result.updates_argument()).buffer(), now);
    if (buffer.data == argument.data &&
        buffer.getBytes() == argument.getBytes()) {
      updatedInPlace[result.updates_argument()] = true;
      continue;
    }
    void *&memory = carried[result.updates_argument()];
    if (!memory && !(error = device.allocate(buffer.getBytes(), memory)).ok())
      return error.withPrefix("cannot keep result #" + std::to_string(i) +
                              " on " + device.getName() + ": ");
    if (!(error = device.copyWithin(memory, buffer.data, buffer.getBytes()))
             .ok())
      return error.withPrefix("result #" + std::to_string(i) + ": ");
  }
  // Results of the caller's previous run keep their storage: a train step
  // returns every parameter and moment, and fresh zeroed allocations of
  // them cost as much as a step's kernels. (So do those this run did not
  // make: a drain makes only the deferred part's.)
  results.resize(program.results_size());
  for (int i = 0; i < program.results_size(); ++i) {
    if ((!wanted.empty() &&
         (i >= static_cast<int>(wanted.size()) || !wanted[i])) ||
        !isValid(i))
      continue;
    Tensor buffer = getBuffer(program.results(i).buffer(), now);
    OwnedTensor &result = results[i];
    if (!result.view.data || result.view.dtype != buffer.dtype ||
        result.view.shape != buffer.shape) {
      Expected<OwnedTensor> allocated = OwnedTensor::allocate(
          buffer.dtype, buffer.shape, "result #" + std::to_string(i));
      if (!allocated.ok())
        return allocated.getStatus();
      result = allocated.take();
    }
    if (!(error = device.copyToHost(result.view.data, buffer.data,
                                    buffer.getBytes()))
             .ok())
      return error.withPrefix("result #" + std::to_string(i) + ": ");
  }
  return device.synchronize();
}

//===----------------------------------------------------------------------===//
// Inputs and pieces
//===----------------------------------------------------------------------===//

/// splitmix64: a tiny, portable generator; the same stream on every rank.
static uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Expected<OwnedTensor>
tessera::runtime::makeGlobalInput(const plan::Argument &argument, uint64_t seed,
                                  int64_t index) {
  Expected<OwnedTensor> allocated = OwnedTensor::allocate(
      getDType(argument.dtype()),
      {argument.global_shape().begin(), argument.global_shape().end()},
      "the global value of '" + argument.name() + "'");
  if (!allocated.ok())
    return allocated.getStatus();
  OwnedTensor tensor = allocated.take();
  // Optimizer state starts at zero; the step counter is set per step.
  if (argument.role() == plan::OPTIMIZER_STATE || argument.role() == plan::STEP)
    return tensor;
  // A weight stash starts as its parameter does.
  if (argument.role() == plan::WEIGHT_STASH)
    index = argument.version_of_source();
  uint64_t state = seed * 0x100000001b3ULL + index;
  int64_t n = tensor.view.getNumElements();
  uint64_t bound = argument.index_bound() > 0 ? argument.index_bound() : 1;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t bits = nextRandom(state);
    switch (tensor.view.dtype) {
    case DType::F32:
      tensor.view.as<float>()[i] =
          static_cast<float>(bits >> 40) / (1 << 24) - 0.5f;
      break;
    case DType::F64:
      tensor.view.as<double>()[i] =
          static_cast<double>(bits >> 11) / (1ULL << 53) - 0.5;
      break;
    case DType::BF16:
    case DType::F16:
      tensor.view.as<uint16_t>()[i] = floatToHalf(
          tensor.view.dtype, static_cast<float>(bits >> 40) / (1 << 24) - 0.5f);
      break;
    case DType::I32:
      tensor.view.as<int32_t>()[i] = static_cast<int32_t>(bits % bound);
      break;
    case DType::I64:
      tensor.view.as<int64_t>()[i] = static_cast<int64_t>(bits % bound);
      break;
    case DType::I1:
      tensor.view.as<uint8_t>()[i] = bits & 1;
      break;
    default:
      break;
    }
  }
  return tensor;
}

/// Copies the block of `global` at `offsets` with `local`'s shape, into
/// `local` or (with `toGlobal`) back. Only the part inside the global tensor
/// moves: the rest of a padded piece is padding.
static void copyBlock(const Tensor &local, const Tensor &global,
                      const std::vector<int64_t> &offsets, bool toGlobal) {
  int64_t rank = local.getRank();
  size_t elementBytes = getDTypeBytes(local.dtype);
  if (rank == 0) {
    if (toGlobal)
      std::memcpy(global.data, local.data, elementBytes);
    else
      std::memcpy(local.data, global.data, elementBytes);
    return;
  }
  std::vector<int64_t> extent(rank), globalStrides(rank, 1),
      localStrides(rank, 1);
  for (int64_t d = rank - 1; d >= 0; --d) {
    extent[d] =
        std::clamp<int64_t>(global.shape[d] - offsets[d], 0, local.shape[d]);
    if (d + 1 < rank) {
      globalStrides[d] = globalStrides[d + 1] * global.shape[d + 1];
      localStrides[d] = localStrides[d + 1] * local.shape[d + 1];
    }
  }
  if (getNumElements(extent) == 0)
    return;
  int64_t rowElements = extent[rank - 1];
  int64_t rows = getNumElements(extent) / rowElements;
  std::vector<int64_t> index(rank, 0);
  auto *localBytes = static_cast<uint8_t *>(local.data);
  auto *globalBytes = static_cast<uint8_t *>(global.data);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t globalOffset = 0, localOffset = 0;
    for (int64_t d = 0; d < rank; ++d) {
      globalOffset += (index[d] + offsets[d]) * globalStrides[d];
      localOffset += index[d] * localStrides[d];
    }
    uint8_t *l = localBytes + localOffset * elementBytes;
    uint8_t *g = globalBytes + globalOffset * elementBytes;
    size_t bytes = rowElements * elementBytes;
    if (toGlobal)
      std::memcpy(g, l, bytes);
    else
      std::memcpy(l, g, bytes);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < extent[d])
        break;
      index[d] = 0;
    }
  }
}

/// The shape and offsets of `rank`'s piece of a global tensor whose pieces
/// tile `tiledShape` (its shape, or the padded one).
static void getPiece(const std::vector<int64_t> &tiledShape,
                     const std::vector<std::vector<std::string>> &dimAxes,
                     const Mesh &mesh, int64_t rank,
                     std::vector<int64_t> &shape,
                     std::vector<int64_t> &offsets) {
  shape = tiledShape;
  offsets.assign(tiledShape.size(), 0);
  for (size_t d = 0; d < tiledShape.size(); ++d) {
    if (d >= dimAxes.size() || dimAxes[d].empty())
      continue;
    Group group = mesh.getGroup(rank, dimAxes[d]);
    shape[d] = tiledShape[d] / group.size;
    offsets[d] = group.index * shape[d];
  }
}

/// Copies elements [begin, end) of the block of `global` at `offsets` with
/// shape `block`, in row-major order, to `flat` (or, with `toGlobal`, back):
/// a flat piece's share of its block. Elements of a padded block past the
/// global tensor's end are padding and stay as they are.
static void copyFlatRange(const Tensor &flat, const Tensor &global,
                          const std::vector<int64_t> &block,
                          const std::vector<int64_t> &offsets, int64_t begin,
                          int64_t end, bool toGlobal) {
  size_t elementBytes = getDTypeBytes(global.dtype);
  auto *flatBytes = static_cast<uint8_t *>(flat.data);
  auto *globalBytes = static_cast<uint8_t *>(global.data);
  int64_t rank = block.size();
  int64_t row = rank == 0 ? 1 : block[rank - 1];
  std::vector<int64_t> globalStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    globalStrides[d] = globalStrides[d + 1] * global.shape[d + 1];
  // One run of a block row at a time: contiguous in both.
  for (int64_t element = begin; element < end;) {
    int64_t column = element % row;
    int64_t count = std::min(end - element, row - column);
    int64_t globalOffset = 0, rest = element, inside = count;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t index = rest % block[d] + offsets[d];
      if (d == rank - 1)
        inside = std::clamp<int64_t>(global.shape[d] - index, 0, count);
      else if (index >= global.shape[d])
        inside = 0;
      globalOffset += index * globalStrides[d];
      rest /= block[d];
    }
    uint8_t *f = flatBytes + (element - begin) * elementBytes;
    uint8_t *g = globalBytes + globalOffset * elementBytes;
    if (inside > 0 && toGlobal)
      std::memcpy(g, f, inside * elementBytes);
    else if (inside > 0)
      std::memcpy(f, g, inside * elementBytes);
    element += count;
  }
}

/// Moves `rank`'s piece between `local` and `global` (allocating `local`,
/// zeros where it is padding, when it is null).
static void movePiece(OwnedTensor *owned, const Tensor *local,
                      const Tensor &global, const PieceLayout &layout,
                      const Mesh &mesh, int64_t rank, bool toGlobal) {
  // Microbatches major in dim 0: the rank's piece of each, one after
  // another (the plan's checks make the parts divide evenly).
  if (int64_t parts = layout.microbatchesMajor; parts > 1) {
    PieceLayout part = layout;
    part.microbatchesMajor = 0;
    std::vector<int64_t> shape, offsets;
    getPiece(global.shape, layout.dimAxes, mesh, rank, shape, offsets);
    if (owned)
      *owned = OwnedTensor(global.dtype, shape);
    Tensor whole = owned ? owned->view : *local;
    size_t globalPart = global.getBytes() / parts,
           localPart = whole.getBytes() / parts;
    for (int64_t m = 0; m < parts; ++m) {
      Tensor from = global, to = whole;
      from.shape[0] /= parts;
      to.shape[0] /= parts;
      from.data = static_cast<uint8_t *>(global.data) + m * globalPart;
      to.data = static_cast<uint8_t *>(whole.data) + m * localPart;
      movePiece(nullptr, &to, from, part, mesh, rank, toGlobal);
    }
    return;
  }
  std::vector<int64_t> shape, offsets;
  getPiece(layout.paddedShape.empty() ? global.shape : layout.paddedShape,
           layout.dimAxes, mesh, rank, shape, offsets);
  if (layout.flatAxes.empty()) {
    if (owned)
      *owned = OwnedTensor(global.dtype, shape);
    copyBlock(owned ? owned->view : *local, global, offsets, toGlobal);
    return;
  }
  Group group = mesh.getGroup(rank, layout.flatAxes);
  int64_t elements = 1;
  for (int64_t size : shape)
    elements *= size;
  int64_t share = (elements + group.size - 1) / group.size;
  if (owned)
    *owned = OwnedTensor(global.dtype, {share});
  int64_t begin = std::min(elements, group.index * share);
  int64_t end = std::min(elements, begin + share);
  copyFlatRange(owned ? owned->view : *local, global, shape, offsets, begin,
                end, toGlobal);
}

namespace {
/// How a unit's flat buffer lays out its members: its rows, a rank of each
/// row's index over its dim 0 axes, and each member's piece layout.
struct UnitRows {
  int64_t rows = 1;
  std::vector<int64_t> ranks = {0};
  std::vector<PieceLayout> layouts;
};

template <typename Message>
UnitRows getUnitRows(const Message &unit, const Mesh &mesh) {
  UnitRows layout;
  for (const plan::Member &member : unit.members()) {
    PieceLayout piece;
    for (const plan::DimAxes &dim : member.dim_axes())
      piece.dimAxes.emplace_back(dim.axes().begin(), dim.axes().end());
    layout.layouts.push_back(std::move(piece));
  }
  if (unit.global_shape_size() != 2 || unit.dim_axes().empty())
    return layout;
  std::vector<std::string> axes(unit.dim_axes(0).axes().begin(),
                                unit.dim_axes(0).axes().end());
  layout.rows = unit.global_shape(0);
  layout.ranks.assign(layout.rows, -1);
  for (int64_t rank = 0; rank < mesh.getNumDevices(); ++rank) {
    Group group = mesh.getGroup(rank, axes);
    if (group.index < layout.rows && layout.ranks[group.index] < 0)
      layout.ranks[group.index] = rank;
  }
  return layout;
}
} // namespace

template <typename Message>
OwnedTensor
tessera::runtime::packMembers(const Message &unit,
                              const std::vector<const Tensor *> &members,
                              const Mesh &mesh) {
  UnitRows layout = getUnitRows(unit, mesh);
  OwnedTensor packed(members.front()->dtype,
                     std::vector<int64_t>(unit.global_shape().begin(),
                                          unit.global_shape().end()));
  auto *to = static_cast<uint8_t *>(packed.view.data);
  for (int64_t rank : layout.ranks)
    for (size_t i = 0; i < members.size(); ++i) {
      OwnedTensor piece =
          takeLocalPiece(*members[i], layout.layouts[i], mesh, rank);
      std::memcpy(to, piece.view.data, piece.view.getBytes());
      to += piece.view.getBytes();
    }
  return packed;
}

template <typename Message>
Expected<std::vector<OwnedTensor>>
tessera::runtime::unpackMembers(const Message &unit, const Tensor &global,
                                const Mesh &mesh) {
  // Every member element lies in some row's piece, so the members together
  // hold no more elements than the buffer: more, and the layout is not one
  // of this buffer's (a damaged checkpoint's), refused before allocating.
  int64_t total = 0, elements = global.getNumElements();
  for (const plan::Member &member : unit.members()) {
    std::optional<int64_t> count = getCheckedNumElements(
        {member.global_shape().begin(), member.global_shape().end()});
    if (!count || *count > elements - total)
      return dataError("unit member '" + member.name() +
                       "' does not fit its flat buffer of " +
                       std::to_string(elements) + " elements");
    total += *count;
  }
  UnitRows layout = getUnitRows(unit, mesh);
  std::vector<OwnedTensor> unpacked;
  for (const plan::Member &member : unit.members())
    unpacked.emplace_back(global.dtype,
                          std::vector<int64_t>(member.global_shape().begin(),
                                               member.global_shape().end()));
  auto *from = static_cast<uint8_t *>(global.data);
  size_t left = global.getBytes();
  for (int64_t rank : layout.ranks)
    for (size_t i = 0; i < unpacked.size(); ++i) {
      // The member's piece on this row's ranks, in place in the row.
      OwnedTensor shape =
          takeLocalPiece(unpacked[i].view, layout.layouts[i], mesh, rank);
      Tensor piece{global.dtype, shape.view.shape, from};
      if (piece.getBytes() > left)
        return dataError("the pieces of unit member '" +
                         unit.members(i).name() + "' run past its flat buffer");
      placeLocalPiece(piece, unpacked[i].view, layout.layouts[i], mesh, rank);
      from += piece.getBytes();
      left -= piece.getBytes();
    }
  return unpacked;
}

template OwnedTensor tessera::runtime::packMembers(
    const plan::Argument &, const std::vector<const Tensor *> &, const Mesh &);
template Expected<std::vector<OwnedTensor>>
tessera::runtime::unpackMembers(const plan::Argument &, const Tensor &,
                                const Mesh &);
template Expected<std::vector<OwnedTensor>>
tessera::runtime::unpackMembers(const plan::Result &, const Tensor &,
                                const Mesh &);

OwnedTensor tessera::runtime::takeLocalPiece(const Tensor &global,
                                             const PieceLayout &layout,
                                             const Mesh &mesh, int64_t rank) {
  OwnedTensor local;
  movePiece(&local, nullptr, global, layout, mesh, rank, /*toGlobal=*/false);
  return local;
}

void tessera::runtime::placeLocalPiece(const Tensor &local,
                                       const Tensor &global,
                                       const PieceLayout &layout,
                                       const Mesh &mesh, int64_t rank) {
  movePiece(nullptr, &local, global, layout, mesh, rank, /*toGlobal=*/true);
}

namespace {

/// A buffer as a trace event's argument: its shape, dtype and bytes.
std::string describeBuffer(const plan::Program &program, int64_t id) {
  if (id < 0 || id >= program.buffers_size())
    return "null";
  const plan::Buffer &buffer = program.buffers(id);
  std::vector<int64_t> shape(buffer.shape().begin(), buffer.shape().end());
  DType dtype = getDType(buffer.dtype());
  std::string text = "{\"shape\": [";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "], \"dtype\": \"" + getDTypeName(dtype) + "\", \"bytes\": " +
         std::to_string(getNumElements(shape) * getDTypeBytes(dtype)) + "}";
}

std::string
describeBuffers(const plan::Program &program,
                const google::protobuf::RepeatedField<int64_t> &ids) {
  std::string text = "[";
  for (int i = 0; i < ids.size(); ++i)
    text += (i ? ", " : "") + describeBuffer(program, ids[i]);
  return text + "]";
}

} // namespace

void Executor::writeTraceEvents(std::ostream &os, int64_t rank) const {
  os << "  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << rank
     << ", \"args\": {\"name\": \"rank " << rank << "\"}}";
  for (int64_t stream : {kUnitTrack, int64_t(0), int64_t(1)})
    os << ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << rank
       << ", \"tid\": " << stream << ", \"args\": {\"name\": \""
       << (stream == kUnitTrack ? "pipeline units"
           : stream == 0        ? "compute"
                                : "communication")
       << "\"}}";
  // A marker where each step's first event starts.
  int64_t marked = 0;
  for (const TraceEvent &event : trace)
    if (event.step > marked) {
      marked = event.step;
      os << ",\n  {\"name\": \"step " << marked
         << "\", \"ph\": \"i\", \"s\": \"p\", \"pid\": " << rank
         << ", \"tid\": 0, \"ts\": " << event.start << "}";
    }
  for (const TraceEvent &event : trace) {
    std::string args = "\"step\": " + std::to_string(event.step);
    if (event.microbatch >= 0)
      args += ", \"microbatch\": " + std::to_string(event.microbatch);
    if (event.version >= 0)
      args += ", \"weights_version\": " + std::to_string(event.version);
    std::string flow;
    if (event.instruction >= 0 &&
        event.instruction < program.instructions_size()) {
      const plan::Instruction &instruction =
          program.instructions(event.instruction);
      args += ", \"instruction\": " + std::to_string(event.instruction);
      if (instruction.has_kernel()) {
        args += ", \"inputs\": " +
                describeBuffers(program, instruction.kernel().inputs()) +
                ", \"outputs\": " +
                describeBuffers(program, instruction.kernel().outputs());
      } else if (instruction.has_collective()) {
        const plan::Collective &collective = instruction.collective();
        args += ", \"group\": [";
        for (int i = 0; i < collective.mesh_axes_size(); ++i)
          args += (i ? ", " : "") + quoteJson(collective.mesh_axes(i));
        args += "], \"input\": " + describeBuffer(program, collective.input()) +
                ", \"output\": " + describeBuffer(program, collective.output());
      } else if (instruction.has_send_recv()) {
        const plan::SendRecv &transfer = instruction.send_recv();
        std::vector<int64_t> peer = mesh.getCoordinates(rank);
        peer[mesh.getAxisIndex(transfer.mesh_axis())] = transfer.peer();
        int64_t peerRank = mesh.getRank(peer);
        args += ", \"peer\": " + std::to_string(peerRank) +
                ", \"tag\": " + std::to_string(transfer.tag()) +
                ", \"tensor\": " + describeBuffer(program, transfer.buffer());
        // The arrow from a send to its receive: one id on both ranks.
        int64_t from = transfer.is_send() ? rank : peerRank;
        int64_t to = transfer.is_send() ? peerRank : rank;
        std::string id =
            quoteJson(std::to_string(from) + ">" + std::to_string(to) + ":" +
                      std::to_string(transfer.tag()) + ":" +
                      std::to_string(event.microbatch) + ":" +
                      std::to_string(event.step));
        flow = std::string(",\n  {\"name\": \"transfer\", \"cat\": "
                           "\"transfer\", \"ph\": \"") +
               (transfer.is_send() ? "s" : "f") +
               "\", \"bp\": \"e\", \"id\": " + id +
               ", \"pid\": " + std::to_string(rank) +
               ", \"tid\": " + std::to_string(event.stream) + ", \"ts\": ";
        std::ostringstream at;
        at << event.start;
        flow += at.str() + "}";
      } else if (instruction.has_accumulate()) {
        args += ", \"tensor\": " +
                describeBuffer(program, instruction.accumulate().input());
      }
    }
    os << ",\n  {\"name\": " << quoteJson(event.name)
       << ", \"ph\": \"X\", \"pid\": " << rank << ", \"tid\": " << event.stream
       << ", \"ts\": " << event.start
       << ", \"dur\": " << event.end - event.start << ", \"args\": {" << args
       << "}}" << flow;
  }
}

void Executor::writeTrace(std::ostream &os, int64_t rank) const {
  os << "{\"traceEvents\": [\n";
  writeTraceEvents(os, rank);
  os << "\n]}\n";
}

void tessera::runtime::setStepCounters(const plan::Program &program,
                                       int64_t step,
                                       std::vector<OwnedTensor> &locals) {
  for (int i = 0; i < program.arguments_size(); ++i) {
    if (program.arguments(i).role() != plan::STEP)
      continue;
    Tensor &counter = locals[i].view;
    if (counter.dtype == DType::I64)
      counter.as<int64_t>()[0] = step;
    else if (counter.dtype == DType::I32)
      counter.as<int32_t>()[0] = static_cast<int32_t>(step);
  }
}

Expected<std::vector<OwnedTensor>>
tessera::runtime::makeLocalInputs(const plan::Program &program,
                                  const Mesh &mesh, int64_t rank,
                                  uint64_t seed) {
  std::vector<OwnedTensor> locals;
  for (int i = 0; i < program.arguments_size(); ++i) {
    const plan::Argument &argument = program.arguments(i);
    std::vector<OwnedTensor> globals;
    for (const auto &[source, tensor] : getStepTensors(argument, i)) {
      Expected<OwnedTensor> global = makeGlobalInput(tensor, seed, source);
      if (!global.ok())
        return global.getStatus();
      globals.push_back(global.take());
    }
    OwnedTensor packed;
    if (!argument.members().empty()) {
      std::vector<const Tensor *> members;
      for (const OwnedTensor &global : globals)
        members.push_back(&global.view);
      packed = packMembers(argument, members, mesh);
    }
    locals.push_back(takeLocalPiece(
        argument.members().empty() ? globals.front().view : packed.view,
        getLayout(argument), mesh, rank));
  }
  return locals;
}
