// The storage and collective phases of RunValidation (coordinator.h).
//
// Storage runs in lock-step over the live hosts: every host writes its own files under
// <shared>/<host>, then every host reads the next host's files (so its page cache never held
// them), then the metadata probe, which also removes the probe files. The probes' codes
// (storage_probe.h) decide FAIL (cannot write: read-only, full, refused) from UNKNOWN (out of
// time); a reader whose neighbour never wrote is not blamed for it.
//
// The collective phase runs one allreduce sweep with every live host as a rank, and
// nccl-tests' all_reduce_perf from the coordinator where it is installed.
#include <fmt/format.h>

#include <algorithm>

#include "railyard/base/units.h"
#include "railyard/validate/coordinator_internal.h"
#include "railyard/validate/probe_settings.h"

namespace railyard::validate::internal {
namespace {

using std::chrono::milliseconds;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// FAIL for a probe that ran and was refused (storage_probe.h's codes); UNKNOWN for one that
// ran out of time, whose agent stopped answering, or that this railyard lacks.
Outcome ProbeFailure(const Status& s, std::string_view what) {
  std::string reason = fmt::format("{}: {}", what, s.message());
  switch (s.code()) {
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kUnavailable:
    case StatusCode::kUnimplemented:
    case StatusCode::kAborted:
      return Outcome::Unknown(reason);
    default:
      return Outcome::Fail(reason);
  }
}

std::string HostDir(const Run& run, int host) {
  return run.options.shared_dir + "/" + run.hosts[host].name;
}

// Gate per host (a shared directory given, the profile's needs): false when every host was
// given its SKIPPED outcome and nothing is to run.
bool Gated(Run& run, const PlannedCheck* pc, const std::vector<int>& live) {
  if (pc == nullptr) return true;
  const Site site{.shared_dir = !run.options.shared_dir.empty()};
  bool any = false;
  for (int host : live) {
    if (std::optional<Outcome> g = Gate(pc->check->info(), run.hosts[host].profile, site)) {
      run.AddCheck(host, pc->check->info().id, *g);
    } else {
      any = true;
    }
  }
  return !any;
}

struct StorageRun {
  Run& run;
  std::vector<int> hosts;  // live, in report order
  std::vector<StorageFigure> figures;
  std::vector<Status> write, read, meta;

  void Write(const StorageProbeOptions& o, milliseconds timeout) {
    std::vector<Exchange> xs;
    for (int h : hosts) {
      xs.push_back({.host = h,
                    .task = {.kind = TaskKind::kStorageWrite,
                             .dir = HostDir(run, h),
                             .bytes_per_file = o.bytes_per_file,
                             .block_bytes = o.block_bytes,
                             .files = o.files}});
    }
    run.Progress("storage", "", "write", 0, static_cast<int>(xs.size()));
    run.Send(xs, timeout, "storage");
    for (size_t i = 0; i < xs.size(); ++i) {
      write[i] = Answer(xs[i]);
      if (write[i].ok()) figures[i].write_bytes_per_s = xs[i].result->bytes_per_s;
    }
  }

  void Read(const StorageProbeOptions& o, milliseconds timeout) {
    std::vector<Exchange> xs;
    std::vector<size_t> which;
    for (size_t i = 0; i < hosts.size() && hosts.size() > 1; ++i) {
      size_t n = (i + 1) % hosts.size();
      figures[i].read_from = hosts[n];
      xs.push_back({.host = hosts[i],
                    .task = {.kind = TaskKind::kStorageRead,
                             .dir = HostDir(run, hosts[i]),
                             .neighbour_dir = HostDir(run, hosts[n]),
                             .bytes_per_file = o.bytes_per_file,
                             .block_bytes = o.block_bytes,
                             .files = o.files}});
      which.push_back(i);
    }
    run.Progress("storage", "", "read neighbour", 0, static_cast<int>(xs.size()));
    run.Send(xs, timeout, "storage");
    for (size_t k = 0; k < xs.size(); ++k) {
      read[which[k]] = Answer(xs[k]);
      if (read[which[k]].ok()) figures[which[k]].read_bytes_per_s = xs[k].result->bytes_per_s;
    }
  }

  void Metadata(int items, milliseconds timeout) {
    std::vector<Exchange> xs;
    for (int h : hosts) {
      xs.push_back({.host = h,
                    .task = {.kind = TaskKind::kMetadata,
                             .dir = HostDir(run, h),
                             .items = items,
                             .cleanup = true}});
    }
    run.Progress("storage", "", items > 0 ? "metadata" : "cleanup", 0, static_cast<int>(xs.size()));
    run.Send(xs, timeout, "storage");
    for (size_t i = 0; i < xs.size(); ++i) {
      meta[i] = Answer(xs[i]);
      if (meta[i].ok()) figures[i].metadata_ops_per_s = xs[i].result->ops_per_s;
    }
  }

