// NICs from sysfs: RDMA devices from class/infiniband (rate from their ACTIVE ports) and
// physical network interfaces from class/net.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/topo/discover.h"
#include "railyard/topo/discover/sources.h"
#include "railyard/topo/discover/sysfs.h"

namespace railyard::topo {
namespace internal {
namespace {

uint64_t NetdevSpeedBits(const std::string& root, const std::string& netdev) {
  std::optional<int64_t> mbps = ReadSysfsInt(root + "/class/net/" + netdev + "/speed");
  return mbps && *mbps > 0 ? static_cast<uint64_t>(*mbps) * 1000000ULL : 0;
}

}  // namespace

// RDMA devices (InfiniBand, RoCE, EFA) from class/infiniband; their rate is the fastest
// ACTIVE port's.
std::vector<FoundNic> RdmaNics(const std::string& root,
                               std::map<std::string, std::vector<std::string>>& netdevs,
                               std::vector<std::string>& notes) {
  std::vector<FoundNic> out;
  const std::string dir = root + "/class/infiniband";
  std::vector<std::string> software;
  for (const std::string& name : SortedNatural(ListDir(dir))) {
    const std::string ib = dir + "/" + name;
    const std::string device = RealPath(ib + "/device");
    const std::string pci_dir = PciDirOf(device);
    if (pci_dir.empty()) {  // rxe/siw ride on an Ethernet netdev: not an RDMA NIC
      software.push_back(name);
      continue;
    }
    FoundNic found;
    found.nic.name = name;
    found.nic.rdma = true;
    found.nic.pci_bus_id = NormalizePciBusId(LastComponent(pci_dir));
    found.nic.numa_node = NumaOfDevice(device, pci_dir);
    found.pci_dir = pci_dir;
    uint64_t active_rate = 0, any_rate = 0;
    bool any_active = false;
    std::vector<std::string> states;
    for (const std::string& port : SortedNatural(ListDir(ib + "/ports"))) {
      const std::string port_dir = ib + "/ports/" + port;
      std::string state = base::ReadTrimmedFile(port_dir + "/state").value_or("unknown");
      std::optional<std::string> rate_text = base::ReadTrimmedFile(port_dir + "/rate");
      uint64_t rate = 0;
      if (rate_text) {
        Result<uint64_t> r = ParseIbRate(*rate_text);
        if (r.ok()) {
          rate = *r;
        } else {
          notes.push_back(fmt::format("{}/rate: {}", port_dir, r.status().message()));
        }
      }
      any_rate = std::max(any_rate, rate);
      if (state.find("ACTIVE") != std::string::npos) {  // "4: ACTIVE"
        any_active = true;
        active_rate = std::max(active_rate, rate);
      } else {
        states.push_back(fmt::format("port {}: {}", port, state));
      }
    }
    found.nic.rate_bits = any_active ? active_rate : any_rate;
    if (!any_active) {
      notes.push_back(fmt::format("{}: no ACTIVE port ({}); rate is the link's nominal one", name,
                                  states.empty() ? "no ports" : JoinSome(states)));
    }
    std::vector<std::string> nets = SortedNatural(ListDir(ib + "/device/net"));
    if (!nets.empty()) {
      if (found.nic.rate_bits == 0) found.nic.rate_bits = NetdevSpeedBits(root, nets.front());
      netdevs[name] = nets;
    }
    out.push_back(std::move(found));
  }
  if (!software.empty()) {
    notes.push_back(fmt::format("software RDMA devices without a PCI function left out: {}",
                                JoinSome(software)));
  }
  return out;
}

// Physical network interfaces (those with a device link), except the ones an RDMA device
// already stands for.
std::vector<FoundNic> NetdevNics(const std::string& root, const std::set<std::string>& taken,
                                 std::vector<std::string>& notes) {
  std::vector<FoundNic> out;
  std::vector<std::string> is_virtual;
  const std::string dir = root + "/class/net";
  for (const std::string& name : SortedNatural(ListDir(dir))) {
    if (name == "lo" || taken.count(name)) continue;
    const std::string device = RealPath(dir + "/" + name + "/device");
    if (device.empty()) {  // bridges, veth, tunnels, bonds
      is_virtual.push_back(name);
      continue;
    }
    FoundNic found;
    found.nic.name = name;
    found.pci_dir = PciDirOf(device);
    if (!found.pci_dir.empty()) {
      found.nic.pci_bus_id = NormalizePciBusId(LastComponent(found.pci_dir));
    }
    found.nic.numa_node = NumaOfDevice(device, found.pci_dir);
    found.nic.rate_bits = NetdevSpeedBits(root, name);
    out.push_back(std::move(found));
  }
  if (!is_virtual.empty()) {
    notes.push_back(
        fmt::format("virtual network interfaces (no device) left out: {}", JoinSome(is_virtual)));
  }
  return out;
}

}  // namespace internal

Result<uint64_t> ParseIbRate(std::string_view text) {
  std::string_view s = base::StripAsciiWhitespace(text);
  size_t space = s.find(' ');
  std::string_view number = s.substr(0, space);
  std::string_view rest =
      space == std::string_view::npos ? "" : base::StripAsciiWhitespace(s.substr(space));
  if (number.empty() || rest.substr(0, 6) != "Gb/sec") {
    return InvalidArgument("expected an InfiniBand rate like \"400 Gb/sec (4X NDR)\", got \"{}\"",
                           s);
  }
  Result<uint64_t> bits = base::ParseRateBits(fmt::format("{}Gbit", number));
  if (!bits.ok()) {
    return InvalidArgument("expected an InfiniBand rate like \"400 Gb/sec (4X NDR)\", got \"{}\"",
                           s);
  }
  return bits;
}

}  // namespace railyard::topo
