#include "railyard/vcluster/vcluster.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/base/units.h"
#include "railyard/vcluster/slurm.h"
#include "railyard/vcluster/topology_file.h"

namespace railyard::vcluster {
namespace {

using Argv = std::vector<std::string>;
constexpr auto kLockWait = std::chrono::seconds(30);
// Inside a namespace the host's interface is always called eth0, as on a real node.
constexpr const char* kHostIf = "eth0";
// How long a link that was just set up may take to pass traffic (see WaitLinksPass).
constexpr auto kLinkWait = std::chrono::seconds(5);
constexpr auto kLinkPoll = std::chrono::milliseconds(10);
// A full scratch directory: a tmpfs this small, filled by one file.
constexpr uint64_t kFullScratchBytes = 1 << 20;

std::string TcRate(uint64_t bits) { return fmt::format("{}bit", bits); }

// tbf needs a bucket of at least one GSO super-packet (64 KiB); larger rates need ~4 ms of
// traffic or the shaper undershoots.
std::string TbfBurst(uint64_t bits) {
  uint64_t bytes = std::max<uint64_t>(bits / 8 / 250, 256 * 1024);
  return fmt::format("{}b", bytes);
}

std::string LockPath(const std::string& dir, std::string_view prefix) {
  return fmt::format("{}/vcluster-{}.lock", dir, prefix);
}

// "5: ry-h0@if4: <BROADCAST,...>" -> "ry-h0"
std::vector<std::string> ParseLinkNames(const std::string& ip_o_link) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < ip_o_link.size()) {
    size_t end = ip_o_link.find('\n', pos);
    if (end == std::string::npos) end = ip_o_link.size();
    std::string line = ip_o_link.substr(pos, end - pos);
    pos = end + 1;
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    size_t start = colon + 2;
    size_t stop = line.find_first_of("@:", start);
    if (stop == std::string::npos) continue;
    names.push_back(line.substr(start, stop - start));
  }
  return names;
}

// "ry-node0 (id: 3)" or "ry-node0" per line -> names
std::vector<std::string> ParseNetnsNames(const std::string& ip_netns_list) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < ip_netns_list.size()) {
    size_t end = ip_netns_list.find('\n', pos);
    if (end == std::string::npos) end = ip_netns_list.size();
    std::string line = ip_netns_list.substr(pos, end - pos);
    pos = end + 1;
    size_t space = line.find(' ');
    std::string name = line.substr(0, space);
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

bool HasPrefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string HostNames(const ClusterPlan& plan) {
  std::string out;
  for (const auto& h : plan.hosts) {
    if (!out.empty()) out += ", ";
    out += h.name;
  }
  return out;
}

// "a\040b" (mountinfo's octal escapes) -> "a b".
std::string UnescapeMountField(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 3 < in.size() && in[i + 1] >= '0' && in[i + 1] <= '3') {
      out += static_cast<char>((in[i + 1] - '0') * 64 + (in[i + 2] - '0') * 8 + (in[i + 3] - '0'));
      i += 3;
    } else {
      out += in[i];
    }
  }
  return out;
}

// Mount points at or below `dir`, in mount order (unmount them in reverse), read from
// /proc/self/mountinfo, so that mounts made by a command that crashed are found too.
std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> found;
  auto text = base::ReadFile("/proc/self/mountinfo");
  if (!text.ok() || dir.empty()) return found;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    std::string_view line(text->data() + pos, end - pos);
    pos = end + 1;
    // "36 35 98:0 /mnt1 /mnt/point rw,... - ext3 ...": the fifth field is the mount point.
    size_t field = 0, start = 0;
    for (size_t i = 0; i <= line.size() && field < 5; ++i) {
      if (i == line.size() || line[i] == ' ') {
        if (++field == 5) {
          std::string point = UnescapeMountField(line.substr(start, i - start));
          if (point == dir || HasPrefix(point, dir + "/")) found.push_back(point);
        }
        start = i + 1;
      }
    }
  }
  return found;
}

// Why the link end `dev` (in `netns`, "" = this namespace) does not pass traffic yet, from
// `ip -j -d link show dev <dev>`; empty when it does: operstate UP, a real qdisc (not the noop
// one a device has while its carrier is off), and for a bridge port the forwarding state.
std::string LinkNotReady(const std::string& ip_json, bool bridge_port) {
  nlohmann::json j = nlohmann::json::parse(ip_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty() || !j[0].is_object()) return "unreadable `ip -j link` output";
  const nlohmann::json& l = j[0];
  std::string oper = l.value("operstate", std::string("?"));
  std::string qdisc = l.value("qdisc", std::string("?"));
  std::string state = "forwarding";
  if (bridge_port) {
    auto info = l.find("linkinfo");
    state = "?";
    if (info != l.end() && info->is_object()) {
      auto slave = info->find("info_slave_data");
      if (slave != info->end() && slave->is_object()) state = slave->value("state", state);
    }
  }
  if (oper == "UP" && qdisc != "noop" && state == "forwarding") return "";
  std::string why = fmt::format("operstate {}, qdisc {}", oper, qdisc);
  if (bridge_port) why += fmt::format(", bridge port {}", state);
  return why;
}

}  // namespace

