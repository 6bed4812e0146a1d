#include "railyard/validate/agent_protocol.h"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

#include "railyard/base/config.h"

namespace railyard::validate {
namespace {

using base::FieldContext;
using nlohmann::json;

constexpr std::array<std::string_view, 10> kKindNames = {
    "node",          "clock",        "reach",    "latency",   "send",
    "storage_write", "storage_read", "metadata", "allreduce", "exit"};

// Optional fields of types base/config.h has no Optional* reader for.
Result<double> OptDouble(const json& j, std::string_view key, const FieldContext& ctx) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0.0;
  return base::RequireDouble(j, key, ctx);
}
Result<bool> OptBool(const json& j, std::string_view key, const FieldContext& ctx) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  return base::RequireBool(j, key, ctx);
}
Result<uint64_t> OptUint64(const json& j, std::string_view key, const FieldContext& ctx) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return uint64_t{0};
  return base::RequireUint64(j, key, ctx);
}
Result<int> OptInt32(const json& j, std::string_view key, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(int64_t v, base::OptionalInt(j, key, 0, ctx));
  if (v < INT32_MIN || v > INT32_MAX) return ctx.Child(key).Error("out of range");
  return static_cast<int>(v);
}
// The array under `key`, or an empty one when absent.
Result<json> OptArray(const json& j, std::string_view key, const FieldContext& ctx) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return json::array();
  RY_ASSIGN_OR_RETURN(const json* a, base::RequireArray(j, key, ctx));
  return *a;
}
// The array under `key` (absent: empty), each element read by `read_one(element, ctx)`.
template <typename T, typename ReadOne>
Result<std::vector<T>> ReadList(const json& j, std::string_view key, const FieldContext& ctx,
                                ReadOne read_one) {
  RY_ASSIGN_OR_RETURN(json a, OptArray(j, key, ctx));
  std::vector<T> out;
  for (size_t i = 0; i < a.size(); ++i) {
    Result<T> v = read_one(a[i], ctx.Child(key).Index(i));
    if (!v.ok()) return v.status();
    out.push_back(std::move(*v));
  }
  return out;
}

Result<std::vector<std::string>> StringList(const json& j, std::string_view key,
                                            const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(json a, OptArray(j, key, ctx));
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string()) return ctx.Child(key).Index(i).Error("expected a string");
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

Result<json> Parse(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, base::ParseJson(text, key));
  if (!j.is_object()) return FieldContext(std::string(key)).Error("expected a JSON object");
  return j;
}

json ProfileToJson(const Profile& p) {
  json j = {{"name", p.name},
            {"hosts", p.hosts},
            {"nic_rate_bits", p.nic_rate_bits},
            {"gpus", p.gpus},
            {"fabric_provider", p.fabric_provider}};
  if (p.rdma) j["rdma"] = *p.rdma;
  if (p.memlock_bytes) j["memlock_bytes"] = *p.memlock_bytes;
  for (const MountExpectation& m : p.mounts)
    j["mounts"].push_back({{"path", m.path}, {"fs", m.fs_type}});
  for (const topo::GpuNicPath& g : p.gpu_nic_paths) {
    j["gpu_nic_paths"].push_back(
        {{"gpu", g.gpu}, {"nic", g.nic}, {"path", topo::PathClassName(g.path)}});
  }
  return j;
}

