// `railyard bench recover`: how long `railyard run` takes to bring a job back after a rank
// dies or hangs, and whether the recovered job ends with the same bits as one that never
// failed.
//
// It runs the example trainer (examples/train) under `railyard run` as a user would, on
// `local:N` (pretend hosts of this machine) or on the virtual cluster that is up
// (`vcluster[:PREFIX]`, with its data and checkpoints in the cluster's shared directory): once
// uninterrupted (its wall time and final weights are the reference), then --repeat times with
// rank --kill-rank failing before step --kill-at-step on the first attempt: SIGKILLed
// (--fault kill) or stopped with SIGSTOP (--fault hang: frozen, alive and silent, found by
// the heartbeat timeout). Each run's figures come from the launcher's JSON-lines events: the
// failure (which rank it blamed and why), the restart (which spare took over, the checkpoint
// step resumed from) and the recovered event (detect, stop, restart, resume and total times
// on the launcher's monotonic clock, and the steps done again). A run counts as correct when
// it succeeded after one restart, blamed the faulty rank, and wrote weights byte-identical to
// the reference's; any other run makes the command exit 1. Everything it writes lives in one
// temporary directory, removed at the end, also when SIGINT or SIGTERM stops it (the job in
// flight is stopped first).
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/units.h"
#include "railyard/cli/agents_common.h"
#include "railyard/cli/cli_common.h"
#include "railyard/validate/host_list.h"

namespace railyard::cli {
namespace {

// The launch issue's targets for one recovery: in all, and for detecting a dead rank (a hung
// one: within twice the heartbeat timeout).
constexpr double kTargetTotalMs = 10'000;
constexpr double kTargetDeadDetectMs = 1'000;
constexpr auto kRunTimeout = std::chrono::minutes(10);

struct BenchRecoverFlags {
  std::string hosts = "local:3";
  int nodes = 0;  // 0: every host not kept as a spare
  int spares = 1;
  int nproc_per_host = 2;
  int steps = 100;
  int ckpt_every = 10;
  int kill_at_step = -1;  // -1: half way, between two checkpoints
  int kill_rank = 1;
  int repeat = 3;
  std::string fault = "kill";  // kill or hang
  std::string heartbeat_timeout = "3s";
  std::string train_binary;
  bool json = false;
};

// What the flags resolve to.
struct Setup {
  int nodes = 0;           // hosts the job runs on
  int world = 0;           // its ranks
  std::string parent_dir;  // where the temporary directory goes: the vcluster's shared dir
  double heartbeat_ms = 0;
  double detect_target_ms = 0;  // a dead rank: 1 s; a hung one: 2 x the heartbeat timeout
};

// One recovered run, as `railyard run` reported it.
struct RecoveredRun {
  double detect_ms = 0, stop_ms = 0, restart_ms = 0, resume_ms = 0, total_ms = 0;
  int64_t lost_steps = 0;
  int64_t resumed_from = -1;  // the checkpoint step of the restart event
  int blamed_rank = -1;       // the failure event's rank
  std::string failed_host;
  std::string cause;        // the failure event's message
  std::string replacement;  // the spare (or the same host again, without one)
  double run_s = 0;         // the whole `railyard run`, start to exit
  bool weights_identical = false;
  bool correct = false;
};

// SIGINT and SIGTERM: the run in flight is stopped and the temporary directory removed.
std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal.store(sig); }

// The trainer: --train-binary, else where the build puts it next to this binary.
Result<std::string> FindTrainBinary(const std::string& flag) {
  if (!flag.empty()) {
    if (::access(flag.c_str(), X_OK) != 0) {
      return NotFound("--train-binary {}: no executable file there", flag);
    }
    return std::filesystem::absolute(flag).string();
  }
  const std::filesystem::path dir = std::filesystem::path(SelfExecutable()).parent_path();
  const std::vector<std::filesystem::path> candidates = {
      dir / "examples/train/railyard_train_example", dir / "railyard_train_example"};
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c.string();
  }
  return NotFound(
      "bench recover: the example trainer is not at {} or {}; build it (`cmake --build build "
      "--target railyard_train_example`) or give --train-binary PATH",
      candidates[0].string(), candidates[1].string());
}