ModeChoice DetectMode(CommandRunner* runner, std::string_view prefix) {
  if (::geteuid() != 0) {
    return {Mode::kLoopback, "not running as root, so no network namespaces"};
  }
  const std::string probe = fmt::format("{}-probe", prefix);
  auto added = runner->Run({"ip", "netns", "add", probe});
  if (!added.ok()) {
    return {Mode::kLoopback,
            fmt::format("network namespaces unavailable ({})", added.status().message())};
  }
  runner->Run({"ip", "netns", "delete", probe}).status().IgnoreError();
  return {Mode::kNetns, ""};
}

VirtualCluster::VirtualCluster(CommandRunner* runner, std::string state_dir)
    : runner_(runner), state_dir_(std::move(state_dir)) {}

Result<OwnedObjects> VirtualCluster::ListOwned(std::string_view prefix) {
  const std::string owned = OwnedNamePrefix(prefix);
  OwnedObjects found;
  RY_ASSIGN_OR_RETURN(std::string netns, runner_->Run({"ip", "netns", "list"}));
  for (auto& n : ParseNetnsNames(netns)) {
    if (HasPrefix(n, owned)) found.netns.push_back(n);
  }
  RY_ASSIGN_OR_RETURN(std::string links, runner_->Run({"ip", "-o", "link", "show"}));
  for (auto& n : ParseLinkNames(links)) {
    if (HasPrefix(n, owned)) found.links.push_back(n);
  }
  return found;
}

Result<std::vector<std::string>> VirtualCluster::FindOwned(std::string_view prefix) {
  RY_ASSIGN_OR_RETURN(OwnedObjects o, ListOwned(prefix));
  std::vector<std::string> all = o.netns;
  all.insert(all.end(), o.links.begin(), o.links.end());
  return all;
}

// A link set up is not usable at once: the kernel applies the carrier change in its linkwatch
// work, which runs up to a second after the previous run when link events come in bursts
// (as they do while a cluster is built or a host healed). Until then the device keeps the
// noop qdisc, which drops everything, and a bridge port stays disabled, so the first ARP
// requests are lost and connects fail with EHOSTUNREACH. Polls both ends until each reports
// operstate UP with a real qdisc (and a bridge port forwarding), or kLinkWait passes.
Status VirtualCluster::WaitLinksPass(const std::vector<LinkEnd>& ends, std::string_view what) {
  const base::Deadline deadline = base::Deadline::After(kLinkWait);
  std::vector<LinkEnd> pending = ends;
  for (;;) {
    std::string first_why;
    std::vector<LinkEnd> still;
    for (const LinkEnd& e : pending) {
      Argv argv = {"ip"};
      if (!e.netns.empty()) argv.insert(argv.end(), {"-n", e.netns});
      argv.insert(argv.end(), {"-j", "-d", "link", "show", "dev", e.dev});
      RY_ASSIGN_OR_RETURN(std::string out, runner_->Run(argv));
      std::string why = LinkNotReady(out, e.bridge_port);
      if (why.empty()) continue;
      if (still.empty()) first_why = why;
      still.push_back(e);
    }
    if (still.empty()) return Status::Ok();
    if (deadline.Expired()) {
      const LinkEnd& e = still.front();
      return Unavailable(
          "{}: {} link end(s) still do not pass traffic after {} s; first: {}{} ({})", what,
          still.size(), std::chrono::duration_cast<std::chrono::seconds>(kLinkWait).count(), e.dev,
          e.netns.empty() ? "" : " in netns " + e.netns, first_why);
    }
    pending = std::move(still);
    std::this_thread::sleep_for(kLinkPoll);  // a poll interval, bounded by the deadline
  }
}

std::vector<VirtualCluster::LinkEnd> VirtualCluster::HostLinkEnds(const HostPlan& h) const {
  return {{"", h.bridge_port, /*bridge_port=*/true}, {h.netns, kHostIf, /*bridge_port=*/false}};
}

