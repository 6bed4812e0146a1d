// `railyard run ... -- CMD ARGS`: runs a training job on a gang of hosts and brings it back
// from failures (launch/launcher.h), and `railyard run agent`, the host agent each host runs
// (launch/host_agent.h).
//
// The command resolves the hosts (validate/host_list.h, or `local:N` for N pretend hosts on
// this machine), runs the preflight validation plan over them when asked and excludes what
// fails, places the job and its spares around the exclusions (place/placement.h), plans
// each local rank's binding from the node model (launch/binding.h), serves the launcher's
// store, starts one agent per host, and supervises. Progress and decisions go to stderr and
// to the JSON-lines event log; the summary to stdout; the exit code says how it ended
// (launch/launcher.h: 0 succeeded, 3 failed with the restart budget spent, 4 no host left,
// 5 preflight left too few hosts, 6 time limit, 130 interrupted, 2 bad input).
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/strings.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/units.h"
#include "railyard/cli/agents_common.h"
#include "railyard/cli/cli_common.h"
#include "railyard/launch/binding.h"
#include "railyard/launch/host_agent.h"
#include "railyard/launch/launcher.h"
#include "railyard/net/store/tcp_store_client.h"
#include "railyard/net/store/tcp_store_server.h"
#include "railyard/place/placement.h"
#include "railyard/topo/node_json.h"
#include "railyard/validate/coordinator.h"
#include "railyard/validate/plan.h"
#include "railyard/validate/registry.h"
#include "railyard/validate/remediation.h"
#include "railyard/validate/report_table.h"