std::vector<std::string> RunArgv(const BenchRecoverFlags& f, const Setup& setup,
                                 const std::string& train, const std::string& dir,
                                 const std::string& name, bool fault) {
  std::vector<std::string> argv = {SelfExecutable(),
                                   "run",
                                   "--hosts",
                                   f.hosts,
                                   "--nodes",
                                   std::to_string(setup.nodes),
                                   "--spares",
                                   std::to_string(f.spares),
                                   "--nproc-per-host",
                                   std::to_string(f.nproc_per_host),
                                   "--preflight",
                                   "none",
                                   "--heartbeat-timeout",
                                   f.heartbeat_timeout,
                                   "--ckpt-dir",
                                   dir + "/ckpt-" + name,
                                   "--events",
                                   "-",
                                   "--",
                                   train,
                                   "--steps",
                                   std::to_string(f.steps),
                                   "--data",
                                   dir + "/data",
                                   "--ckpt-every",
                                   std::to_string(f.ckpt_every),
                                   "--log-every",
                                   "0",
                                   "--out",
                                   dir + "/weights-" + name + ".bin"};
  if (fault) {
    argv.insert(
        argv.end(),
        {f.fault == "hang" ? "--hang-at-step-for-test" : "--fail-at-step-for-test",
         std::to_string(f.kill_at_step), "--fail-rank-for-test", std::to_string(f.kill_rank)});
  }
  return argv;
}

// Runs `railyard run` to its end; on SIGINT or SIGTERM stops it (SIGTERM to it: it stops
// every rank) and returns ABORTED.
Result<base::ExitInfo> RunJob(const std::vector<std::string>& argv, const std::string& cwd,
                              double* wall_s) {
  auto start = base::Clock::now();
  RY_ASSIGN_OR_RETURN(base::Child child, base::Child::Spawn({.argv = argv, .cwd = cwd}));
  const base::Deadline deadline = base::Deadline::After(kRunTimeout);
  for (;;) {
    // Short waits, so that a signal to the bench is acted on within a fraction of a second.
    auto slice =
        base::Deadline::Earliest(deadline, base::Deadline::After(std::chrono::milliseconds(200)));
    Result<base::ExitInfo> done = child.Wait(slice);
    if (done.ok()) {
      *wall_s = base::SecondsSince(start);
      return done;
    }
    if (done.status().code() != StatusCode::kDeadlineExceeded) return done.status();
    if (g_signal.load() != 0) {
      child.SignalGroup(SIGTERM);
      if (!child.Wait(base::Deadline::After(std::chrono::seconds(15))).ok()) child.KillAndReap();
      return Aborted("bench recover: stopped by signal {}", g_signal.load());
    }
    if (deadline.Expired()) {
      child.KillAndReap();
      return DeadlineExceeded("bench recover: `railyard run` still running after {} min: {}",
                              std::chrono::duration_cast<std::chrono::minutes>(kRunTimeout).count(),
                              base::CommandLine(argv));
    }
  }
}

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// The run's failure, restart and recovered events.
Result<RecoveredRun> ParseRun(const base::ExitInfo& done) {
  RecoveredRun r;
  int failures = 0, recoveries = 0;
  for (std::string_view line : base::SplitLines(done.stdout_text)) {
    if (!line.starts_with("{")) continue;
    auto e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_object()) continue;
    const std::string kind = e.value("event", "");
    if (kind == "failure" && failures++ == 0) {
      r.blamed_rank = e.value("rank", -1);
      r.failed_host = e.value("host", "");
      r.cause = e.value("message", "");
    } else if (kind == "restart" && r.replacement.empty()) {
      r.replacement = e.value("host", "");
      r.resumed_from = e.value("step", int64_t{-1});
    } else if (kind == "recovered" && e.contains("recovery") && recoveries++ == 0) {
      const nlohmann::json& t = e["recovery"];
      r.detect_ms = t.value("detect_ms", 0.0);
      r.stop_ms = t.value("stop_ms", 0.0);
      r.restart_ms = t.value("restart_ms", 0.0);
      r.resume_ms = t.value("resume_ms", 0.0);
      r.total_ms = t.value("total_ms", 0.0);
      r.lost_steps = t.value("lost_steps", int64_t{0});
    }
  }
  if (recoveries == 0) {
    return Internal("`railyard run` reported no recovery ({}); its output ends: {}",
                    done.Describe(), Tail(done.stdout_text + done.stderr_text, 600));
  }
  r.correct = done.Succeeded() && failures == 1 && recoveries == 1;
  if (!r.correct) {
    r.cause += fmt::format(" ({} failure{}, {} recover{}, {})", failures, failures == 1 ? "" : "s",
                           recoveries, recoveries == 1 ? "y" : "ies", done.Describe());
  }
  return r;
}

// The median; for an even count the upper of the two middle values (as bench validate).
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