  Status Answer(const Exchange& x) const {
    if (!x.result) return DeadlineExceeded("{}", run.hosts[x.host].dead_reason);
    return x.result->AsStatus();
  }
};

void ThroughputVerdicts(StorageRun& s, const PlannedCheck& pc) {
  std::vector<double> writes, reads;
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    if (s.write[i].ok()) writes.push_back(s.figures[i].write_bytes_per_s * 8);
    if (s.read[i].ok() && s.hosts.size() > 1) reads.push_back(s.figures[i].read_bytes_per_s * 8);
  }
  const CheckInfo& info = pc.check->info();
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    const int host = s.hosts[i];
    if (!s.run.hosts[host].live) continue;
    if (!s.write[i].ok()) {
      s.run.AddCheck(host, info.id, ProbeFailure(s.write[i], "write"));
      continue;
    }
    const double w = s.figures[i].write_bytes_per_s * 8;
    std::vector<Outcome> parts = {Judge(info, pc.settings, w,
                                        fmt::format("write {}", base::FormatRateBits(w)),
                                        {.median = Median(writes)})};
    if (s.read[i].ok() && s.hosts.size() > 1) {
      const double r = s.figures[i].read_bytes_per_s * 8;
      parts.push_back(Judge(info, pc.settings, r, fmt::format("read {}", base::FormatRateBits(r)),
                            {.median = Median(reads)}));
    } else if (!s.read[i].ok() && s.read[i].code() != StatusCode::kNotFound) {
      parts.push_back(ProbeFailure(s.read[i], "read"));
    }
    s.run.AddCheck(host, info.id, Worst(parts));
  }
}

void MetadataVerdicts(StorageRun& s, const PlannedCheck& pc) {
  std::vector<double> rates;
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    if (s.meta[i].ok()) rates.push_back(s.figures[i].metadata_ops_per_s);
  }
  const CheckInfo& info = pc.check->info();
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    const int host = s.hosts[i];
    if (!s.run.hosts[host].live) continue;
    if (!s.meta[i].ok()) {
      s.run.AddCheck(host, info.id, ProbeFailure(s.meta[i], "metadata"));
      continue;
    }
    const double ops = s.figures[i].metadata_ops_per_s;
    s.run.AddCheck(host, info.id,
                   Judge(info, pc.settings, ops, fmt::format("{:.0f} metadata ops/s", ops),
                         {.median = Median(rates)}));
  }
}

void Unknown(Run& run, const PlannedCheck* pc, const std::vector<int>& hosts,
             const std::string& why) {
  if (pc == nullptr) return;
  for (int h : hosts) run.AddCheck(h, pc->check->info().id, Outcome::Unknown(why));
}

}  // namespace