Result<Profile> ProfileFromJson(const json& j, const FieldContext& ctx) {
  Profile p;
  RY_ASSIGN_OR_RETURN(p.name, base::RequireString(j, "name", ctx));
  RY_ASSIGN_OR_RETURN(p.hosts, base::OptionalString(j, "hosts", "", ctx));
  RY_ASSIGN_OR_RETURN(p.nic_rate_bits, OptUint64(j, "nic_rate_bits", ctx));
  RY_ASSIGN_OR_RETURN(int64_t gpus, base::OptionalInt(j, "gpus", -1, ctx));
  p.gpus = static_cast<int>(gpus);
  RY_ASSIGN_OR_RETURN(p.fabric_provider, base::OptionalString(j, "fabric_provider", "", ctx));
  if (j.contains("rdma")) {
    RY_ASSIGN_OR_RETURN(p.rdma, base::RequireBool(j, "rdma", ctx));
  }
  if (j.contains("memlock_bytes")) {
    RY_ASSIGN_OR_RETURN(p.memlock_bytes, base::RequireUint64(j, "memlock_bytes", ctx));
  }
  RY_ASSIGN_OR_RETURN(json mounts, OptArray(j, "mounts", ctx));
  for (size_t i = 0; i < mounts.size(); ++i) {
    FieldContext c = ctx.Child("mounts").Index(i);
    MountExpectation m;
    RY_ASSIGN_OR_RETURN(m.path, base::RequireString(mounts[i], "path", c));
    RY_ASSIGN_OR_RETURN(m.fs_type, base::OptionalString(mounts[i], "fs", "", c));
    p.mounts.push_back(std::move(m));
  }
  RY_ASSIGN_OR_RETURN(json paths, OptArray(j, "gpu_nic_paths", ctx));
  for (size_t i = 0; i < paths.size(); ++i) {
    FieldContext c = ctx.Child("gpu_nic_paths").Index(i);
    topo::GpuNicPath g;
    RY_ASSIGN_OR_RETURN(int64_t gpu, base::RequireInt(paths[i], "gpu", c));
    g.gpu = static_cast<int>(gpu);
    RY_ASSIGN_OR_RETURN(g.nic, base::RequireString(paths[i], "nic", c));
    RY_ASSIGN_OR_RETURN(std::string cls, base::RequireString(paths[i], "path", c));
    Result<topo::PathClass> pc = topo::ParsePathClass(cls);
    if (!pc.ok()) return c.Child("path").Error(pc.status().message());
    g.path = *pc;
    p.gpu_nic_paths.push_back(std::move(g));
  }
  return p;
}

json CheckSpecToJson(const NodeCheckSpec& s) {
  json j = {{"id", s.id}, {"timeout_ms", s.timeout_ms}};
  if (!s.warn.empty()) j["warn"] = s.warn;
  if (!s.fail.empty()) j["fail"] = s.fail;
  if (!s.params.empty()) j["params"] = s.params;
  if (!s.profiles.empty()) j["profiles"] = s.profiles;
  return j;
}

Result<NodeCheckSpec> CheckSpecFromJson(const json& j, const FieldContext& ctx) {
  NodeCheckSpec s;
  RY_ASSIGN_OR_RETURN(s.id, base::RequireString(j, "id", ctx));
  RY_ASSIGN_OR_RETURN(s.warn, base::OptionalString(j, "warn", "", ctx));
  RY_ASSIGN_OR_RETURN(s.fail, base::OptionalString(j, "fail", "", ctx));
  RY_ASSIGN_OR_RETURN(s.timeout_ms, base::RequireInt(j, "timeout_ms", ctx));
  RY_ASSIGN_OR_RETURN(s.profiles, StringList(j, "profiles", ctx));
  if (j.contains("params")) {
    RY_ASSIGN_OR_RETURN(const json* params, base::RequireObject(j, "params", ctx));
    for (auto& [k, v] : params->items()) {
      RY_ASSIGN_OR_RETURN(s.params[k], base::RequireString(*params, k, ctx.Child("params")));
    }
  }
  return s;
}

json PeersToJson(const std::vector<Peer>& peers) {
  json a = json::array();
  for (const Peer& p : peers)
    a.push_back({{"host", p.host}, {"address", p.address}, {"port", p.port}});
  return a;
}

Result<Peer> PeerFromJson(const json& j, const FieldContext& c) {
  Peer p;
  RY_ASSIGN_OR_RETURN(p.host, base::RequireString(j, "host", c));
  RY_ASSIGN_OR_RETURN(p.address, base::RequireString(j, "address", c));
  RY_ASSIGN_OR_RETURN(p.port, OptInt32(j, "port", c));
  return p;
}

Result<PeerResult> PeerResultFromJson(const json& j, const FieldContext& c) {
  PeerResult p;
  RY_ASSIGN_OR_RETURN(p.host, base::RequireString(j, "host", c));
  RY_ASSIGN_OR_RETURN(p.ok, base::RequireBool(j, "ok", c));
  RY_ASSIGN_OR_RETURN(p.seconds, OptDouble(j, "seconds", c));
  RY_ASSIGN_OR_RETURN(p.error, base::OptionalString(j, "error", "", c));
  return p;
}

Result<CollectiveFigure> FigureFromJson(const json& j, const FieldContext& c) {
  CollectiveFigure f;
  RY_ASSIGN_OR_RETURN(f.bytes, base::RequireUint64(j, "bytes", c));
  RY_ASSIGN_OR_RETURN(f.seconds, OptDouble(j, "seconds", c));
  RY_ASSIGN_OR_RETURN(f.algbw_bytes_per_s, OptDouble(j, "algbw", c));
  RY_ASSIGN_OR_RETURN(f.busbw_bytes_per_s, OptDouble(j, "busbw", c));
  return f;
}

