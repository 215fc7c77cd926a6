//===- Trainer.h - A plan's training steps on one rank ----------*- C++ -*-===//
//
// The training loop of tessera-run as a library: on one rank of a job, the
// device and communicator, the step's arguments (generated from a seed, or
// read from tensor files, a safetensors checkpoint or a sharded checkpoint),
// the steps with their data feed, log, metrics, traces and checkpoints,
// and at the end the losses and results gathered to rank 0, which prints
// and writes them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAINING_TRAINER_H
#define TESSERA_RUNTIME_TRAINING_TRAINER_H

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Device.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Safetensors.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"
#include "tessera/runtime/training/Job.h"

#include "plan.pb.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime {

/// What a run reads and writes (tessera-run's options of the same names).
struct TrainerOptions {
  int64_t steps = 1;
  /// The seed of generated inputs (and of the data feed's order).
  uint64_t seed = 0;
  /// Tensor files: every step argument (or with `weights` the data ones),
  /// and the parameters in step order.
  std::string inputs, weights;
  /// Tensor files written: the step's global inputs, the results, and a
  /// text file of the losses.
  std::string dumpInputs, dumpOutputs, dumpLosses;
  /// Sharded checkpoint directories (Checkpoint.h).
  std::string saveCheckpoint, loadCheckpoint;
  /// With `saveCheckpoint`: also save after every this many steps (0: only
  /// at the end).
  int64_t saveEvery = 0;
  /// A token file the steps read their batches from (Data.h).
  std::string data;
  /// Safetensors files of the parameters by name, read and written.
  std::string loadWeights, saveWeights;
  /// With `saveWeights` NAME.safetensors.index.json: the bytes after which a
  /// shard is closed (Hugging Face's default, 5 GB).
  int64_t shardBytes = 5000000000;
  /// A JSON-lines file of each step's loss and metrics.
  std::string metrics;
  /// A directory for Chrome traces, a file per rank and one of all.
  std::string traceDir;
  /// Report the step time (and a checkpoint's) on rank 0.
  bool time = false;
  /// "cpu" or "cuda".
  std::string device = "cpu";
  double commTimeout = 600;
  /// The CPU kernels' threads; 0: the default (getDefaultKernelThreads).
  int threads = 0;
};

/// Fails unless every output `options` names can be written: the
/// directories of the traces and the checkpoint are made (as the save would
/// make them) and must be writable, and each written file's directory must
/// exist and be writable. Checked before the first step, so that a
/// mistyped path does not cost the run.
Status checkTrainerOutputs(const TrainerOptions &options);

/// Runs `plan`'s training steps on this rank of `job`.
class Trainer {
public:
  /// `mpiSerialized`: MPI granted MPI_THREAD_SERIALIZED or more, so that
  /// the communicator may progress collectives from a thread.
  Trainer(const plan::Plan &plan, const Job &job, TrainerOptions options,
          bool mpiSerialized);
  ~Trainer();

  /// Runs the whole training: sets up, runs the steps and gathers the
  /// results. Fails with this rank's first error (the caller ends the job,
  /// so that no rank waits for it).
  Status run();

private:
  static Status fail(const std::string &message) {
    return invalidArgument(message);
  }
  /// The device, the communicator and its groups.
  Status setUp();
  struct InputSources;
  /// The step's arguments on this rank (`locals`).
  Status prepareArguments();
  /// Which step tensors each argument holds, their roles, and which file
  /// tensor gives each parameter and data argument.
  void findInputSources(InputSources &sources) const;
  /// Reads --weights, --load-weights and --inputs, checked against the
  /// step.
  Status readGivenInputs(InputSources &sources) const;
  /// This rank's piece of argument `index` of its program, made from its
  /// step tensors' sources.
  Status addLocalArgument(int index, InputSources &sources);
  /// --load-weights: opens the safetensors file and finds each parameter
  /// of the step (by its index; a weight stash's, its parameter's) under
  /// its name, checked against its dtype and shape; every mismatch is
  /// reported at once.
  Status matchLoadedWeights(
      const std::map<int64_t, int64_t> &stashOf,
      std::optional<SafetensorsCheckpoint> &safetensors,
      std::map<int64_t, const SafetensorsFile::Entry *> &entryOf) const;
  /// --load-checkpoint: the arguments and the step a checkpoint reached,
  /// checked against the steps to run.
  Status resumeFromCheckpoint();
  /// The steps, with the data feed, the log and checkpoints on the way.
  Status train();
  /// The step's updates (`results`) as the next step's arguments.
  void takeUpdates();
  /// --time: the steps' mean and fastest time, the first and last aside.
  void printStepTimes() const;
  /// Chrome traces: this rank's, and rank 0 every rank's in one.
  Status writeTraces();
  /// The losses and results on rank 0, printed and written.
  Status gatherResults();
  /// Whether rank 0 gathers `result`: the new parameters and optimizer
  /// state (results that update an argument, the size of the model on
  /// every rank) only where they are written out.
  bool isGathered(const plan::Result &result) const;
  /// On rank 0, each global result by its index in the step, put together
  /// from the ranks' gathered bytes (`everyone`; rank r's results from
  /// `resultsAt[r]` on), the loss printed.
  Status assembleResults(std::vector<std::vector<uint8_t>> &everyone,
                         const std::vector<size_t> &resultsAt,
                         std::map<int64_t, OwnedTensor> &globalResults);
  /// On rank 0, --save-weights and --dump-outputs of the global results
  /// by their index in the step.
  Status writeResults(std::map<int64_t, OwnedTensor> &globalResults);

  const plan::Plan &plan;
  const Job &job;
  TrainerOptions options;
  bool mpiSerialized;
  int rank;
  Mesh mesh;
  std::unique_ptr<Device> device;
  std::unique_ptr<Communicator> communicator;
  const plan::Program *program = nullptr;
  std::unique_ptr<Executor> executor;
  /// The step's arguments on this rank, then each step's updates.
  std::vector<OwnedTensor> locals;
  std::vector<OwnedTensor> results;
  std::vector<double> losses, stepSeconds;
  /// The step a loaded checkpoint reached (0: none).
  int64_t firstStep = 0;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_TRAINER_H
