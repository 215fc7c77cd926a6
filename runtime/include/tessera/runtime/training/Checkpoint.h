//===- Checkpoint.h - tessera-run's checkpoints ------------------*- C++
//-*-===//
//
// A checkpoint is a directory: per rank rank-<N>.tensors, its pieces of the
// parameters and optimizer state, with rank-<N>.txt naming each (name,
// dtype, global shape, layout) and recording the tensors file's XXH3-64;
// and index.txt (rank 0's: the format, the step reached, the mesh, the
// XXH3-64 of every rank's rank-<N>.txt, and last that of its own text).
// So the whole checkpoint is under one chain of checksums, which a load
// checks before it trusts a name, a layout, the step or the format; an
// unkeyed checksum finds damage and edits, not a forger who recomputes it.
// A save writes into <dir>.partial and, once every rank has written and
// synced its files, rank 0 seals them in index.txt and swaps the directory
// in: in one rename that exchanges the two directories where the file
// system can, else by two renames through <dir>.old. A kill at any moment
// leaves the previous checkpoint whole, in <dir> (or in <dir>.old between
// the two renames, where a load finds it). A load matches the tensors by
// name, layout, dtype and shape, never by position. Every path it opens is
// the directory's index.txt or a rank's files, by a rank number below the
// saved mesh's device count: nothing a checkpoint holds names a file.
//
// Formats: a save writes v3. A v2 checkpoint (saved before v3: index.txt
// without checksums) still loads, since its own check holds: each tensors
// file against its rank's checksum; its names and layouts are unchecked,
// and a load says so. A v2 index with v3 rank files, or with a v3 index's
// lines, is a relabelled v3 and is refused. A v1 checkpoint (tensors by
// position, no checksum at all) is refused: nothing in it can be checked.
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

/// The two parts of a save, without the ranks' agreement and the swap, for
/// a checkpoint put together in one process (the tests', the fuzzer's):
/// rank `rank`'s files written into `dir`, and then `dir`'s index.txt,
/// sealing the rank files of every rank of `mesh` found there.
Status writeCheckpointShard(const std::string &dir,
                            const plan::Program &program,
                            const std::vector<OwnedTensor> &locals, int rank);
Status writeCheckpointIndex(const std::string &dir, const Mesh &mesh,
                            int64_t step);

/// Reads this rank's pieces from `dir` into `locals` (`program` is this
/// rank's of `plan`); the step the checkpoint reached comes back through
/// `step`. A checkpoint whose checksums do not hold is refused, naming the
/// file that does not match.
Status loadCheckpoint(const std::string &dir, const plan::Plan &plan,
                      const plan::Program &program, const Mesh &mesh,
                      std::vector<OwnedTensor> &locals, int rank,
                      int64_t &step);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_TRAINING_CHECKPOINT_H