nlohmann::json Figures(const RecoveredRun& r) {
  return {{"detect_ms", r.detect_ms}, {"stop_ms", r.stop_ms},   {"restart_ms", r.restart_ms},
          {"resume_ms", r.resume_ms}, {"total_ms", r.total_ms}, {"lost_steps", r.lost_steps},
          {"run_s", r.run_s}};
}

Outcome RunBenchRecover(const BenchRecoverFlags& f, const Setup& setup, const std::string& train) {
  const bool hang = f.fault == "hang";
  std::string tmpl = setup.parent_dir + "/railyard-bench-recover-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ErrnoStatus(errno, fmt::format("bench recover: creating the directory {}", tmpl));
  }
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{tmpl};
  const std::string& dir = tmpl;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  auto stopped = [](const Status& st) -> Outcome {
    if (st.code() == StatusCode::kAborted && g_signal.load() != 0) {
      PrintError(st);
      return 128 + g_signal.load();
    }
    return st;
  };

  // The reference: the same job, never failing. It also packs the data set (128 KiB) that
  // every later run reads.
  double ref_s = 0;
  auto ref = RunJob(RunArgv(f, setup, train, dir, "ref", false), dir, &ref_s);
  if (!ref.ok()) return stopped(ref.status());
  if (!ref->Succeeded()) {
    return Internal("bench recover: the uninterrupted run failed ({}): {}", ref->Describe(),
                    Tail(ref->stderr_text, 600));
  }
  RY_ASSIGN_OR_RETURN(std::string reference, base::ReadFile(dir + "/weights-ref.bin"));
  if (!f.json) fmt::print(stderr, "uninterrupted run: {:.2f} s\n", ref_s);

  std::vector<RecoveredRun> runs;
  for (int i = 0; i < f.repeat; ++i) {
    const std::string name = std::to_string(i);
    double wall_s = 0;
    auto done = RunJob(RunArgv(f, setup, train, dir, name, true), dir, &wall_s);
    if (!done.ok()) return stopped(done.status());
    auto parsed = ParseRun(*done);
    if (!parsed.ok()) return parsed.status().WithContext(fmt::format("run {}", i + 1));
    RecoveredRun r = *parsed;
    r.run_s = wall_s;
    auto weights = base::ReadFile(dir + "/weights-" + name + ".bin");
    r.weights_identical = weights.ok() && *weights == reference;
    r.correct = r.correct && r.weights_identical && r.blamed_rank == f.kill_rank;
    std::error_code ec;
    std::filesystem::remove_all(dir + "/ckpt-" + name, ec);
    if (!f.json) {
      fmt::print(stderr,
                 "run {}/{}: {}; {} took over, resuming from step {}: total {:.0f} ms, {} steps "
                 "again, weights {}{}\n",
                 i + 1, f.repeat, r.cause, r.replacement, r.resumed_from, r.total_ms, r.lost_steps,
                 r.weights_identical ? "identical" : "DIFFER",
                 r.correct
                     ? ""
                     : fmt::format("  <- not correct (expected rank {} blamed once)", f.kill_rank));
    }
    runs.push_back(r);
  }

  auto median_of = [&](double RecoveredRun::*field) {
    std::vector<double> v;
    for (const RecoveredRun& r : runs) v.push_back(r.*field);
    return Median(v);
  };
  std::vector<double> lost;
  for (const RecoveredRun& r : runs) lost.push_back(static_cast<double>(r.lost_steps));
  RecoveredRun med{.detect_ms = median_of(&RecoveredRun::detect_ms),
                   .stop_ms = median_of(&RecoveredRun::stop_ms),
                   .restart_ms = median_of(&RecoveredRun::restart_ms),
                   .resume_ms = median_of(&RecoveredRun::resume_ms),
                   .total_ms = median_of(&RecoveredRun::total_ms),
                   .lost_steps = static_cast<int64_t>(Median(lost)),
                   .run_s = median_of(&RecoveredRun::run_s)};
  const int correct = static_cast<int>(
      std::count_if(runs.begin(), runs.end(), [](const RecoveredRun& r) { return r.correct; }));
  const size_t identical_runs = std::count_if(
      runs.begin(), runs.end(), [](const RecoveredRun& r) { return r.weights_identical; });
  const bool identical = identical_runs == runs.size();
  const bool detect_met =
      hang ? med.detect_ms <= setup.detect_target_ms : med.detect_ms < setup.detect_target_ms;

  if (f.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const RecoveredRun& r : runs) {
      nlohmann::json j = Figures(r);
      j.update({{"resumed_from", r.resumed_from},
                {"blamed_rank", r.blamed_rank},
                {"failed_host", r.failed_host},
                {"cause", r.cause},
                {"replacement", r.replacement},
                {"weights_identical", r.weights_identical},
                {"correct", r.correct}});
      list.push_back(j);
    }
    nlohmann::json j = {{"hosts", f.hosts},
                        {"nodes", setup.nodes},
                        {"spares", f.spares},
                        {"nproc_per_host", f.nproc_per_host},
                        {"world_size", setup.world},
                        {"fault", f.fault},
                        {"heartbeat_timeout_ms", setup.heartbeat_ms},
                        {"steps", f.steps},
                        {"ckpt_every", f.ckpt_every},
                        {"kill_at_step", f.kill_at_step},
                        {"kill_rank", f.kill_rank},
                        {"repeat", f.repeat},
                        {"uninterrupted_s", ref_s},
                        {"runs", list},
                        {"median", Figures(med)},
                        {"target_total_ms", kTargetTotalMs},
                        {"within_target", med.total_ms <= kTargetTotalMs},
                        {"detect_target_ms", setup.detect_target_ms},
                        {"detect_within_target", detect_met},
                        {"weights_identical", identical},
                        {"correct_runs", correct}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print(
        "recovery of `railyard run --hosts {}` ({} host{} and {} spare{}, {} ranks per host, world "
        "{}, heartbeat timeout {}): {} steps, a checkpoint every {}, rank {} {} before step {}\n",
        f.hosts, setup.nodes, setup.nodes == 1 ? "" : "s", f.spares, f.spares == 1 ? "" : "s",
        f.nproc_per_host, setup.world, f.heartbeat_timeout, f.steps, f.ckpt_every, f.kill_rank,
        hang ? "frozen (SIGSTOP)" : "killed (SIGKILL)", f.kill_at_step);
    fmt::print("{:<7}{:>10}{:>9}{:>12}{:>11}{:>10}{:>12}{:>8}  {}\n", "run", "detect_ms", "stop_ms",
               "restart_ms", "resume_ms", "total_ms", "lost_steps", "run_s", "weights");
    auto row = [](const std::string& label, const RecoveredRun& r, const std::string& weights) {
      fmt::print("{:<7}{:>10.0f}{:>9.0f}{:>12.0f}{:>11.0f}{:>10.0f}{:>12}{:>8.2f}  {}\n", label,
                 r.detect_ms, r.stop_ms, r.restart_ms, r.resume_ms, r.total_ms, r.lost_steps,
                 r.run_s, weights);
    };
    for (size_t i = 0; i < runs.size(); ++i) {
      row(std::to_string(i + 1), runs[i], runs[i].weights_identical ? "identical" : "DIFFER");
    }
    row("median", med, fmt::format("{} of {} identical", identical_runs, runs.size()));
    fmt::print(
        "uninterrupted run: {:.2f} s; target total_ms <= {:.0f}: {}; target detect_ms {} "
        "{:.0f} ({}): {}\n",
        ref_s, kTargetTotalMs, med.total_ms <= kTargetTotalMs ? "met" : "NOT met",
        hang ? "<=" : "<", setup.detect_target_ms,
        hang ? fmt::format("2 x the heartbeat timeout {}", f.heartbeat_timeout)
             : std::string("a dead rank"),
        detect_met ? "met" : "NOT met");
  }
  if (correct < f.repeat) {
    fmt::print(stderr,
               "railyard: bench recover: {} of {} runs did not recover correctly (a failed run, "
               "another rank blamed, or weights that differ from the uninterrupted run's)\n",
               f.repeat - correct, f.repeat);
    return 1;
  }
  return Status::Ok();
}

