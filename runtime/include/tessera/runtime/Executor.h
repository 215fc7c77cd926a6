//===- Executor.h - Runs one rank's program of a plan ------------*- C++
//-*-===//

#ifndef TESSERA_RUNTIME_EXECUTOR_H
#define TESSERA_RUNTIME_EXECUTOR_H

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Device.h"
#include "tessera/runtime/Plan.h"

#include <chrono>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace tessera::runtime {

/// A run of a program's instructions: a schedule entry's microbatch and
/// slot, or (outside the units) microbatch and slot 0.
struct UnitRun {
  int64_t microbatch = 0, slot = 0;
  bool inUnit = false;
  /// The step (from 0) whose copy of a buffer with step slots is used.
  int64_t step = 0;
};

/// Runs a validated program on this rank: all buffers live in one arena on
/// the device, laid out by the plan's memory plan; kernels run on the device
/// and collectives through the communicator (which must work on the same
/// device's memory).
class Executor {
public:
  /// Without a device, the program runs on the CPU. Loads the program: finds
  /// the device's kernel of every kernel instruction and decodes its
  /// attributes, once (see getLoadStatus).
  Executor(const plan::Program &program, const Mesh &mesh,
           Communicator &communicator, Device *device = nullptr);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Train loops: with this on, the results that update arguments stay on
  /// the device after each run and are the next run's values of those
  /// arguments, so that parameters and optimizer state never travel to the
  /// host and back between steps; the caller's values of them are read by
  /// the first run only.
  void setCarryUpdates(bool on) { carryUpdates = on; }

  /// Whether the program loaded: it fails on an op the device has no kernel
  /// for ("instruction 3: unknown kernel 'nn.foo'"); run answers the same.
  const Status &getLoadStatus() const { return loadStatus; }

  /// Runs the program once on local `arguments` (in the program's argument
  /// order) and returns its local results: all, or where `wanted` (one flag
  /// per result) is given, those it marks (the others keep what they held).
  /// Fails with a message naming the failing instruction.
  Status run(const std::vector<OwnedTensor> &arguments,
             std::vector<OwnedTensor> &results,
             const std::vector<bool> &wanted = {});

  /// Whether a run leaves work of its step to the next (a steady pipeline
  /// program's deferred backwards and updates, plan.proto's
  /// Program.steady): after the last run, drain does it.
  bool hasDeferredWork() const {
    return program.steady() &&
           (program.has_update_after_entry() ||
            program.deferred_end() > program.deferred_begin());
  }
  /// How many steps a run's deferred entries and updates lag its own: 1
  /// under 2BW, p - r - 1 on PipeDream's rank r (0 without deferred work).
  int64_t getLag() const;
  /// Runs what the last runs left of their steps (their deferred entries
  /// and updates, getLag() runs of them) and returns the results as run
  /// does: the state after the last step.
  Status drain(std::vector<OwnedTensor> &results,
               const std::vector<bool> &wanted = {});

  /// One instruction's span, in microseconds since the executor was made
  /// (a traced run waits for each kernel, so that on a GPU a kernel's span
  /// is its run, not the time to queue it): kernels and
  /// blocking collectives on stream 0 (compute), started
  /// collectives on their stream from their start until they were seen
  /// complete (by the communicator's progress thread, else at their wait);
  /// and each pipeline unit's span ("F1.3") on the track kUnitTrack.
  static constexpr int64_t kUnitTrack = -1;
  struct TraceEvent {
    std::string name;
    int64_t stream;
    double start, end;
    /// The instruction it ran (-1: none, as a wait or a unit) and its
    /// microbatch (-1: outside the units); the run (step) it was part of,
    /// from 1.
    int64_t instruction = -1, microbatch = -1, step = 0;
    /// A steady pipeline program's unit: the weights it reads, those after
    /// `version` updates (a step reads Program.weight_delay updates fewer
    /// than its own number, at least none). -1 elsewhere.
    int64_t version = -1;
  };
  /// Records a TraceEvent per instruction from now on (off at first).
  void setTracing(bool on) { tracing = on; }
  /// Every instruction of every traced run so far.
  const std::vector<TraceEvent> &getTrace() const { return trace; }
  /// The trace as Chrome trace JSON (Perfetto opens it): one process per
  /// rank, one thread per stream, a marker where each step starts, and on
  /// each instruction's span its tensors (shapes, dtypes, bytes), its
  /// collective's group or its transfer's peer, its microbatch and step;
  /// flow arrows join a send to its receive across ranks' traces.
  void writeTrace(std::ostream &os, int64_t rank) const;
  /// The events alone, comma-separated (writeTrace's list, which a merged
  /// trace of every rank concatenates).
  void writeTraceEvents(std::ostream &os, int64_t rank) const;

private:
  /// A kernel instruction as loaded: the device's kernel, the attributes
  /// decoded from the plan, and (once the arena exists) its tensors.
  struct LoadedKernel {
    const Kernel *kernel = nullptr;
    KernelAttrs attrs;
    std::vector<Tensor> inputs, outputs;
    std::vector<const Tensor *> inputPointers;
    std::vector<Tensor *> outputPointers;
  };

  /// A collective or send started on a stream, with when and where.
  struct InFlight {
    Pending pending;
    double start;
    std::string name;
    int64_t stream;
    int64_t instruction = -1, microbatch = -1;
  };

