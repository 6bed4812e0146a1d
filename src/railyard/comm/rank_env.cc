#include "railyard/comm/rank_env.h"

#include <charconv>
#include <cstdlib>

#include "railyard/net/tcp/congestion.h"

namespace railyard::comm {
namespace {

Result<int> ParseInt(std::string_view name, const std::string& text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument("{}='{}' is not an integer", name, text);
  }
  return v;
}

// An optional whole number from Railyard's name, else torchrun's; `*out` is left alone when
// neither is set. INVALID_ARGUMENT naming the variable read when it is not a number >= 0.
Status ReadCount(const EnvGetter& get, std::string_view ours, std::string_view theirs, int* out) {
  std::string_view name = ours;
  std::string text = get(ours);
  if (text.empty() && !theirs.empty()) text = get(name = theirs);
  if (text.empty()) return Status::Ok();
  RY_ASSIGN_OR_RETURN(int v, ParseInt(name, text));
  if (v < 0) return InvalidArgument("{}={}: expected a whole number, 0 or more", name, v);
  *out = v;
  return Status::Ok();
}

}  // namespace

EnvGetter ProcessEnv() {
  return [](std::string_view name) {
    const char* v = std::getenv(std::string(name).c_str());
    return std::string(v ? v : "");
  };
}

EnvGetter MapEnv(const std::map<std::string, std::string>& env) {
  return [&env](std::string_view name) {
    auto it = env.find(std::string(name));
    return it == env.end() ? std::string() : it->second;
  };
}

Result<TransportEnvironment> TransportEnvironment::FromEnv(const EnvGetter& get) {
  TransportEnvironment te;
  te.transport = get("RAILYARD_TRANSPORT");
  te.socket_ifname = get("RAILYARD_SOCKET_IFNAME");
  te.ofi_provider = get("RAILYARD_OFI_PROVIDER");
  te.ofi_domain = get("RAILYARD_OFI_DOMAIN");
  te.tcp_congestion = get("RAILYARD_TCP_CC");
  if (!te.tcp_congestion.empty()) {
    auto cc = net::CongestionControl::Parse(te.tcp_congestion);
    if (!cc.ok()) return cc.status().WithContext("RAILYARD_TCP_CC");
  }
  return te;
}

void TransportEnvironment::AppendTo(EnvList& env) const {
  for (auto [name, value] : {std::pair{"RAILYARD_TRANSPORT", &transport},
                             std::pair{"RAILYARD_SOCKET_IFNAME", &socket_ifname},
                             std::pair{"RAILYARD_OFI_PROVIDER", &ofi_provider},
                             std::pair{"RAILYARD_OFI_DOMAIN", &ofi_domain},
                             std::pair{"RAILYARD_TCP_CC", &tcp_congestion}}) {
    if (!value->empty()) env.emplace_back(name, *value);
  }
}