// The hosts: local:N, or the virtual cluster that is up (its host count and shared
// directory). Sets setup->parent_dir; returns the number of hosts.
Result<int> ResolveBenchHosts(const BenchRecoverFlags& f, Setup* setup) {
  if (std::optional<int> local = LocalHostCount(f.hosts)) {
    if (*local < 1 || *local > 64) {
      return InvalidArgument("--hosts {}: expected local:N with N from 1 to 64", f.hosts);
    }
    setup->parent_dir = std::filesystem::temp_directory_path().string();
    return *local;
  }
  if (f.hosts != "vcluster" && !f.hosts.starts_with("vcluster:")) {
    return InvalidArgument(
        "--hosts {}: expected local:N (N pretend hosts on this machine, 1 to 64) or "
        "vcluster[:PREFIX] (the virtual cluster that is up)",
        f.hosts);
  }
  auto list = validate::ResolveHosts(f.hosts);
  if (!list.ok()) {
    return FailedPrecondition(
        "--hosts {}: {}; bench recover brings up no cluster itself: start one first, e.g. "
        "`railyard vcluster up --hosts 4 --leaves 2`",
        f.hosts, list.status().message());
  }
  if (!list->vcluster || list->vcluster->shared_dir.empty()) {
    return FailedPrecondition(
        "--hosts {}: the virtual cluster has no shared directory for the data and checkpoints "
        "every host must read; bring it up again with `railyard vcluster up`",
        f.hosts);
  }
  if (list->vcluster->control_address.empty()) {
    // `railyard run` would refuse every run: its store must listen where the hosts reach it.
    return FailedPrecondition(
        "--hosts {}: the virtual cluster records no control address (in netns mode only one "
        "cluster at a time holds it: is another one up? `railyard vcluster status`), so "
        "`railyard run` has nowhere its hosts reach; bring this one up again once the other "
        "is down, or with --mode loopback",
        f.hosts);
  }
  setup->parent_dir = list->vcluster->shared_dir;
  return static_cast<int>(list->hosts.size());
}