// Unmounts everything at or below `dir`, newest first.
Status VirtualCluster::UnmountUnder(const std::string& dir) {
  std::vector<std::string> mounts = MountsUnder(dir);
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
    RY_RETURN_IF_ERROR(runner_->Run({"umount", *it}).status());
  }
  std::vector<std::string> left = MountsUnder(dir);
  if (!left.empty()) {
    return Internal("{} is still mounted after umount (busy? `fuser -m {}` names who uses it)",
                    left.back(), left.back());
  }
  return Status::Ok();
}

// The shared directory and one subdirectory per host, empty.
Status VirtualCluster::MakeSharedDir(const ClusterState& state) {
  if (!MountsUnder(state.shared_dir).empty()) {
    return FailedPrecondition(
        "{} has mounts from an earlier cluster; run `railyard vcluster down --prefix {}` first",
        state.shared_dir, state.spec().prefix);
  }
  std::error_code ec;
  std::filesystem::remove_all(state.shared_dir, ec);
  for (const auto& h : state.plan.hosts) {
    RY_RETURN_IF_ERROR(base::MakeDirs(state.ScratchDir(h.name)));
  }
  return Status::Ok();
}

// The control address goes on the spine bridge unless another device of the root namespace
// already has an address in the hosts' /16 (another netns cluster holds it): two clusters
// share their hosts' addresses, so only one of them can be reached from here.
Status VirtualCluster::AddControlAddress(ClusterState& state, const ProgressFn& progress) {
  RY_ASSIGN_OR_RETURN(std::string out, runner_->Run({"ip", "-j", "addr", "show", "to",
                                                     fmt::format("198.18.0.0/{}", kSubnetBits)}));
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_array()) {
    for (const auto& dev : j) {
      if (!dev.is_object() || !dev.contains("addr_info") || !dev["addr_info"].is_array()) continue;
      for (const auto& a : dev["addr_info"]) {
        if (!a.is_object() || !a.contains("local")) continue;
        if (progress) {
          progress(fmt::format("no control address: {} already has {} (another virtual cluster?)",
                               dev.value("ifname", std::string("?")),
                               a["local"].get<std::string>()));
        }
        return Status::Ok();
      }
    }
  }
  RY_RETURN_IF_ERROR(
      runner_
          ->Run({"ip", "addr", "add", fmt::format("{}/{}", kControlAddress, kSubnetBits), "dev",
                 state.plan.spine_bridge})
          .status());
  state.control_address = kControlAddress;
  return Status::Ok();
}

Status VirtualCluster::ApplyLinkRate(const std::string& dev, const std::string& netns,
                                     uint64_t rate_bits) {
  Argv tc = {"tc"};
  if (!netns.empty()) tc.insert(tc.end(), {"-n", netns});
  if (rate_bits == 0) {
    // No shaping: remove a qdisc if one is there (deleting none fails harmlessly).
    Argv del = tc;
    del.insert(del.end(), {"qdisc", "del", "dev", dev, "root"});
    runner_->Run(del).status().IgnoreError();
    return Status::Ok();
  }
  Argv add = tc;
  add.insert(add.end(), {"qdisc", "replace", "dev", dev, "root", "tbf", "rate", TcRate(rate_bits),
                         "burst", TbfBurst(rate_bits), "latency", "20ms"});
  return runner_->Run(add).status();
}

// The host's upload direction is an htb on eth0 inside its namespace: a default class at the
// host's rate plus one class per degraded path, selected by destination address. Its
// download direction is a tbf on the bridge-side port. Rebuilt from the state each time, so
// applying it is idempotent.
Status VirtualCluster::ApplyHostShaping(const ClusterState& state, const HostPlan& host) {
  const uint64_t rate = state.HostRate(host.name);
  RY_RETURN_IF_ERROR(ApplyLinkRate(host.bridge_port, "", rate));
  const Argv tc = {"tc", "-n", host.netns};
  auto with = [&](std::initializer_list<std::string> rest) {
    Argv a = tc;
    a.insert(a.end(), rest);
    return a;
  };
  runner_->Run(with({"qdisc", "del", "dev", kHostIf, "root"})).status().IgnoreError();
  std::vector<std::pair<const HostPlan*, uint64_t>> paths;
  for (const auto& p : state.paths) {
    if (p.a == host.name) paths.emplace_back(state.plan.FindHost(p.b), p.rate_bits);
    if (p.b == host.name) paths.emplace_back(state.plan.FindHost(p.a), p.rate_bits);
  }
  if (rate == 0 && paths.empty()) return Status::Ok();
  // "Unshaped" under htb still needs a rate: far above what a veth moves.
  const uint64_t default_rate = rate == 0 ? 100'000'000'000ull : rate;
  RY_RETURN_IF_ERROR(runner_
                         ->Run(with({"qdisc", "add", "dev", kHostIf, "root", "handle", "1:", "htb",
                                     "default", "10"}))
                         .status());
  RY_RETURN_IF_ERROR(runner_
                         ->Run(with({"class", "add", "dev", kHostIf, "parent", "1:", "classid",
                                     "1:10", "htb", "rate", TcRate(default_rate), "ceil",
                                     TcRate(default_rate), "quantum", "60000"}))
                         .status());
  for (const auto& [peer, prate] : paths) {
    if (peer == nullptr) continue;
    const uint64_t r = rate == 0 ? prate : std::min(prate, rate);
    const std::string classid = fmt::format("1:{:x}", 0x100 + peer->index);
    RY_RETURN_IF_ERROR(
        runner_
            ->Run(with({"class", "add", "dev", kHostIf, "parent", "1:", "classid", classid, "htb",
                        "rate", TcRate(r), "ceil", TcRate(r), "quantum", "60000"}))
            .status());
    RY_RETURN_IF_ERROR(runner_
                           ->Run(with({"filter", "add", "dev", kHostIf, "parent", "1:", "protocol",
                                       "ip", "prio", "1", "u32", "match", "ip", "dst",
                                       peer->address + "/32", "flowid", classid}))
                           .status());
  }
  return Status::Ok();
}

