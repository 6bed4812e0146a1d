// FakeNodeEnv: a NodeEnv whose answers a test sets, for node-check tests.
//
//   FakeNodeEnv env;
//   env.memlock = 64 * 1024;
//   env.files["/proc/meminfo"] = "SwapTotal: 0 kB\nSwapFree: 0 kB\n";
//   env.dirs["/sys/class/infiniband"] = {"mlx5_0"};
//
// A file, directory or statfs path not set is NOT_FOUND; `memlock_error` makes MemlockLimit
// fail. Providers and GPUs answer their Result as set (UNAVAILABLE / NOT_FOUND by default).
#pragma once

#include <map>
#include <string>
#include <vector>

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
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    auto it = dirs.find(path);
    if (it == dirs.end()) return NotFound("{}: no such directory", path);
    return it->second;
  }
  Result<FsSpace> Space(const std::string& path) override {
    auto it = spaces.find(path);
    if (it == spaces.end()) return NotFound("statfs {}: no such file or directory", path);
    return it->second;
  }
  bool IsRoot() override { return root; }
  Result<std::vector<std::string>> FabricProviders() override { return providers; }
  Result<std::vector<GpuState>> Gpus() override { return gpus; }
  Result<std::vector<topo::GpuNicPath>> GpuNicPaths() override { return paths; }

  uint64_t memlock = kUnlimited;
  Status memlock_error;
  std::map<std::string, std::string> files;
  std::map<std::string, std::vector<std::string>> dirs;
  std::map<std::string, FsSpace> spaces;
  bool root = false;
  Result<std::vector<std::string>> providers = Unavailable("libfabric.so.1 not found");
  Result<std::vector<GpuState>> gpus = NotFound("NVML not found (libnvidia-ml.so.1)");
  Result<std::vector<topo::GpuNicPath>> paths = std::vector<topo::GpuNicPath>{};
};

}  // namespace railyard::validate