namespace railyard::cli {
namespace {

namespace v = railyard::validate;
using launch::kRunBadInput;

constexpr int kUsage = 2;  // as main() gives for bad input

struct RunFlags {
  CLI::App* app = nullptr;
  std::string hosts;
  std::string vcluster;  // --vcluster [PREFIX]: the same as --hosts vcluster[:PREFIX]
  CLI::Option* vcluster_option = nullptr;
  bool slurm = false;
  bool k8s = false;
  int nproc_per_host = 1;
  int nodes = 0;  // 0: every host not kept as a spare
  int spares = 0;
  std::string exclude;
  std::string ckpt_dir;
  int max_restarts = 3;
  std::string heartbeat_timeout = "60s";
  std::string startup_timeout;
  double straggler_factor = 2.0;
  std::string preflight;  // empty: quick, none for local hosts
  std::string agents;
  std::string agent_command;
  std::string agent_binary;
  std::string listen;
  std::string secret_file;
  std::string events;
  std::string log_dir;
  std::string topology;
  std::string job_id;
  std::string agent_connect_timeout = "30s";
  std::string time_limit;
  std::vector<std::string> env;
  bool dry_run = false;
  std::vector<std::string> command;
};

struct AgentFlags {
  std::string launcher;
  std::string job;
  std::string host;
  bool host_from_index = false;
  bool secret_stdin = false;
  std::string secret_file;
  std::string address;
  std::string connect_timeout = "30s";
  std::string launcher_timeout = "10s";
};

int Bad(const Status& st) {
  PrintError(st);
  return kUsage;
}

// SIGINT and SIGTERM: remembered for the launcher, which stops every rank and ends; the
// self-pipe wakes its wait at once.
std::atomic<int> g_signal{0};
int g_wake[2] = {-1, -1};

void OnSignal(int sig) {
  g_signal.store(sig);
  char b = 1;
  ssize_t ignored = ::write(g_wake[1], &b, 1);
  (void)ignored;
}

Status InstallSignalHandlers() {
  if (g_wake[0] < 0 && ::pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return ErrnoStatus(errno, "run: self-pipe for signals");
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  return Status::Ok();
}

// The hosts of the run, from --hosts, --slurm or --k8s.
Result<v::HostList> ResolveRunHosts(const RunFlags& f) {
  std::string spec = f.hosts;
  if (f.slurm) {
    const char* list = std::getenv("SLURM_JOB_NODELIST");
    if (list == nullptr || *list == '\0') {
      return FailedPrecondition(
          "--slurm: SLURM_JOB_NODELIST is not set (run inside sbatch or salloc)");
    }
    spec = list;
  }
  if (f.k8s) {
    if (f.nodes < 1)
      return InvalidArgument(
          "--k8s: give --nodes N (the Indexed Job's parallelism minus --spares)");
    v::HostList list;
    list.spec = "k8s";
    for (int i = 0; i < f.nodes + f.spares; ++i) {
      list.hosts.push_back(fmt::format("index-{}", i));
      list.addresses.push_back("");
    }
    list.cluster = v::FlatCluster(list.hosts);
    return list;
  }
  if (spec.empty()) {
    return InvalidArgument(
        "give --hosts (vcluster, local:N, a host file or node[01-16]), --slurm or --k8s");
  }
  if (auto n = LocalHostCount(spec)) {
    if (*n < 1 || *n > 64)
      return InvalidArgument("--hosts {}: expected local:N with N from 1 to 64", spec);
    v::HostList list;
    list.spec = spec;
    for (int i = 0; i < *n; ++i) {
      list.hosts.push_back(fmt::format("local{}", i));
      list.addresses.push_back("127.0.0.1");
    }
    list.cluster = v::FlatCluster(list.hosts);
    return list;
  }
  return v::ResolveHosts(spec);
}

bool IsLocal(const RunFlags& f) { return LocalHostCount(f.hosts).has_value(); }

// Runs `agent_args` as a child of this process: the host agents of `local:N`.
class LocalAgentStarter final : public v::AgentStarter {
 public:
  explicit LocalAgentStarter(std::string railyard) : railyard_(std::move(railyard)) {}
  Result<std::unique_ptr<v::AgentHandle>> Start(const v::AgentInvocation& inv) override {
    base::SpawnOptions s;
    s.argv = v::AgentCommand(railyard_, inv);
    s.stdin_data = inv.secret + "\n";
    s.env = {{"RAILYARD_VHOST_ADDR", "127.0.0.1"}};
    RY_ASSIGN_OR_RETURN(base::Child child, base::Child::Spawn(s));
    return std::unique_ptr<v::AgentHandle>(new v::ChildAgentHandle(std::move(child)));
  }
  std::string Describe() const override { return "local processes"; }

 private:
  std::string railyard_;
};

// Preflight: runs `plan` over `list` and returns the hosts that did not pass (FAIL or
// UNKNOWN), with why.
Result<std::map<std::string, std::string>> Preflight(const std::string& plan_name,
                                                     const v::HostList& list,
                                                     v::AgentStarter* starter, net::Store* store,
                                                     const std::string& store_address,
                                                     const std::string& secret) {
  v::CheckRegistry registry;
  RY_RETURN_IF_ERROR(v::RegisterBuiltinChecks(registry));
  // The virtual cluster's hosts share one kernel: its own plans leave out what says nothing
  // about one virtual host.
  std::string name = plan_name;
  if (list.vcluster && (name == "quick" || name == "full")) {
    name = name == "quick" ? "vcluster-quick" : "vcluster";
  }
  RY_ASSIGN_OR_RETURN(v::Plan plan, v::LoadPlan(name, registry));
  fmt::print(stderr, "railyard: run: preflight: plan {} on {} hosts\n", plan.name,
             list.hosts.size());
  v::CoordinatorOptions o{.plan = &plan,
                          .hosts = list.hosts,
                          .cluster = &list.cluster,
                          .shared_dir = list.vcluster ? list.vcluster->shared_dir : "",
                          .store = store,
                          .store_address = store_address,
                          .secret = secret,
                          .run_id = "preflight",
                          .starter = starter,
                          .progress = [](const v::ProgressEvent& e) {
                            fmt::print(stderr, "railyard: run: preflight: {}\n",
                                       v::FormatProgressLine(e));
                          }};
  RY_ASSIGN_OR_RETURN(v::RunReport report, v::RunValidation(o));
  std::map<std::string, std::string> bad;
  for (const v::HostEntry& h : report.hosts) {
    if (h.overall.verdict == v::Verdict::kFail || h.overall.verdict == v::Verdict::kUnknown) {
      bad[h.name] = fmt::format("{}: {}", v::VerdictName(h.overall.verdict), h.overall.reason);
    }
  }
  return bad;
}

int RunJob(const RunFlags& given) {
  RunFlags f = given;
  if (f.vcluster_option != nullptr && f.vcluster_option->count() > 0) {
    if (!f.hosts.empty() || f.slurm || f.k8s) {
      return Bad(InvalidArgument("give one of --vcluster, --hosts, --slurm and --k8s"));
    }
    f.hosts = f.vcluster.empty() ? "vcluster" : "vcluster:" + f.vcluster;
  }
  if (!f.app->remaining().empty() && f.command.empty()) {
    return Bad(InvalidArgument("run: unknown argument '{}' (the command goes after --)",
                               f.app->remaining()[0]));
  }
  if (f.command.empty()) {
    return Bad(
        InvalidArgument("run: no command: put it after --, as in "
                        "`railyard run --hosts local:2 -- ./train --steps 100`"));
  }
  if (f.nproc_per_host < 1) {
    return Bad(InvalidArgument("--nproc-per-host {}: expected 1 or more", f.nproc_per_host));
  }
  if (f.spares < 0 || f.nodes < 0 || f.max_restarts < 0) {
    return Bad(InvalidArgument("--nodes, --spares and --max-restarts are 0 or more"));
  }
  auto heartbeat = f.heartbeat_timeout == "0" ? Result<base::Duration>(base::Duration::zero())
                                              : base::ParseDuration(f.heartbeat_timeout);
  if (!heartbeat.ok() || *heartbeat < std::chrono::milliseconds(0)) {
    return Bad(
        InvalidArgument("--heartbeat-timeout {}: expected a duration (60s, 2m; 0 turns "
                        "hang detection off)",
                        f.heartbeat_timeout));
  }
  std::optional<base::Duration> startup;
  if (!f.startup_timeout.empty()) {
    auto d = base::ParseDuration(f.startup_timeout);
    if (!d.ok()) {
      return Bad(
          InvalidArgument("--startup-timeout {}: expected a duration (5m)", f.startup_timeout));
    }
    startup = *d;
  }
  std::optional<base::Duration> limit;
  if (!f.time_limit.empty()) {
    auto d = base::ParseDuration(f.time_limit);
    if (!d.ok() || *d <= base::Duration::zero()) {
      return Bad(InvalidArgument("--time-limit {}: expected a duration (2h)", f.time_limit));
    }
    limit = *d;
  }
  comm::EnvList env;
  for (const std::string& e : f.env) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Bad(InvalidArgument("--env '{}': expected NAME=VALUE", e));
    }
    env.emplace_back(e.substr(0, eq), e.substr(eq + 1));
  }
  if (!f.job_id.empty()) {
    bool ok = f.job_id.size() <= 40;
    for (char c : f.job_id) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
    }
    if (!ok) {
      return Bad(InvalidArgument(
          "--job-id '{}': expected 1 to 40 letters, digits, '.', '_' or '-' (it prefixes the "
          "store's keys and names the ranks' sockets)",
          f.job_id));
    }
  }
  auto connect_timeout = ParseTimeout("--agent-connect-timeout", f.agent_connect_timeout);
  if (!connect_timeout.ok()) return Bad(connect_timeout.status());
  if (!f.events.empty() && f.events != "-") {
    std::string dir =
        f.events.substr(0, f.events.rfind('/') == std::string::npos ? 0 : f.events.rfind('/'));
    if (!dir.empty() && !std::filesystem::is_directory(dir)) {
      return Bad(NotFound("--events {}: directory {} does not exist", f.events, dir));
    }
  }