Status VirtualCluster::BuildNetns(const ClusterState& state, const ProgressFn& progress) {
  const ClusterPlan& plan = state.plan;
  auto run = [&](Argv argv) { return runner_->Run(argv).status(); };
  RY_RETURN_IF_ERROR(run({"ip", "link", "add", plan.spine_bridge, "type", "bridge"}));
  RY_RETURN_IF_ERROR(run({"ip", "link", "set", plan.spine_bridge, "up"}));
  for (const auto& leaf : plan.leaves) {
    if (progress) progress(fmt::format("leaf {} ({} hosts)", leaf.name, leaf.hosts.size()));
    RY_RETURN_IF_ERROR(run({"ip", "link", "add", leaf.bridge, "type", "bridge"}));
    RY_RETURN_IF_ERROR(run({"ip", "link", "set", leaf.bridge, "up"}));
    RY_RETURN_IF_ERROR(
        run({"ip", "link", "add", leaf.uplink, "type", "veth", "peer", "name", leaf.spine_port}));
    RY_RETURN_IF_ERROR(run({"ip", "link", "set", leaf.uplink, "master", leaf.bridge, "up"}));
    RY_RETURN_IF_ERROR(
        run({"ip", "link", "set", leaf.spine_port, "master", plan.spine_bridge, "up"}));
    RY_RETURN_IF_ERROR(ApplyLinkRate(leaf.uplink, "", plan.spec.spine_rate_bits));
    RY_RETURN_IF_ERROR(ApplyLinkRate(leaf.spine_port, "", plan.spec.spine_rate_bits));
    for (int hi : leaf.hosts) {
      const HostPlan& h = plan.hosts[hi];
      RY_RETURN_IF_ERROR(run({"ip", "netns", "add", h.netns}));
      RY_RETURN_IF_ERROR(run({"ip", "link", "add", h.bridge_port, "type", "veth", "peer", "name",
                              kHostIf, "netns", h.netns}));
      RY_RETURN_IF_ERROR(run({"ip", "link", "set", h.bridge_port, "master", leaf.bridge, "up"}));
      RY_RETURN_IF_ERROR(run({"ip", "-n", h.netns, "addr", "add",
                              fmt::format("{}/{}", h.address, kSubnetBits), "dev", kHostIf}));
      RY_RETURN_IF_ERROR(run({"ip", "-n", h.netns, "link", "set", kHostIf, "up"}));
      RY_RETURN_IF_ERROR(run({"ip", "-n", h.netns, "link", "set", "lo", "up"}));
      RY_RETURN_IF_ERROR(ApplyHostShaping(state, h));
    }
  }
  std::vector<LinkEnd> ends;
  for (const auto& leaf : plan.leaves) {
    ends.push_back({"", leaf.uplink, /*bridge_port=*/true});
    ends.push_back({"", leaf.spine_port, /*bridge_port=*/true});
  }
  for (const auto& h : plan.hosts) {
    for (auto& e : HostLinkEnds(h)) ends.push_back(std::move(e));
  }
  if (progress) progress("waiting for every link to pass traffic");
  return WaitLinksPass(ends, "vcluster up");
}

Status VirtualCluster::Save(const ClusterState& state) {
  return base::WriteFileAtomic(StateFilePath(state_dir_, state.spec().prefix), StateToJson(state));
}