Result<Setup> CheckFlags(BenchRecoverFlags& f) {
  Setup setup;
  if (f.fault != "kill" && f.fault != "hang") {
    return InvalidArgument(
        "--fault {}: expected kill (the rank SIGKILLs itself) or hang (it stops itself with "
        "SIGSTOP)",
        f.fault);
  }
  auto timeout = base::ParseDuration(f.heartbeat_timeout);
  if (!timeout.ok() || timeout->count() < 0 || (f.fault == "hang" && timeout->count() == 0)) {
    return InvalidArgument("--heartbeat-timeout {}: expected a duration (3s, 500ms){}",
                           f.heartbeat_timeout,
                           f.fault == "hang" ? " above 0: a hang is found by it" : "");
  }
  setup.heartbeat_ms = std::chrono::duration<double, std::milli>(*timeout).count();
  setup.detect_target_ms = f.fault == "hang" ? 2 * setup.heartbeat_ms : kTargetDeadDetectMs;
  RY_ASSIGN_OR_RETURN(const int hosts, ResolveBenchHosts(f, &setup));
  if (f.spares < 0 || f.spares >= hosts) {
    return InvalidArgument(
        "--spares {}: expected 0 to {} ({} has {} hosts: at least one runs the job)", f.spares,
        hosts - 1, f.hosts, hosts);
  }
  setup.nodes = f.nodes > 0 ? f.nodes : hosts - f.spares;
  if (f.nodes < 0 || setup.nodes + f.spares > hosts) {
    return InvalidArgument("--nodes {}: expected 1 to {} ({} has {} hosts, {} kept as spares)",
                           f.nodes, hosts - f.spares, f.hosts, hosts, f.spares);
  }
  if (f.nproc_per_host < 1) {
    return InvalidArgument("--nproc-per-host {}: expected 1 or more", f.nproc_per_host);
  }
  if (f.steps < 2 || f.steps > 1'000'000) {
    return InvalidArgument("--steps {}: expected 2 to 1000000", f.steps);
  }
  if (f.ckpt_every < 0) return InvalidArgument("--ckpt-every {}: expected 0 or more", f.ckpt_every);
  if (f.kill_at_step < 0) {
    f.kill_at_step = std::clamp(f.steps / 2 + f.ckpt_every / 2, 1, f.steps - 1);
  }
  if (f.kill_at_step < 1 || f.kill_at_step >= f.steps) {
    return InvalidArgument("--kill-at-step {}: expected 1 to {} (before the last of --steps {})",
                           f.kill_at_step, f.steps - 1, f.steps);
  }
  setup.world = setup.nodes * f.nproc_per_host;
  if (f.kill_rank < 0 || f.kill_rank >= setup.world) {
    return InvalidArgument(
        "--kill-rank {}: expected 0 to {} (the job's {} ranks: {} hosts of {}, {} per host)",
        f.kill_rank, setup.world - 1, setup.world, setup.nodes, f.hosts, f.nproc_per_host);
  }
  if (f.repeat < 1 || f.repeat > 100) {
    return InvalidArgument("--repeat {}: expected 1 to 100", f.repeat);
  }
  return setup;
}

}  // namespace

