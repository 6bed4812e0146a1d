// NodeEnv: how a node check reads the host it runs on.
//
// Node checks take their inputs through this interface rather than calling the OS, so a test
// feeds them any host it likes (FakeNodeEnv in node_env_testing.h) and the same check code
// runs unchanged on a real node (NewSystemNodeEnv). It is LevelDB's Env seam, kept to what the
// checks read; a check that needs more adds a method here.
//
// Thread-safety: the system implementation is safe to call concurrently; the answers of the
// slow sources (libfabric, NVML) are computed once per process and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::validate {

// Size and free space of the file system holding a path (statfs).
struct FsSpace {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // to an unprivileged user (f_bavail)
};

// One GPU as NVML reports it. A field NVML does not support on that GPU stays unset.
struct GpuState {
  int index = 0;
  std::string name;                         // "NVIDIA H200"
  std::optional<bool> ecc_enabled;          // current ECC mode
  std::optional<uint64_t> ecc_uncorrected;  // volatile uncorrected ECC errors since boot
  std::optional<bool> remap_pending;        // row remapping waits for a GPU reset
  std::optional<bool> remap_failure;        // a row could not be remapped
};

class NodeEnv {
 public:
  virtual ~NodeEnv() = default;

  // The soft RLIMIT_MEMLOCK of this process in bytes; kUnlimited (profile.h) for
  // RLIM_INFINITY. Errors: the errno Status of getrlimit.
  virtual Result<uint64_t> MemlockLimit() = 0;

  // The whole text of a small kernel file ("/proc/meminfo", "/sys/class/..."). NOT_FOUND
  // when it does not exist; other read failures as base::ReadFile.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;

  // The names in a directory, sorted, without "." and "..". NOT_FOUND when it does not exist.
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;

  // statfs of `path`. NOT_FOUND when it does not exist; other errno Statuses as statfs.
  virtual Result<FsSpace> Space(const std::string& path) = 0;

  // Whether this process runs as root (effective uid 0).
  virtual bool IsRoot() = 0;

  // libfabric providers for FI_EP_RDM with FI_MSG|FI_TAGGED, in libfabric's rank order
  // ("verbs;ofi_rxm", "tcp;ofi_rxm", "shm"). UNAVAILABLE when libfabric cannot be loaded or
  // was not built in; DEADLINE_EXCEEDED when fi_getinfo did not answer.
  virtual Result<std::vector<std::string>> FabricProviders() = 0;

  // The GPUs NVML sees. NOT_FOUND "NVML not found (libnvidia-ml.so.1)" without the library;
  // UNAVAILABLE when a call fails (driver not loaded, ...).
  virtual Result<std::vector<GpuState>> Gpus() = 0;

  // The PCIe distance of every GPU to every NIC, as topo's discovery classifies it from sysfs
  // (GPUs numbered as NVML numbers them, else in PCI order). Empty without GPUs or NICs.
  virtual Result<std::vector<topo::GpuNicPath>> GpuNicPaths() = 0;
};

// The real host. Never null.
std::unique_ptr<NodeEnv> NewSystemNodeEnv();

}  // namespace railyard::validate