Result<RankEnvironment> RankEnvironment::FromEnv(const EnvGetter& get) {
  RankEnvironment e;
  std::string rank_var = get("RAILYARD_RANK").empty() ? "RANK" : "RAILYARD_RANK";
  std::string size_var = get("RAILYARD_WORLD_SIZE").empty() ? "WORLD_SIZE" : "RAILYARD_WORLD_SIZE";
  if (get(rank_var).empty() || get(size_var).empty()) {
    return InvalidArgument(
        "RAILYARD_RANK and RAILYARD_WORLD_SIZE (or RANK and WORLD_SIZE) must "
        "be set: this process does not know its place in the job");
  }
  RY_ASSIGN_OR_RETURN(e.rank, ParseInt(rank_var, get(rank_var)));
  RY_ASSIGN_OR_RETURN(e.world_size, ParseInt(size_var, get(size_var)));
  if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size) {
    return InvalidArgument("{}={} is outside {}={}", rank_var, e.rank, size_var, e.world_size);
  }
  RY_RETURN_IF_ERROR(ReadCount(get, "RAILYARD_LOCAL_RANK", "LOCAL_RANK", &e.local_rank));
  RY_RETURN_IF_ERROR(
      ReadCount(get, "RAILYARD_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", &e.local_world_size));
  if (e.local_rank >= 0 && e.local_world_size > 0 && e.local_rank >= e.local_world_size) {
    return InvalidArgument(
        "local rank {} is outside the {} ranks of its host (RAILYARD_LOCAL_RANK or LOCAL_RANK, "
        "RAILYARD_LOCAL_WORLD_SIZE or LOCAL_WORLD_SIZE)",
        e.local_rank, e.local_world_size);
  }
  RY_RETURN_IF_ERROR(ReadCount(get, "RAILYARD_GROUP_RANK", "GROUP_RANK", &e.group_rank));
  RY_RETURN_IF_ERROR(
      ReadCount(get, "RAILYARD_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", &e.restart_count));

  e.store_address = get("RAILYARD_STORE");
  e.store_dir = get("RAILYARD_STORE_DIR");
  e.master_addr = get("MASTER_ADDR");
  if (std::string port = get("MASTER_PORT"); !port.empty()) {
    RY_ASSIGN_OR_RETURN(e.master_port, ParseInt("MASTER_PORT", port));
    if (e.master_port < 1 || e.master_port > 65535) {
      return InvalidArgument("MASTER_PORT={}: expected a port from 1 to 65535", port);
    }
  }
  if (e.store_address.empty() && e.store_dir.empty() && !e.master_addr.empty() &&
      e.master_port == 0) {
    return InvalidArgument("MASTER_ADDR is set but MASTER_PORT is not");
  }
  if (e.store_address.empty() && e.store_dir.empty() && e.master_addr.empty()) {
    return InvalidArgument(
        "no rendezvous store: set RAILYARD_STORE=host:port, "
        "RAILYARD_STORE_DIR=/shared/dir, or MASTER_ADDR and MASTER_PORT");
  }
  e.job_secret = get("RAILYARD_JOB_SECRET");
  if (e.job_secret.empty()) {
    return InvalidArgument(
        "RAILYARD_JOB_SECRET is not set: the launcher must generate one per "
        "job (e.g. `openssl rand -hex 16`) and pass it to every rank");
  }
  RY_ASSIGN_OR_RETURN(e.transport, TransportEnvironment::FromEnv(get));
  e.job_id = get("RAILYARD_JOB_ID");
  e.serve_store = get("RAILYARD_STORE_SERVE") == "1" && e.rank == 0;
  e.host = get("RAILYARD_HOST");
  e.virtual_host = get("RAILYARD_VHOST");
  e.ckpt_dir = get("RAILYARD_CKPT_DIR");
  e.progress = get("RAILYARD_PROGRESS");
  if (e.serve_store && e.store_address.empty()) {
    return InvalidArgument("RAILYARD_STORE_SERVE=1 needs RAILYARD_STORE=ip:port to listen on");
  }
  return e;
}

std::string RankEnvironment::StoreAddress() const {
  if (!store_address.empty()) return store_address;
  if (store_dir.empty() && !master_addr.empty() && master_port > 0) {
    return master_addr + ":" + std::to_string(master_port);
  }
  return "";
}

EnvList RankEnvironment::ToEnv() const {
  EnvList env;
  auto both = [&](const char* ours, const char* theirs, const std::string& value) {
    env.emplace_back(ours, value);
    env.emplace_back(theirs, value);
  };
  both("RAILYARD_RANK", "RANK", std::to_string(rank));
  both("RAILYARD_WORLD_SIZE", "WORLD_SIZE", std::to_string(world_size));
  if (local_rank >= 0) both("RAILYARD_LOCAL_RANK", "LOCAL_RANK", std::to_string(local_rank));
  if (local_world_size > 0) {
    both("RAILYARD_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", std::to_string(local_world_size));
  }
  if (group_rank >= 0) both("RAILYARD_GROUP_RANK", "GROUP_RANK", std::to_string(group_rank));
  both("RAILYARD_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count));
  auto one = [&](const char* name, const std::string& value) {
    if (!value.empty()) env.emplace_back(name, value);
  };
  one("RAILYARD_STORE", store_address);
  one("RAILYARD_STORE_DIR", store_dir);
  // Every rank gets the variable, so that one inherited from the launcher's own environment
  // cannot make a rank serve.
  env.emplace_back("RAILYARD_STORE_SERVE", serve_store ? "1" : "0");
  one("MASTER_ADDR", master_addr);
  if (master_port > 0) env.emplace_back("MASTER_PORT", std::to_string(master_port));
  one("RAILYARD_JOB_SECRET", job_secret);
  one("RAILYARD_JOB_ID", job_id);
  one("RAILYARD_HOST", host);
  one("RAILYARD_VHOST", virtual_host);
  one("RAILYARD_CKPT_DIR", ckpt_dir);
  one("RAILYARD_PROGRESS", progress);
  transport.AppendTo(env);
  return env;
}

}  // namespace railyard::comm
