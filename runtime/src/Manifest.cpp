//===- Manifest.cpp - Checking that every group's members agree -----------===//
//
// The check runs the ranks' communication symbolically: each rank's run
// order of collectives, transfers and waits (the same for every rank of a
// program), advanced as far as what the others have issued allows.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Manifest.h"

#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Plan.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace tessera;
using namespace tessera::runtime;

namespace {

/// `name` in lower case: "ALL_REDUCE" -> "all_reduce".
std::string lower(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return name;
}

/// "f32[4, 8]".
std::string describeBuffer(const plan::Program &program, int64_t id) {
  const plan::Buffer &buffer = program.buffers(id);
  std::string text = std::string(getDTypeName(getDType(buffer.dtype()))) + "[";
  for (int i = 0; i < buffer.shape_size(); ++i)
    text += (i ? ", " : "") + std::to_string(buffer.shape(i));
  return text + "]";
}

/// Whether two collectives are the same call on their communicator: kind,
/// reduction, dims, pairs, and their buffers' dtypes and shapes.
bool isSameCall(const plan::Program &a, const plan::Collective &x,
                const plan::Program &b, const plan::Collective &y) {
  auto sameBuffer = [&](int64_t i, int64_t j) {
    const plan::Buffer &p = a.buffers(i), &q = b.buffers(j);
    return p.dtype() == q.dtype() &&
           std::equal(p.shape().begin(), p.shape().end(), q.shape().begin(),
                      q.shape().end());
  };
  return x.kind() == y.kind() && x.reduction() == y.reduction() &&
         x.dim() == y.dim() && x.concat_dim() == y.concat_dim() &&
         x.root() == y.root() &&
         std::equal(
             x.source_target_pairs().begin(), x.source_target_pairs().end(),
             y.source_target_pairs().begin(), y.source_target_pairs().end()) &&
         sameBuffer(x.input(), y.input()) && sameBuffer(x.output(), y.output());
}

/// What a run of a program does that other ranks see or wait for.
struct Step {
  enum Kind { Collective, Send, Receive, Wait } kind;
  /// Its instruction (-1: the sends' wait after schedule entry `entry`)
  /// and microbatch (-1 outside the units).
  int64_t instruction = 0, microbatch = -1, entry = -1;
  /// A collective, or a send, that the run waits for right away (on stream
  /// 0); a started one is waited for by a Wait step.
  bool blocking = true;
  /// A collective's mesh axes, or a transfer's axis and peer, interned.
  int64_t key = 0;
  /// Its number among the run's steps of its kind and key: its place in
  /// its communicator's order, or its channel's.
  int64_t sequence = 0;
  /// A Wait: the started steps it waits for.
  std::vector<int64_t> waits;
};

/// Per program, its run's steps; the keys' meanings.
struct Manifest {
  std::vector<std::vector<Step>> steps;
  std::vector<std::vector<std::string>> axes;
  std::map<std::vector<std::string>, int64_t> axesKeys;
  std::map<std::pair<std::string, int64_t>, int64_t> peerKeys;

  explicit Manifest(const plan::Plan &plan);
};

Manifest::Manifest(const plan::Plan &plan) {
  for (const plan::Program &program : plan.programs()) {
    std::vector<Step> &run = steps.emplace_back();
    std::map<int64_t, int64_t> startedByEvent;
    std::map<std::pair<int64_t, int64_t>, int64_t> startedSends;
    std::map<std::pair<Step::Kind, int64_t>, int64_t> counts;
    auto addWait = [&](Step wait) {
      if (!wait.waits.empty())
        run.push_back(std::move(wait));
    };
    auto visit = [&](RunStep at) {
      const plan::Instruction &instruction =
          program.instructions(at.instruction);
      Step wait{Step::Wait, at.instruction, at.microbatch, at.entry};
      for (int64_t event : instruction.wait_events())
        if (auto it = startedByEvent.find(event); it != startedByEvent.end())
          wait.waits.push_back(it->second);
      addWait(std::move(wait));
      if (!isCommunication(instruction))
        return;
      Step step{Step::Collective, at.instruction, at.microbatch, at.entry,
                instruction.stream() == 0};
      if (instruction.has_collective()) {
        const auto &listed = instruction.collective().mesh_axes();
        std::vector<std::string> names(listed.begin(), listed.end());
        auto [it, added] = axesKeys.emplace(names, axes.size());
        if (added)
          axes.push_back(names);
        step.key = it->second;
      } else {
        const plan::SendRecv &transfer = instruction.send_recv();
        step.kind = transfer.is_send() ? Step::Send : Step::Receive;
        step.key =
            peerKeys
                .emplace(std::pair(transfer.mesh_axis(), transfer.peer()),
                         peerKeys.size())
                .first->second;
      }
      step.sequence = counts[{step.kind, step.key}]++;
      int64_t index = run.size();
      run.push_back(std::move(step));
      if (instruction.stream() == 0)
        return;
      // A unit's started send is waited for by schedule entries; anything
      // else started, by its event.
      if (at.entry >= 0 && instruction.has_send_recv())
        startedSends[{at.instruction, at.microbatch}] = index;
      else if (!instruction.signal_events().empty())
        startedByEvent[instruction.signal_events(0)] = index;
    };
    auto endEntry = [&](int64_t entry) {
      Step wait{Step::Wait, -1, program.schedule(entry).microbatch(), entry};
      for (const plan::SendRun &send : program.schedule(entry).wait_sends())
        if (auto it =
                startedSends.find({send.instruction(), send.microbatch()});
            it != startedSends.end())
          wait.waits.push_back(it->second);
      addWait(std::move(wait));
    };
    forEachRunStep(program, visit, endEntry);
  }
}

/// Runs the ranks' steps as far as they can go.
class Simulation {
public:
  Simulation(const plan::Plan &plan, const Manifest &manifest)
      : plan(plan), manifest(manifest), mesh(getMesh(plan)),
        programOf(mesh.getNumDevices(), -1) {
    for (int index = 0; index < plan.programs_size(); ++index)
      for (int64_t rank : plan.programs(index).ranks())
        programOf[rank] = index;
  }