Result<ClusterState> VirtualCluster::Up(const ClusterSpec& spec, const ProgressFn& progress,
                                        const UpOptions& options) {
  RY_RETURN_IF_ERROR(ValidateSpec(spec));
  if (options.slurm) RY_RETURN_IF_ERROR(CheckSlurmSpec(spec));
  RY_RETURN_IF_ERROR(base::MakeDirs(state_dir_));
  RY_ASSIGN_OR_RETURN(
      base::FileLock lock,
      base::FileLock::Acquire(LockPath(state_dir_, spec.prefix), base::Deadline::After(kLockWait)));
  const std::string state_file = StateFilePath(state_dir_, spec.prefix);
  if (base::PathExists(state_file)) {
    auto existing = Load(spec.prefix);
    std::string what = existing.ok()
                           ? fmt::format(" ({} hosts, {} mode, since {})", existing->spec().hosts,
                                         ModeName(existing->spec().mode), existing->created)
                           : "";
    return AlreadyExists(
        "a virtual cluster with prefix '{}' is already up{}; run `railyard vcluster down "
        "--prefix {}` first, or pick another --prefix",
        spec.prefix, what, spec.prefix);
  }
  if (spec.mode == Mode::kNetns) {
    RY_ASSIGN_OR_RETURN(auto leftovers, FindOwned(spec.prefix));
    if (!leftovers.empty()) {
      return FailedPrecondition(
          "{} leftover namespaces/links named '{}*' exist (first: {}) but no state file; "
          "run `railyard vcluster down --prefix {}` to remove them",
          leftovers.size(), OwnedNamePrefix(spec.prefix), leftovers.front(), spec.prefix);
    }
  }
  ClusterState state;
  ClusterSpec effective = spec;
  if (spec.mode == Mode::kLoopback) {
    // Nothing shapes loopback traffic: record the truth rather than the requested rates.
    effective.leaf_rate_bits = 0;
    effective.spine_rate_bits = 0;
  }
  state.plan = MakePlan(effective);
  state.created = NowIso8601();
  state.topology_file = TopologyFilePath(state_dir_, spec.prefix);
  state.shared_dir = SharedDirPath(state_dir_, spec.prefix);
  if (spec.mode == Mode::kLoopback) state.control_address = kLoopbackControlAddress;
  RY_RETURN_IF_ERROR(MakeSharedDir(state));
  Status built;
  if (spec.mode == Mode::kNetns) {
    built = BuildNetns(state, progress);
    if (built.ok()) built = AddControlAddress(state, progress);
  }
  if (built.ok()) {
    Result<std::string> topology = TopologyYaml(state);
    built =
        topology.ok() ? base::WriteFileAtomic(state.topology_file, *topology) : topology.status();
  }
  if (built.ok() && options.slurm) {
    built = StartSlurm(state_dir_, state, progress,
                       {.health_check_command = options.slurm_health_check,
                        .health_check_interval_s = options.slurm_health_interval_s,
                        .fail_for_test = options.slurm_fail_for_test});
  }
  if (built.ok()) built = Save(state);
  if (!built.ok()) {
    if (progress) progress("failed; removing what was created");
    auto removed = DownLocked(spec.prefix, {});
    std::string cleanup = removed.ok() ? "everything it created was removed"
                                       : "cleanup also failed: " + removed.status().message();
    return Status(built.code(),
                  fmt::format("vcluster up failed ({}): {}", cleanup, built.message()));
  }
  return state;
}

Result<DownReport> VirtualCluster::Down(std::string_view prefix, const ProgressFn& progress) {
  RY_RETURN_IF_ERROR(ValidatePrefix(prefix));
  RY_RETURN_IF_ERROR(base::MakeDirs(state_dir_));
  RY_ASSIGN_OR_RETURN(
      base::FileLock lock,
      base::FileLock::Acquire(LockPath(state_dir_, prefix), base::Deadline::After(kLockWait)));
  return DownLocked(prefix, progress);
}

