// NodeEnv: how a node check reads the host it runs on.
//
// Node checks take their inputs through this interface rather than calling the OS, so a test
// feeds them any host it likes (FakeNodeEnv in node_env_testing.h) and the same check code
// runs unchanged on a real node (NewSystemNodeEnv). It is LevelDB's Env seam, kept to what the
// checks read; a check that needs more adds a method here.
//
// Thread-safety: the system implementation is safe to call concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "railyard/base/status.h"

namespace railyard::validate {

class NodeEnv {
 public:
  virtual ~NodeEnv() = default;

  // The soft RLIMIT_MEMLOCK of this process in bytes; kUnlimited (profile.h) for
  // RLIM_INFINITY. Errors: the errno Status of getrlimit.
  virtual Result<uint64_t> MemlockLimit() = 0;

  // The whole text of a small kernel file ("/proc/meminfo", "/sys/class/..."). NOT_FOUND
  // when it does not exist; other read failures as base::ReadFile.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;

  // Whether this process runs as root (effective uid 0).
  virtual bool IsRoot() = 0;
};

// The real host. Never null.
std::unique_ptr<NodeEnv> NewSystemNodeEnv();

}  // namespace railyard::validate
