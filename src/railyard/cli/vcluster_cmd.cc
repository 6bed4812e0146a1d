// `railyard vcluster ...`: bring up, inspect, change and remove a virtual cluster.
#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "railyard/base/files.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/vcluster/bandwidth_matrix.h"
#include "railyard/vcluster/vcluster.h"

namespace railyard::cli {
namespace {

using namespace railyard::vcluster;

struct CommonFlags {
  std::string prefix;
  std::string state_dir;
};

void AddCommonFlags(CLI::App* sub, CommonFlags* f) {
  f->prefix = DefaultPrefix();
  f->state_dir = DefaultStateDir();
  sub->add_option("--prefix", f->prefix,
                  "name prefix of every namespace, bridge and veth of the cluster; lets "
                  "several clusters coexist (env RAILYARD_VCLUSTER_PREFIX)")
      ->capture_default_str();
  sub->add_option("--state-dir", f->state_dir,
                  "where state and topology files live (env RAILYARD_STATE_DIR)")
      ->capture_default_str();
}

// The fault-injection hook of the integration tests (--fail-at-for-test N > 0): fail the Nth
// ip/tc command.
std::unique_ptr<CommandRunner> MakeRunner(std::unique_ptr<CommandRunner>* keep, int fail_at) {
  *keep = MakeSystemRunner(std::chrono::seconds(20));
  if (fail_at > 0) return std::make_unique<FailingRunner>(keep->get(), fail_at);
  return nullptr;
}

Result<uint64_t> ParseRateFlag(const std::string& flag, const std::string& text) {
  if (text == "0" || text == "none" || text == "unshaped") return uint64_t{0};
  auto r = base::ParseRateBits(text);
  if (!r.ok()) return r.status().WithContext(flag);
  return r;
}

// The HealthCheckProgram's command for --slurm-health-check PLAN: this railyard's `validate
// node` with the node's Slurm name and --slurm-drain. A plan file is made absolute (slurmd
// runs the check from its own directory) and must exist now, not at the first check.
Status HealthCheckCommand(bool slurm, const std::string& plan, const std::string& interval,
                          UpOptions* options) {
  if (!slurm) return InvalidArgument("--slurm-health-check needs --slurm");
  auto every = base::ParseDuration(interval);
  if (!every.ok() || *every < std::chrono::seconds(1)) {
    return InvalidArgument(
        "--slurm-health-interval {}: expected a duration of at least 1s (Slurm counts whole "
        "seconds)",
        interval);
  }
  std::string path = plan;
  const bool builtin = plan.find('/') == std::string::npos && !base::PathExists(plan);
  if (!builtin) {
    std::error_code ec;
    path = std::filesystem::absolute(plan, ec).string();
    if (ec || !base::PathExists(path)) {
      return NotFound(
          "--slurm-health-check {}: no such plan file (or give a built-in plan: "
          "quick, full, vcluster-quick, vcluster)",
          plan);
    }
  }
  options->slurm_health_check =
      fmt::format("{} validate node --plan {} --host \"$SLURMD_NODENAME\" --slurm-drain",
                  base::ShellQuote(SelfExecutable()), base::ShellQuote(path));
  options->slurm_health_interval_s =
      static_cast<int>(std::chrono::ceil<std::chrono::seconds>(*every).count());
  return Status::Ok();
}

std::string RateText(uint64_t bits) {
  return bits == 0 ? "unshaped" : base::FormatRateBits(static_cast<double>(bits));
}

void PrintTree(const ClusterState& s) {
  const auto& plan = s.plan;
  fmt::print("cluster '{}' ({} mode): {} hosts on {} leaves\n", plan.spec.prefix,
             ModeName(plan.spec.mode), plan.hosts.size(), plan.leaves.size());
  fmt::print("spine0\n");
  for (size_t l = 0; l < plan.leaves.size(); ++l) {
    const auto& leaf = plan.leaves[l];
    bool last_leaf = l + 1 == plan.leaves.size();
    fmt::print("{} {}  (uplink {}{})\n", last_leaf ? "└─" : "├─", leaf.name,
               RateText(s.UplinkRate(leaf.name)),
               s.uplink_rates.count(leaf.name) ? ", DEGRADED" : "");
    for (size_t k = 0; k < leaf.hosts.size(); ++k) {
      const auto& h = plan.hosts[leaf.hosts[k]];
      std::string notes;
      if (s.cut.count(h.name)) notes += "  CUT";
      if (s.host_rates.count(h.name)) notes += "  DEGRADED";
      if (auto f = s.scratch_faults.find(h.name); f != s.scratch_faults.end()) {
        notes += f->second == ScratchFault::kReadOnly ? "  SCRATCH-READONLY" : "  SCRATCH-FULL";
      }
      if (auto p = s.hidden_providers.find(h.name); p != s.hidden_providers.end()) {
        for (const auto& name : p->second) notes += "  NO-" + name;
      }
      fmt::print("{}  {} {:<8} {:<15} link {}{}\n", last_leaf ? "  " : "│ ",
                 k + 1 == leaf.hosts.size() ? "└─" : "├─", h.name, h.address,
                 RateText(s.HostRate(h.name)), notes);
    }
  }
  for (const auto& p : s.paths) {
    fmt::print("path {} <-> {} degraded to {}\n", p.a, p.b, RateText(p.rate_bits));
  }
  fmt::print("control address: {}\n", s.control_address.empty() ? "none" : s.control_address);
  fmt::print("shared dir: {}\n", s.shared_dir.empty() ? "none" : s.shared_dir);
  if (!s.slurm_conf.empty()) {
    fmt::print("slurm: SLURM_CONF={} (docs/slurm.md)\n", s.slurm_conf);
  }
}

nlohmann::json StateJson(const ClusterState& s) {
  nlohmann::json j = nlohmann::json::parse(StateToJson(s));
  j["host_list"] = nlohmann::json::array();
  for (const auto& h : s.plan.hosts) {
    j["host_list"].push_back({{"name", h.name},
                              {"leaf", s.plan.leaves[h.leaf].name},
                              {"address", h.address},
                              {"netns", s.spec().mode == Mode::kNetns ? h.netns : ""},
                              {"rate_bits", s.HostRate(h.name)},
                              {"cut", s.cut.count(h.name) > 0},
                              {"scratch_dir", s.ScratchDir(h.name)}});
  }
  return j;
}

}  // namespace

void RegisterVclusterCommand(CLI::App& app, Action* action) {
  CLI::App* vc = app.add_subcommand(
      "vcluster",
      "A virtual cluster on this machine: hosts are network namespaces on a leaf/spine tree "
      "of bridges, with shaped (tbf) and cuttable links");
  vc->require_subcommand(1);
  vc->footer(
      "Examples:\n"
      "  railyard vcluster up --hosts 8 --leaves 2 --leaf-rate 10Gbit --spine-rate 5Gbit\n"
      "  railyard vcluster status\n"
      "  railyard vcluster exec node0 -- ping -c1 198.18.1.5\n"
      "  railyard vcluster degrade node3 --rate 100Mbit          # one host's link\n"
      "  railyard vcluster degrade node0 node5 --rate 50Mbit     # one path\n"
      "  railyard vcluster degrade --uplink leaf0 --rate 40Mbit  # one leaf's uplink\n"
      "  railyard vcluster cut node2 && railyard vcluster heal node2\n"
      "  railyard vcluster fault scratch-readonly node3          # or scratch-full\n"
      "  railyard vcluster fault hide-provider node3 tcp\n"
      "  railyard vcluster restore                               # undo all but cuts\n"
      "  railyard vcluster down\n"
      "  railyard vcluster up --slurm   # and a Slurm cluster on the hosts (docs/slurm.md)\n"
      "Docs: docs/vcluster.md\n");

  // up
  {
    struct Flags {
      CommonFlags common;
      int hosts = 4;
      int leaves = 2;
      std::string leaf_rate = "1Gbit";
      std::string spine_rate = "500Mbit";
      std::string mode = "auto";
      std::string topology_out;
      bool slurm = false;
      std::string slurm_health_check;
      std::string slurm_health_interval = "10s";
      bool slurm_fail_for_test = false;
      int fail_at_for_test = 0;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* up = vc->add_subcommand("up", "Create the namespaces, bridges and links");
    AddCommonFlags(up, &f->common);
    up->add_option("--hosts", f->hosts, "number of hosts (1-250)")->capture_default_str();
    up->add_option("--leaves", f->leaves, "number of leaf switches; hosts are spread evenly")
        ->capture_default_str();
    up->add_option("--leaf-rate", f->leaf_rate,
                   "rate of each host's link to its leaf, e.g. 10Gbit, 800Mbit, 1.25GB/s; "
                   "'none' for unshaped")
        ->capture_default_str();
    up->add_option("--spine-rate", f->spine_rate,
                   "rate of each leaf's uplink to the spine; below the leaf rate, traffic "
                   "between leaves is slower, as on an oversubscribed fabric")
        ->capture_default_str();
    up->add_option("--mode", f->mode,
                   "auto (namespaces when root, else loopback), netns, or loopback")
        ->capture_default_str();
    up->add_option("--topology-out", f->topology_out,
                   "also write the topology YAML here (it is always written to the state dir)");
    up->add_flag("--slurm", f->slurm,
                 "also run a Slurm cluster on the hosts: munged, slurmctld on the control "
                 "address, one slurmd per host (needs root, munge and slurm-wlm; "
                 "docs/slurm.md)");
    up->add_option("--slurm-health-check", f->slurm_health_check,
                   "with --slurm: slurmd's HealthCheckProgram runs `railyard validate node "
                   "--plan PLAN --slurm-drain` on every node (PLAN: a built-in plan or a file), "
                   "draining a node that fails with Reason \"railyard: ...\" and resuming it "
                   "once it passes");
    up->add_option("--slurm-health-interval", f->slurm_health_interval,
                   "with --slurm-health-check: HealthCheckInterval, whole seconds")
        ->capture_default_str();
    up->add_option("--fail-at-for-test", f->fail_at_for_test,
                   "test hook: fail the Nth ip/tc command (0: none)")
        ->group("");
    up->add_flag("--slurm-fail-for-test", f->slurm_fail_for_test,
                 "test hook: fail once the Slurm daemons run")
        ->group("");
    up->footer(
        "Examples:\n  railyard vcluster up --hosts 8 --leaves 2 --leaf-rate 10Gbit --spine-rate "
        "5Gbit\n"
        "  railyard vcluster up --slurm --slurm-health-check health.yaml --slurm-health-interval "
        "5s\n");
    up->callback([f, action] {
      *action = [f]() -> Outcome {
        ClusterSpec spec;
        spec.prefix = f->common.prefix;
        spec.hosts = f->hosts;
        spec.leaves = f->leaves;
        auto lr = ParseRateFlag("--leaf-rate", f->leaf_rate);
        if (!lr.ok()) return lr.status();
        auto sr = ParseRateFlag("--spine-rate", f->spine_rate);
        if (!sr.ok()) return sr.status();
        spec.leaf_rate_bits = *lr;
        spec.spine_rate_bits = *sr;
        if (Status s = ValidateSpec(spec); !s.ok()) return s;
        if (f->mode != "auto" && f->mode != "netns" && f->mode != "loopback") {
          return InvalidArgument("--mode '{}': expected auto, netns or loopback", f->mode);
        }
        std::unique_ptr<CommandRunner> system;
        auto failing = MakeRunner(&system, f->fail_at_for_test);
        CommandRunner* runner = failing ? failing.get() : system.get();
        if (f->mode == "auto") {
          ModeChoice choice = DetectMode(system.get(), spec.prefix);
          spec.mode = choice.mode;
          if (choice.mode == Mode::kLoopback) {
            fmt::print(
                "note: loopback mode, {}: hosts are addresses on 127.{}.0.0/16, links "
                "are not shaped and cannot be cut\n",
                choice.reason, LoopbackOctet(spec.prefix));
          }
        } else {
          spec.mode = f->mode == "netns" ? Mode::kNetns : Mode::kLoopback;
        }
        UpOptions options{.slurm = f->slurm, .slurm_fail_for_test = f->slurm_fail_for_test};
        if (!f->slurm_health_check.empty()) {
          auto health = HealthCheckCommand(f->slurm, f->slurm_health_check,
                                           f->slurm_health_interval, &options);
          if (!health.ok()) return health;
        }
        VirtualCluster vcl(runner, f->common.state_dir);
        auto state = vcl.Up(
            spec, [](std::string_view step) { fmt::print("  {}\n", step); }, options);
        if (!state.ok()) return state.status();
        if (!f->topology_out.empty()) {
          auto text = base::ReadFile(state->topology_file);
          if (!text.ok()) return text.status();
          if (Status s = base::WriteFileAtomic(f->topology_out, *text); !s.ok()) return s;
        }
        PrintTree(*state);
        fmt::print("topology: {}\n", state->topology_file);
        return Status::Ok();
      };
    });
  }

  // down
  {
    auto f = std::make_shared<CommonFlags>();
    CLI::App* down = vc->add_subcommand(
        "down",
        "Remove every namespace, bridge and veth of the cluster (idempotent; also "
        "cleans up after a crash)");
    AddCommonFlags(down, f.get());
    down->callback([f, action] {
      *action = [f]() -> Outcome {
        auto system = MakeSystemRunner(std::chrono::seconds(20));
        VirtualCluster vcl(system.get(), f->state_dir);
        auto report = vcl.Down(f->prefix);
        if (!report.ok()) return report.status();
        if (!report->had_state && report->removed.empty()) {
          fmt::print("cluster '{}': nothing to remove\n", f->prefix);
        } else {
          fmt::print("cluster '{}' is down ({} namespaces and links removed)\n", f->prefix,
                     report->removed.size());
        }
        return Status::Ok();
      };
    });
  }

  // status
  {
    struct Flags {
      CommonFlags common;
      bool json = false;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* status =
        vc->add_subcommand("status", "Show the cluster's tree, addresses and link states");
    AddCommonFlags(status, &f->common);
    status->add_flag("--json", f->json, "print the state as JSON");
    status->callback([f, action] {
      *action = [f]() -> Outcome {
        VirtualCluster vcl(nullptr, f->common.state_dir);
        auto state = vcl.Load(f->common.prefix);
        if (!state.ok()) return state.status();
        if (f->json) {
          fmt::print("{}\n", StateJson(*state).dump(2));
        } else {
          PrintTree(*state);
          fmt::print("created {}; topology {}\n", state->created, state->topology_file);
        }
        return Status::Ok();
      };
    });
  }

  // list
  {
    struct Flags {
      std::string state_dir = DefaultStateDir();
      bool json = false;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* list = vc->add_subcommand("list", "List the virtual clusters that are up");
    list->add_option("--state-dir", f->state_dir, "where state files live")->capture_default_str();
    list->add_flag("--json", f->json, "print as JSON");
    list->callback([f, action] {
      *action = [f]() -> Outcome {
        VirtualCluster vcl(nullptr, f->state_dir);
        auto all = vcl.List();
        if (!all.ok()) return all.status();
        if (f->json) {
          nlohmann::json j = nlohmann::json::array();
          for (const auto& s : *all) j.push_back(StateJson(s));
          fmt::print("{}\n", j.dump(2));
          return Status::Ok();
        }
        if (all->empty()) {
          fmt::print("no virtual clusters are up (state dir {})\n", f->state_dir);
          return Status::Ok();
        }
        fmt::print("{:<8} {:<9} {:>5} {:>6}  {}\n", "PREFIX", "MODE", "HOSTS", "LEAVES", "CREATED");
        for (const auto& s : *all) {
          fmt::print("{:<8} {:<9} {:>5} {:>6}  {}\n", s.spec().prefix, ModeName(s.spec().mode),
                     s.spec().hosts, s.spec().leaves, s.created);
        }
        return Status::Ok();
      };
    });
  }

  // exec
  {
    struct Flags {
      CommonFlags common;
      std::string host;
      std::vector<std::string> command;
      std::string timeout = "1h";
    };
    auto f = std::make_shared<Flags>();
    CLI::App* ex = vc->add_subcommand(
        "exec",
        "Run a command on a virtual host (inside its namespace, with RAILYARD_VHOST, "
        "RAILYARD_VHOST_ADDR set); exits with the command's exit code");
    AddCommonFlags(ex, &f->common);
    ex->add_option("host", f->host, "host name, e.g. node3")->required();
    ex->add_option("command", f->command, "the command and its arguments, after --")->required();
    ex->add_option("--timeout", f->timeout, "kill the command (and all it started) after this")
        ->capture_default_str();
    ex->footer("Example:\n  railyard vcluster exec node0 -- ping -c 3 198.18.1.3\n");
    ex->callback([f, action] {
      *action = [f]() -> Outcome {
        auto timeout = base::ParseDuration(f->timeout);
        if (!timeout.ok()) return timeout.status().WithContext("--timeout");
        VirtualCluster vcl(nullptr, f->common.state_dir);
        auto state = vcl.Load(f->common.prefix);
        if (!state.ok()) return state.status();
        const HostPlan* host = state->plan.FindHost(f->host);
        if (host == nullptr) {
          std::string names;
          for (const auto& h : state->plan.hosts) names += (names.empty() ? "" : ", ") + h.name;
          return NotFound("unknown host '{}' in cluster '{}' (hosts: {})", f->host,
                          f->common.prefix, names);
        }
        HostExecution hx = ExecutionFor(*state, *host);
        base::SpawnOptions so{.argv = f->command,
                              .env = hx.env,
                              .netns_path = hx.netns_path,
                              .capture_stdout = false,
                              .capture_stderr = false};
        auto child = base::Child::Spawn(so);
        if (!child.ok()) return child.status();
        auto done = child->Wait(base::Deadline::After(*timeout));
        if (!done.ok()) {
          child->KillAndReap();
          return done.status().WithContext(fmt::format("exec on {}", f->host));
        }
        if (done->signal != 0) return 128 + done->signal;
        return done->exit_code;
      };
    });
  }

  // matrix
  {
    struct Flags {
      CommonFlags common;
      std::string per_pair = "300ms";
      std::string pairs;
      int port = 5201;
      bool json = false;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* mx = vc->add_subcommand(
        "matrix", "Measure host-to-host TCP bandwidth, one ordered pair at a time");
    AddCommonFlags(mx, &f->common);
    mx->add_option("--per-pair", f->per_pair, "how long each pair streams")->capture_default_str();
    mx->add_option("--pairs", f->pairs,
                   "only these pairs, e.g. node0:node1,node2:node0 (default: every ordered pair)");
    mx->add_option("--port", f->port, "probe port on every host")->capture_default_str();
    mx->add_flag("--json", f->json,
                 "print [{\"src\", \"dst\", \"bits_per_second\"}] instead of a table");
    mx->footer("Example:\n  railyard vcluster matrix --pairs node0:node1,node0:node2 --json\n");
    mx->callback([f, action] {
      *action = [f]() -> Outcome {
        auto per_pair = base::ParseDuration(f->per_pair);
        if (!per_pair.ok()) return per_pair.status().WithContext("--per-pair");
        if (f->port < 1 || f->port > 65535) {
          return InvalidArgument("--port {}: expected 1 to 65535", f->port);
        }
        VirtualCluster vcl(nullptr, f->common.state_dir);
        auto state = vcl.Load(f->common.prefix);
        if (!state.ok()) return state.status();
        MatrixOptions mo;
        mo.railyard_binary = SelfExecutable();
        mo.per_pair = *per_pair;
        mo.port = static_cast<uint16_t>(f->port);
        std::string_view rest = f->pairs;
        while (!rest.empty()) {
          size_t comma = rest.find(',');
          std::string_view item = rest.substr(0, comma);
          rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
          size_t colon = item.find(':');
          if (colon == std::string_view::npos) {
            return InvalidArgument("--pairs: '{}' is not SRC:DST (e.g. node0:node1)", item);
          }
          const HostPlan* s = state->plan.FindHost(item.substr(0, colon));
          const HostPlan* d = state->plan.FindHost(item.substr(colon + 1));
          if (s == nullptr || d == nullptr || s == d) {
            return InvalidArgument(
                "--pairs: '{}': expected two different hosts of cluster '{}' ({})", item,
                f->common.prefix, state->plan.HostList());
          }
          mo.pairs.emplace_back(s->index, d->index);
        }
        const auto& hosts = state->plan.hosts;
        if (!f->json) {
          mo.on_pair = [&](int s, int d, double bits) {
            fmt::print("{:<8} -> {:<8} {:>10}\n", hosts[s].name, hosts[d].name,
                       base::FormatRateBits(bits));
            std::fflush(stdout);
          };
        }
        auto m = MeasureBandwidth(*state, mo);
        if (!m.ok()) return m.status();
        if (f->json) {
          nlohmann::json j = nlohmann::json::array();
          for (size_t s = 0; s < hosts.size(); ++s) {
            for (size_t d = 0; d < hosts.size(); ++d) {
              if ((*m)[s][d] > 0) {
                j.push_back({{"src", hosts[s].name},
                             {"dst", hosts[d].name},
                             {"bits_per_second", (*m)[s][d]}});
              }
            }
          }
          fmt::print("{}\n", j.dump());
        }
        return Status::Ok();
      };
    });
  }

  // degrade / restore / cut / heal
  {
    struct Flags {
      CommonFlags common;
      std::vector<std::string> hosts;
      std::string uplink;
      std::string rate;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* dg = vc->add_subcommand(
        "degrade",
        "Slow one host's link (one host), one path between two hosts, or one leaf's uplink to "
        "the spine (--uplink)");
    AddCommonFlags(dg, &f->common);
    dg->add_option("hosts", f->hosts, "HOST, or HOST-A HOST-B for one path")->expected(0, 2);
    dg->add_option("--uplink", f->uplink,
                   "slow this leaf's uplink instead (both directions), e.g. leaf0; every "
                   "path between its hosts and other leaves crosses it");
    dg->add_option("--rate", f->rate, "the new rate, e.g. 100Mbit")->required();
    dg->footer(
        "Examples:\n  railyard vcluster degrade node3 --rate 100Mbit\n"
        "  railyard vcluster degrade node0 node5 --rate 50Mbit\n"
        "  railyard vcluster degrade --uplink leaf0 --rate 40Mbit\n"
        "Undo with `railyard vcluster restore`.\n");
    dg->callback([f, action] {
      *action = [f]() -> Outcome {
        if (f->uplink.empty() == f->hosts.empty()) {
          return InvalidArgument(
              "degrade: name one host, two hosts (a path) or --uplink LEAF, e.g. `railyard "
              "vcluster degrade node3 --rate 100Mbit` or `... degrade --uplink leaf0 --rate "
              "40Mbit`");
        }
        auto rate = base::ParseRateBits(f->rate);
        if (!rate.ok()) return rate.status().WithContext("--rate");
        auto system = MakeSystemRunner(std::chrono::seconds(20));
        VirtualCluster vcl(system.get(), f->common.state_dir);
        Status s;
        std::string what;
        if (!f->uplink.empty()) {
          s = vcl.DegradeUplink(f->common.prefix, f->uplink, *rate);
          what = f->uplink + " uplink";
        } else if (f->hosts.size() == 1) {
          s = vcl.DegradeHost(f->common.prefix, f->hosts[0], *rate);
          what = f->hosts[0];
        } else {
          s = vcl.DegradePath(f->common.prefix, f->hosts[0], f->hosts[1], *rate);
          what = f->hosts[0] + " <-> " + f->hosts[1];
        }
        if (s.ok()) fmt::print("{} degraded to {}\n", what, RateText(*rate));
        return s;
      };
    });

    auto r = std::make_shared<CommonFlags>();
    CLI::App* rs = vc->add_subcommand(
        "restore",
        "Undo every degrade (hosts, paths, uplinks) and every fault (scratch, hidden "
        "providers); cut links stay cut (use heal)");
    AddCommonFlags(rs, r.get());
    rs->footer(
        "Example:\n  railyard vcluster degrade --uplink leaf0 --rate 40Mbit\n"
        "  railyard vcluster fault scratch-full node3\n"
        "  railyard vcluster restore        # both undone\n");
    rs->callback([r, action] {
      *action = [r]() -> Outcome {
        auto system = MakeSystemRunner(std::chrono::seconds(20));
        VirtualCluster vcl(system.get(), r->state_dir);
        Status s = vcl.Restore(r->prefix);
        if (s.ok()) fmt::print("cluster '{}': link rates and faults restored\n", r->prefix);
        return s;
      };
    });

    // fault
    CLI::App* fault = vc->add_subcommand(
        "fault",
        "Inject a host fault that is not a link: a scratch directory read-only or "
        "full, a fabric provider hidden");
    fault->require_subcommand(1);
    fault->footer(
        "Examples:\n"
        "  railyard vcluster fault scratch-readonly node3   # writes under its scratch dir: EROFS\n"
        "  railyard vcluster fault scratch-full node3       # a full 1 MiB tmpfs: ENOSPC\n"
        "  railyard vcluster fault hide-provider node3 tcp  # its commands get FI_PROVIDER=^tcp\n"
        "  railyard vcluster fault clear node3              # undo node3's faults\n"
        "  railyard vcluster restore                        # undo every fault and degrade\n"
        "The scratch dir of HOST is <state-dir>/<prefix>-shared/HOST (`vcluster status`); "
        "`vcluster exec` sets RAILYARD_VHOST_SCRATCH to it.\n");
    struct FaultSpec {
      const char* name;
      const char* help;
      bool takes_provider;
    };
    for (FaultSpec spec : {
             FaultSpec{"scratch-readonly",
                       "Make HOST's scratch directory read-only (a read-only bind mount over it)",
                       false},
             FaultSpec{"scratch-full",
                       "Make HOST's scratch directory full (a 1 MiB tmpfs over it, filled)", false},
             FaultSpec{"hide-provider",
                       "Hide a libfabric provider from HOST: every `vcluster exec` on it runs "
                       "with FI_PROVIDER=^PROVIDER",
                       true},
             FaultSpec{"clear", "Undo HOST's scratch fault and hidden providers", false},
         }) {
      struct FaultFlags {
        CommonFlags common;
        std::string host;
        std::string provider;
      };
      auto ff = std::make_shared<FaultFlags>();
      CLI::App* sub = fault->add_subcommand(spec.name, spec.help);
      AddCommonFlags(sub, &ff->common);
      sub->add_option("host", ff->host, "host name, e.g. node3")->required();
      if (spec.takes_provider) {
        sub->add_option("provider", ff->provider, "provider name, e.g. tcp, verbs, efa")
            ->required();
      }
      sub->footer(fmt::format("Example:\n  railyard vcluster fault {} node3{}\n", spec.name,
                              spec.takes_provider ? " tcp" : ""));
      const std::string which = spec.name;
      sub->callback([ff, action, which] {
        *action = [ff, which]() -> Outcome {
          auto system = MakeSystemRunner(std::chrono::seconds(20));
          VirtualCluster vcl(system.get(), ff->common.state_dir);
          const std::string& p = ff->common.prefix;
          Status s;
          if (which == "scratch-readonly") {
            s = vcl.SetScratchFault(p, ff->host, ScratchFault::kReadOnly);
          } else if (which == "scratch-full") {
            s = vcl.SetScratchFault(p, ff->host, ScratchFault::kFull);
          } else if (which == "hide-provider") {
            s = vcl.HideProvider(p, ff->host, ff->provider);
          } else {
            s = vcl.ClearFaults(p, ff->host);
          }
          if (!s.ok()) return s;
          if (which == "hide-provider") {
            fmt::print("{}: provider {} hidden (FI_PROVIDER=^{} for its commands)\n", ff->host,
                       ff->provider, ff->provider);
          } else if (which == "clear") {
            fmt::print("{}: faults cleared\n", ff->host);
          } else {
            fmt::print("{}: scratch directory {}\n", ff->host,
                       which == "scratch-full" ? "full" : "read-only");
          }
          return Status::Ok();
        };
      });
    }

    for (bool cut : {true, false}) {
      auto c = std::make_shared<Flags>();
      CLI::App* sub = vc->add_subcommand(
          cut ? "cut" : "heal", cut ? "Take a host's link down (the host becomes unreachable)"
                                    : "Bring a cut host's link back up");
      AddCommonFlags(sub, &c->common);
      sub->add_option("host", c->hosts, "host name")->required()->expected(1);
      sub->callback([c, action, cut] {
        *action = [c, cut]() -> Outcome {
          auto system = MakeSystemRunner(std::chrono::seconds(20));
          VirtualCluster vcl(system.get(), c->common.state_dir);
          Status s = cut ? vcl.Cut(c->common.prefix, c->hosts[0])
                         : vcl.Heal(c->common.prefix, c->hosts[0]);
          if (s.ok()) fmt::print("{}: link {}\n", c->hosts[0], cut ? "down" : "up");
          return s;
        };
      });
    }
  }
}

}  // namespace railyard::cli