Result<DownReport> VirtualCluster::DownLocked(std::string_view prefix, const ProgressFn& progress) {
  DownReport report;
  const std::string state_file = StateFilePath(state_dir_, prefix);
  report.had_state = base::PathExists(state_file);
  bool netns_mode = true;
  if (report.had_state) {
    auto st = Load(prefix);
    if (st.ok() && st->spec().mode == Mode::kLoopback) netns_mode = false;
  }
  // Before the namespaces go: StopSlurm finds job steps by the namespace they run in.
  RY_RETURN_IF_ERROR(StopSlurm(state_dir_, prefix, progress).WithContext("vcluster down"));
  if (netns_mode) {
    RY_ASSIGN_OR_RETURN(OwnedObjects owned, ListOwned(prefix));
    // Host ports first: deleting one end of a veth removes the eth0 inside the namespace at
    // once, while a namespace's own teardown is asynchronous in the kernel. Then the spine
    // veths, then bridges, then the namespaces.
    auto rank = [&](const std::string& n) {
      std::string_view rest = std::string_view(n).substr(prefix.size() + 1);
      if (HasPrefix(rest, "h")) return 0;
      if (!rest.empty() && (rest.back() == 'u' || rest.back() == 'd')) return 1;
      return 2;
    };
    std::stable_sort(owned.links.begin(), owned.links.end(),
                     [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
    std::vector<Argv> commands;
    for (const auto& name : owned.links) commands.push_back({"ip", "link", "delete", name});
    for (const auto& name : owned.netns) commands.push_back({"ip", "netns", "delete", name});
    for (const auto& cmd : commands) {
      auto r = runner_->Run(cmd);
      if (r.ok()) {
        report.removed.push_back(cmd.back());
        if (progress) progress(fmt::format("removed {}", cmd.back()));
      }
      // A failure here is usually "already gone" (a veth's peer took it along); the
      // re-listing below is what decides success.
    }
    RY_ASSIGN_OR_RETURN(auto remaining, FindOwned(prefix));
    if (!remaining.empty()) {
      return Internal("vcluster down: {} objects named '{}*' could not be removed (first: {})",
                      remaining.size(), OwnedNamePrefix(prefix), remaining.front());
    }
  }
  // Scratch faults are mounts over host directories: unmount before removing, also those a
  // crashed command left (found in mountinfo, not through the state file).
  const std::string shared = SharedDirPath(state_dir_, prefix);
  RY_RETURN_IF_ERROR(UnmountUnder(shared).WithContext("vcluster down"));
  std::error_code ec;
  std::filesystem::remove_all(shared, ec);
  if (ec) {
    return Internal("vcluster down: cannot remove the shared directory {}: {}", shared,
                    ec.message());
  }
  for (const auto& f : {state_file, TopologyFilePath(state_dir_, prefix)}) {
    if (::unlink(f.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno, fmt::format("vcluster down: cannot remove '{}'", f));
    }
  }
  return report;
}

Result<ClusterState> VirtualCluster::Load(std::string_view prefix) const {
  RY_RETURN_IF_ERROR(ValidatePrefix(prefix));
  const std::string path = StateFilePath(state_dir_, prefix);
  auto text = base::ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return FailedPrecondition(
          "no virtual cluster with prefix '{}' is up (no state file {}); start one with "
          "`railyard vcluster up`",
          prefix, path);
    }
    return text.status();
  }
  return StateFromJson(*text, path);
}

Result<std::vector<ClusterState>> VirtualCluster::List() const {
  std::vector<ClusterState> out;
  DIR* d = ::opendir(state_dir_.c_str());
  if (d == nullptr) return out;  // no directory: no clusters
  std::vector<std::string> prefixes;
  while (dirent* e = ::readdir(d)) {
    std::string_view n(e->d_name);
    if (HasPrefix(n, "vcluster-") && n.size() > 14 && n.substr(n.size() - 5) == ".json") {
      prefixes.emplace_back(n.substr(9, n.size() - 14));
    }
  }
  ::closedir(d);
  std::sort(prefixes.begin(), prefixes.end());
  for (const auto& p : prefixes) {
    if (!ValidatePrefix(p).ok()) continue;
    RY_ASSIGN_OR_RETURN(ClusterState s, Load(p));
    out.push_back(std::move(s));
  }
  return out;
}

Result<ClusterState> VirtualCluster::LoadForChange(std::string_view prefix) const {
  RY_ASSIGN_OR_RETURN(ClusterState state, Load(prefix));
  if (state.spec().mode == Mode::kLoopback) {
    return Unimplemented(
        "cluster '{}' runs in loopback mode (no network namespaces), so its links cannot be "
        "shaped or cut; bring it up as root to get namespaces",
        prefix);
  }
  return state;
}

Result<const HostPlan*> VirtualCluster::ResolveHost(const ClusterState& state,
                                                    std::string_view host) const {
  const HostPlan* h = state.plan.FindHost(host);
  if (h == nullptr) {
    return NotFound("unknown host '{}' in cluster '{}' (hosts: {})", host, state.spec().prefix,
                    HostNames(state.plan));
  }
  return h;
}

#define RY_LOCK_CLUSTER(prefix)               \
  RY_RETURN_IF_ERROR(ValidatePrefix(prefix)); \
  RY_ASSIGN_OR_RETURN(                        \
      base::FileLock lock_,                   \
      base::FileLock::Acquire(LockPath(state_dir_, prefix), base::Deadline::After(kLockWait)))

