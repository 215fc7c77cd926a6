//===- Job.cpp - This process's place among the ranks of a run ------------===//

#include "tessera/runtime/training/Job.h"

#include "tessera/runtime/MpiWait.h"

#include <mpi.h>

#include <cstdlib>

using namespace tessera::runtime;

bool Job::needsMpi() {
  for (const char *name :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name))
      return true;
  const char *world = std::getenv("WORLD_SIZE");
  return !world || std::atol(world) <= 1;
}

bool Job::isFirstProcess() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                           "SLURM_PROCID", "RANK"})
    if (const char *value = std::getenv(name))
      return std::atoi(value) == 0;
  return true;
}

void Job::finishMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Finalize();
}

Expected<Job> Job::start(double timeoutSeconds) {
  Job job;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &job.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &job.size);
  }
  if (job.size > 1) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                        &node);
    MPI_Comm_rank(node, &job.localRank);
    MPI_Comm_size(node, &job.localSize);
    MPI_Comm_free(&node);
    return job;
  }
  Expected<TorchrunEnvironment> environment = getTorchrunEnvironment();
  if (!environment.ok())
    return environment.getStatus();
  if (environment->size > 1) {
    Expected<std::unique_ptr<Rendezvous>> met = Rendezvous::connect(
        environment->host, environment->port, environment->rank,
        environment->size, timeoutSeconds);
    if (!met.ok())
      return met.getStatus().withPrefix(
          "rank " + std::to_string(environment->rank) + ": ");
    job.rendezvous = met.take();
    job.rank = environment->rank;
    job.size = environment->size;
    job.localRank = environment->localRank;
    job.localSize = environment->localSize;
    return job;
  }
  const char *tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  if (tasks && std::atol(tasks) > 1)
    return invalidArgument(
        "started as one of " + std::string(tasks) +
        " SLURM tasks, but MPI sees one process: run srun with MPI support "
        "(srun --mpi=pmix tessera-run ...)");
  return job;
}

Status Job::allReduceMin(int value, int &least, double timeoutSeconds,
                         const std::string &why) const {
  // A world of one agrees with itself (and needs no MPI to).
  if (size == 1) {
    least = value;
    return Status::success();
  }
  if (rendezvous)
    return rendezvous->allReduceMin(value, least).withPrefix(why + ": ");
  return allReduceMinWithin(value, least, timeoutSeconds, why);
}

void Job::abort() const {
  if (!rendezvous)
    MPI_Abort(MPI_COMM_WORLD, 1);
  finishMpi();
  std::exit(1);
}
