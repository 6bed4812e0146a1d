#include "railyard/base/clock.h"

#include <limits>

namespace railyard::base {

int Deadline::PollTimeoutMs() const {
  if (IsNever()) return -1;
  auto left = Remaining();
  if (left <= Duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  if (ms > std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  return static_cast<int>(ms);
}

}  // namespace railyard::base
