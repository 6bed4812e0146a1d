// Progress: one status line for long work that reads well on a terminal and in a log.
//
// On a terminal each Update() redraws the line in place (carriage return), and Done()
// clears it. Anywhere else (a pipe, a file, a CI log) carriage returns would pile every
// update into one unreadable line, so updates become whole lines instead, at most one per
// tenth of the work plus the last one: a 10-million-sample pack logs eleven lines, not ten
// million. Work of at most kEveryStepUpTo units logs every update.
//
//   base::Progress progress(stderr);
//   for (size_t i = 0; i < n; ++i) progress.Update(i + 1, n, fmt::format("packed {}", i + 1));
//   progress.Done();
//
// Thread-safety: one thread at a time.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace railyard::base {

class Progress {
 public:
  // Writes to `out` (not owned). Whether `out` is a terminal is asked once, here.
  explicit Progress(std::FILE* out);
  // For tests: decide the mode instead of asking the terminal.
  Progress(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}
  ~Progress() { Done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of `total` units are finished (total 0: nothing to do, so finished); `text` is
  // the whole line, without newline.
  void Update(size_t done, size_t total, std::string_view text);
  // Ends the progress display: clears a terminal line; nothing to do for a log.
  void Done();

  bool terminal() const { return terminal_; }

  static constexpr size_t kEveryStepUpTo = 20;

 private:
  std::FILE* out_;
  bool terminal_;
  size_t width_ = 0;     // longest line drawn, to blank it out on a terminal
  int last_tenth_ = -1;  // last tenth of the work logged as a line (not a terminal)
  bool logged_last_ = false;
};

}  // namespace railyard::base
