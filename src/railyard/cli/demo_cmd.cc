// `railyard demo`: a tour of what Railyard can do, on a virtual cluster it brings up and
// removes itself. It grows with each capability.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/base/progress.h"
#include "railyard/base/strings.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/vcluster/bandwidth_matrix.h"
#include "railyard/vcluster/vcluster.h"

namespace railyard::cli {
namespace {

using namespace railyard::vcluster;

struct DemoFlags {
  std::string prefix = "ryd";
  int hosts = 8;
  int leaves = 2;
  std::string leaf_rate = "1Gbit";
  std::string spine_rate = "500Mbit";
  std::string degrade_rate = "100Mbit";
  std::string per_pair = "300ms";
  std::string mode = "auto";
  std::string validate_plan = "vcluster";
};

std::string Mbit(double bits) { return fmt::format("{:.0f}", bits / 1e6); }

void Step(int n, int total, std::string_view what) {
  fmt::print("\n[{}/{}] {}\n", n, total, what);
  std::fflush(stdout);
}

// One allreduce benchmark across all hosts, through `railyard bench comm --vcluster`, with
// its bus bandwidth next to the rates the links allow.
Status DemoAllreduce(const vcluster::ClusterState& state) {
  const auto& spec = state.spec();
  base::SpawnOptions o;
  o.argv = {SelfExecutable(),
            "bench",
            "comm",
            "--vcluster",
            spec.prefix,
            "--ranks",
            std::to_string(spec.hosts),
            "--transport",
            "tcp",
            "--sizes",
            "16MiB",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--timeout",
            "30s",
            "--json"};
  RY_ASSIGN_OR_RETURN(base::ExitInfo done,
                      base::RunChecked(o, base::Deadline::After(std::chrono::seconds(120))));
  auto rows = nlohmann::json::parse(done.stdout_text, nullptr, false);
  if (!rows.is_array() || rows.empty() || !rows[0].contains("busbw_gbps")) {
    return Internal("bench comm printed no result: {}", done.stdout_text.substr(0, 200));
  }
  double busbw_bits = rows[0]["busbw_gbps"].get<double>() * 8e9;
  fmt::print("  16 MiB f32 sum, ring over {} hosts: {} us per allreduce, busbw {}, {} wrong\n",
             spec.hosts, static_cast<int64_t>(rows[0]["time_us"].get<double>()),
             base::FormatRateBits(busbw_bits), rows[0]["wrong"].get<uint64_t>());
  if (spec.mode == vcluster::Mode::kLoopback || spec.leaf_rate_bits == 0) {
    fmt::print("  (loopback mode: links are not shaped, so there is no link rate to compare)\n");
    return Status::Ok();
  }
  // A ring crosses a leaf uplink when the hosts span leaves; then the uplink is the limit.
  uint64_t limit = spec.leaf_rate_bits;
  std::string why = "host link";
  if (spec.leaves > 1 && spec.spine_rate_bits > 0 && spec.spine_rate_bits < limit) {
    limit = spec.spine_rate_bits;
    why = "leaf uplink (the ring crosses the spine)";
  }
  fmt::print(
      "  link rates: host {}, leaf uplink {}; the limit here is the {}: busbw is {:.0f}% "
      "of {}\n",
      base::FormatRateBits(static_cast<double>(spec.leaf_rate_bits)),
      base::FormatRateBits(static_cast<double>(spec.spine_rate_bits)), why,
      100.0 * busbw_bits / static_cast<double>(limit),
      base::FormatRateBits(static_cast<double>(limit)));
  return Status::Ok();
}

// Runs `railyard validate` over the cluster as a user would, prints its table indented, and
// returns the hosts it wrote to its exclusion file (FAIL and UNKNOWN).
Result<std::vector<std::string>> DemoValidate(const vcluster::ClusterState& state,
                                              const std::string& plan) {
  const std::string exclude_file =
      fmt::format("{}/{}-demo-exclude.txt", vcluster::DefaultStateDir(), state.spec().prefix);
  base::SpawnOptions o;
  o.argv = {SelfExecutable(), "validate", "--hosts",        "vcluster:" + state.spec().prefix,
            "--plan",         plan,       "--exclude-file", exclude_file};
  RY_ASSIGN_OR_RETURN(base::ExitInfo done,
                      base::RunCommand(o, base::Deadline::After(std::chrono::seconds(180))));
  // 0 to 3 are verdicts (OK, WARN, FAIL, UNKNOWN); anything else is validate failing.
  if (done.signal != 0 || done.exit_code > 3) {
    return Internal("validate did not finish: {}", done.Describe());
  }
  for (std::string_view line : base::SplitLines(done.stdout_text)) fmt::print("  {}\n", line);
  auto text = base::ReadFile(exclude_file);
  std::vector<std::string> hosts;
  if (text.ok()) {
    for (std::string_view line : base::SplitLines(*text)) {
      line = base::StripAsciiWhitespace(line);
      if (!line.empty() && line[0] != '#') hosts.emplace_back(line);
    }
  }
  std::remove(exclude_file.c_str());
  fmt::print("  validation excluded: {}\n",
             hosts.empty() ? "nothing" : fmt::format("{}", fmt::join(hosts, ", ")));
  return hosts;
}

// The example trainer (examples/train), built beside this binary.
std::string TrainBinary() {
  std::string self = SelfExecutable();
  return self.substr(0, self.rfind('/') + 1) + "examples/train/railyard_train_example";
}

// Trains the example under `railyard run` twice on the cluster: once uninterrupted, once with
// a rank that kills itself mid-run, around the hosts validation excluded and with one spare.
// Prints the launcher's events and whether the recovered weights equal the uninterrupted
// run's, byte for byte.
Status DemoTrain(const vcluster::ClusterState& state, const std::vector<std::string>& excluded,
                 std::vector<std::string>* summary) {
  const std::string train = TrainBinary();
  if (::access(train.c_str(), X_OK) != 0) {
    return NotFound("the example trainer {} is not built (make build builds it)", train);
  }
  const int usable = state.spec().hosts - static_cast<int>(excluded.size());
  const int nodes = std::min(4, usable - 1);
  if (nodes < 2) {
    fmt::print("  {} usable hosts: too few for a 2-host job with a spare, skipped\n", usable);
    summary->push_back("training: skipped, too few usable hosts");
    return Status::Ok();
  }
  const std::string dir = state.shared_dir + "/demo-train";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  RY_RETURN_IF_ERROR(base::MakeDirs(dir));
  auto run = [&](const std::string& name, int spares,
                 std::vector<std::string> fault) -> Result<base::ExitInfo> {
    base::SpawnOptions o;
    o.argv = {SelfExecutable(),
              "run",
              "--hosts",
              "vcluster:" + state.spec().prefix,
              "--nodes",
              std::to_string(nodes),
              "--spares",
              std::to_string(spares),
              "--nproc-per-host",
              "2",
              "--preflight",
              "none",
              "--heartbeat-timeout",
              "10s",
              "--ckpt-dir",
              dir + "/ckpt-" + name,
              "--events",
              dir + "/" + name + "-events.jsonl"};
    if (!excluded.empty()) {
      o.argv.push_back("--exclude");
      o.argv.push_back(fmt::format("{}", fmt::join(excluded, ",")));
    }
    std::vector<std::string> cmd = {
        "--",          train, "--steps", "200",         "--ckpt-every", "20",
        "--log-every", "0",   "--data",  dir + "/data", "--out",        dir + "/" + name + ".bin"};
    o.argv.insert(o.argv.end(), cmd.begin(), cmd.end());
    o.argv.insert(o.argv.end(), fault.begin(), fault.end());
    return base::RunCommand(o, base::Deadline::After(std::chrono::seconds(120)));
  };
  RY_ASSIGN_OR_RETURN(base::ExitInfo clean, run("uninterrupted", 0, {}));
  if (!clean.Succeeded()) return Internal("the uninterrupted run failed: {}", clean.Describe());
  fmt::print("  uninterrupted: {} ranks on {} hosts, 200 steps: done\n", 2 * nodes, nodes);
  fmt::print("  again, with rank 3 killing itself before step 130 (a checkpoint every 20):\n");
  RY_ASSIGN_OR_RETURN(
      base::ExitInfo failed,
      run("recovered", 1, {"--fail-at-step-for-test", "130", "--fail-rank-for-test", "3"}));
  for (std::string_view line : base::SplitLines(failed.stderr_text)) {
    if (line.starts_with("railyard: run: ")) fmt::print("    {}\n", line.substr(15));
  }
  if (!failed.Succeeded())
    return Internal("the run with a failure did not recover: {}", failed.Describe());
  auto a = base::ReadFile(dir + "/uninterrupted.bin");
  auto b = base::ReadFile(dir + "/recovered.bin");
  if (!a.ok() || !b.ok()) return Internal("the runs wrote no weights");
  fmt::print("  final weights of the recovered run {} the uninterrupted run's ({} bytes)\n",
             *a == *b ? "are byte-identical to" : "DIFFER from", a->size());
  // The story in the launcher's own words, from its event log.
  auto events = base::ReadFile(dir + "/recovered-events.jsonl");
  for (std::string_view line : base::SplitLines(events.ok() ? *events : "")) {
    auto e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_discarded()) continue;
    std::string kind = e.value("event", "");
    if (kind == "attempt_start" && e.value("attempt", 0) == 0) {
      summary->push_back("placement: " + e.value("message", ""));
    } else if (kind == "failure") {
      summary->push_back("named: " + e.value("message", ""));
    } else if (kind == "restart") {
      summary->push_back("recovered: " + e.value("message", ""));
    }
  }
  summary->push_back(fmt::format("weights: {} to the uninterrupted run's",
                                 *a == *b ? "byte-identical" : "DIFFERENT"));
  std::filesystem::remove_all(dir, ec);
  if (*a != *b) return Internal("recovered weights differ from the uninterrupted run's");
  return Status::Ok();
}

Status RunDemo(const DemoFlags& f) {
  auto start = base::Clock::now();
  ClusterSpec spec;
  spec.prefix = f.prefix;
  spec.hosts = f.hosts;
  spec.leaves = f.leaves;
  RY_ASSIGN_OR_RETURN(spec.leaf_rate_bits, base::ParseRateBits(f.leaf_rate));
  RY_ASSIGN_OR_RETURN(spec.spine_rate_bits, base::ParseRateBits(f.spine_rate));
  RY_ASSIGN_OR_RETURN(uint64_t degraded_rate, base::ParseRateBits(f.degrade_rate));
  RY_ASSIGN_OR_RETURN(base::Duration per_pair, base::ParseDuration(f.per_pair));
  RY_RETURN_IF_ERROR(ValidateSpec(spec));
  if (spec.hosts < 2) return InvalidArgument("--hosts {}: the demo needs at least 2", spec.hosts);

  auto runner = MakeSystemRunner(std::chrono::seconds(20));
  VirtualCluster vc(runner.get(), DefaultStateDir());
  const int total = 7;

  Step(1, total,
       fmt::format("bring up a {}-host virtual cluster on {} leaves", spec.hosts, spec.leaves));
  if (f.mode == "auto") {
    ModeChoice choice = DetectMode(runner.get(), spec.prefix);
    spec.mode = choice.mode;
    if (choice.mode == Mode::kLoopback) {
      fmt::print("  note: loopback mode, {}: no shaping, so the degraded-host step is skipped\n",
                 choice.reason);
    }
  } else {
    spec.mode = f.mode == "netns" ? Mode::kNetns : Mode::kLoopback;
  }
  // A demo interrupted earlier may have left its cluster behind: start clean.
  RY_RETURN_IF_ERROR(vc.Down(spec.prefix).status());
  RY_ASSIGN_OR_RETURN(ClusterState state, vc.Up(spec, [](std::string_view s) {
    fmt::print("  {}\n", s);
    std::fflush(stdout);
  }));
  // From here on the cluster is removed whatever happens.
  struct Teardown {
    VirtualCluster* vc;
    std::string prefix;
    bool armed = true;
    ~Teardown() {
      if (armed) vc->Down(prefix).status().IgnoreError();
    }
  } teardown{&vc, spec.prefix};
  fmt::print("  up in {:.1f}s ({} mode, prefix '{}')\n", base::SecondsSince(start),
             ModeName(spec.mode), spec.prefix);

  Step(2, total, "topology (also written as YAML for the placement and validation tools)");
  const auto& plan = state.plan;
  const bool shaped = spec.mode == Mode::kNetns;
  auto rate = [&](uint64_t bits) {
    return shaped ? base::FormatRateBits(static_cast<double>(bits)) : std::string("unshaped");
  };
  fmt::print("  spine0\n");
  for (const auto& leaf : plan.leaves) {
    fmt::print("  └─ {} (uplink {}):", leaf.name, rate(spec.spine_rate_bits));
    for (int h : leaf.hosts) fmt::print(" {}={}", plan.hosts[h].name, plan.hosts[h].address);
    fmt::print("\n");
  }
  fmt::print("  host links {}; file {}\n", rate(spec.leaf_rate_bits), state.topology_file);

  Step(3, total,
       fmt::format("host-to-host TCP bandwidth, one pair at a time ({} per pair)", f.per_pair));
  MatrixOptions mo;
  mo.railyard_binary = SelfExecutable();
  mo.per_pair = per_pair;
  const size_t n = plan.hosts.size();
  size_t done = 0;
  const size_t pairs = n * (n - 1);
  base::Progress progress(stdout);
  mo.on_pair = [&](int s, int d, double bits) {
    ++done;
    progress.Update(done, pairs,
                    fmt::format("  measured {}/{}: {} -> {} {} Mbit/s", done, pairs,
                                plan.hosts[s].name, plan.hosts[d].name, Mbit(bits)));
  };
  RY_ASSIGN_OR_RETURN(BandwidthMatrix m, MeasureBandwidth(state, mo));
  progress.Done();
  fmt::print("  Mbit/s   ");
  for (const auto& h : plan.hosts) fmt::print("{:>8}", h.name);
  fmt::print("\n");
  double same_sum = 0, cross_sum = 0;
  int same_n = 0, cross_n = 0;
  for (size_t s = 0; s < n; ++s) {
    fmt::print("  {:<8} ", plan.hosts[s].name);
    for (size_t d = 0; d < n; ++d) {
      if (s == d) {
        fmt::print("{:>8}", "-");
        continue;
      }
      fmt::print("{:>8}", Mbit(m[s][d]));
      if (plan.hosts[s].leaf == plan.hosts[d].leaf)
        same_sum += m[s][d], ++same_n;
      else
        cross_sum += m[s][d], ++cross_n;
    }
    fmt::print("\n");
  }
  if (same_n > 0) fmt::print("  same leaf:    mean {} Mbit/s\n", Mbit(same_sum / same_n));
  if (cross_n > 0) {
    fmt::print("  across leaves: mean {} Mbit/s (the spine uplink is {})\n",
               Mbit(cross_sum / cross_n), rate(spec.spine_rate_bits));
  }

  Step(4, total, "validation finds a degraded host (which one is not told to it)");
  std::vector<std::string> excluded;
  {
    // A fault the validation must find by measuring: node1's link drops to --degrade-rate.
    const HostPlan& victim = plan.hosts[1];
    if (spec.mode == Mode::kLoopback) {
      fmt::print("  loopback mode has no links to shape: validating a clean cluster\n");
    } else {
      RY_RETURN_IF_ERROR(vc.DegradeHost(spec.prefix, victim.name, degraded_rate));
      fmt::print("  (a fault was injected into one host's link)\n");
    }
    RY_ASSIGN_OR_RETURN(excluded, DemoValidate(state, f.validate_plan));
    if (spec.mode != Mode::kLoopback) RY_RETURN_IF_ERROR(vc.Restore(spec.prefix));
  }

  Step(5, total,
       fmt::format("allreduce across the {} hosts (railyard comm over tcp, one rank "
                   "per host)",
                   spec.hosts));
  RY_RETURN_IF_ERROR(DemoAllreduce(state));

  Step(6, total,
       "train under `railyard run` around what validation excluded; kill a rank; recover on "
       "a spare");
  std::vector<std::string> summary;
  summary.push_back(excluded.empty()
                        ? std::string("validation: nothing excluded")
                        : fmt::format("validation: excluded {} (the host whose link was degraded "
                                      "without telling it is {})",
                                      fmt::join(excluded, ", "),
                                      spec.mode == Mode::kLoopback ? "none, in loopback mode"
                                                                   : plan.hosts[1].name));
  RY_RETURN_IF_ERROR(DemoTrain(state, excluded, &summary));

  Step(7, total, "tear down");
  RY_ASSIGN_OR_RETURN(DownReport report, vc.Down(spec.prefix));
  teardown.armed = false;
  fmt::print("  removed {} namespaces and links\n", report.removed.size());
  fmt::print("\nsummary\n");
  for (const std::string& line : summary) fmt::print("  {}\n", line);
  fmt::print("\ndemo finished in {:.1f}s\n", base::SecondsSince(start));
  return Status::Ok();
}

}  // namespace