  // Hosts, and what this machine can hold when they all live on it.
  Result<v::HostList> list = ResolveRunHosts(f);
  if (!list.ok()) return Bad(list.status().WithContext("--hosts"));
  if (!f.topology.empty()) {
    if (Status st = v::AttachTopology(*list, f.topology); !st.ok()) {
      return Bad(st.WithContext("--topology"));
    }
  }
  const bool on_this_machine = IsLocal(f) || list->vcluster.has_value();
  if (on_this_machine) {
    long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    if (f.nproc_per_host > cpus) {
      return Bad(
          InvalidArgument("--nproc-per-host {}: every host of {} is this machine, which has {} "
                          "CPUs; give at most {}",
                          f.nproc_per_host, list->spec, cpus, cpus));
    }
    std::string exe = f.command[0];
    std::string found = base::FindInPath(exe);
    if (found.empty() || ::access(found.c_str(), X_OK) != 0) {
      return Bad(NotFound("run: command '{}' not found{}", exe,
                          exe.find('/') == std::string::npos ? " in PATH" : ""));
    }
  }

  // How agents start.
  std::string agents = f.agents;
  if (agents.empty()) {
    agents = IsLocal(f)       ? "local"
             : list->vcluster ? "vcluster"
             : f.slurm        ? "srun"
             : f.k8s          ? "external"
                              : "ssh";
  }
  std::unique_ptr<v::AgentStarter> starter;
  std::string railyard = f.agent_binary.empty() ? SelfExecutable() : f.agent_binary;
  if (agents == "local") {
    starter = std::make_unique<LocalAgentStarter>(railyard);
  } else {
    auto made = MakeAgentStarter(agents, f.agent_command, f.agent_binary, *list);
    if (!made.ok()) return Bad(made.status());
    starter = std::move(*made);
  }

