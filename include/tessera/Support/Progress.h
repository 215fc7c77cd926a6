//===- Progress.h - A progress line on a terminal ---------------*- C++ -*-===//
//
// One line on stderr that a long search, compile or run redraws in place
// ("plans considered 512, best 1.84 s"), shown only where stderr is a
// terminal (so never in a log or a pipe), at most ten times a second, and
// cleared when done or destroyed.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SUPPORT_PROGRESS_H
#define TESSERA_SUPPORT_PROGRESS_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

namespace tessera {

class ProgressLine {
public:
  ProgressLine() : enabled(llvm::sys::Process::StandardErrIsDisplayed()) {}
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine &) = delete;
  ProgressLine &operator=(const ProgressLine &) = delete;

  bool isEnabled() const { return enabled; }

  /// Redraws the line as `text`, unless it was drawn less than 100 ms ago.
  void update(const llvm::Twine &text) {
    if (!enabled)
      return;
    auto now = std::chrono::steady_clock::now();
    if (shown && now - last < std::chrono::milliseconds(100))
      return;
    last = now;
    shown = true;
    // Back to the line's start, then the text over what was there.
    llvm::errs() << "\r\x1b[K" << text;
    llvm::errs().flush();
  }

  /// Erases the line.
  void clear() {
    if (!shown)
      return;
    llvm::errs() << "\r\x1b[K";
    llvm::errs().flush();
    shown = false;
  }

private:
  bool enabled;
  bool shown = false;
  std::chrono::steady_clock::time_point last;
};

} // namespace tessera

#endif // TESSERA_SUPPORT_PROGRESS_H