void RunStoragePhase(Run& run) {
  const PlannedCheck* tp = run.Planned("storage.throughput");
  const PlannedCheck* md = run.Planned("storage.metadata");
  if (tp == nullptr && md == nullptr) return;
  std::vector<int> live = run.LiveHosts();
  bool skip_tp = Gated(run, tp, live), skip_md = Gated(run, md, live);
  if (skip_tp && skip_md) return;
  StorageProbeOptions o;
  int items = 0;
  if (!skip_tp) {
    Result<StorageProbeOptions> r = StorageProbeOptionsFrom(tp->settings);
    if (!r.ok()) return Unknown(run, tp, live, "bad parameter: " + r.status().message());
    o = *r;
  }
  if (!skip_md) {
    Result<int> r = MetadataItemsFrom(md->settings);
    if (!r.ok()) return Unknown(run, md, live, "bad parameter: " + r.status().message());
    items = *r;
  }
  StorageRun s{.run = run, .hosts = live};
  s.figures.resize(live.size());
  s.write.assign(live.size(), Status::Ok());
  s.read = s.write;
  s.meta = s.write;
  for (size_t i = 0; i < live.size(); ++i) s.figures[i].host = live[i];
  if (!skip_tp) {
    s.Write(o, tp->timeout + kTaskMargin);
    s.Read(o, tp->timeout + kTaskMargin);
  }
  s.Metadata(items, (skip_md ? milliseconds(10'000) : md->timeout) + kTaskMargin);
  for (size_t i = 0; i < live.size(); ++i) {
    StorageFigure& f = s.figures[i];
    for (const Status* st : {&s.write[i], &s.read[i], &s.meta[i]}) {
      if (!st->ok() && f.error.empty()) f.error = st->message();
    }
    run.report.storage_write_bytes_per_s += f.write_bytes_per_s;
    run.report.storage_read_bytes_per_s += f.read_bytes_per_s;
    run.report.storage_metadata_ops_per_s += f.metadata_ops_per_s;
    run.report.storage.push_back(f);
  }
  if (!skip_tp) ThroughputVerdicts(s, *tp);
  if (!skip_md) MetadataVerdicts(s, *md);
}

namespace {

// The rate the allreduce is held to: the slowest live host's link from the topology, else the
// fleet median of the pair bandwidths (when they were not normalised).
double ExpectedBusBits(const Run& run, const std::vector<int>& live) {
  double slowest = 0;
  for (int h : live) {
    double r = static_cast<double>(run.hosts[h].profile.nic_rate_bits);
    if (r > 0 && (slowest == 0 || r < slowest)) slowest = r;
  }
  if (slowest > 0) return slowest;
  return run.report.fabric_stats.normalised ? 0 : run.report.fabric_stats.median;
}

Outcome Allreduce(Run& run, const PlannedCheck& pc) {
  std::vector<int> live = run.LiveHosts();
  if (live.size() < 2) return Outcome::Skipped("needs at least two live hosts");
  Result<AllreduceSweepParams> params = AllreduceParamsFrom(pc.settings);
  if (!params.ok()) return Outcome::Unknown("bad parameter: " + params.status().message());
  std::vector<std::string> names;
  for (int h : live) names.push_back(run.hosts[h].name);
  std::vector<Exchange> xs;
  for (size_t k = 0; k < live.size(); ++k) {
    xs.push_back({.host = live[k],
                  .task = {.kind = TaskKind::kAllreduce,
                           .key_prefix = run.options.run_id + "/allreduce",
                           .rank = static_cast<int>(k),
                           .world = static_cast<int>(live.size()),
                           .sizes = params->sizes,
                           .hosts = names,
                           .warmup = params->warmup,
                           .iters = params->iters}});
  }
  run.Progress("collective", "", fmt::format("allreduce over {} hosts", live.size()));
  run.Send(xs, pc.timeout + kTaskMargin, "collective");
  for (const Exchange& x : xs) {
    if (!x.result) {
      return Outcome::Unknown(
          fmt::format("{}: {}", run.hosts[x.host].name, run.hosts[x.host].dead_reason));
    }
    if (!x.result->ok) {
      return ProbeFailure(x.result->AsStatus(),
                          fmt::format("allreduce on {}", run.hosts[x.host].name));
    }
  }
  run.report.collective = xs[0].result->figures;
  if (run.report.collective.empty()) return Outcome::Unknown("the sweep returned no figure");
  const CollectiveFigure& last = run.report.collective.back();
  const double bits = last.busbw_bytes_per_s * 8;
  return Judge(pc.check->info(), pc.settings, bits,
               fmt::format("busbw {} at {} over {} hosts", base::FormatRateBits(bits),
                           base::FormatBytes(last.bytes), live.size()),
               {.expected = ExpectedBusBits(run, live)});
}

Outcome NcclTests(Run& run, const PlannedCheck& pc) {
  Result<NcclTestsOptions> o = NcclTestsOptionsFrom(pc.settings);
  if (!o.ok()) return Outcome::Unknown("bad parameter: " + o.status().message());
  Result<std::string> binary = FindAllReducePerf(o->binary);
  if (!binary.ok()) return Outcome::Skipped(binary.status().message());
  run.Progress("collective", "", "nccl-tests all_reduce_perf");
  o->deadline = base::Deadline::After(pc.timeout);
  Result<NcclTestsRun> r = RunNcclTests(*o);
  if (!r.ok()) return Outcome::Unknown(r.status().message());
  if (r->wrong > 0 || !r->out_of_bounds_ok) {
    return Outcome::Fail(fmt::format("{} reported {} wrong values", r->command, r->wrong));
  }
  if (r->figures.empty()) return Outcome::Unknown(r->command + " printed no figure");
  const double bits = r->figures.back().busbw_bytes_per_s * 8;
  return Judge(pc.check->info(), pc.settings, bits,
               fmt::format("busbw {} at {} ({})", base::FormatRateBits(bits),
                           base::FormatBytes(r->figures.back().bytes), r->command),
               {.median = bits});
}

}  // namespace

void RunCollectivePhase(Run& run) {
  if (const PlannedCheck* pc = run.Planned("collective.allreduce")) {
    auto start = base::Clock::now();
    Outcome o = Allreduce(run, *pc);
    run.report.cluster_checks.push_back(
        {pc->check->info().id, std::move(o),
         std::chrono::duration_cast<milliseconds>(base::Clock::now() - start)});
  }
  if (const PlannedCheck* pc = run.Planned("collective.nccl_tests")) {
    auto start = base::Clock::now();
    Outcome o = NcclTests(run, *pc);
    run.report.cluster_checks.push_back(
        {pc->check->info().id, std::move(o),
         std::chrono::duration_cast<milliseconds>(base::Clock::now() - start)});
  }
}

}  // namespace railyard::validate::internal