  Status run();

private:
  struct Arrival {
    int64_t count = 0, rank = -1;
    const Step *step = nullptr;
  };

  const plan::Program &getProgram(int64_t rank) const {
    return plan.programs(programOf[rank]);
  }
  const plan::Instruction &getInstruction(int64_t rank,
                                          const Step &step) const {
    return getProgram(rank).instructions(step.instruction);
  }
  int64_t getPeer(int64_t rank, const Step &step) const {
    const plan::SendRecv &transfer = getInstruction(rank, step).send_recv();
    std::vector<int64_t> coordinates = mesh.getCoordinates(rank);
    coordinates[mesh.getAxisIndex(transfer.mesh_axis())] = transfer.peer();
    return mesh.getRank(coordinates);
  }
  Group getGroup(int64_t rank, const Step &step) const {
    return mesh.getGroup(rank, manifest.axes[step.key]);
  }
  std::tuple<int64_t, int64_t, int64_t> getCall(int64_t rank,
                                                const Step &step) const {
    return {step.key, getGroup(rank, step).color, step.sequence};
  }
  /// "rank 3 (program 1, instruction 7, microbatch 2: send f32[4] to pp=0
  /// tag 1)".
  std::string describe(int64_t rank, const Step &step) const;

  Status issue(int64_t rank, const Step &step);
  /// Whether a collective or send that `rank` issued is complete.
  bool isDone(int64_t rank, const Step &started) const;
  bool isComplete(int64_t rank, const Step &step) const;

