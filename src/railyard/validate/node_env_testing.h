// FakeNodeEnv: a NodeEnv whose answers a test sets, for node-check tests.
//
//   FakeNodeEnv env;
//   env.memlock = 64 * 1024;
//   env.files["/proc/meminfo"] = "SwapTotal: 0 kB\nSwapFree: 0 kB\n";
//
// A file not in `files` is NOT_FOUND; `memlock_error` makes MemlockLimit fail.
#pragma once

#include <map>
#include <string>

#include "railyard/validate/node_env.h"
#include "railyard/validate/profile.h"

namespace railyard::validate {

class FakeNodeEnv final : public NodeEnv {
 public:
  Result<uint64_t> MemlockLimit() override {
    if (!memlock_error.ok()) return memlock_error;
    return memlock;
  }
  Result<std::string> ReadFile(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return NotFound("{}: no such file", path);
    return it->second;
  }
  bool IsRoot() override { return root; }

  uint64_t memlock = kUnlimited;
  Status memlock_error;
  std::map<std::string, std::string> files;
  bool root = false;
};

}  // namespace railyard::validate
