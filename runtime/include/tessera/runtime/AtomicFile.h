//===- AtomicFile.h - Files written whole or not at all ---------*- C++ -*-===//
//
// Weights, token files, checkpoints and the parameter server's state files
// are written to a staging file beside their path, synced to disk and
// renamed over it: a reader, or a run that resumes after a crash, sees the
// old file or the new one, never a part.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_ATOMICFILE_H
#define TESSERA_RUNTIME_ATOMICFILE_H

#include "tessera/runtime/Status.h"

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::runtime {

/// Writes `path` whole: `write` writes the staging file it is given
/// (`path` + ".tmp"), which is then synced to disk and renamed over
/// `path`. Where `write` or the rename fails, the staging file is removed
/// and `path` is left as it was; a failure of the rename or the sync is a
/// DataError "cannot write <what> '<path>': <reason>" (`what` may be
/// empty).
Status writeFileAtomically(
    const std::string &path,
    const std::function<Status(const std::string &staging)> &write,
    const std::string &what = "");

/// writeFileAtomically of `pieces`, one after another.
Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &pieces,
                           const std::string &what = "");

/// Writes all of `bytes` from `data` at the descriptor's offset, resuming
/// after a partial write or a signal; false on an error (errno says which).
bool writeAll(int descriptor, const void *data, size_t bytes);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_ATOMICFILE_H