  Status load();
  /// Points every loaded kernel's tensors into the arena.
  void bindBuffers();
  /// Buffer `id` in `run`: its slot's copy, its microbatch's rows.
  Tensor getBuffer(int64_t id, const UnitRun &run = {});
  /// Runs instructions [begin, end) in `run`.
  Status runInstructions(int64_t begin, int64_t end, const UnitRun &run);
  /// A run (arguments given) or a drain (none).
  Status runStep(const std::vector<OwnedTensor> *arguments,
                 std::vector<OwnedTensor> &results,
                 const std::vector<bool> &wanted);
  /// Waits for a started collective or send and traces it.
  Status finish(InFlight &started);
  Status runAxisIndex(const plan::AxisIndex &axisIndex, const UnitRun &run);
  Pending startCollective(const plan::Collective &collective,
                          const UnitRun &run);
  /// `when` (by default now) in microseconds since the executor was made.
  double getMicroseconds(std::chrono::steady_clock::time_point when =
                             std::chrono::steady_clock::now()) const;
  void record(TraceEvent event);

  const plan::Program &program;
  const Mesh &mesh;
  Communicator &communicator;
  std::unique_ptr<Device> ownDevice;
  Device &device;
  Status loadStatus;
  /// Per instruction; empty for the instructions that launch no kernel.
  std::vector<LoadedKernel> kernels;
  /// The device's nn.slice, which runs an all_slice collective.
  const Kernel *sliceKernel = nullptr;
  /// The device's nn.add, which runs an accumulate.
  const Kernel *addKernel = nullptr;
  /// Writes an axis_index's values (nn.constant).
  const Kernel *constantKernel = nullptr;
  /// Per kernel instruction: whether its buffers move with the unit run
  /// (slots, microbatch rows), so that its tensors are re-pointed per run.
  std::vector<bool> perRun;
  /// In a run: collectives and sends in flight by event, the units' sends
  /// by (instruction, microbatch), and the accumulators written so far.
  std::map<int64_t, InFlight> inFlight;
  std::map<std::pair<int64_t, int64_t>, InFlight> sendsInFlight;
  /// Per buffer and step parity: a steady program's sums of two steps are
  /// made at once (see Buffer.step_slots).
  static constexpr int64_t kAccumulatorCopies = 2;
  std::vector<bool> accumulated;
  /// Per buffer: whether a steady program's deferred part writes it.
  std::vector<bool> madeDeferred;
  /// The events a steady program's deferred part signals, and whether this
  /// run skipped that part (its step is before the first or, in a drain,
  /// after the last).
  std::set<int64_t> deferredEvents;
  bool deferredSkipped = false;
  /// Device memory of the arena, allocated by the first run.
  void *arena = nullptr;
  bool carryUpdates = false;
  /// With carryUpdates, per argument: device memory holding the result that
  /// updates it, as the last run left it (null for the others, and before
  /// the first run). The arena holds such a result for the next run only
  /// where the memory plan wrote it over the argument (an in-place update):
  /// elsewhere it reuses an argument's memory after the argument's last use.
  std::vector<void *> carried;
  /// Per argument: whether the last run's update of it lies in its own
  /// buffer, where the next run reads it, so that nothing is copied.
  std::vector<bool> updatedInPlace;
  std::chrono::steady_clock::time_point epoch =
      std::chrono::steady_clock::now();
  bool tracing = false;
  std::vector<TraceEvent> trace;
  /// Runs so far: the step a traced event belongs to.
  int64_t runs = 0;
  /// The step of the last run (not a drain); -1 once drained.
  int64_t lastStep = -1;
};

/// The global value of argument `index` for `seed`, the same on every rank:
/// floats uniform in [-0.5, 0.5), integers uniform in [0, index_bound);
/// optimizer state and the step counter start at zero. Fails with a device
/// error naming the argument and its bytes where the host has no memory for
/// it.
Expected<OwnedTensor> makeGlobalInput(const plan::Argument &argument,
                                      uint64_t seed, int64_t index);

/// A unit's flat buffer, of the layout `unit` gives (an Argument or Result
/// with members), from its members' global tensors: their elements one
/// after another, or (a buffer of a row per device of its dim 0 axes) in
/// each row their pieces for the devices of that row's index.
template <typename Message>
OwnedTensor packMembers(const Message &unit,
                        const std::vector<const Tensor *> &members,
                        const Mesh &mesh);

/// The members' global tensors of a unit's flat buffer `global`, of the
/// layout `unit` gives; an error where the layout does not fit the buffer.
template <typename Message>
Expected<std::vector<OwnedTensor>>
unpackMembers(const Message &unit, const Tensor &global, const Mesh &mesh);

/// Sets every step counter (plan::STEP) among `program`'s arguments
/// `locals` to `step`.
void setStepCounters(const plan::Program &program, int64_t step,
                     std::vector<OwnedTensor> &locals);

/// `rank`'s piece of each of `program`'s arguments, from their seeded
/// global values (makeGlobalInput, by each tensor's index in the step;
/// a unit's members packed); fails as makeGlobalInput does.
Expected<std::vector<OwnedTensor>> makeLocalInputs(const plan::Program &program,
                                                   const Mesh &mesh,
                                                   int64_t rank, uint64_t seed);

/// The piece of a global tensor that `rank` holds under `layout`.
OwnedTensor takeLocalPiece(const Tensor &global, const PieceLayout &layout,
                           const Mesh &mesh, int64_t rank);

/// Writes `local`, the piece of `rank` under `layout`, into `global`. Of a
/// flat piece only the elements, not the padding, are written.
void placeLocalPiece(const Tensor &local, const Tensor &global,
                     const PieceLayout &layout, const Mesh &mesh, int64_t rank);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_EXECUTOR_H