Result<CheckResult> CheckResultFromJson(const json& j, const FieldContext& ctx) {
  CheckResult r;
  RY_ASSIGN_OR_RETURN(r.id, base::RequireString(j, "id", ctx));
  RY_ASSIGN_OR_RETURN(std::string verdict, base::RequireString(j, "verdict", ctx));
  Result<Verdict> v = ParseVerdict(verdict);
  if (!v.ok()) return ctx.Child("verdict").Error(v.status().message());
  r.outcome.verdict = *v;
  RY_ASSIGN_OR_RETURN(r.outcome.reason, base::OptionalString(j, "reason", "", ctx));
  RY_ASSIGN_OR_RETURN(r.outcome.measured, base::OptionalString(j, "measured", "", ctx));
  RY_ASSIGN_OR_RETURN(r.outcome.expected, base::OptionalString(j, "expected", "", ctx));
  RY_ASSIGN_OR_RETURN(int64_t ms, base::OptionalInt(j, "elapsed_ms", 0, ctx));
  r.elapsed = std::chrono::milliseconds(ms);
  return r;
}

}  // namespace

std::string HelloKey(std::string_view run_id, std::string_view host) {
  return fmt::format("{}/hello/{}", run_id, host);
}
std::string TaskKey(std::string_view run_id, std::string_view host, int seq) {
  return fmt::format("{}/task/{}/{}", run_id, host, seq);
}
std::string ResultKey(std::string_view run_id, std::string_view host, int seq) {
  return fmt::format("{}/result/{}/{}", run_id, host, seq);
}

std::string_view TaskKindName(TaskKind kind) { return kKindNames[static_cast<size_t>(kind)]; }

Result<TaskKind> ParseTaskKind(std::string_view name) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == name) return static_cast<TaskKind>(i);
  }
  return InvalidArgument("unknown task kind '{}' (expected one of {})", name,
                         fmt::join(kKindNames, ", "));
}

Result<Verdict> ParseVerdict(std::string_view name) {
  for (Verdict v :
       {Verdict::kSkipped, Verdict::kPass, Verdict::kWarn, Verdict::kUnknown, Verdict::kFail}) {
    if (VerdictName(v) == name) return v;
  }
  return InvalidArgument("unknown verdict '{}' (expected PASS, WARN, FAIL, UNKNOWN or SKIPPED)",
                         name);
}

TaskResult TaskResult::Failed(const Status& status) {
  TaskResult r;
  r.error = status.message();
  r.code = std::string(StatusCodeName(status.code()));
  return r;
}

Status TaskResult::AsStatus() const {
  if (ok) return Status::Ok();
  for (int c = 1; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (StatusCodeName(static_cast<StatusCode>(c)) == code) {
      return Status(static_cast<StatusCode>(c), error);
    }
  }
  return Status(StatusCode::kInternal, error.empty() ? "the agent gave no reason" : error);
}

std::string ToJson(const Hello& h) {
  return json{
      {"address", h.address}, {"probe_port", h.probe_port}, {"pid", h.pid}, {"version", h.version}}
      .dump();
}

Result<Hello> HelloFromJson(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, Parse(text, key));
  FieldContext ctx{std::string(key)};
  Hello h;
  RY_ASSIGN_OR_RETURN(h.address, base::RequireString(j, "address", ctx));
  RY_ASSIGN_OR_RETURN(h.probe_port, OptInt32(j, "probe_port", ctx));
  RY_ASSIGN_OR_RETURN(h.pid, base::OptionalInt(j, "pid", 0, ctx));
  RY_ASSIGN_OR_RETURN(h.version, OptInt32(j, "version", ctx));
  if (h.version != kAgentProtocolVersion) {
    return ctx.Child("version").Error(fmt::format(
        "agent speaks protocol version {}, this coordinator {}", h.version, kAgentProtocolVersion));
  }
  return h;
}