  // Exclusions: the file, then the preflight.
  std::set<std::string> excluded;
  if (!f.exclude.empty()) {
    auto hosts = ReadHostsArg("--exclude", f.exclude);
    if (!hosts.ok()) return Bad(hosts.status());
    excluded.insert(hosts->begin(), hosts->end());
  }
  // Agents that dial in are `run agent`s, not validation agents: no preflight through them.
  std::string preflight =
      f.preflight.empty() ? (IsLocal(f) || agents == "external" ? "none" : "quick") : f.preflight;
  if (preflight != "none" && agents == "external") {
    return Bad(InvalidArgument(
        "--preflight {}: agents that dial in (--k8s, --agents external) are run agents, not "
        "validation agents; validate the hosts beforehand and give --exclude @FILE",
        preflight));
  }

  // Placement: the job's hosts then its spares, around the exclusions.
  const int candidates = static_cast<int>(list->hosts.size());
  int nodes = f.nodes;
  auto place_job = [&]() -> Result<place::Placement> {
    // A topology (--topology) may name more nodes than the run has (an allocation's share of
    // the cluster): only the listed hosts are candidates.
    const std::set<std::string> listed(list->hosts.begin(), list->hosts.end());
    std::vector<bool> unavailable(list->cluster.nodes.size(), false);
    for (size_t i = 0; i < list->cluster.nodes.size(); ++i) {
      const std::string& name = list->cluster.nodes[i].name;
      unavailable[i] = excluded.count(name) > 0 || listed.count(name) == 0;
    }
    int usable = candidates - static_cast<int>(excluded.size());
    int want = (nodes > 0 ? nodes : usable - f.spares) + f.spares;
    if (want - f.spares < 1) {
      return InvalidArgument(
          "{} usable hosts of {} ({} excluded) leave none for the job besides "
          "{} spares",
          usable, candidates, excluded.size(), f.spares);
    }
    // The job's hosts first, as compact as the tree allows, then the spares from the rest: one
    // placement of both would let a spare take a place inside the job's leaf and push a job
    // host into another leaf.
    RY_ASSIGN_OR_RETURN(place::Placement job,
                        place::PlaceOnce(list->cluster, {.nodes = want - f.spares}, unavailable));
    if (f.spares == 0) return job;
    for (int n : job.node_indices) unavailable[n] = true;
    auto spare = place::PlaceOnce(list->cluster, {.nodes = f.spares}, unavailable);
    if (!spare.ok()) return spare.status().WithContext(fmt::format("placing {} spares", f.spares));
    job.hosts.insert(job.hosts.end(), spare->hosts.begin(), spare->hosts.end());
    job.node_indices.insert(job.node_indices.end(), spare->node_indices.begin(),
                            spare->node_indices.end());
    job.explanation += fmt::format("; spares: {}", fmt::join(spare->hosts, ","));
    return job;
  };
  auto placement = place_job();
  if (!placement.ok()) return Bad(placement.status().WithContext("placing the job"));

  // Bindings from the node model.
  std::map<std::string, std::vector<launch::LocalRankSetup>> setup;
  std::map<std::string, std::string> node_models;
  std::string tables;
  for (const std::string& h : placement->hosts) {
    auto node = std::find_if(list->cluster.nodes.begin(), list->cluster.nodes.end(),
                             [&](const topo::Node& n) { return n.name == h; });
    if (node == list->cluster.nodes.end()) continue;
    auto plan = launch::PlanBindings(*node, f.nproc_per_host);
    if (!plan.ok()) return Bad(plan.status().WithContext("--nproc-per-host"));
    std::vector<launch::LocalRankSetup> ranks;
    for (const launch::RankBinding& b : *plan) ranks.push_back({.cpus = b.cpus, .env = b.Env()});
    setup[h] = std::move(ranks);
    node_models[h] = topo::NodeToJson(*node).dump();
    tables += launch::FormatBindingTable(h, *plan);
  }

  auto split = [&](const place::Placement& p, std::vector<std::string>* hosts,
                   std::vector<std::string>* spares) {
    int job = static_cast<int>(p.hosts.size()) - f.spares;
    hosts->assign(p.hosts.begin(), p.hosts.begin() + job);
    spares->assign(p.hosts.begin() + job, p.hosts.end());
  };
  std::vector<std::string> hosts, spares;
  split(*placement, &hosts, &spares);

