#include "railyard/launch/run_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "railyard/base/config.h"

namespace railyard::launch {
namespace {

using base::FieldContext;
using nlohmann::json;

// Reads the fields of one JSON object, each absent one left at its default; the first
// problem (a field of the wrong type) is kept and reported by status().
class Fields {
 public:
  Fields(const json& object, FieldContext ctx) : j_(object), ctx_(std::move(ctx)) {}

  template <typename T>
  Fields& Get(const char* key, T& out) {
    if (!status_.ok()) return *this;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return *this;
    if (!Matches(*it, out)) {
      status_ = ctx_.Child(key).Error(fmt::format("expected {}, got {}", Want(out), it->dump()));
      return *this;
    }
    out = it->get<T>();
    return *this;
  }
  const Status& status() const { return status_; }

 private:
  static bool Matches(const json& v, const std::string&) { return v.is_string(); }
  static bool Matches(const json& v, const bool&) { return v.is_boolean(); }
  template <typename T>
  requires std::is_integral_v<T>
  static bool Matches(const json& v, const T&) { return v.is_number_integer(); }
  template <typename T>
  static bool Matches(const json& v, const std::vector<T>&) {
    return v.is_array() &&
           std::all_of(v.begin(), v.end(), [](const json& e) { return Matches(e, T{}); });
  }
  static std::string Want(const std::string&) { return "a string"; }
  static std::string Want(const bool&) { return "true or false"; }
  template <typename T>
  requires std::is_integral_v<T>
  static std::string Want(const T&) { return "an integer"; }
  template <typename T>
  static std::string Want(const std::vector<T>&) {
    return "a list of " + Want(T{}).substr(Want(T{}).find(' ') + 1) + "s";
  }

  const json& j_;
  FieldContext ctx_;
  Status status_ = Status::Ok();
};

Result<json> ParseObject(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, base::ParseJson(text, key));
  if (!j.is_object()) return InvalidArgument("{}: expected a JSON object", key);
  return j;
}

json EnvToJson(const comm::EnvList& env) {
  json j = json::array();
  for (const auto& [name, value] : env) j.push_back(json::array({name, value}));
  return j;
}

Result<comm::EnvList> EnvFromJson(const json& j, const FieldContext& ctx) {
  comm::EnvList env;
  if (j.is_null()) return env;
  if (!j.is_array()) return ctx.Error("expected a list of [name, value] pairs");
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string()) {
      return ctx.Index(i).Error("expected [name, value], two strings");
    }
    env.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
  }
  return env;
}

const json& Member(const json& j, const char* key) {
  static const json kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

}  // namespace

std::string RunHelloKey(std::string_view job, std::string_view host) {
  return fmt::format("{}/hello/{}", job, host);
}
std::string RunPlanKey(std::string_view job, int attempt) {
  return fmt::format("{}/plan/{}", job, attempt);
}
std::string RunControlKey(std::string_view job) { return fmt::format("{}/control", job); }
std::string RunStatusKey(std::string_view job, std::string_view host) {
  return fmt::format("{}/status/{}", job, host);
}

int AttemptPlan::GroupOf(std::string_view host) const {
  auto it = std::find(hosts.begin(), hosts.end(), host);
  return it == hosts.end() ? -1 : static_cast<int>(it - hosts.begin());
}

std::string_view AgentStateName(AgentStatus::State state) {
  switch (state) {
    case AgentStatus::State::kIdle:
      return "idle";
    case AgentStatus::State::kRunning:
      return "running";
    case AgentStatus::State::kStopped:
      return "stopped";
    case AgentStatus::State::kFailed:
      return "failed";
    case AgentStatus::State::kEnded:
      return "ended";
  }
  return "?";
}

std::string ToJson(const RunHello& hello) {
  return json{{"address", hello.address}, {"pid", hello.pid}}.dump();
}

