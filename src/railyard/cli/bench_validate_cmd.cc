// `railyard bench validate`: how long validation takes, and whether a clean cluster stays
// clean run after run.
//
// It brings up its own virtual cluster (8 hosts in 2 leaves, 200 Mbit/s host links by
// default: the links, not the CPUs, set the pace), runs `railyard validate --hosts
// vcluster:<prefix>` --repeat times as a user would, and reads each JSON report. A clean
// cluster must give no finding and no host worse than PASS in every run: any false positive is
// counted and makes the command exit 1. It also times the planning of the topology-covering
// schedule on a generated 3-level fat tree (16,384 nodes by default), next to what the
// all-pairs tournament would need.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/place/fattree.h"
#include "railyard/validate/schedule.h"
#include "railyard/vcluster/vcluster.h"

namespace railyard::cli {
namespace {

struct BenchValidateFlags {
  std::string prefix = "rbv";
  int hosts = 8;
  int leaves = 2;
  std::string leaf_rate = "200Mbit";
  std::string spine_rate = "800Mbit";
  std::string plan = "vcluster";
  int repeat = 1;
  int plan_nodes = 16384;
  bool json = false;
};

struct RunFigures {
  double total_s = 0;     // the report's own total
  double wall_s = 0;      // the command, start to exit
  int rounds = 0;         // fabric measurement rounds, re-tests included
  size_t tests = 0;       // pair measurements (one per direction)
  size_t findings = 0;    // fabric findings worse than PASS
  size_t transient = 0;   // suspects that re-tests cleared (PASS findings)
  size_t flagged = 0;     // hosts worse than PASS
  double node_max_s = 0;  // slowest host's node checks
  std::string verdict;
  int exit_code = -1;
};

Result<RunFigures> RunOnce(const BenchValidateFlags& f, const std::string& dir, int i) {
  const std::string report_path = fmt::format("{}/report-{}.json", dir, i);
  base::SpawnOptions o{.argv = {SelfExecutable(), "validate", "--hosts", "vcluster:" + f.prefix,
                                "--plan", f.plan, "--json", report_path}};
  auto start = base::Clock::now();
  RY_ASSIGN_OR_RETURN(base::ExitInfo done,
                      base::RunCommand(o, base::Deadline::After(std::chrono::minutes(5))));
  RunFigures r;
  r.wall_s = base::SecondsSince(start);
  r.exit_code = done.signal ? 128 + done.signal : done.exit_code;
  std::ifstream in(report_path);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object() || !j.contains("hosts")) {
    return Internal("run {}: validate wrote no report ({}): {}", i + 1, done.Describe(),
                    done.stderr_text.substr(0, 400));
  }
  r.total_s = j.value("total_s", 0.0);
  r.verdict = j["overall"].value("verdict", "");
  r.rounds = j["fabric"].value("rounds", 0);
  r.tests = j["fabric"]["pairs"].size();
  for (const auto& finding : j["fabric"]["findings"]) {
    ++(finding.value("verdict", "") == "PASS" ? r.transient : r.findings);
  }
  for (const auto& h : j["hosts"]) {
    std::string v = h["overall"].value("verdict", "");
    if (v != "PASS" && v != "SKIPPED") ++r.flagged;
    double node_ms = 0;
    for (const auto& c : h["checks"]) {
      std::string id = c.value("id", "");
      if (id.starts_with("node.") || id.starts_with("gpu.")) {
        node_ms = std::max(node_ms, c.value("elapsed_ms", 0.0));
      }
    }
    r.node_max_s = std::max(r.node_max_s, node_ms / 1e3);
  }
  return r;
}

nlohmann::json PlanningFigures(int nodes) {
  place::FatTreeSpec spec = place::FatTreeSpecForNodes(nodes);
  topo::Cluster c = place::MakeFatTree(spec);
  for (topo::Node& n : c.nodes) n.link_rate_bits = 200'000'000;
  std::vector<double> ms;
  validate::Schedule s;
  for (int i = 0; i < 5; ++i) {
    auto t0 = base::Clock::now();
    s = validate::TopologySchedule(c);
    validate::SetExpectedRates(c, s);
    ms.push_back(base::SecondsSince(t0) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return {{"hosts", c.nodes.size()},      {"levels", c.levels.size()},
          {"rounds", s.rounds.size()},    {"pairs", s.PairCount()},
          {"plan_ms", ms[ms.size() / 2]}, {"all_pairs_rounds", nodes % 2 == 0 ? nodes - 1 : nodes}};
}

Outcome RunBenchValidate(const BenchValidateFlags& f) {
  vcluster::ClusterSpec spec;
  spec.prefix = f.prefix;
  spec.hosts = f.hosts;
  spec.leaves = f.leaves;
  spec.mode = vcluster::Mode::kNetns;
  RY_ASSIGN_OR_RETURN(spec.leaf_rate_bits, base::ParseRateBits(f.leaf_rate));
  RY_ASSIGN_OR_RETURN(spec.spine_rate_bits, base::ParseRateBits(f.spine_rate));
  RY_RETURN_IF_ERROR(vcluster::ValidateSpec(spec));
  auto runner = vcluster::MakeSystemRunner(std::chrono::seconds(20));
  vcluster::VirtualCluster vc(runner.get(), vcluster::DefaultStateDir());
  vcluster::ModeChoice mode = vcluster::DetectMode(runner.get(), spec.prefix);
  if (mode.mode != vcluster::Mode::kNetns) {
    return FailedPrecondition(
        "bench validate needs network namespaces to shape links ({}); run it as root", mode.reason);
  }
  RY_RETURN_IF_ERROR(vc.Down(spec.prefix).status());
  RY_RETURN_IF_ERROR(vc.Up(spec).status());
  struct Teardown {
    vcluster::VirtualCluster* vc;
    std::string prefix;
    ~Teardown() { vc->Down(prefix).status().IgnoreError(); }
  } teardown{&vc, spec.prefix};

  // Reports go beside the cluster's state files and leave with the cluster.
  const std::string dir = vc.state_dir() + "/" + spec.prefix + "-bench-validate";
  RY_RETURN_IF_ERROR(base::MakeDirs(dir));
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  std::vector<RunFigures> runs;
  int false_positive_runs = 0;
  for (int i = 0; i < f.repeat; ++i) {
    RY_ASSIGN_OR_RETURN(RunFigures r, RunOnce(f, dir, i));
    const bool clean = r.verdict == "PASS" && r.findings == 0 && r.flagged == 0;
    if (!clean) ++false_positive_runs;
    if (!f.json) {
      fmt::print(stderr,
                 "run {}/{}: {} in {:.1f}s, {} rounds, {} tests, {} findings ({} transient "
                 "suspects cleared by re-test){}\n",
                 i + 1, f.repeat, r.verdict, r.total_s, r.rounds, r.tests, r.findings, r.transient,
                 clean ? "" : "  <- not clean");
    }
    runs.push_back(r);
  }
  nlohmann::json planning = PlanningFigures(f.plan_nodes);
  nlohmann::json runs_json = nlohmann::json::array();
  for (const RunFigures& r : runs) {
    runs_json.push_back({{"total_s", r.total_s},
                         {"wall_s", r.wall_s},
                         {"rounds", r.rounds},
                         {"tests", r.tests},
                         {"findings", r.findings},
                         {"transient_suspects", r.transient},
                         {"hosts_flagged", r.flagged},
                         {"node_checks_max_s", r.node_max_s},
                         {"verdict", r.verdict}});
  }
  const RunFigures& last = runs.back();
  std::vector<double> totals;
  for (const RunFigures& r : runs) totals.push_back(r.total_s);
  std::sort(totals.begin(), totals.end());
  const int all_pairs_rounds = f.hosts % 2 == 0 ? f.hosts - 1 : f.hosts;
  nlohmann::json j = {{"hosts", f.hosts},
                      {"plan", f.plan},
                      {"total_s", totals[totals.size() / 2]},
                      {"rounds", last.rounds},
                      {"tests", last.tests},
                      {"findings", last.findings},
                      {"all_pairs_rounds", all_pairs_rounds},
                      {"repeat", f.repeat},
                      {"clean_runs", f.repeat - false_positive_runs},
                      {"runs", runs_json},
                      {"planning", planning}};
  if (f.json) {
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print(
        "validate, plan {}, {} hosts in {} leaves ({} host links): median {:.1f}s over {} "
        "run(s), {} of them clean\n",
        f.plan, f.hosts, f.leaves, f.leaf_rate, totals[totals.size() / 2], f.repeat,
        f.repeat - false_positive_runs);
    fmt::print("  last run: {} rounds, {} pair tests, slowest node checks {:.2f}s per host\n",
               last.rounds, last.tests, last.node_max_s);
    fmt::print(
        "planning the topology-covering schedule for {} hosts ({} levels): {:.1f} ms, {} "
        "rounds, {} pairs (all pairs would take {} rounds)\n",
        planning["hosts"].get<size_t>(), planning["levels"].get<size_t>(),
        planning["plan_ms"].get<double>(), planning["rounds"].get<size_t>(),
        planning["pairs"].get<size_t>(), planning["all_pairs_rounds"].get<int>());
  }
  if (false_positive_runs > 0) {
    fmt::print(stderr,
               "railyard: bench validate: {} of {} runs on a clean cluster were not clean\n",
               false_positive_runs, f.repeat);
    return 1;
  }
  return Status::Ok();
}

}  // namespace

void RegisterBenchValidateCommand(CLI::App* bench, Action* action) {
  auto f = std::make_shared<BenchValidateFlags>();
  CLI::App* v = bench->add_subcommand(
      "validate",
      "Validation speed on a virtual cluster it brings up (and no false positive on a clean "
      "one, run after run), and the planning time of the large-cluster schedule");
  v->add_option("--prefix", f->prefix, "prefix of the bench cluster's names")
      ->capture_default_str();
  v->add_option("--hosts", f->hosts, "virtual hosts")->capture_default_str();
  v->add_option("--leaves", f->leaves, "leaf switches")->capture_default_str();
  v->add_option("--leaf-rate", f->leaf_rate, "host link rate")->capture_default_str();
  v->add_option("--spine-rate", f->spine_rate, "leaf uplink rate")->capture_default_str();
  v->add_option(
       "--plan", f->plan,
       "validation plan: vcluster (the full plan for virtual hosts), vcluster-quick, or any other")
      ->capture_default_str();
  v->add_option("--repeat", f->repeat, "runs on the clean cluster")->capture_default_str();
  v->add_option("--plan-nodes", f->plan_nodes, "nodes of the fat tree whose schedule is timed")
      ->capture_default_str();
  v->add_flag(
      "--json", f->json,
      "one object: hosts, plan, total_s (median), rounds, tests, findings (worse than PASS), "
      "all_pairs_rounds, repeat, "
      "clean_runs, runs[], planning{hosts, levels, rounds, pairs, plan_ms, "
      "all_pairs_rounds}");
  v->footer(
      "Examples:\n"
      "  sudo railyard bench validate --repeat 5\n"
      "  sudo railyard bench validate --plan vcluster-quick --json\n"
      "Exit 1 when a run on the clean cluster flagged anything. Docs: docs/performance.md\n");
  v->callback([f, action] {
    *action = [f]() -> Outcome {
      if (f->repeat < 1 || f->repeat > 100) {
        return InvalidArgument("--repeat {}: expected 1 to 100", f->repeat);
      }
      if (f->hosts < 2) return InvalidArgument("--hosts {}: expected at least 2", f->hosts);
      if (f->plan_nodes < 2 || f->plan_nodes > 1'000'000) {
        return InvalidArgument("--plan-nodes {}: expected 2 to 1000000", f->plan_nodes);
      }
      return RunBenchValidate(*f);
    };
  });
}

}  // namespace railyard::cli
