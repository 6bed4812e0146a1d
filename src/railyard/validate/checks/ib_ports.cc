// node.ib_ports: every port of every RDMA device in /sys/class/infiniband (InfiniBand, RoCE,
// EFA) is ACTIVE and runs at least at the profile's expected link rate. A port that trained
// at a lower width or speed (a bad cable, a dirty optic) halves a rail's bandwidth and slows
// every collective on it. SKIPPED when the profile expects no RDMA; FAIL when RDMA is
// expected and no device is there. A plan may name the devices to check (`devices`).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/topo/discover.h"
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

constexpr const char* kIbDir = "/sys/class/infiniband";

std::vector<std::string> SplitList(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (comma != 0) out.emplace_back(list.substr(0, comma));
    list = comma == list.npos ? "" : list.substr(comma + 1);
  }
  return out;
}

class IbPortsCheck final : public BasicCheck {
 public:
  IbPortsCheck()
      : BasicCheck({.id = "node.ib_ports",
                    .summary = "RDMA ports ACTIVE at the expected rate",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2),
                    .unit = Unit::kRate,
                    .default_fail = "100% of expected",
                    .params = {{"devices", "", "comma-separated RDMA devices; empty: all"}}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    const Profile& p = *ctx.profile;
    if (!p.rdma.value_or(false)) {
      return Outcome::Skipped(
          fmt::format("no RDMA expected on profile {}{}", p.name,
                      p.rdma ? "" : " (set rdma in the plan or give --topology)"));
    }
    std::vector<std::string> devices = SplitList(ctx.settings->params.find("devices")->second);
    if (devices.empty()) {
      Result<std::vector<std::string>> listed = ctx.env->ListDir(kIbDir);
      if (!listed.ok() && listed.status().code() != StatusCode::kNotFound) {
        return Outcome::Unknown(listed.status().message());
      }
      if (listed.ok()) devices = *listed;
      if (devices.empty()) {
        return Outcome::Fail(
            fmt::format("RDMA expected, but {} lists no device (no RDMA driver "
                        "loaded?)",
                        kIbDir));
      }
    }
    std::vector<Outcome> parts;
    double slowest = std::numeric_limits<double>::infinity();
    int active = 0, ports_seen = 0;
    for (const std::string& dev : devices) {
      std::string ports_dir = fmt::format("{}/{}/ports", kIbDir, dev);
      Result<std::vector<std::string>> ports = ctx.env->ListDir(ports_dir);
      if (!ports.ok()) {
        parts.push_back(ports.status().code() == StatusCode::kNotFound
                            ? Outcome::Fail(fmt::format("RDMA device {} not found", dev))
                            : Outcome::Unknown(ports.status().message()));
        continue;
      }
      for (const std::string& port : *ports) {
        ++ports_seen;
        parts.push_back(CheckPort(ctx, ports_dir + "/" + port, dev + "/" + port, slowest, active));
      }
    }
    if (ports_seen == 0 && parts.empty()) {
      parts.push_back(Outcome::Fail("RDMA expected, but no device has a port"));
    }
    std::string expected = p.nic_rate_bits > 0
                               ? fmt::format("ACTIVE, >= {}", base::FormatRateBits(p.nic_rate_bits))
                               : "ACTIVE";
    std::string measured =
        active == 0 ? "no port ACTIVE"
                    : fmt::format("{} ACTIVE, slowest {}", active, base::FormatRateBits(slowest));
    Outcome worst = Worst(parts);
    if (worst.verdict == Verdict::kPass) {
      worst.reason = fmt::format("{} port{} ACTIVE{}", active, active == 1 ? "" : "s",
                                 p.nic_rate_bits > 0 ? " at the expected rate" : "");
    }
    return std::move(worst).With(measured, expected);
  }

 private:
  // One port: its state, and its rate against the profile's (when known).
  Outcome CheckPort(const CheckContext& ctx, const std::string& dir, const std::string& name,
                    double& slowest, int& active) const {
    Result<std::string> state = ctx.env->ReadFile(dir + "/state");
    if (!state.ok()) return Outcome::Unknown(state.status().message());
    // "4: ACTIVE"
    std::string_view s = base::StripAsciiWhitespace(*state);
    if (size_t colon = s.find(':'); colon != s.npos) {
      s = base::StripAsciiWhitespace(s.substr(colon + 1));
    }
    if (s != "ACTIVE") return Outcome::Fail(fmt::format("{} is {}, expected ACTIVE", name, s));
    ++active;
    Result<std::string> rate_text = ctx.env->ReadFile(dir + "/rate");
    if (!rate_text.ok()) return Outcome::Unknown(rate_text.status().message());
    Result<uint64_t> rate = topo::ParseIbRate(base::StripAsciiWhitespace(*rate_text));
    if (!rate.ok()) return Outcome::Unknown(fmt::format("{}: {}", name, rate.status().message()));
    slowest = std::min(slowest, static_cast<double>(*rate));
    std::string what = fmt::format("{} at {}", name, base::FormatRateBits(*rate));
    if (ctx.profile->nic_rate_bits == 0) return Outcome::Pass(what);
    return Judge(info(), *ctx.settings, static_cast<double>(*rate), what,
                 {.expected = static_cast<double>(ctx.profile->nic_rate_bits)});
  }
};

}  // namespace

std::unique_ptr<Check> NewIbPortsCheck() { return std::make_unique<IbPortsCheck>(); }

}  // namespace railyard::validate