void RegisterDemoCommand(CLI::App& app, Action* action) {
  auto f = std::make_shared<DemoFlags>();
  CLI::App* demo = app.add_subcommand(
      "demo",
      "A tour on a virtual cluster it brings up and removes, in 7 steps: bring-up, "
      "topology, bandwidth matrix, validation finding a degraded host it is not told of, an "
      "allreduce across the hosts (busbw next to the link rate), training under `railyard run` "
      "placed around what validation excluded, with a rank killed and the job recovered on a "
      "spare to the same weights, tear-down");
  demo->add_option("--prefix", f->prefix, "prefix of the demo cluster's names")
      ->capture_default_str();
  demo->add_option("--hosts", f->hosts, "hosts")->capture_default_str();
  demo->add_option("--leaves", f->leaves, "leaf switches")->capture_default_str();
  demo->add_option("--leaf-rate", f->leaf_rate, "host link rate")->capture_default_str();
  demo->add_option("--spine-rate", f->spine_rate, "leaf uplink rate")->capture_default_str();
  demo->add_option("--degrade-rate", f->degrade_rate, "rate of the degraded host")
      ->capture_default_str();
  demo->add_option("--per-pair", f->per_pair, "measuring time per host pair")
      ->capture_default_str();
  demo->add_option("--mode", f->mode, "auto, netns or loopback")->capture_default_str();
  demo->add_option("--validate-plan", f->validate_plan, "validation plan of step 4")
      ->capture_default_str();
  demo->footer("Example:\n  sudo railyard demo --hosts 6 --leaves 3\nDocs: docs/demo.md\n");
  demo->callback([f, action] {
    *action = [f]() -> Outcome {
      if (f->mode != "auto" && f->mode != "netns" && f->mode != "loopback") {
        return InvalidArgument("--mode '{}': expected auto, netns or loopback", f->mode);
      }
      return RunDemo(*f);
    };
  });
}

}  // namespace railyard::cli