void RegisterBenchRecoverCommand(CLI::App* bench, Action* action) {
  auto f = std::make_shared<BenchRecoverFlags>();
  CLI::App* r = bench->add_subcommand(
      "recover",
      "Recovery time of `railyard run` after a rank is killed or hangs (detect, stop, restart, "
      "resume), and whether the recovered weights are byte-identical to an uninterrupted run's");
  r->add_option("--hosts", f->hosts,
                "local:N (N pretend hosts on this machine) or vcluster[:PREFIX] (the virtual "
                "cluster that is up; data and checkpoints in its shared directory)")
      ->capture_default_str();
  r->add_option("--nodes", f->nodes, "hosts the job runs on (default: all not kept as spares)");
  r->add_option("--spares", f->spares, "hosts kept to replace the failed one")
      ->capture_default_str();
  r->add_option("--nproc-per-host", f->nproc_per_host, "ranks per host")->capture_default_str();
  r->add_option("--steps", f->steps, "training steps of each run")->capture_default_str();
  r->add_option("--ckpt-every", f->ckpt_every, "steps between checkpoints")->capture_default_str();
  r->add_option("--fault", f->fault,
                "kill: the rank SIGKILLs itself; hang: it stops itself with SIGSTOP (frozen, "
                "found by the heartbeat timeout)")
      ->capture_default_str();
  r->add_option("--heartbeat-timeout", f->heartbeat_timeout,
                "railyard run's --heartbeat-timeout T (a hang's detection target: 2 x T)")
      ->capture_default_str();
  r->add_option("--kill-at-step", f->kill_at_step,
                "the faulty rank dies or freezes before this step (default: half way, between "
                "two checkpoints)");
  r->add_option("--kill-rank", f->kill_rank, "the faulty rank")->capture_default_str();
  r->add_option("--repeat", f->repeat, "runs with a faulty rank")->capture_default_str();
  r->add_option("--train-binary", f->train_binary,
                "the example trainer (default: examples/train/railyard_train_example beside "
                "this binary)");
  r->add_flag("--json", f->json,
              "one object: hosts, nodes, spares, nproc_per_host, world_size, fault, "
              "heartbeat_timeout_ms, steps, ckpt_every, kill_at_step, kill_rank, repeat, "
              "uninterrupted_s, runs[]{detect_ms, stop_ms, restart_ms, resume_ms, total_ms, "
              "lost_steps, run_s, resumed_from, blamed_rank, failed_host, cause, replacement, "
              "weights_identical, correct}, median{detect_ms, stop_ms, restart_ms, resume_ms, "
              "total_ms, lost_steps, run_s}, target_total_ms, within_target, detect_target_ms, "
              "detect_within_target, weights_identical, correct_runs");
  r->footer(
      "Runs the example trainer under `railyard run` once uninterrupted, then --repeat times\n"
      "with --kill-rank SIGKILLed (--fault kill) or frozen by SIGSTOP (--fault hang) before\n"
      "--kill-at-step; the job's ranks are replaced on a spare and resume from the newest\n"
      "checkpoint. detect: death (a hang: the frozen rank's last heartbeat) -> the launcher\n"
      "decides (target: under 1 s; a hang: within 2 x the heartbeat timeout); stop: -> every\n"
      "rank of the attempt ended; restart: -> every new rank started; resume: -> every rank\n"
      "stepped again; total: death -> stepping again (target <= 10 s); lost_steps: steps done\n"
      "again; run_s: the whole run. --hosts vcluster needs the virtual cluster up\n"
      "(`railyard vcluster up --hosts 4 --leaves 2`) and runs with --preflight none.\n"
      "Examples:\n"
      "  railyard bench recover --repeat 5\n"
      "  railyard bench recover --fault hang --heartbeat-timeout 3s --repeat 3\n"
      "  railyard bench recover --hosts vcluster:rbr --repeat 5\n"
      "  railyard bench recover --hosts local:5 --spares 1 --nproc-per-host 1 --kill-rank 3\n"
      "  railyard bench recover --steps 40 --kill-at-step 25 --repeat 1 --json\n"
      "Exit 1 when a run did not recover correctly. Docs: docs/performance.md (Recovery)\n");
  r->callback([f, action] {
    *action = [f]() -> Outcome {
      RY_ASSIGN_OR_RETURN(Setup setup, CheckFlags(*f));
      RY_ASSIGN_OR_RETURN(std::string train, FindTrainBinary(f->train_binary));
      return RunBenchRecover(*f, setup, train);
    };
  });
}

}  // namespace railyard::cli