  if (f.dry_run) {
    fmt::print("hosts: {} ({}); placement: {}\n", list->hosts.size(), list->spec,
               placement->explanation);
    fmt::print("job: {} hosts x {} ranks = {} ranks: {}\n", hosts.size(), f.nproc_per_host,
               hosts.size() * f.nproc_per_host, fmt::join(hosts, ","));
    fmt::print("spares: {}\n", spares.empty() ? "none" : fmt::format("{}", fmt::join(spares, ",")));
    fmt::print("preflight: {}; agents: {}; restarts: at most {}; heartbeat timeout: {}\n",
               preflight,
               agents == "local" ? "local processes"
               : starter         ? starter->Describe()
                                 : "external",
               f.max_restarts, f.heartbeat_timeout);
    for (size_t g = 0; g < hosts.size(); ++g) {
      fmt::print("  {} runs ranks {}-{}\n", hosts[g], g * f.nproc_per_host,
                 (g + 1) * f.nproc_per_host - 1);
    }
    fmt::print("{}", tables);
    return 0;
  }

  // The launcher's store.
  Result<std::pair<std::string, int>> where =
      IsLocal(f) ? Result<std::pair<std::string, int>>(std::pair{std::string("127.0.0.1"), 0})
                 : StoreListenAddress(f.listen, agents == "external", *list);
  if (!where.ok()) return Bad(where.status());
  Result<std::string> secret = ReadJobSecret(f.secret_file, agents != "external");
  if (!secret.ok()) return Bad(secret.status());
  if (secret->empty()) {
    return Bad(
        InvalidArgument("agents started elsewhere must share the job secret: give "
                        "--secret-file F or set {}",
                        kJobSecretEnv));
  }
  auto server = net::TcpStoreServer::Start(
      {.bind_ip = where->first, .port = where->second, .secret = *secret});
  if (!server.ok()) return Bad(server.status().WithContext("--listen"));
  auto store = net::ConnectTcpStore((*server)->address(), *secret,
                                    base::Deadline::After(std::chrono::seconds(10)));
  if (!store.ok()) return Bad(store.status().WithContext("the launcher's own store"));
  if (Status st = InstallSignalHandlers(); !st.ok()) return Bad(st);

  if (preflight != "none") {
    auto vstarter =
        agents == "local" || agents == "external"
            ? Result<std::unique_ptr<v::AgentStarter>>(std::unique_ptr<v::AgentStarter>())
            : MakeAgentStarter(agents, f.agent_command, f.agent_binary, *list);
    if (!vstarter.ok()) return Bad(vstarter.status());
    auto bad =
        Preflight(preflight, *list, vstarter->get(), store->get(), (*server)->address(), *secret);
    if (!bad.ok()) return Bad(bad.status().WithContext("--preflight " + preflight));
    for (const auto& [host, why] : *bad) {
      fmt::print(stderr, "railyard: run: preflight: excluding {}: {}\n", host, why);
      excluded.insert(host);
    }
    if (!bad->empty()) {
      auto again = place_job();
      if (!again.ok()) {
        PrintError(again.status().WithContext(
            "placing the job around the hosts that failed the preflight"));
        return launch::kRunPreflightFailed;
      }
      split(*again, &hosts, &spares);
    }
  }

  const std::string job =
      f.job_id.empty() ? fmt::format("run-{}", base::ToHex(base::RandomBytes(4))) : f.job_id;
  std::string events_path = f.events;
  if (events_path.empty()) {
    events_path =
        (f.ckpt_dir.empty() ? std::string(".") : f.ckpt_dir) + "/railyard-run-events.jsonl";
  }
  std::FILE* events = nullptr;
  if (events_path != "-") {
    if (!f.ckpt_dir.empty()) base::MakeDirs(f.ckpt_dir).IgnoreError();
    events = std::fopen(events_path.c_str(), "a");
    if (events == nullptr) {
      return Bad(
          ErrnoStatus(errno, fmt::format("--events {}: cannot open for appending", events_path)));
    }
  }