Status VirtualCluster::DegradeHost(std::string_view prefix, std::string_view host,
                                   uint64_t rate_bits) {
  if (rate_bits == 0) return InvalidArgument("--rate must be greater than zero");
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, LoadForChange(prefix));
  RY_ASSIGN_OR_RETURN(const HostPlan* h, ResolveHost(state, host));
  state.host_rates[h->name] = rate_bits;
  RY_RETURN_IF_ERROR(ApplyHostShaping(state, *h));
  return Save(state);
}

Status VirtualCluster::DegradePath(std::string_view prefix, std::string_view a, std::string_view b,
                                   uint64_t rate_bits) {
  if (rate_bits == 0) return InvalidArgument("--rate must be greater than zero");
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, LoadForChange(prefix));
  RY_ASSIGN_OR_RETURN(const HostPlan* ha, ResolveHost(state, a));
  RY_ASSIGN_OR_RETURN(const HostPlan* hb, ResolveHost(state, b));
  if (ha == hb) return InvalidArgument("a path needs two different hosts, got '{}' twice", a);
  if (ha->index > hb->index) std::swap(ha, hb);
  auto it = std::find_if(state.paths.begin(), state.paths.end(),
                         [&](const auto& p) { return p.a == ha->name && p.b == hb->name; });
  if (it != state.paths.end())
    it->rate_bits = rate_bits;
  else
    state.paths.push_back({ha->name, hb->name, rate_bits});
  RY_RETURN_IF_ERROR(ApplyHostShaping(state, *ha));
  RY_RETURN_IF_ERROR(ApplyHostShaping(state, *hb));
  return Save(state);
}

Status VirtualCluster::Restore(std::string_view prefix) {
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, Load(prefix));
  for (const auto& [host, fault] : state.scratch_faults) {
    RY_RETURN_IF_ERROR(UnmountUnder(state.ScratchDir(host)));
  }
  state.scratch_faults.clear();
  state.hidden_providers.clear();
  if (state.spec().mode == Mode::kNetns) {
    std::set<std::string> touched;
    for (const auto& [h, r] : state.host_rates) touched.insert(h);
    for (const auto& p : state.paths) touched.insert({p.a, p.b});
    std::set<std::string> uplinks;
    for (const auto& [leaf, r] : state.uplink_rates) uplinks.insert(leaf);
    state.host_rates.clear();
    state.paths.clear();
    state.uplink_rates.clear();
    for (const auto& name : touched) {
      if (const HostPlan* h = state.plan.FindHost(name))
        RY_RETURN_IF_ERROR(ApplyHostShaping(state, *h));
    }
    for (const auto& name : uplinks) {
      if (const LeafPlan* l = state.plan.FindLeaf(name))
        RY_RETURN_IF_ERROR(ApplyUplinkRate(state, *l));
    }
  }
  return Save(state);
}

Status VirtualCluster::ApplyUplinkRate(const ClusterState& state, const LeafPlan& leaf) {
  const uint64_t rate = state.UplinkRate(leaf.name);
  RY_RETURN_IF_ERROR(ApplyLinkRate(leaf.uplink, "", rate));
  return ApplyLinkRate(leaf.spine_port, "", rate);
}

Status VirtualCluster::DegradeUplink(std::string_view prefix, std::string_view leaf,
                                     uint64_t rate_bits) {
  if (rate_bits == 0) return InvalidArgument("--rate must be greater than zero");
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, LoadForChange(prefix));
  const LeafPlan* l = state.plan.FindLeaf(leaf);
  if (l == nullptr) {
    std::string names;
    for (const auto& x : state.plan.leaves) names += (names.empty() ? "" : ", ") + x.name;
    return NotFound("unknown leaf '{}' in cluster '{}' (leaves: {})", leaf, prefix, names);
  }
  state.uplink_rates[l->name] = rate_bits;
  RY_RETURN_IF_ERROR(ApplyUplinkRate(state, *l));
  return Save(state);
}

