//===- Job.h - This process's place among the ranks of a run ----*- C++ -*-===//
//
// tessera-run starts under three launchers. Under mpirun (or srun with MPI
// support) MPI's world is the job. Under torchrun-style variables (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) each process is a world
// of one to MPI, and the ranks meet in a TCP rendezvous (Rendezvous.h) that
// bootstraps NCCL: such a job runs on GPUs only, since the CPU backend's
// collectives are MPI's. Either way, the ranks agree on errors through the
// Job outside the plan's collectives.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAINING_JOB_H
#define TESSERA_RUNTIME_TRAINING_JOB_H

#include "tessera/runtime/Rendezvous.h"

#include <memory>
#include <string>

namespace tessera::runtime {

class Job {
public:
  /// Whether this process runs over MPI: an MPI launcher started it, or
  /// nothing did (a world of one). Torchrun-style variables alone (WORLD_SIZE
  /// > 1) need no MPI, and do not start it: their processes would each be
  /// an MPI singleton, racing to make one session directory.
  static bool needsMpi();
  /// Finalizes MPI if it was started and is not finalized yet.
  static void finishMpi();
  /// Whether this process is its job's first by its launcher's variables
  /// (mpirun's, PMIx's, PMI's, SLURM's, torchrun's), or was started alone:
  /// before MPI starts, it speaks for all.
  static bool isFirstProcess();

  /// How this process was started, after MPI_Init where needsMpi: MPI's
  /// world where it has several ranks; else torchrun-style variables with
  /// WORLD_SIZE > 1, whose ranks meet within `timeoutSeconds`; else a world
  /// of one. Fails on a wrong variable, a failed rendezvous, or a
  /// multi-task srun step without MPI support (its tasks have no way to
  /// meet).
  static Expected<Job> start(double timeoutSeconds);

  int getRank() const { return rank; }
  int getSize() const { return size; }
  /// This rank's index among the ranks of its node, and their number.
  int getLocalRank() const { return localRank; }
  int getLocalSize() const { return localSize; }
  /// The rendezvous of a torchrun-style start; null under MPI.
  Rendezvous *getRendezvous() const { return rendezvous.get(); }

  /// The least of every rank's `value` within `timeoutSeconds`; `why` names
  /// what a rank that never comes stopped doing.
  Status allReduceMin(int value, int &least, double timeoutSeconds,
                      const std::string &why) const;

  /// Ends the job after this rank's error: MPI_Abort under MPI (mpirun ends
  /// the other ranks); under torchrun an exit, after which torchrun stops
  /// the others.
  [[noreturn]] void abort() const;

private:
  int rank = 0, size = 1, localRank = 0, localSize = 1;
  std::unique_ptr<Rendezvous> rendezvous;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_JOB_H