  launch::LaunchSpec spec;
  spec.argv = f.command;
  spec.hosts = hosts;
  spec.spares = spares;
  spec.nproc_per_host = f.nproc_per_host;
  spec.ckpt_dir = f.ckpt_dir;
  spec.log_dir = f.log_dir.empty() && !f.ckpt_dir.empty() ? f.ckpt_dir + "/logs" : f.log_dir;
  if (!spec.log_dir.empty()) {
    if (Status st = base::MakeDirs(spec.log_dir); !st.ok()) return Bad(st.WithContext("--log-dir"));
  }
  spec.agent_connect_timeout = *connect_timeout;
  spec.env = env;
  spec.setup = setup;
  spec.node_models = node_models;
  spec.supervisor.heartbeat_timeout = *heartbeat;
  if (startup) spec.supervisor.startup_timeout = *startup;
  spec.supervisor.max_restarts = f.max_restarts;
  spec.supervisor.straggler_factor = f.straggler_factor;
  spec.store = store->get();
  spec.store_address = (*server)->address();
  spec.secret = *secret;
  spec.job_id = job;
  spec.starter = agents == "external" ? nullptr : starter.get();
  spec.agent_args = {"run",   "agent", "--launcher",    (*server)->address(),
                     "--job", job,     "--secret-stdin"};
  spec.rank_port = IsLocal(f) ? 0 : 29400;
  if (limit) spec.deadline = base::Deadline::After(*limit);
  spec.wake_fd = g_wake[0];
  spec.interrupted = &g_signal;
  spec.on_event = [&](const launch::LaunchEvent& e) {
    fmt::print(stderr, "railyard: run: {}\n", e.message);
    if (events != nullptr) {
      fmt::print(events, "{}\n", launch::EventJson(e));
      std::fflush(events);
    } else if (events_path == "-") {
      fmt::print("{}\n", launch::EventJson(e));
      std::fflush(stdout);  // a pipe reader sees each event as it happens
    }
  };
  fmt::print(stderr,
             "railyard: run: job {}: {} hosts x {} ranks, {} spare{}, agents: {}, events: {}\n",
             job, hosts.size(), f.nproc_per_host, spares.size(), spares.size() == 1 ? "" : "s",
             spec.starter ? spec.starter->Describe() : "external (dialling in)", events_path);
  Result<launch::LaunchOutcome> out = launch::RunLaunch(spec);
  if (events != nullptr) std::fclose(events);
  if (!out.ok()) {
    PrintError(out.status());
    return g_signal.load() != 0 ? 128 + g_signal.load() : kRunBadInput;
  }
  fmt::print("{}: {}\n", job, out->summary);
  for (const launch::RecoveryTiming& t : out->recoveries) {
    fmt::print(
        "  recovery after attempt {}: detect {:.0f} ms, stop {:.0f} ms, restart {:.0f} ms, "
        "resume {:.0f} ms, total {:.0f} ms, {} steps done again\n",
        t.attempt, t.detect_ms, t.stop_ms, t.restart_ms, t.resume_ms, t.total_ms, t.lost_steps);
  }
  return out->exit_code;
}

int RunAgent(const AgentFlags& f) {
  std::string host = f.host;
  if (f.host_from_index) {
    const char* index = std::getenv("JOB_COMPLETION_INDEX");
    if (index == nullptr || *index == '\0') {
      return Bad(FailedPrecondition(
          "--host-from-index: JOB_COMPLETION_INDEX is not set (run as a pod of an Indexed Job)"));
    }
    host = fmt::format("index-{}", index);
  }
  if (host.empty() || f.launcher.empty() || f.job.empty()) {
    return Bad(InvalidArgument(
        "run agent: give --launcher ADDR:PORT, --job ID and --host H (or --host-from-index)"));
  }
  auto connect = ParseTimeout("--connect-timeout", f.connect_timeout);
  if (!connect.ok()) return Bad(connect.status());
  auto fence = ParseTimeout("--launcher-timeout", f.launcher_timeout);
  if (!fence.ok()) return Bad(fence.status());
  std::string secret;
  if (f.secret_stdin) {
    auto line = ReadStdinLine(base::Deadline::After(*connect));
    if (!line.ok()) return Bad(line.status().WithContext("--secret-stdin"));
    secret = std::string(base::StripAsciiWhitespace(*line));
  } else {
    auto read = ReadJobSecret(f.secret_file, false);
    if (!read.ok()) return Bad(read.status());
    secret = *read;
  }
  if (secret.empty()) {
    return Bad(
        InvalidArgument("run agent: no job secret (give --secret-stdin, --secret-file F or set {})",
                        kJobSecretEnv));
  }
  // SIGTERM or SIGINT from the carrier (srun, the kubelet, ssh's hangup) stops the ranks
  // before the agent leaves; a SIGKILL takes them with it (PR_SET_PDEATHSIG).
  auto store = net::ConnectTcpStore(f.launcher, secret, base::Deadline::After(*connect));
  if (!store.ok()) {
    return Bad(
        store.status().WithContext(fmt::format("run agent {}: launcher {} not reachable within {}",
                                               host, f.launcher, base::FormatDuration(*connect))));
  }
  if (Status st = InstallSignalHandlers(); !st.ok()) return Bad(st);
  Status st = launch::RunHostAgent({.host = host,
                                    .job = f.job,
                                    .address = f.address,
                                    .store_address = f.launcher,
                                    .launcher_timeout = *fence,
                                    .stop_requested = &g_signal},
                                   **store);
  if (!st.ok()) {
    PrintError(st);
    return 1;
  }
  return 0;
}