Status VirtualCluster::SetScratchFault(std::string_view prefix, std::string_view host,
                                       ScratchFault fault) {
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, Load(prefix));
  RY_ASSIGN_OR_RETURN(const HostPlan* h, ResolveHost(state, host));
  if (state.shared_dir.empty()) {
    return FailedPrecondition(
        "cluster '{}' has no shared directory (it was brought up by an older railyard); "
        "bring it up again",
        prefix);
  }
  const std::string dir = state.ScratchDir(h->name);
  RY_RETURN_IF_ERROR(UnmountUnder(dir));  // a fault replaces the one before
  state.scratch_faults.erase(h->name);
  Status applied;
  if (fault == ScratchFault::kReadOnly) {
    // A bind mount of the directory over itself, then made read-only: the files stay visible,
    // every write fails with EROFS.
    applied = runner_->Run({"mount", "--bind", dir, dir}).status();
    if (applied.ok()) applied = runner_->Run({"mount", "-o", "remount,ro,bind", dir}).status();
  } else {
    applied = runner_
                  ->Run({"mount", "-t", "tmpfs", "-o",
                         fmt::format("size={},mode=0777", kFullScratchBytes),
                         fmt::format("{}-scratch-full", prefix), dir})
                  .status();
    if (applied.ok()) applied = FillDirectory(dir);
  }
  if (!applied.ok()) {
    UnmountUnder(dir).IgnoreError();
    return applied.WithContext(fmt::format("scratch fault on {} ({})", h->name, dir));
  }
  state.scratch_faults[h->name] = fault;
  return Save(state);
}

// Writes one file into `dir` until the file system refuses (ENOSPC), at most twice the size
// of the tmpfs, so that a directory that is not the small tmpfs is never filled.
Status VirtualCluster::FillDirectory(const std::string& dir) {
  const std::string path = dir + "/.railyard-fill";
  base::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot create {}", path));
  std::string block(64 << 10, '\0');
  for (uint64_t written = 0; written < 2 * kFullScratchBytes;) {
    ssize_t n = ::write(fd.get(), block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOSPC) return Status::Ok();
    if (n < 0) return ErrnoStatus(errno, fmt::format("filling {}", path));
    written += static_cast<uint64_t>(n);
  }
  return Status::Ok();  // not the tmpfs (a test's simulated mount): bounded, left as is
}

Status VirtualCluster::HideProvider(std::string_view prefix, std::string_view host,
                                    std::string_view provider) {
  if (provider.empty() || provider.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") !=
                              std::string_view::npos) {
    return InvalidArgument(
        "provider '{}': expected a libfabric provider name such as tcp, verbs, efa or shm",
        provider);
  }
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, Load(prefix));
  RY_ASSIGN_OR_RETURN(const HostPlan* h, ResolveHost(state, host));
  state.hidden_providers[h->name].insert(std::string(provider));
  return Save(state);
}

Status VirtualCluster::ClearFaults(std::string_view prefix, std::string_view host) {
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, Load(prefix));
  RY_ASSIGN_OR_RETURN(const HostPlan* h, ResolveHost(state, host));
  if (!state.shared_dir.empty()) RY_RETURN_IF_ERROR(UnmountUnder(state.ScratchDir(h->name)));
  state.scratch_faults.erase(h->name);
  state.hidden_providers.erase(h->name);
  return Save(state);
}

Status VirtualCluster::Cut(std::string_view prefix, std::string_view host) {
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, LoadForChange(prefix));
  RY_ASSIGN_OR_RETURN(const HostPlan* h, ResolveHost(state, host));
  RY_RETURN_IF_ERROR(runner_->Run({"ip", "link", "set", h->bridge_port, "down"}).status());
  state.cut.insert(h->name);
  return Save(state);
}

Status VirtualCluster::Heal(std::string_view prefix, std::string_view host) {
  RY_LOCK_CLUSTER(prefix);
  RY_ASSIGN_OR_RETURN(ClusterState state, LoadForChange(prefix));
  RY_ASSIGN_OR_RETURN(const HostPlan* h, ResolveHost(state, host));
  RY_RETURN_IF_ERROR(runner_->Run({"ip", "link", "set", h->bridge_port, "up"}).status());
  state.cut.erase(h->name);
  RY_RETURN_IF_ERROR(Save(state));
  RY_RETURN_IF_ERROR(WaitLinksPass(HostLinkEnds(*h), fmt::format("heal {}", h->name)));
  // While the link was down, every attempt to reach across it left an ARP resolution behind
  // (INCOMPLETE, or FAILED): a connect made after the heal would queue behind the old one,
  // waiting up to a second for its next probe, or fail with EHOSTUNREACH when its probes
  // ran out. Forgetting them makes the next packet start a fresh resolution, over a link
  // that now passes traffic.
  RY_RETURN_IF_ERROR(runner_->Run({"ip", "-n", h->netns, "neigh", "flush", "all"}).status());
  for (const auto& other : state.plan.hosts) {
    if (other.name == h->name) continue;
    RY_RETURN_IF_ERROR(
        runner_->Run({"ip", "-n", other.netns, "neigh", "flush", "to", h->address}).status());
  }
  return Status::Ok();
}

}  // namespace railyard::vcluster
