// Small sysfs readers shared by node discovery's sources (discover/*.cc): integer files,
// directory listings in the order people count devices, PCI bus ids in device paths, and the
// NUMA node a device sits on. Internal to topo/discover.cc and its sources.
//
// Every function tolerates a missing or malformed file: it answers nullopt, "" or -1 and the
// caller records a note.
//
// Thread-safety: pure functions of the file system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::topo::internal {

// ---- files and directories (sysfs.cc) ----

// A decimal or 0x-prefixed hex integer file; nullopt when absent or malformed.
std::optional<int64_t> ReadSysfsInt(const std::string& path);

// Canonical path with symlinks resolved, or "" when it does not exist.
std::string RealPath(const std::string& path);

// Entry names of a directory, unsorted; empty when it cannot be read.
std::vector<std::string> ListDir(const std::string& dir);

// `v` sorted so that "mlx5_2" < "mlx5_10": digit runs compare by value, so devices list in
// the order people count them.
std::vector<std::string> SortedNatural(std::vector<std::string> v);

// ---- PCI bus ids in device paths (sysfs_pci.cc) ----

// "0000:17:00.0" (domains may have more than 4 digits behind a VMD controller).
bool IsBdf(std::string_view s);

// The PCI function directory a sysfs device path belongs to: the path cut after its last bus
// id ("/sys/devices/pci0000:00/0000:00:03.0/virtio2" -> ".../0000:00:03.0"), or "".
std::string PciDirOf(const std::string& real_path);

// ---- paths and files (sysfs.cc) ----

// "a/b/c" -> "c".
std::string LastComponent(const std::string& path);

// The NUMA node of a device from its numa_node file (the PCI function's when the device has
// none); -1 when unknown.
int NumaOfDevice(const std::string& device_dir, const std::string& pci_dir);

// ParseCpuList with the file named in its error.
Result<std::vector<int>> ReadCpuList(std::string_view text, const std::string& path);

// Lists at most `limit` names, then "and N more".
std::string JoinSome(const std::vector<std::string>& names, size_t limit = 6);

}  // namespace railyard::topo::internal
