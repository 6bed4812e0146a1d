#include "railyard/net/interfaces.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <memory>
#include <set>

namespace railyard::net {
namespace {

// IFNAMSIZ includes the terminating NUL.
constexpr size_t kMaxInterfaceName = IFNAMSIZ - 1;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Bridges and veth pairs of containers and VMs carry an IPv4 address but do not reach other
// hosts; choosing one by default is a classic cause of "rank 5 cannot connect" in clusters.
bool IsBridgeName(std::string_view name) {
  return StartsWith(name, "docker") || StartsWith(name, "virbr") || StartsWith(name, "veth");
}

bool Matches(const InterfaceSpec& spec, std::string_view name) {
  bool listed = std::any_of(spec.names.begin(), spec.names.end(), [&](const std::string& n) {
    return spec.exact ? name == n : StartsWith(name, n);
  });
  return spec.exclude ? !listed : listed;
}

std::string DescribeAll(const std::vector<NetInterface>& all) {
  if (all.empty()) return "none with an IPv4 address";
  std::string out;
  for (const auto& nic : all) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({}{})", nic.name, nic.ipv4, nic.up ? "" : ", down");
  }
  return out;
}

}  // namespace

Result<InterfaceSpec> ParseInterfaceSpec(std::string_view spec) {
  InterfaceSpec out;
  if (spec.empty()) return out;
  std::string_view rest = spec;
  if (rest.front() == '^') {
    out.exclude = true;
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest.front() == '=') {
    out.exact = true;
    rest.remove_prefix(1);
  }
  for (;;) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.empty()) {
      return InvalidArgument(
          "interface spec '{}' has an empty item: expected a comma-separated list of names or "
          "prefixes, optionally after '^' (exclude) and/or '=' (exact names)",
          spec);
    }
    if (item.size() > kMaxInterfaceName) {
      return InvalidArgument(
          "interface spec '{}': '{}' is longer than an interface name ({} bytes)", spec, item,
          kMaxInterfaceName);
    }
    for (char c : item) {
      if (c == '/' || c == '^' || c == '=' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
        return InvalidArgument("interface spec '{}': '{}' is not an interface name", spec, item);
      }
    }
    out.names.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<NetInterface> FilterInterfaces(const std::vector<NetInterface>& all,
                                           const InterfaceSpec& spec) {
  std::vector<NetInterface> out;
  for (const auto& nic : all) {
    if (spec.names.empty() || Matches(spec, nic.name)) out.push_back(nic);
  }
  return out;
}

Result<std::vector<NetInterface>> ListInterfaces() {
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) return ErrnoStatus(errno, "getifaddrs (listing interfaces)");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> list(raw, ::freeifaddrs);
  std::vector<NetInterface> out;
  std::set<std::string> seen;
  for (ifaddrs* ifa = raw; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if (!seen.insert(ifa->ifa_name).second) continue;  // secondary addresses: keep the first
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) == nullptr) continue;
    NetInterface nic;
    nic.name = ifa->ifa_name;
    nic.ipv4 = buf;
    nic.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    nic.up = (ifa->ifa_flags & IFF_UP) != 0 && (ifa->ifa_flags & IFF_RUNNING) != 0;
    out.push_back(std::move(nic));
  }
  return out;
}

Result<NetInterface> ChooseInterfaceFrom(const std::vector<NetInterface>& all,
                                         std::string_view spec) {
  RY_ASSIGN_OR_RETURN(InterfaceSpec parsed, ParseInterfaceSpec(spec));
  // Lower rank is better: real NICs, then bridges (only when a spec asked for them), then
  // loopback.
  auto rank = [&](const NetInterface& nic) {
    if (nic.loopback) return 2;
    return IsBridgeName(nic.name) ? 1 : 0;
  };
  const NetInterface* best = nullptr;
  for (const auto& nic : all) {
    if (!nic.up || !(parsed.names.empty() || Matches(parsed, nic.name))) continue;
    if (spec.empty() && !nic.loopback && IsBridgeName(nic.name)) continue;
    if (best == nullptr || rank(nic) < rank(*best)) best = &nic;
  }
  if (best == nullptr) {
    if (spec.empty()) {
      return NotFound("no usable network interface (up, with an IPv4 address); interfaces here: {}",
                      DescribeAll(all));
    }
    return NotFound("no network interface matches RAILYARD_SOCKET_IFNAME='{}'; interfaces here: {}",
                    spec, DescribeAll(all));
  }
  return *best;
}

Result<NetInterface> ChooseInterface(std::string_view spec) {
  RY_ASSIGN_OR_RETURN(std::vector<NetInterface> all, ListInterfaces());
  return ChooseInterfaceFrom(all, spec);
}

}  // namespace railyard::net
