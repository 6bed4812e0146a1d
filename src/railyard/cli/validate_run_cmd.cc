// `railyard validate --plan P --hosts H`: the coordinator of a validation run over many hosts,
// and `railyard validate agent`, the agent each host runs (validate/coordinator.h, agent.h).
//
// The coordinator resolves the hosts (validate/host_list.h) and the plan, serves the
// rendezvous store on --listen with a fresh job secret, starts one agent per host through a
// starter (validate/agent_starter.h) or waits for agents that already run (--agents
// external), runs the plan, prints progress on stderr and the report on stdout, writes the
// files asked for, applies the remediation asked for (validate/remediation.h) and exits with
// the report's Nagios code. Bad input exits 3 (UNKNOWN), as `validate node` does
// (docs/cli.md), with one line.
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/cli/agents_common.h"
#include "railyard/cli/cli_common.h"
#include "railyard/net/store/tcp_store_client.h"
#include "railyard/net/store/tcp_store_server.h"
#include "railyard/validate/agent.h"
#include "railyard/validate/agent_starter.h"
#include "railyard/validate/coordinator.h"
#include "railyard/validate/host_list.h"
#include "railyard/validate/plan.h"
#include "railyard/validate/registry.h"
#include "railyard/validate/remediation.h"
#include "railyard/validate/report_html.h"
#include "railyard/validate/report_json.h"
#include "railyard/validate/report_junit.h"
#include "railyard/validate/report_prometheus.h"
#include "railyard/validate/report_table.h"
#include "railyard/validate/schedule.h"

