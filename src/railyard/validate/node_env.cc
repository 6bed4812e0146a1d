#include "railyard/validate/node_env.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

#include "railyard/base/files.h"
#include "railyard/validate/profile.h"

namespace railyard::validate {
namespace {

class SystemNodeEnv final : public NodeEnv {
 public:
  Result<uint64_t> MemlockLimit() override {
    rlimit rl{};
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return ErrnoStatus(errno, "getrlimit(MEMLOCK)");
    if (rl.rlim_cur == RLIM_INFINITY) return kUnlimited;
    return static_cast<uint64_t>(rl.rlim_cur);
  }
  Result<std::string> ReadFile(const std::string& path) override { return base::ReadFile(path); }
  bool IsRoot() override { return geteuid() == 0; }
};

}  // namespace

std::unique_ptr<NodeEnv> NewSystemNodeEnv() { return std::make_unique<SystemNodeEnv>(); }

}  // namespace railyard::validate
