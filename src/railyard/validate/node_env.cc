#include "railyard/validate/node_env.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>

#include "railyard/base/files.h"
#include "railyard/topo/discover.h"
#include "railyard/validate/internal/nvml.h"
#include "railyard/validate/profile.h"

namespace railyard::validate {
namespace {

// fi_getinfo may stall on a misconfigured provider; node checks must finish in seconds.
constexpr std::chrono::milliseconds kFabricTimeout{1500};

Result<std::vector<std::string>> ProvidersFromDiscovery() {
  // Discovery's libfabric source already time-boxes fi_getinfo; the other sources are off.
  Result<topo::Discovery> d = topo::DiscoverNode({.use_hwloc = false,
                                                  .use_libfabric = true,
                                                  .use_nvml = false,
                                                  .fabric_timeout = kFabricTimeout,
                                                  .hostname = "localhost"});
  if (!d.ok()) return d.status();
  auto libfabric_note = [&] {
    for (const std::string& n : d->notes) {
      if (n.starts_with("libfabric")) return n;
    }
    return std::string("libfabric: no answer");
  };
  if (!d->sources.fabric.starts_with("libfabric ")) return Unavailable("{}", libfabric_note());
  if (d->fabric_providers.empty()) {
    std::string note = libfabric_note();
    if (note.find("did not answer") != std::string::npos) return DeadlineExceeded("{}", note);
  }
  return d->fabric_providers;
}

Result<std::vector<topo::GpuNicPath>> PathsFromDiscovery() {
  RY_ASSIGN_OR_RETURN(
      topo::Discovery d,
      topo::DiscoverNode(
          {.use_hwloc = false, .use_libfabric = false, .use_nvml = true, .hostname = "localhost"}));
  return d.node.gpu_nic_paths;
}

class SystemNodeEnv final : public NodeEnv {
 public:
  Result<uint64_t> MemlockLimit() override {
    rlimit rl{};
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return ErrnoStatus(errno, "getrlimit(MEMLOCK)");
    if (rl.rlim_cur == RLIM_INFINITY) return kUnlimited;
    return static_cast<uint64_t>(rl.rlim_cur);
  }
  Result<std::string> ReadFile(const std::string& path) override { return base::ReadFile(path); }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return ErrnoStatus(errno, "opendir " + path);
    std::vector<std::string> names;
    while (dirent* e = readdir(dir)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }
  Result<FsSpace> Space(const std::string& path) override {
    struct statfs s {};
    if (statfs(path.c_str(), &s) != 0) return ErrnoStatus(errno, "statfs " + path);
    return FsSpace{.total_bytes = static_cast<uint64_t>(s.f_blocks) * s.f_frsize,
                   .available_bytes = static_cast<uint64_t>(s.f_bavail) * s.f_frsize};
  }
  bool IsRoot() override { return geteuid() == 0; }
  Result<std::vector<std::string>> FabricProviders() override {
    std::call_once(providers_once_, [this] { providers_ = ProvidersFromDiscovery(); });
    return providers_;
  }
  Result<std::vector<GpuState>> Gpus() override {
    std::call_once(gpus_once_, [this] { gpus_ = internal::GpusFromNvml("libnvidia-ml.so.1"); });
    return gpus_;
  }
  Result<std::vector<topo::GpuNicPath>> GpuNicPaths() override {
    std::call_once(paths_once_, [this] { paths_ = PathsFromDiscovery(); });
    return paths_;
  }

 private:
  std::once_flag providers_once_, gpus_once_, paths_once_;
  Result<std::vector<std::string>> providers_ = Unavailable("not probed");
  Result<std::vector<GpuState>> gpus_ = Unavailable("not probed");
  Result<std::vector<topo::GpuNicPath>> paths_ = Unavailable("not probed");
};

}  // namespace

std::unique_ptr<NodeEnv> NewSystemNodeEnv() { return std::make_unique<SystemNodeEnv>(); }

}  // namespace railyard::validate
