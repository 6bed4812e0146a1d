// `railyard validate node`: run the node checks of a validation plan on this host, print a
// table (or JSON) and exit with the Nagios code of the worst verdict, so Slurm's
// HealthCheckProgram, an NHC wrapper or a Kubernetes probe can call it. Bad input exits 3
// (UNKNOWN), as Nagios plugins do, not the CLI's usual 2 (docs/cli.md). The run over many
// hosts (`validate --plan --hosts`) and `validate agent` are in validate_run_cmd.cc.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "railyard/cli/cli_common.h"
#include "railyard/topo/load.h"
#include "railyard/validate/node_run.h"
#include "railyard/validate/plan.h"
#include "railyard/validate/registry.h"
#include "railyard/validate/remediation.h"

namespace railyard::cli {
namespace {

namespace v = railyard::validate;

// Exit code for input validate cannot use (Nagios UNKNOWN).
constexpr int kBadInput = 3;

struct NodeFlags {
  std::string plan = "quick";
  std::string topology;
  std::string host;
  std::string profile;
  bool json = false;
  bool slurm_drain = false;
  CLI::App* app = nullptr;  // for the arguments CLI11 left over
};

// Slurm's name for this node where Slurm gave one (slurmd sets SLURMD_NODENAME for its
// HealthCheckProgram and for job steps; a node's name need not be its host name), else the
// host name.
std::string ThisHost() {
  if (const char* slurm = std::getenv("SLURMD_NODENAME"); slurm != nullptr && *slurm != '\0') {
    return slurm;
  }
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// The profile for `host`: the plan's by --profile or by the host, resolved against the
// topology when one is given.
Result<v::Profile> ChooseProfile(const NodeFlags& f, const v::Plan& plan, std::string& host) {
  v::Profile profile;
  if (!f.profile.empty()) {
    std::vector<std::string> names;
    const v::Profile* found = nullptr;
    for (const v::Profile& p : plan.profiles) {
      names.push_back(p.name);
      if (p.name == f.profile) found = &p;
    }
    if (found == nullptr) {
      std::string near = v::NearestName(f.profile, names);
      return NotFound("--profile {}: plan {} has no such profile ({})", f.profile, plan.name,
                      near.empty() ? fmt::format("profiles: {}", fmt::join(names, ", "))
                                   : fmt::format("did you mean '{}'?", near));
    }
    profile = *found;
  } else {
    profile = plan.ProfileFor(host);
  }
  if (f.topology.empty()) return profile;
  RY_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::LoadTopology(f.topology));
  int node = cluster.FindNode(host);
  if (node < 0 && f.host.empty() && host.find('.') != std::string::npos) {
    host = host.substr(0, host.find('.'));  // Slurm names nodes by their short host name
    node = cluster.FindNode(host);
  }
  if (node < 0) {
    std::vector<std::string> names;
    for (const topo::Node& n : cluster.nodes) names.push_back(n.name);
    std::string near = v::NearestName(host, names);
    return NotFound("--host {}: no such node in {}{}", host, f.topology,
                    near.empty() ? std::string(" (give --host NAME)")
                                 : fmt::format(" (did you mean '{}'?)", near));
  }
  return v::ResolveProfile(profile, cluster, node);
}

void PrintTable(const v::NodeReport& r, const v::Plan& plan) {
  std::vector<std::array<std::string, 5>> rows = {
      {"CHECK", "VERDICT", "MEASURED", "EXPECTED", "REASON"}};
  for (const v::CheckResult& c : r.checks) {
    rows.push_back({c.id, std::string(v::VerdictName(c.outcome.verdict)), c.outcome.measured,
                    c.outcome.expected, c.outcome.reason});
  }
  std::array<size_t, 4> width{};
  for (const auto& row : rows) {
    for (size_t i = 0; i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    fmt::print("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", row[0], width[0], row[1], width[1], row[2],
               width[2], row[3], width[3], row[4]);
  }
  fmt::print("\nhost {}, profile {}, plan {}: {} ({} checks in {:.2f} s)\n", r.host, r.profile,
             plan.name, v::VerdictName(r.overall.verdict), r.checks.size(),
             r.elapsed.count() / 1000.0);
}

nlohmann::json ReportJson(const v::NodeReport& r, const v::Plan& plan) {
  nlohmann::json checks = nlohmann::json::array();
  for (const v::CheckResult& c : r.checks) {
    checks.push_back({{"id", c.id},
                      {"verdict", v::VerdictName(c.outcome.verdict)},
                      {"measured", c.outcome.measured},
                      {"expected", c.outcome.expected},
                      {"reason", c.outcome.reason},
                      {"elapsed_ms", c.elapsed.count()}});
  }
  return {{"version", 1},
          {"host", r.host},
          {"profile", r.profile},
          {"plan", plan.name},
          {"verdict", v::VerdictName(r.overall.verdict)},
          {"exit_code", r.overall.ExitCode()},
          {"summary", v::OneLineSummary(r)},
          {"elapsed_s", r.elapsed.count() / 1000.0},
          {"checks", checks}};
}

int BadInput(const Status& st) {
  PrintError(st);
  return kBadInput;
}

int RunNode(const NodeFlags& f) {
  if (std::vector<std::string> extra = f.app->remaining(); !extra.empty()) {
    return BadInput(
        InvalidArgument("validate node: unexpected argument '{}' (see 'railyard "
                        "validate node --help')",
                        extra.front()));
  }
  if (f.plan.empty()) return BadInput(InvalidArgument("--plan: expected quick, full or a file"));
  v::CheckRegistry registry;
  if (Status st = v::RegisterBuiltinChecks(registry); !st.ok()) return BadInput(st);
  Result<v::Plan> plan = v::LoadPlan(f.plan, registry);
  if (!plan.ok()) return BadInput(plan.status().WithContext("--plan " + f.plan));
  std::string host = f.host.empty() ? ThisHost() : f.host;
  Result<v::Profile> profile = ChooseProfile(f, *plan, host);
  if (!profile.ok()) return BadInput(profile.status());
  std::shared_ptr<v::NodeEnv> env = v::NewSystemNodeEnv();
  v::NodeReport report =
      v::RunNodeChecks(*plan, host, *profile, env, {.site = {.root = geteuid() == 0}});
  if (f.json) {
    fmt::print("{}\n", ReportJson(report, *plan).dump(2));
  } else {
    PrintTable(report, *plan);
  }
  std::fflush(stdout);
  fmt::print(stderr, "{}\n", v::OneLineSummary(report));
  if (f.slurm_drain) {
    // The same rule as the run over many hosts: drain on FAIL, resume only a drain whose
    // reason is Railyard's, never touch another's or act on UNKNOWN.
    v::RunReport one{.plan = plan->name};
    one.hosts.push_back({.name = host,
                         .profile = report.profile,
                         .checks = report.checks,
                         .overall = report.overall});
    fmt::print(stderr, "{}", v::FormatSlurmActions(v::ApplySlurmDrain(one, v::SystemScontrol())));
  }
  // A check past its timeout may still be inside NVML or libfabric: leave without running
  // static destructors under it.
  if (report.abandoned > 0) std::_Exit(report.overall.ExitCode());
  return report.overall.ExitCode();
}

}  // namespace

void RegisterValidateRun(CLI::App* validate, Action* action);  // validate_run_cmd.cc

void RegisterValidateCommand(CLI::App& app, Action* action) {
  CLI::App* validate = app.add_subcommand(
      "validate",
      "Validate hosts, links and storage before and during training (Nagios exit codes)");
  // The run over many hosts (--plan --hosts) and `validate agent`: validate_run_cmd.cc.
  RegisterValidateRun(validate, action);

  auto f = std::make_shared<NodeFlags>();
  CLI::App* node = validate->add_subcommand(
      "node",
      "Run the node checks of a plan on this host: limits, memory, kernel settings, "
      "mounts, RDMA ports, fabric providers, GPUs");
  f->app = node;
  node->allow_extras();  // so that a typo exits 3 (UNKNOWN) here, not the parser's 2
  node->add_option("--plan", f->plan,
                   "quick (default), full, vcluster (full for the virtual cluster), or a plan file "
                   "(docs/formats.md)")
      ->expected(0, 1);
  node->add_option("--topology", f->topology,
                   "topology file: this host's expected link rate, GPU count and RDMA")
      ->expected(0, 1);
  node->add_option("--host", f->host,
                   "this host's name in the topology and the plan's "
                   "profiles (default: the host name)")
      ->expected(0, 1);
  node->add_option("--profile", f->profile, "use this profile of the plan, whatever the host")
      ->expected(0, 1);
  node->add_flag("--json", f->json, "print the report as JSON (docs/validation.md)");
  node->add_flag("--slurm-drain", f->slurm_drain,
                 "drain this node in Slurm when it fails (Reason \"railyard: <check>: <why>\"); "
                 "resume it when it passes and the drain is railyard's; never touch another "
                 "drain");
  node->footer(
      "Prints one row per check (check, verdict, measured, expected, reason) and, on stderr,\n"
      "one line for logs and Slurm: 'railyard: node.memlock FAIL: memlock limit 64 KiB,\n"
      "expected unlimited'. Verdicts: PASS, WARN, FAIL, UNKNOWN (could not decide: unreadable\n"
      "input, timed out), SKIPPED (does not apply, with the reason). A check never passes\n"
      "unless it ran; each has a timeout, past which it is UNKNOWN and the run goes on.\n"
      "Exit codes (Nagios): 0 OK (PASS/SKIPPED), 1 WARN, 2 FAIL, 3 UNKNOWN or bad input.\n"
      "Examples:\n"
      "  railyard validate node                                   # built-in quick plan\n"
      "  railyard validate node --topology cluster.yaml --host gpu017 --json\n"
      "  railyard validate node --plan deploy/plans/gpu-lustre.yaml --profile gpu\n"
      "  railyard validate node --plan /etc/railyard/health.yaml --slurm-drain\n"
      "  # slurm.conf: HealthCheckProgram=/usr/local/sbin/railyard-health-check\n"
      "  #   (deploy/slurm/railyard-health-check runs the line above with the node's name)\n"
      "The host defaults to $SLURMD_NODENAME when Slurm sets it, else the host name.\n"
      "Docs: docs/validation.md\n");
  node->callback([f, action] { *action = [f]() -> Outcome { return RunNode(*f); }; });
}

}  // namespace railyard::cli
