//===- Manifest.h - What each rank communicates, and in what order -*- C++
//-*-===//
//
// A plan's collective manifest: per program, the collectives and transfers
// of one step in the order a run issues them. The runtime matches a
// collective by its order on its group's communicator and a transfer by
// its order on its channel, so a group whose members issue other
// operations, or a rank that waits for what its peer issues only after
// waiting for it, hangs a real cluster. checkManifest finds both before
// anything runs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_MANIFEST_H
#define TESSERA_RUNTIME_MANIFEST_H

#include "plan.pb.h"
#include "tessera/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::runtime {

/// One instruction of a run, in the order the run executes it.
struct RunStep {
  int64_t instruction = 0;
  /// The schedule entry that runs it (and its microbatch), or -1: the
  /// instructions before and after the units run once.
  int64_t entry = -1, microbatch = -1;
};

/// Calls `visit(step)` on each instruction of one run of `program` in run
/// order (with units: those before the units, each schedule entry's unit,
/// then those after), and `endEntry(entry)` after each schedule entry's
/// unit, where its sends are waited for.
template <typename Visit, typename EndEntry>
void forEachRunStep(const plan::Program &program, Visit visit,
                    EndEntry endEntry) {
  auto run = [&](int64_t begin, int64_t end, int64_t entry,
                 int64_t microbatch) {
    for (int64_t i = begin; i < end; ++i)
      visit(RunStep{i, entry, microbatch});
  };
  if (program.units().empty()) {
    run(0, program.instructions_size(), -1, -1);
    return;
  }
  run(0, program.units(0).begin(), -1, -1);
  for (int64_t entry = 0; entry < program.schedule_size(); ++entry) {
    const plan::ScheduleEntry &scheduled = program.schedule(entry);
    const plan::Unit &unit = program.units(scheduled.unit());
    run(unit.begin(), unit.end(), entry, scheduled.microbatch());
    endEntry(entry);
  }
  run(program.units().rbegin()->end(), program.instructions_size(), -1, -1);
}

/// A collective's kind as the plan and the dist dialect name it:
/// "all_reduce".
std::string getCollectiveKindName(plan::CollectiveKind kind);

/// Whether an instruction communicates: a collective (but a slice, which
/// keeps a local piece) or a transfer.
bool isCommunication(const plan::Instruction &instruction);

/// What a communicating instruction of `program` does, for a manifest or
/// an error: "all_reduce sum f32[4, 8] over (dp)", "send f32[4, 8] to pp=1
/// tag 3".
std::string describeCommunication(const plan::Program &program,
                                  const plan::Instruction &instruction);

/// Checks that the members of every collective's group issue the same
/// collectives (kind, reduction, dims, dtypes and shapes) in the same order
/// on its communicator, and that the ranks' collectives, transfers and
/// waits let every run finish: a blocking collective completes when all its
/// group has issued it, a receive when its send has been issued, a send
/// (and a wait for a started one) when its receive has been posted. Fails
/// with an invalid plan error naming the op, its instruction and the ranks.
/// For plans whose transfers validatePlan has matched.
Status checkManifest(const plan::Plan &plan);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_MANIFEST_H