std::string ToJson(const Task& t) {
  json j = {{"kind", TaskKindName(t.kind)}};
  if (t.timeout_ms) j["timeout_ms"] = t.timeout_ms;
  switch (t.kind) {
    case TaskKind::kNode:
      j["plan"] = t.plan;
      j["checks"] = json::array();
      for (const NodeCheckSpec& s : t.checks) j["checks"].push_back(CheckSpecToJson(s));
      j["profile"] = ProfileToJson(t.profile);
      j["shared_dir"] = t.shared_dir;
      break;
    case TaskKind::kReach:
    case TaskKind::kLatency:
    case TaskKind::kSend:
      j["peers"] = PeersToJson(t.peers);
      if (t.samples) j["samples"] = t.samples;
      if (t.duration_ms) j["duration_ms"] = t.duration_ms;
      break;
    case TaskKind::kStorageWrite:
    case TaskKind::kStorageRead:
    case TaskKind::kMetadata:
      j["dir"] = t.dir;
      if (!t.neighbour_dir.empty()) j["neighbour_dir"] = t.neighbour_dir;
      if (t.bytes_per_file) j["bytes_per_file"] = t.bytes_per_file;
      if (t.block_bytes) j["block_bytes"] = t.block_bytes;
      if (t.files) j["files"] = t.files;
      if (t.items) j["items"] = t.items;
      if (t.cleanup) j["cleanup"] = true;
      break;
    case TaskKind::kAllreduce:
      j["key_prefix"] = t.key_prefix;
      j["rank"] = t.rank;
      j["world"] = t.world;
      j["sizes"] = t.sizes;
      j["hosts"] = t.hosts;
      j["warmup"] = t.warmup;
      j["iters"] = t.iters;
      break;
    case TaskKind::kClock:
    case TaskKind::kExit:
      break;
  }
  return j.dump();
}

Result<Task> TaskFromJson(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, Parse(text, key));
  FieldContext ctx{std::string(key)};
  Task t;
  RY_ASSIGN_OR_RETURN(std::string kind, base::RequireString(j, "kind", ctx));
  Result<TaskKind> k = ParseTaskKind(kind);
  if (!k.ok()) return ctx.Child("kind").Error(k.status().message());
  t.kind = *k;
  RY_ASSIGN_OR_RETURN(t.timeout_ms, base::OptionalInt(j, "timeout_ms", 0, ctx));
  RY_ASSIGN_OR_RETURN(t.plan, base::OptionalString(j, "plan", "", ctx));
  RY_ASSIGN_OR_RETURN(t.checks, ReadList<NodeCheckSpec>(j, "checks", ctx, CheckSpecFromJson));
  if (t.kind == TaskKind::kNode) {
    RY_ASSIGN_OR_RETURN(const json* profile, base::RequireObject(j, "profile", ctx));
    RY_ASSIGN_OR_RETURN(t.profile, ProfileFromJson(*profile, ctx.Child("profile")));
  }
  RY_ASSIGN_OR_RETURN(t.shared_dir, OptBool(j, "shared_dir", ctx));
  RY_ASSIGN_OR_RETURN(t.peers, ReadList<Peer>(j, "peers", ctx, PeerFromJson));
  RY_ASSIGN_OR_RETURN(t.samples, OptInt32(j, "samples", ctx));
  RY_ASSIGN_OR_RETURN(t.duration_ms, base::OptionalInt(j, "duration_ms", 0, ctx));
  RY_ASSIGN_OR_RETURN(t.dir, base::OptionalString(j, "dir", "", ctx));
  RY_ASSIGN_OR_RETURN(t.neighbour_dir, base::OptionalString(j, "neighbour_dir", "", ctx));
  RY_ASSIGN_OR_RETURN(t.bytes_per_file, OptUint64(j, "bytes_per_file", ctx));
  RY_ASSIGN_OR_RETURN(t.block_bytes, OptUint64(j, "block_bytes", ctx));
  RY_ASSIGN_OR_RETURN(t.files, OptInt32(j, "files", ctx));
  RY_ASSIGN_OR_RETURN(t.items, OptInt32(j, "items", ctx));
  RY_ASSIGN_OR_RETURN(t.cleanup, OptBool(j, "cleanup", ctx));
  RY_ASSIGN_OR_RETURN(t.key_prefix, base::OptionalString(j, "key_prefix", "", ctx));
  RY_ASSIGN_OR_RETURN(t.rank, OptInt32(j, "rank", ctx));
  RY_ASSIGN_OR_RETURN(t.world, OptInt32(j, "world", ctx));
  RY_ASSIGN_OR_RETURN(json sizes, OptArray(j, "sizes", ctx));
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!sizes[i].is_number_unsigned()) {
      return ctx.Child("sizes").Index(i).Error("expected a non-negative integer");
    }
    t.sizes.push_back(sizes[i].get<uint64_t>());
  }
  RY_ASSIGN_OR_RETURN(t.hosts, StringList(j, "hosts", ctx));
  RY_ASSIGN_OR_RETURN(t.warmup, OptInt32(j, "warmup", ctx));
  RY_ASSIGN_OR_RETURN(t.iters, OptInt32(j, "iters", ctx));
  if ((t.kind == TaskKind::kSend) && t.peers.size() != 1) {
    return ctx.Child("peers").Error(
        fmt::format("a send task names exactly one peer, got {}", t.peers.size()));
  }
  return t;
}

