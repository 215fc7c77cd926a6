//===- Checkpoint.h - tessera-run's checkpoints ------------------*- C++
//-*-===//
//
// A checkpoint is a directory: index.txt (rank 0: the format, the step
// reached and the mesh), and per rank rank-<N>.tensors, its pieces of the
// parameters and optimizer state, with rank-<N>.txt naming each (name,
// dtype, global shape, layout) and the tensors file's XXH3-64. A save
// writes into <dir>.partial and, once every rank has written and synced
// its files, rank 0 swaps it in: in one rename that exchanges the two
// directories where the file system can, else by two renames through
// <dir>.old. A kill at any moment leaves the previous checkpoint whole, in
// <dir> (or in <dir>.old between the two renames, where a load finds it). A
// load matches the tensors by name, layout, dtype and shape, never by
// position, and checks the checksum.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAINING_CHECKPOINT_H
#define TESSERA_RUNTIME_TRAINING_CHECKPOINT_H

#include "tessera/runtime/training/Job.h"

#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include "plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Saves this rank's parameters and optimizer state (`locals`, by the
/// program's arguments) at `step` into `dir`. Collective over all ranks:
/// every rank learns whether any failed, and the first that failed names
/// why; a rank that never comes is a timeout after `timeoutSeconds`.
Status saveCheckpoint(const std::string &dir, const plan::Program &program,
                      const Mesh &mesh, const std::vector<OwnedTensor> &locals,
                      const Job &job, int64_t step, double timeoutSeconds);

/// Reads this rank's pieces from `dir` into `locals` (`program` is this
/// rank's of `plan`); the step the checkpoint reached comes back through
/// `step`.
Status loadCheckpoint(const std::string &dir, const plan::Plan &plan,
                      const plan::Program &program, const Mesh &mesh,
                      std::vector<OwnedTensor> &locals, int rank,
                      int64_t &step);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_CHECKPOINT_H
