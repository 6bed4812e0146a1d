#include "railyard/base/progress.h"

#include <unistd.h>

#include <algorithm>

namespace railyard::base {

Progress::Progress(std::FILE* out) : out_(out), terminal_(::isatty(::fileno(out)) == 1) {}

void Progress::Update(size_t done, size_t total, std::string_view text) {
  if (terminal_) {
    // Pad over what a longer earlier line left on screen.
    size_t pad = width_ > text.size() ? width_ - text.size() : 0;
    std::fprintf(out_, "\r%.*s%*s", static_cast<int>(text.size()), text.data(),
                 static_cast<int>(pad), "");
    width_ = std::max(width_, text.size());
    std::fflush(out_);
    return;
  }
  const bool last = total == 0 || done >= total;
  // Short work (a 12-pair bandwidth matrix) logs every step: each line is news, and a tenth
  // of it would round some steps away.
  const bool every = total <= kEveryStepUpTo;
  const int tenth = total == 0 ? 10 : static_cast<int>(std::min<size_t>(done * 10 / total, 10));
  if (last ? logged_last_ : (!every && tenth <= last_tenth_)) return;
  last_tenth_ = tenth;
  logged_last_ = last;
  std::fprintf(out_, "%.*s\n", static_cast<int>(text.size()), text.data());
  std::fflush(out_);
}

void Progress::Done() {
  if (terminal_ && width_ > 0) {
    std::fprintf(out_, "\r%*s\r", static_cast<int>(width_), "");
    std::fflush(out_);
  }
  width_ = 0;
}

}  // namespace railyard::base