namespace railyard::cli {

// Adds the run's flags and the `agent` subcommand to `validate` (validate_cmd.cc).
void RegisterValidateRun(CLI::App* validate, Action* action);

namespace {

namespace v = railyard::validate;

constexpr int kBadInput = 3;  // Nagios UNKNOWN (docs/cli.md)

struct RunFlags {
  std::string plan = "quick";
  std::string hosts;
  std::string topology;
  std::string shared_dir;
  std::string agents;  // empty: vcluster for a virtual cluster, else ssh
  std::string agent_command;
  std::string agent_binary;
  std::string listen;
  std::string run_id = "validate";
  std::string secret_file;
  bool dry_run = false;
  std::string json, junit, html, prometheus;
  std::string exclude_file, k8s;
  bool slurm_drain = false;
  std::string timeout = "15s";
  CLI::App* app = nullptr;
};

struct AgentFlags {
  std::string coordinator;
  std::string run_id = "validate";
  std::string host;
  bool secret_stdin = false;
  std::string secret_file;
  std::string address;
  std::string connect_timeout = "30s";
  std::string idle_timeout = "60s";
  CLI::App* app = nullptr;
};

int BadInput(const Status& st) {
  PrintError(st);
  return kBadInput;
}

Status NoExtras(CLI::App* app, std::string_view command) {
  if (std::vector<std::string> extra = app->remaining(); !extra.empty()) {
    return InvalidArgument("{}: unexpected argument '{}' (see 'railyard {} --help')", command,
                           extra.front(), command);
  }
  return Status::Ok();
}

// The run id prefixes store keys and goes on agents' command lines, through remote shells.
Status CheckRunId(std::string_view id) {
  bool ok = !id.empty() && id.size() <= 64;
  for (char c : id) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (ok) return Status::Ok();
  return InvalidArgument("--run '{}': expected 1 to 64 letters, digits, '.', '_' or '-'", id);
}

// The directory of an output file must exist, so that a typo fails before the run.
Status CheckOutput(std::string_view flag, const std::string& path) {
  if (path.empty() || path == "-") return Status::Ok();
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return NotFound("{} {}: directory {} does not exist", flag, path, dir.string());
  }
  return Status::Ok();
}

// The fabric check's `duration` (per round; 1s if unset) and `all_pairs_max` (32) as the
// coordinator reads them, for the dry run.
std::pair<std::chrono::duration<double>, int> FabricParams(const v::PlannedCheck& c) {
  std::chrono::duration<double> per_round = std::chrono::seconds(1);
  int all_pairs_max = 32;
  if (auto it = c.settings.params.find("duration"); it != c.settings.params.end()) {
    if (auto d = base::ParseDuration(it->second); d.ok()) per_round = *d;
  }
  if (auto it = c.settings.params.find("all_pairs_max"); it != c.settings.params.end()) {
    int n = 0;
    auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
    if (ec == std::errc() && n > 0) all_pairs_max = n;
  }
  return {per_round, all_pairs_max};
}

std::string DryRunText(const v::Plan& plan, const v::HostList& list) {
  std::vector<std::string> ids;
  for (const v::PlannedCheck& c : plan.checks) ids.push_back(c.check->info().id);
  std::string out = fmt::format(
      "plan {} ({} checks: {})\nhosts: {} from {} '{}'{}\n", plan.name, ids.size(),
      fmt::join(ids, ", "), list.hosts.size(), v::HostSourceName(list.source), list.spec,
      list.topology_file.empty() ? " (no topology: rates from the fleet median)"
                                 : fmt::format(", topology {}", list.topology_file));
  const v::PlannedCheck* pairs = plan.Find("fabric.pair_bandwidth");
  if (pairs == nullptr) {
    return out + "no fabric schedule: the plan does not run fabric.pair_bandwidth\n";
  }
  auto [per_round, all_pairs_max] = FabricParams(*pairs);
  v::Schedule schedule = v::ChooseSchedule(list.cluster, all_pairs_max);
  std::vector<std::string> names;
  for (const topo::Node& n : list.cluster.nodes) names.push_back(n.name);
  return out + v::FormatDryRun(schedule, names, per_round);
}

// One line per phase start and per host result, on stderr while the run goes.
void PrintProgress(const v::ProgressEvent& e) {
  fmt::print(stderr, "railyard: validate: {}\n", v::FormatProgressLine(e));
}

Status WriteOutputs(const RunFlags& f, const v::RunReport& report) {
  auto write = [](std::string_view flag, const std::string& path, const std::string& text) {
    if (path.empty()) return Status::Ok();
    if (path == "-") {
      fmt::print("{}", text);
      return Status::Ok();
    }
    return base::WriteFileAtomic(path, text).WithContext(std::string(flag));
  };
  Status st = Status::Ok();
  auto keep = [&st](Status s) {
    if (!s.ok()) {
      PrintError(s);
      if (st.ok()) st = s;
    }
  };
  keep(write("--json", f.json, v::ReportToJson(report).dump(2) + "\n"));
  keep(write("--junit", f.junit, v::ReportToJUnit(report)));
  keep(write("--html", f.html, v::ReportToHtml(report)));
  keep(write("--prometheus", f.prometheus, v::ReportToPrometheus(report)));
  keep(write("--exclude-file", f.exclude_file, v::FormatExcludeFile(report)));
  keep(write("--k8s", f.k8s, v::FormatKubernetesScript(report)));
  if (f.slurm_drain) {
    std::vector<v::SlurmAction> done = v::ApplySlurmDrain(report, v::SystemScontrol());
    fmt::print(stderr, "{}", v::FormatSlurmActions(done));
  }
  return st;
}

int RunCoordinator(const RunFlags& f) {
  if (Status st = NoExtras(f.app, "validate"); !st.ok()) return BadInput(st);
  if (f.hosts.empty()) {
    return BadInput(InvalidArgument(
        "validate: give --hosts (vcluster, a host file, node[01-16] or a topology file), or a "
        "subcommand (node, agent)"));
  }
  if (f.plan.empty()) return BadInput(InvalidArgument("--plan: expected quick, full or a file"));
  v::CheckRegistry registry;
  if (Status st = v::RegisterBuiltinChecks(registry); !st.ok()) return BadInput(st);
  Result<v::Plan> plan = v::LoadPlan(f.plan, registry);
  if (!plan.ok()) return BadInput(plan.status().WithContext("--plan " + f.plan));
  Result<v::HostList> list = v::ResolveHosts(f.hosts);
  if (!list.ok()) return BadInput(list.status().WithContext("--hosts"));
  if (!f.topology.empty()) {
    if (Status st = v::AttachTopology(*list, f.topology); !st.ok()) {
      return BadInput(st.WithContext("--topology"));
    }
  }
  RunFlags flags = f;
  if (flags.agents.empty()) flags.agents = list->vcluster ? "vcluster" : "ssh";
  static const std::vector<std::string> kAgents = {"vcluster", "ssh", "srun", "kubectl",
                                                   "external"};
  if (std::find(kAgents.begin(), kAgents.end(), flags.agents) == kAgents.end()) {
    std::string near = v::NearestName(flags.agents, kAgents);
    return BadInput(
        InvalidArgument("--agents {}: expected {}{}", flags.agents, fmt::join(kAgents, ", "),
                        near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
  }
  if (!f.agent_command.empty() && !f.agents.empty()) {
    return BadInput(InvalidArgument("give --agents or --agent-command, not both"));
  }
  Result<std::chrono::milliseconds> timeout = ParseTimeout("--timeout", f.timeout);
  if (!timeout.ok()) return BadInput(timeout.status());
  if (Status st = CheckRunId(f.run_id); !st.ok()) return BadInput(st);
  for (auto [flag, path] :
       {std::pair{"--json", &f.json}, std::pair{"--junit", &f.junit}, std::pair{"--html", &f.html},
        std::pair{"--prometheus", &f.prometheus}, std::pair{"--exclude-file", &f.exclude_file},
        std::pair{"--k8s", &f.k8s}}) {
    if (Status st = CheckOutput(flag, *path); !st.ok()) return BadInput(st);
  }
  if (f.slurm_drain && base::FindInPath("scontrol").empty()) {
    return BadInput(FailedPrecondition("--slurm-drain: 'scontrol' is not installed here"));
  }
  if (f.dry_run) {
    fmt::print("{}", DryRunText(*plan, *list));
    return 0;
  }

  Result<std::unique_ptr<v::AgentStarter>> starter =
      MakeAgentStarter(flags.agents, flags.agent_command, flags.agent_binary, *list);
  if (!starter.ok()) return BadInput(starter.status());
  Result<std::pair<std::string, int>> listen =
      StoreListenAddress(flags.listen, flags.agents == "external", *list);
  if (!listen.ok()) return BadInput(listen.status());
  Result<std::string> secret = ReadJobSecret(f.secret_file, flags.agents != "external");
  if (!secret.ok()) return BadInput(secret.status());
  if (secret->empty()) {
    return BadInput(InvalidArgument(
        "--agents external: the agents must share the job secret: give --secret-file F or set "
        "{}",
        kJobSecretEnv));
  }
  auto server = net::TcpStoreServer::Start(
      {.bind_ip = listen->first, .port = listen->second, .secret = *secret});
  if (!server.ok()) return BadInput(server.status().WithContext("--listen"));
  auto store = net::ConnectTcpStore((*server)->address(), *secret,
                                    base::Deadline::After(std::chrono::seconds(10)));
  if (!store.ok()) return BadInput(store.status().WithContext("the coordinator's own store"));

  fmt::print(stderr, "railyard: validate: plan {} on {} hosts, store {}, agents: {}\n", plan->name,
             list->hosts.size(), (*server)->address(),
             *starter ? (*starter)->Describe() : "external (dialling in)");
  // The virtual cluster's shared directory stands in for a parallel file system.
  std::string shared_dir = f.shared_dir;
  if (shared_dir.empty() && list->vcluster) shared_dir = list->vcluster->shared_dir;
  v::CoordinatorOptions o{.plan = &*plan,
                          .hosts = list->hosts,
                          .cluster = &list->cluster,
                          .shared_dir = shared_dir,
                          .store = store->get(),
                          .store_address = (*server)->address(),
                          .secret = *secret,
                          .run_id = f.run_id,
                          .starter = starter->get(),
                          .agent_connect_timeout = *timeout,
                          .progress = PrintProgress};
  Result<v::RunReport> report = v::RunValidation(o);
  if (!report.ok()) return BadInput(report.status());
  if (f.json != "-") fmt::print("{}", v::FormatReportTable(*report, ::isatty(STDOUT_FILENO) == 1));
  std::fflush(stdout);
  Status written = WriteOutputs(f, *report);
  std::fflush(stdout);
  // A report that could not be written leaves the caller nothing to act on: UNKNOWN.
  return written.ok() ? report->ExitCode() : kBadInput;
}

int RunAgentCommand(const AgentFlags& f) {
  if (Status st = NoExtras(f.app, "validate agent"); !st.ok()) return BadInput(st);
  if (f.coordinator.empty()) {
    return BadInput(InvalidArgument("validate agent: give --coordinator ADDR:PORT"));
  }
  std::string host = f.host;
  if (host.empty()) {
    if (const char* vhost = std::getenv("RAILYARD_VHOST"); vhost != nullptr && *vhost) {
      host = vhost;
    } else {
      char buf[256] = {};
      if (gethostname(buf, sizeof buf - 1) == 0)
        host = std::string(buf).substr(0, std::string(buf).find('.'));
    }
  }
  if (Status st = v::CheckHostName(host); !st.ok()) return BadInput(st.WithContext("--host"));
  if (Status st = CheckRunId(f.run_id); !st.ok()) return BadInput(st);
  Result<std::chrono::milliseconds> connect = ParseTimeout("--connect-timeout", f.connect_timeout);
  if (!connect.ok()) return BadInput(connect.status());
  Result<std::chrono::milliseconds> idle = ParseTimeout("--idle-timeout", f.idle_timeout);
  if (!idle.ok()) return BadInput(idle.status());
  std::string secret;
  if (f.secret_stdin) {
    if (!f.secret_file.empty()) {
      return BadInput(InvalidArgument("give --secret-stdin or --secret-file, not both"));
    }
    Result<std::string> line = ReadStdinLine(base::Deadline::After(*connect));
    if (!line.ok()) return BadInput(line.status().WithContext("--secret-stdin"));
    secret = std::string(base::StripAsciiWhitespace(*line));
  } else {
    Result<std::string> read = ReadJobSecret(f.secret_file, /*may_make=*/false);
    if (!read.ok()) return BadInput(read.status());
    secret = *read;
  }
  if (secret.empty()) {
    return BadInput(InvalidArgument(
        "validate agent: no job secret (give --secret-stdin, --secret-file F or set {})",
        kJobSecretEnv));
  }
  auto store = net::ConnectTcpStore(f.coordinator, secret, base::Deadline::After(*connect));
  if (!store.ok()) {
    return BadInput(store.status().WithContext(
        fmt::format("validate agent {}: coordinator {} not reachable within {}", host,
                    f.coordinator, base::FormatDuration(*connect))));
  }
  v::AgentOptions o{.invocation = {.host = host,
                                   .store_address = f.coordinator,
                                   .run_id = f.run_id,
                                   .secret = secret},
                    .address = f.address,
                    .idle_timeout = *idle};
  Status st = v::RunAgent(o, **store);
  if (!st.ok()) return BadInput(st.WithContext(fmt::format("validate agent {}", host)));
  return 0;
}

constexpr const char* kRunFooter =
    "Runs the plan over the hosts: one agent per host (started through --agents, or already\n"
    "running and dialling in), node checks on every host at once, clock offsets, the fabric\n"
    "(reachability, latency, pair bandwidth with attribution: bad host, bad link, bad uplink,\n"
    "each re-tested against known-good hosts), storage and collectives. Progress on stderr,\n"
    "the report on stdout. A host whose agent never answers is UNKNOWN, and the run finishes.\n"
    "Exit codes (Nagios): 0 OK, 1 WARN, 2 FAIL, 3 UNKNOWN or bad input.\n"
    "--hosts: vcluster[:PREFIX], a host file (@FILE or a path; one host per line, # comments),\n"
    "a Slurm hostlist (node[01-16]), or a topology file (its nodes and tree).\n"
    "Examples:\n"
    "  # the virtual cluster (railyard vcluster up --hosts 8 --leaves 2 --leaf-rate 200Mbit)\n"
    "  railyard validate --plan quick --hosts vcluster --dry-run\n"
    "  railyard validate --plan full --hosts vcluster --html report.html --json report.json\n"
    "  # a host file over ssh (keys, BatchMode), railyard installed at the same path\n"
    "  railyard validate --plan deploy/plans/gpu-lustre.yaml --hosts @hosts.txt --agents ssh \\\n"
    "      --topology cluster.yaml --exclude-file bad_hosts   # then: place --exclude @bad_hosts\n"
    "  # Slurm: inside an allocation, one agent per node through srun; drain what fails\n"
    "  railyard validate --plan quick --hosts \"$SLURM_JOB_NODELIST\" --agents srun --slurm-drain\n"
    "  # Slurm prolog or Kubernetes DaemonSet: agents already run and dial in with\n"
    "  #   railyard validate agent --coordinator 10.0.0.5:29500 --secret-file "
    "/etc/railyard/secret\n"
    "  railyard validate --plan quick --hosts node[01-16] --agents external \\\n"
    "      --listen 10.0.0.5:29500 --secret-file /etc/railyard/secret --k8s remediate.sh\n"
    "  # kubectl exec into DaemonSet pods (the host list names the pods):\n"
    "  railyard validate --hosts @pods.txt --agents kubectl --agent-binary "
    "/usr/local/bin/railyard\n"
    "Docs: docs/validation.md (Running a plan over hosts)\n";

}  // namespace

void RegisterValidateRun(CLI::App* validate, Action* action) {
  auto f = std::make_shared<RunFlags>();
  f->app = validate;
  validate->allow_extras();  // so that a typo exits 3 (UNKNOWN) here, not the parser's 2
  auto opt = [&](const char* name, std::string& value, const char* help) {
    validate->add_option(name, value, help)->expected(0, 1);
  };
  opt("--plan", f->plan,
      "quick (default), full, vcluster (full for the virtual cluster), or a plan file "
      "(docs/formats.md)");
  opt("--hosts", f->hosts, "vcluster[:PREFIX], @FILE or a host file, node[01-16], or a topology");
  opt("--topology", f->topology, "topology file for a host file or hostlist (leaves, rates)");
  opt("--shared-dir", f->shared_dir,
      "directory every host mounts, for the storage checks (default for --hosts vcluster: "
      "its shared directory; otherwise none, and they are SKIPPED)");
  opt("--agents", f->agents,
      "how agents start: vcluster (default for --hosts vcluster), ssh (default otherwise), "
      "srun, kubectl, or external (they already run and dial in)");
  opt("--agent-command", f->agent_command,
      "a template instead of --agents, with {host} and {command}: 'pdsh -w {host} {command}'");
  opt("--agent-binary", f->agent_binary,
      "the railyard binary on the hosts (default: this binary's path)");
  opt("--listen", f->listen,
      "ADDR:PORT the store serves on (default: the virtual cluster's control address, else "
      "this machine's address towards the first host; any free port)");
  opt("--run", f->run_id, "run id: the store's key prefix (default validate)");
  opt("--secret-file", f->secret_file,
      "job secret (default: $RAILYARD_JOB_SECRET, else a fresh one; external agents need it)");
  validate->add_flag("--dry-run", f->dry_run,
                     "print the hosts, checks and fabric schedule; start nothing");
  opt("--json", f->json, "write the JSON report to FILE ('-': stdout, instead of the table)");
  opt("--junit", f->junit, "write a JUnit XML report to FILE");
  opt("--html", f->html, "write a self-contained HTML report to FILE");
  opt("--prometheus", f->prometheus, "write a node_exporter textfile to FILE");
  opt("--exclude-file", f->exclude_file,
      "write the FAIL and UNKNOWN hosts to FILE, for `railyard place --exclude @FILE`");
  validate->add_flag("--slurm-drain", f->slurm_drain,
                     "drain FAIL nodes (Reason=\"railyard: ...\"); resume only nodes whose "
                     "drain railyard wrote");
  opt("--k8s", f->k8s, "write kubectl label/taint commands for failing nodes to FILE");
  opt("--timeout", f->timeout, "how long agents have to connect (default 15s)");
  validate->footer(
      std::string(kRunFooter) +
      "Subcommands: node (this host's checks alone), agent (the agent each host runs).\n");
  validate->callback([validate, f, action] {
    if (!validate->get_subcommands().empty()) return;
    *action = [f]() -> Outcome { return RunCoordinator(*f); };
  });

  auto a = std::make_shared<AgentFlags>();
  CLI::App* agent = validate->add_subcommand(
      "agent", "The validation agent of one host: dials the coordinator, runs its tasks");
  a->app = agent;
  agent->allow_extras();
  auto aopt = [&](const char* name, std::string& value, const char* help) {
    agent->add_option(name, value, help)->expected(0, 1);
  };
  aopt("--coordinator", a->coordinator, "ADDR:PORT of the coordinator's store");
  aopt("--run", a->run_id, "run id (default validate)");
  aopt("--host", a->host, "the name this host has in the host list (default: host name)");
  agent->add_flag("--secret-stdin", a->secret_stdin, "read the job secret from stdin (one line)");
  aopt("--secret-file", a->secret_file, "read the job secret from FILE");
  aopt("--address", a->address,
       "address peers reach this host's probes at (default: towards the coordinator)");
  aopt("--connect-timeout", a->connect_timeout, "how long to try the coordinator (default 30s)");
  aopt("--idle-timeout", a->idle_timeout, "leave when no task comes for this long (default 60s)");
  agent->footer(
      "The job secret comes from --secret-stdin, --secret-file or $RAILYARD_JOB_SECRET, never\n"
      "from the command line. Exit codes: 0 when the coordinator let it go, 3 when the\n"
      "coordinator cannot be reached or went away.\n"
      "Examples:\n"
      "  railyard validate agent --coordinator 10.0.0.5:29500 --secret-file /etc/railyard/secret\n"
      "  # Slurm prolog (backgrounded, one per node):\n"
      "  #   railyard validate agent --coordinator $COORD --host $SLURMD_NODENAME \\\n"
      "  #       --secret-file /etc/railyard/secret &\n"
      "Docs: docs/validation.md (Running a plan over hosts)\n");
  agent->callback([a, action] { *action = [a]() -> Outcome { return RunAgentCommand(*a); }; });
}

}  // namespace railyard::cli