constexpr const char* kRunFooter =
    "Runs CMD as a gang of ranks, nproc-per-host per host, with torchrun's variables (RANK,\n"
    "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), Railyard's (RAILYARD_STORE, RAILYARD_CKPT_DIR,\n"
    "RAILYARD_PROGRESS, ...) and each local rank's binding (CPUs of its GPU's NUMA node,\n"
    "CUDA_VISIBLE_DEVICES, NCCL_IB_HCA). One agent per host starts and watches its ranks.\n"
    "A rank that exits non-zero or is killed, a rank silent for --heartbeat-timeout (hung),\n"
    "or a host whose agent is gone stops the whole gang; the failed host is replaced by a\n"
    "spare when one is left, and the job restarts from its newest checkpoint that verifies,\n"
    "at most --max-restarts times. Stragglers are reported, not stopped.\n"
    "Exit codes: 0 succeeded, 1 the agents never came up, 2 bad input, 3 failed (restarts\n"
    "spent), 4 a host was lost and no spare is left, 5 preflight left too few hosts,\n"
    "6 --time-limit, 128+N signal N (130 SIGINT, 143 SIGTERM): every rank stopped.\n"
    "--hosts: local:N (N pretend hosts on this machine), vcluster[:PREFIX], a host file\n"
    "(@FILE), a Slurm hostlist (node[01-16]) or a topology file.\n"
    "Examples:\n"
    "  railyard run --hosts local:2 --nproc-per-host 2 -- ./train --steps 100\n"
    "  railyard run --vcluster --nodes 6 --spares 1 --nproc-per-host 2 \\\n"
    "      --ckpt-dir /shared/ckpt --max-restarts 3 --heartbeat-timeout 30s -- ./train\n"
    "  railyard run --hosts @hosts.txt --agents ssh --dry-run --nproc-per-host 8 -- python3 t.py\n"
    "  # inside an allocation: one agent per node through srun\n"
    "  railyard run --slurm --nproc-per-host 8 --spares 1 --ckpt-dir /lustre/ckpt -- ./train\n"
    "    (in an sbatch script: deploy/slurm/train.sbatch; docs/slurm.md)\n"
    "Docs: docs/launch.md (railyard run), docs/progress.md (heartbeats from a rank)\n";

}  // namespace