std::string ToJson(const TaskResult& r) {
  json j = {{"ok", r.ok}};
  if (!r.error.empty()) j["error"] = r.error;
  if (!r.code.empty()) j["code"] = r.code;
  if (!r.checks.empty()) {
    for (const CheckResult& c : r.checks) {
      j["checks"].push_back({{"id", c.id},
                             {"verdict", VerdictName(c.outcome.verdict)},
                             {"reason", c.outcome.reason},
                             {"measured", c.outcome.measured},
                             {"expected", c.outcome.expected},
                             {"elapsed_ms", c.elapsed.count()}});
    }
  }
  if (r.abandoned) j["abandoned"] = r.abandoned;
  if (r.realtime_ns) j["realtime_ns"] = r.realtime_ns;
  for (const PeerResult& p : r.peers) {
    json pj = {{"host", p.host}, {"ok", p.ok}, {"seconds", p.seconds}};
    if (!p.error.empty()) pj["error"] = p.error;
    j["peers"].push_back(std::move(pj));
  }
  if (r.bits_per_s) j["bits_per_s"] = r.bits_per_s;
  if (r.bytes) j["bytes"] = r.bytes;
  if (r.seconds) j["seconds"] = r.seconds;
  if (r.bytes_per_s) j["bytes_per_s"] = r.bytes_per_s;
  if (r.ops_per_s) j["ops_per_s"] = r.ops_per_s;
  if (!r.note.empty()) j["note"] = r.note;
  for (const CollectiveFigure& f : r.figures) {
    j["figures"].push_back({{"bytes", f.bytes},
                            {"seconds", f.seconds},
                            {"algbw", f.algbw_bytes_per_s},
                            {"busbw", f.busbw_bytes_per_s}});
  }
  return j.dump();
}

Result<TaskResult> TaskResultFromJson(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, Parse(text, key));
  FieldContext ctx{std::string(key)};
  TaskResult r;
  RY_ASSIGN_OR_RETURN(r.ok, base::RequireBool(j, "ok", ctx));
  RY_ASSIGN_OR_RETURN(r.error, base::OptionalString(j, "error", "", ctx));
  RY_ASSIGN_OR_RETURN(r.code, base::OptionalString(j, "code", "", ctx));
  RY_ASSIGN_OR_RETURN(r.checks, ReadList<CheckResult>(j, "checks", ctx, CheckResultFromJson));
  RY_ASSIGN_OR_RETURN(r.abandoned, OptInt32(j, "abandoned", ctx));
  RY_ASSIGN_OR_RETURN(r.realtime_ns, base::OptionalInt(j, "realtime_ns", 0, ctx));
  RY_ASSIGN_OR_RETURN(r.peers, ReadList<PeerResult>(j, "peers", ctx, PeerResultFromJson));
  RY_ASSIGN_OR_RETURN(r.bits_per_s, OptDouble(j, "bits_per_s", ctx));
  RY_ASSIGN_OR_RETURN(r.bytes, OptUint64(j, "bytes", ctx));
  RY_ASSIGN_OR_RETURN(r.seconds, OptDouble(j, "seconds", ctx));
  RY_ASSIGN_OR_RETURN(r.bytes_per_s, OptDouble(j, "bytes_per_s", ctx));
  RY_ASSIGN_OR_RETURN(r.ops_per_s, OptDouble(j, "ops_per_s", ctx));
  RY_ASSIGN_OR_RETURN(r.note, base::OptionalString(j, "note", "", ctx));
  RY_ASSIGN_OR_RETURN(r.figures, ReadList<CollectiveFigure>(j, "figures", ctx, FigureFromJson));
  return r;
}

}  // namespace railyard::validate