  const plan::Plan &plan;
  const Manifest &manifest;
  Mesh mesh;
  std::vector<int> programOf;
  /// Per collective call (axes, group, sequence): who has issued it.
  std::map<std::tuple<int64_t, int64_t, int64_t>, Arrival> arrivals;
  /// Per channel (sender, receiver): the sends issued, the receives posted.
  std::map<std::pair<int64_t, int64_t>, int64_t> sent, posted;
};

std::string Simulation::describe(int64_t rank, const Step &step) const {
  std::string where =
      "rank " + std::to_string(rank) + " (program " +
      std::to_string(programOf[rank]) +
      (step.instruction >= 0
           ? ", instruction " + std::to_string(step.instruction)
           : ", after schedule entry " + std::to_string(step.entry)) +
      (step.microbatch >= 0 ? ", microbatch " + std::to_string(step.microbatch)
                            : std::string());
  const plan::Program &program = getProgram(rank);
  if (step.kind != Step::Wait)
    return where + ": " +
           describeCommunication(program, getInstruction(rank, step)) + ")";
  // What it still waits for.
  std::string text = where + ": waits for ";
  const std::vector<Step> &steps = manifest.steps[programOf[rank]];
  bool first = true;
  for (int64_t waited : step.waits) {
    if (isDone(rank, steps[waited]))
      continue;
    text += (first ? "" : ", ") +
            describeCommunication(program, getInstruction(rank, steps[waited]));
    first = false;
  }
  return text + ")";
}

Status Simulation::issue(int64_t rank, const Step &step) {
  switch (step.kind) {
  case Step::Collective: {
    Arrival &arrival = arrivals[getCall(rank, step)];
    if (arrival.count++ == 0) {
      arrival.rank = rank;
      arrival.step = &step;
      return Status::success();
    }
    if (isSameCall(getProgram(arrival.rank),
                   getInstruction(arrival.rank, *arrival.step).collective(),
                   getProgram(rank), getInstruction(rank, step).collective()))
      return Status::success();
    std::string axes;
    for (const std::string &axis : manifest.axes[step.key])
      axes += (axes.empty() ? "" : ", ") + axis;
    return invalidPlan(
        "collective " + std::to_string(step.sequence) + " over (" + axes +
        ") differs between members of one group, which would hang: " +
        describe(arrival.rank, *arrival.step) + " against " +
        describe(rank, step));
  }
  case Step::Send:
    ++sent[{rank, getPeer(rank, step)}];
    return Status::success();
  case Step::Receive:
    ++posted[{getPeer(rank, step), rank}];
    return Status::success();
  case Step::Wait:
    return Status::success();
  }
  return Status::success();
}

bool Simulation::isDone(int64_t rank, const Step &started) const {
  if (started.kind == Step::Collective) {
    auto it = arrivals.find(getCall(rank, started));
    return it != arrivals.end() &&
           it->second.count == getGroup(rank, started).size;
  }
  auto it = posted.find({rank, getPeer(rank, started)});
  return it != posted.end() && it->second > started.sequence;
}

bool Simulation::isComplete(int64_t rank, const Step &step) const {
  switch (step.kind) {
  case Step::Collective:
  case Step::Send:
    return !step.blocking || isDone(rank, step);
  case Step::Receive: {
    auto it = sent.find({getPeer(rank, step), rank});
    return it != sent.end() && it->second > step.sequence;
  }
  case Step::Wait:
    return std::all_of(
        step.waits.begin(), step.waits.end(), [&](int64_t waited) {
          return isDone(rank, manifest.steps[programOf[rank]][waited]);
        });
  }
  return true;
}

Status Simulation::run() {
  int64_t ranks = mesh.getNumDevices();
  std::vector<size_t> position(ranks, 0);
  std::vector<char> issued(ranks, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const std::vector<Step> &steps = manifest.steps[programOf[rank]];
      while (position[rank] < steps.size()) {
        const Step &step = steps[position[rank]];
        if (!issued[rank]) {
          if (Status error = issue(rank, step); !error.ok())
            return error;
          issued[rank] = 1;
          moved = true;
        }
        if (!isComplete(rank, step))
          break;
        ++position[rank];
        issued[rank] = 0;
        moved = true;
      }
    }
  }
  std::vector<std::string> stuck;
  for (int64_t rank = 0; rank < ranks; ++rank)
    if (position[rank] < manifest.steps[programOf[rank]].size())
      stuck.push_back(
          describe(rank, manifest.steps[programOf[rank]][position[rank]]));
  if (!stuck.empty()) {
    std::string text;
    for (size_t i = 0; i < std::min<size_t>(stuck.size(), 4); ++i)
      text += (i ? "; " : "") + stuck[i];
    if (stuck.size() > 4)
      text += "; and " + std::to_string(stuck.size() - 4) + " more";
    return invalidPlan("the ranks' communication deadlocks, each waiting "
                       "for another: " +
                       text);
  }
  return Status::success();
}

} // namespace

std::string runtime::getCollectiveKindName(plan::CollectiveKind kind) {
  return lower(plan::CollectiveKind_Name(kind));
}

bool runtime::isCommunication(const plan::Instruction &instruction) {
  return instruction.has_send_recv() ||
         (instruction.has_collective() &&
          instruction.collective().kind() != plan::ALL_SLICE);
}

std::string
runtime::describeCommunication(const plan::Program &program,
                               const plan::Instruction &instruction) {
  if (instruction.has_send_recv()) {
    const plan::SendRecv &transfer = instruction.send_recv();
    return std::string(transfer.is_send() ? "send " : "receive ") +
           describeBuffer(program, transfer.buffer()) +
           (transfer.is_send() ? " to " : " from ") + transfer.mesh_axis() +
           "=" + std::to_string(transfer.peer()) + " tag " +
           std::to_string(transfer.tag());
  }
  const plan::Collective &collective = instruction.collective();
  std::string text = getCollectiveKindName(collective.kind());
  if (collective.reduction() != plan::REDUCTION_UNSPECIFIED)
    text += " " + lower(plan::ReductionKind_Name(collective.reduction()));
  text += " " + describeBuffer(program, collective.input()) + " -> " +
          describeBuffer(program, collective.output()) + " over (";
  for (int i = 0; i < collective.mesh_axes_size(); ++i)
    text += (i ? ", " : "") + collective.mesh_axes(i);
  return text + ")";
}

Status runtime::checkManifest(const plan::Plan &plan) {
  Manifest manifest(plan);
  return Simulation(plan, manifest).run();
}