std::string ToJson(const AttemptPlan& p) {
  json setup = json::array();
  for (const auto& host : p.setup) {
    json ranks = json::array();
    for (const LocalRankSetup& r : host) {
      ranks.push_back({{"cpus", r.cpus}, {"env", EnvToJson(r.env)}});
    }
    setup.push_back(std::move(ranks));
  }
  return json{{"attempt", p.attempt},
              {"world_size", p.world_size},
              {"nproc_per_host", p.nproc_per_host},
              {"hosts", p.hosts},
              {"store_host", p.store_host},
              {"store_port", p.store_port},
              {"master_port", p.master_port},
              {"argv", p.argv},
              {"env", EnvToJson(p.env)},
              {"job_id", p.job_id},
              {"rank_secret", p.rank_secret},
              {"ckpt_dir", p.ckpt_dir},
              {"log_dir", p.log_dir},
              {"node_models", p.node_models},
              {"setup", std::move(setup)}}
      .dump();
}

std::string ToJson(const Control& c) {
  std::string_view action = c.action == Control::Action::kRun    ? "run"
                            : c.action == Control::Action::kStop ? "stop"
                                                                 : "end";
  return json{{"action", action}, {"attempt", c.attempt}, {"why", c.why}}.dump();
}

std::string ToJson(const AgentStatus& s) {
  json ranks = json::array();
  for (const AgentRankStatus& r : s.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"pid", r.pid},
                     {"heard", r.heard},
                     {"silent_ms", r.silent_ms},
                     {"last_step", r.last_step},
                     {"frozen", r.frozen},
                     {"step_us", r.step_us},
                     {"exited", r.exited},
                     {"exit_code", r.exit_code},
                     {"signal", r.signal},
                     {"exited_ms_ago", r.exited_ms_ago},
                     {"error_line", r.error_line},
                     {"stopped_why", r.stopped_why}});
  }
  return json{{"host", s.host},       {"seq", s.seq},     {"state", AgentStateName(s.state)},
              {"attempt", s.attempt}, {"error", s.error}, {"ranks", std::move(ranks)}}
      .dump();
}

Result<RunHello> ParseRunHello(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, ParseObject(text, key));
  RunHello h;
  RY_RETURN_IF_ERROR(Fields(j, FieldContext(std::string(key)))
                         .Get("address", h.address)
                         .Get("pid", h.pid)
                         .status());
  return h;
}

Result<AttemptPlan> ParseAttemptPlan(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, ParseObject(text, key));
  FieldContext ctx{std::string(key)};
  AttemptPlan p;
  RY_RETURN_IF_ERROR(Fields(j, ctx)
                         .Get("attempt", p.attempt)
                         .Get("world_size", p.world_size)
                         .Get("nproc_per_host", p.nproc_per_host)
                         .Get("hosts", p.hosts)
                         .Get("store_host", p.store_host)
                         .Get("store_port", p.store_port)
                         .Get("master_port", p.master_port)
                         .Get("argv", p.argv)
                         .Get("job_id", p.job_id)
                         .Get("rank_secret", p.rank_secret)
                         .Get("ckpt_dir", p.ckpt_dir)
                         .Get("log_dir", p.log_dir)
                         .Get("node_models", p.node_models)
                         .status());
  RY_ASSIGN_OR_RETURN(p.env, EnvFromJson(Member(j, "env"), ctx.Child("env")));
  const json& setup = Member(j, "setup");
  if (!setup.is_null() && !setup.is_array()) {
    return ctx.Child("setup").Error("expected a list per host");
  }
  for (size_t h = 0; setup.is_array() && h < setup.size(); ++h) {
    FieldContext hctx = ctx.Child("setup").Index(h);
    if (!setup[h].is_array()) return hctx.Error("expected a list per local rank");
    std::vector<LocalRankSetup> ranks;
    for (size_t r = 0; r < setup[h].size(); ++r) {
      const json& e = setup[h][r];
      FieldContext rctx = hctx.Index(r);
      if (!e.is_object()) return rctx.Error("expected an object");
      LocalRankSetup s;
      RY_RETURN_IF_ERROR(Fields(e, rctx).Get("cpus", s.cpus).status());
      RY_ASSIGN_OR_RETURN(s.env, EnvFromJson(Member(e, "env"), rctx.Child("env")));
      ranks.push_back(std::move(s));
    }
    p.setup.push_back(std::move(ranks));
  }
  if (p.world_size < 1 || p.nproc_per_host < 1 ||
      p.world_size != p.nproc_per_host * static_cast<int>(p.hosts.size())) {
    return ctx.Error(fmt::format("world_size {} is not nproc_per_host {} x {} hosts", p.world_size,
                                 p.nproc_per_host, p.hosts.size()));
  }
  if (!p.node_models.empty() && p.node_models.size() != p.hosts.size()) {
    return ctx.Child("node_models")
        .Error(fmt::format("{} entries for {} hosts", p.node_models.size(), p.hosts.size()));
  }
  if (!p.setup.empty() && p.setup.size() != p.hosts.size()) {
    return ctx.Child("setup").Error(
        fmt::format("{} entries for {} hosts", p.setup.size(), p.hosts.size()));
  }
  return p;
}

