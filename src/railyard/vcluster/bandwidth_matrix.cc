#include "railyard/vcluster/bandwidth_matrix.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "railyard/base/subprocess.h"
#include "railyard/base/units.h"

namespace railyard::vcluster {

HostExecution ExecutionFor(const ClusterState& state, const HostPlan& host) {
  HostExecution e;
  if (state.spec().mode == Mode::kNetns) e.netns_path = "/run/netns/" + host.netns;
  e.env = {{"RAILYARD_VHOST", host.name},
           {"RAILYARD_VHOST_ADDR", host.address},
           {kPrefixEnv, state.spec().prefix}};
  if (!state.shared_dir.empty()) {
    e.env.emplace_back("RAILYARD_VCLUSTER_SHARED_DIR", state.shared_dir);
    e.env.emplace_back("RAILYARD_VHOST_SCRATCH", state.ScratchDir(host.name));
  }
  if (!state.control_address.empty()) {
    e.env.emplace_back("RAILYARD_VCLUSTER_CONTROL_ADDR", state.control_address);
  }
  // Slurm commands on a host (srun, sbatch, a launcher's agents) find the cluster's Slurm.
  if (!state.slurm_conf.empty()) e.env.emplace_back("SLURM_CONF", state.slurm_conf);
  // libfabric's own exclusion syntax (fabric(7)): a list that starts with '^' is negated.
  auto hidden = state.hidden_providers.find(host.name);
  if (hidden != state.hidden_providers.end() && !hidden->second.empty()) {
    e.env.emplace_back("FI_PROVIDER", fmt::format("^{}", fmt::join(hidden->second, ",")));
  }
  return e;
}

Result<BandwidthMatrix> MeasureBandwidth(const ClusterState& state, const MatrixOptions& options) {
  const auto& hosts = state.plan.hosts;
  const size_t n = hosts.size();
  std::vector<std::pair<int, int>> pairs = options.pairs;
  if (pairs.empty()) {
    for (size_t s = 0; s < n; ++s) {
      for (size_t d = 0; d < n; ++d) {
        if (s != d) pairs.emplace_back(static_cast<int>(s), static_cast<int>(d));
      }
    }
  }
  // Sinks live long enough for every pair plus slack; they are killed when we return.
  const auto per_pair_budget = options.per_pair + std::chrono::seconds(5);
  const auto lifetime = per_pair_budget * static_cast<long>(pairs.size() + 2);
  std::vector<base::Child> sinks;
  std::vector<bool> needs_sink(n, false);
  for (auto [s, d] : pairs) needs_sink[d] = true;
  for (size_t i = 0; i < n; ++i) {
    if (!needs_sink[i]) continue;
    HostExecution ex = ExecutionFor(state, hosts[i]);
    base::SpawnOptions so{
        .argv = {options.railyard_binary, "probe", "sink", "--listen",
                 fmt::format("{}:{}", hosts[i].address, options.port), "--for",
                 base::FormatDuration(std::chrono::duration_cast<base::Duration>(lifetime))},
        .env = ex.env,
        .netns_path = ex.netns_path};
    RY_ASSIGN_OR_RETURN(base::Child sink, base::Child::Spawn(so));
    auto line = sink.ReadLine(base::Deadline::After(std::chrono::seconds(10)));
    if (!line.ok() || line->rfind("ready ", 0) != 0) {
      auto info = sink.KillAndReap();
      return Unavailable("probe sink on host {} ({}) did not start: {}", hosts[i].name,
                         hosts[i].address,
                         line.ok()                  ? *line
                         : info.stderr_text.empty() ? line.status().message()
                                                    : info.stderr_text);
    }
    sinks.push_back(std::move(sink));
  }
  BandwidthMatrix m(n, std::vector<double>(n, 0.0));
  for (auto [s, d] : pairs) {
    HostExecution ex = ExecutionFor(state, hosts[s]);
    base::SpawnOptions so{.argv = {options.railyard_binary, "probe", "send", "--to",
                                   fmt::format("{}:{}", hosts[d].address, options.port), "--time",
                                   base::FormatDuration(options.per_pair), "--json"},
                          .env = ex.env,
                          .netns_path = ex.netns_path};
    auto done = base::RunCommand(so, base::Deadline::After(per_pair_budget));
    if (!done.ok()) {
      return done.status().WithContext(
          fmt::format("measuring {} -> {}", hosts[s].name, hosts[d].name));
    }
    if (!done->Succeeded()) {
      return Unavailable("measuring {} -> {}: {}", hosts[s].name, hosts[d].name, done->Describe());
    }
    try {
      auto j = nlohmann::json::parse(done->stdout_text);
      m[s][d] = j.at("bits_per_second").get<double>();
    } catch (const nlohmann::json::exception& e) {
      return Internal("measuring {} -> {}: unreadable probe output '{}': {}", hosts[s].name,
                      hosts[d].name, done->stdout_text, e.what());
    }
    if (options.on_pair) options.on_pair(s, d, m[s][d]);
  }
  for (auto& sink : sinks) sink.KillAndReap();
  return m;
}

}  // namespace railyard::vcluster