void RegisterRunCommand(CLI::App& app, Action* action) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* run =
      app.add_subcommand("run", "Run a training job on a gang of hosts; recover it from failures");
  f->app = run;
  run->add_option("--hosts", f->hosts,
                  "local:N, vcluster[:PREFIX], @FILE, node[01-16] or a topology file");
  f->vcluster_option =
      run->add_option("--vcluster", f->vcluster,
                      "the virtual cluster that is up (its prefix, default ry): --hosts vcluster")
          ->expected(0, 1);
  run->add_flag("--slurm", f->slurm,
                "hosts from SLURM_JOB_NODELIST (inside sbatch or salloc); one agent per host as "
                "an srun step; ranks in Railyard's leaf order, not SLURM_PROCID's");
  run->add_flag(
      "--k8s", f->k8s,
      "agents are the pods of an Indexed Job and dial in (--listen, --secret-file, --nodes)");
  run->add_option("--nproc-per-host", f->nproc_per_host, "ranks per host (default 1)");
  run->add_option("--nodes", f->nodes, "hosts the job runs on (default: all not kept as spares)");
  run->add_option("--spares", f->spares, "hosts kept to replace failed ones (default 0)");
  run->add_option("--exclude", f->exclude,
                  "hosts to keep off: a list or @FILE (validate --exclude-file)");
  run->add_option("--ckpt-dir", f->ckpt_dir,
                  "the job's checkpoints (RAILYARD_CKPT_DIR); restarts resume from it");
  run->add_option("--max-restarts", f->max_restarts, "restarts before the job fails (default 3)");
  run->add_option(
      "--heartbeat-timeout", f->heartbeat_timeout,
      "a rank silent this long is hung (default 60s; 0: off, for commands without progress)");
  run->add_option("--startup-timeout", f->startup_timeout,
                  "time to a rank's first heartbeat (default: the heartbeat timeout)");
  run->add_option("--straggler-factor", f->straggler_factor,
                  "a rank slower than this times the median step is reported (default 2)");
  run->add_option("--preflight", f->preflight,
                  "validation plan before the start: quick (default), full, a plan file, or none "
                  "(default for local:N and --k8s); failing hosts are excluded");
  run->add_option("--agents", f->agents,
                  "vcluster, ssh, srun, kubectl, external, local (default from --hosts)");
  run->add_option("--agent-command", f->agent_command,
                  "a template with {host} and {command} instead of --agents");
  run->add_option("--agent-binary", f->agent_binary,
                  "the railyard binary on the hosts (default: this one)");
  run->add_option("--listen", f->listen,
                  "ADDR:PORT of the launcher's store (default: chosen from --hosts)");
  run->add_option("--secret-file", f->secret_file,
                  "job secret (default $RAILYARD_JOB_SECRET, else a fresh one)");
  run->add_option(
      "--events", f->events,
      "JSON-lines event log (default CKPT_DIR/railyard-run-events.jsonl, else ./...; '-': stdout)");
  run->add_option("--log-dir", f->log_dir,
                  "each rank's output, appended to DIR/rank-<r>.log (default CKPT_DIR/logs; "
                  "without either, agents keep it and report its error line)");
  run->add_option("--topology", f->topology,
                  "topology file for the hosts: their tree (placement), node models (binding) and "
                  "addresses; nodes it lists beyond the hosts are not used");
  run->add_option("--job-id", f->job_id,
                  "the job's id, known in advance by agents that dial in (default run-<random>)");
  run->add_option("--agent-connect-timeout", f->agent_connect_timeout,
                  "how long every agent has to say hello (default 30s; pods: minutes)");
  run->add_option("--time-limit", f->time_limit, "stop every rank and end after this long (2h)");
  // One value per --env, so that the `--` after it starts the command instead of ending
  // --env's list of values (CLI11 reads a `--` after a vector option that way).
  run->add_option("--env", f->env, "NAME=VALUE for every rank (repeatable)")
      ->allow_extra_args(false);
  run->add_flag("--dry-run", f->dry_run,
                "print the placement, spares and per-rank binding table; start nothing");
  run->add_option("command", f->command, "the command every rank runs (after --)");
  run->allow_extras();
  run->footer(std::string(kRunFooter) +
              "Subcommand: agent (the host agent the launcher starts).\n");
  run->callback([run, f, action] {
    if (!run->get_subcommands().empty()) return;
    *action = [f]() -> Outcome { return RunJob(*f); };
  });

  auto a = std::make_shared<AgentFlags>();
  CLI::App* agent = run->add_subcommand(
      "agent", "The host agent of `railyard run`: starts and watches this host's ranks");
  agent->add_option("--launcher", a->launcher, "ADDR:PORT of the launcher's store");
  agent->add_option("--job", a->job, "the job id the launcher gave");
  agent->add_option("--host", a->host, "the name the launcher knows this host by");
  agent->add_flag("--host-from-index", a->host_from_index,
                  "the host is index-$JOB_COMPLETION_INDEX (a pod of a Kubernetes Indexed Job)");
  agent->add_flag("--secret-stdin", a->secret_stdin, "read the job secret from stdin (one line)");
  agent->add_option("--secret-file", a->secret_file, "read the job secret from FILE");
  agent->add_option("--address", a->address,
                    "this host's address for its ranks (default: towards the launcher)");
  agent->add_option("--connect-timeout", a->connect_timeout,
                    "how long to try the launcher (default 30s)");
  agent->add_option(
      "--launcher-timeout", a->launcher_timeout,
      "stop the ranks and leave when the launcher is unreachable this long (default 10s)");
  agent->footer(
      "Started by `railyard run` on every host (vcluster exec, ssh, srun), or as the pod of a\n"
      "Kubernetes Indexed Job (deploy/kubernetes/train-job.yaml). The secret comes from\n"
      "--secret-stdin, --secret-file or $RAILYARD_JOB_SECRET, never the command line.\n"
      "Docs: docs/launch.md (railyard run)\n");
  agent->callback([a, action] { *action = [a]() -> Outcome { return RunAgent(*a); }; });
}

}  // namespace railyard::cli