Result<Control> ParseControl(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, ParseObject(text, key));
  FieldContext ctx{std::string(key)};
  Control c;
  std::string action;
  RY_RETURN_IF_ERROR(
      Fields(j, ctx).Get("action", action).Get("attempt", c.attempt).Get("why", c.why).status());
  if (action == "run") {
    c.action = Control::Action::kRun;
  } else if (action == "stop") {
    c.action = Control::Action::kStop;
  } else if (action == "end") {
    c.action = Control::Action::kEnd;
  } else {
    return ctx.Child("action").Error(
        fmt::format("expected \"run\", \"stop\" or \"end\", got \"{}\"", action));
  }
  return c;
}

Result<AgentStatus> ParseAgentStatus(std::string_view text, std::string_view key) {
  RY_ASSIGN_OR_RETURN(json j, ParseObject(text, key));
  FieldContext ctx{std::string(key)};
  AgentStatus s;
  std::string state;
  RY_RETURN_IF_ERROR(Fields(j, ctx)
                         .Get("host", s.host)
                         .Get("seq", s.seq)
                         .Get("state", state)
                         .Get("attempt", s.attempt)
                         .Get("error", s.error)
                         .status());
  bool known = false;
  for (auto st :
       {AgentStatus::State::kIdle, AgentStatus::State::kRunning, AgentStatus::State::kStopped,
        AgentStatus::State::kFailed, AgentStatus::State::kEnded}) {
    if (AgentStateName(st) == state) {
      s.state = st;
      known = true;
    }
  }
  if (!known) {
    return ctx.Child("state").Error(fmt::format(
        "expected \"idle\", \"running\", \"stopped\", \"failed\" or \"ended\", got \"{}\"", state));
  }
  const json& ranks = Member(j, "ranks");
  if (!ranks.is_null() && !ranks.is_array()) return ctx.Child("ranks").Error("expected a list");
  for (size_t i = 0; ranks.is_array() && i < ranks.size(); ++i) {
    FieldContext rctx = ctx.Child("ranks").Index(i);
    if (!ranks[i].is_object()) return rctx.Error("expected an object");
    AgentRankStatus r;
    RY_RETURN_IF_ERROR(Fields(ranks[i], rctx)
                           .Get("rank", r.rank)
                           .Get("pid", r.pid)
                           .Get("heard", r.heard)
                           .Get("silent_ms", r.silent_ms)
                           .Get("last_step", r.last_step)
                           .Get("frozen", r.frozen)
                           .Get("step_us", r.step_us)
                           .Get("exited", r.exited)
                           .Get("exit_code", r.exit_code)
                           .Get("signal", r.signal)
                           .Get("exited_ms_ago", r.exited_ms_ago)
                           .Get("error_line", r.error_line)
                           .Get("stopped_why", r.stopped_why)
                           .status());
    s.ranks.push_back(std::move(r));
  }
  return s;
}

}  // namespace railyard::launch
