#include "railyard/validate/remediation.h"

#include <fmt/format.h>

#include "railyard/validate/agent_starter.h"

namespace railyard::validate {
namespace {

constexpr std::string_view kReasonPrefix = "railyard:";
constexpr size_t kMaxReason = 200;  // scontrol shows reasons on one line; keep them readable

// The value of "Key=" in `scontrol show node -o` output: up to the next space, or for
// Reason, up to its " [user@time]" suffix (reasons have spaces).
std::string Field(std::string_view line, std::string_view key) {
  size_t at = 0;
  for (;;) {
    at = line.find(key, at);
    if (at == std::string_view::npos) return "";
    if (at == 0 || line[at - 1] == ' ') break;
    at += key.size();
  }
  std::string_view value = line.substr(at + key.size());
  size_t end = key == "Reason=" ? value.find(" [") : value.find_first_of(" \n");
  if (end == std::string_view::npos) end = value.find('\n');
  return std::string(value.substr(0, end));
}

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (text.size() > kMaxReason) text = text.substr(0, kMaxReason - 3) + "...";
  return text;
}

// A taint value (a label value): at most 63 of [A-Za-z0-9._-], alphanumeric at both ends.
std::string TaintValue(const HostEntry& host) {
  for (const CheckResult& c : host.checks) {
    if (c.outcome.verdict != host.overall.verdict) continue;
    std::string v;
    for (char ch : c.id) {
      v += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'
               ? ch
               : '_';
    }
    v = v.substr(0, 63);
    if (!v.empty() && std::isalnum(static_cast<unsigned char>(v.front())) &&
        std::isalnum(static_cast<unsigned char>(v.back()))) {
      return v;
    }
  }
  return "failed";
}

bool Failing(Verdict v) { return v == Verdict::kFail || v == Verdict::kUnknown; }
bool Healthy(Verdict v) { return v == Verdict::kPass || v == Verdict::kWarn; }

}  // namespace

std::string HostReason(const HostEntry& host) {
  for (const CheckResult& c : host.checks) {
    if (c.outcome.verdict == host.overall.verdict) {
      return c.outcome.reason.empty() ? c.id : c.id + ": " + c.outcome.reason;
    }
  }
  return host.overall.reason;
}

std::string FormatExcludeFile(const RunReport& report) {
  int n = 0;
  for (const HostEntry& h : report.hosts) n += Failing(h.overall.verdict);
  std::string out = fmt::format(
      "# railyard validate, plan {}, {}: {} of {} hosts FAIL or UNKNOWN (not shown healthy).\n"
      "# For `railyard place --exclude @FILE`.\n",
      report.plan, report.started, n, report.hosts.size());
  for (const HostEntry& h : report.hosts) {
    if (!Failing(h.overall.verdict)) continue;
    out += fmt::format("# {} {}\n{}\n", VerdictName(h.overall.verdict), OneLine(HostReason(h)),
                       h.name);
  }
  return out;
}

ScontrolRunner SystemScontrol(std::chrono::milliseconds timeout) {
  return [timeout](const std::vector<std::string>& argv) {
    return base::RunCommand({.argv = argv}, base::Deadline::After(timeout));
  };
}

std::vector<SlurmAction> ApplySlurmDrain(const RunReport& report, const ScontrolRunner& scontrol) {
  std::vector<SlurmAction> actions;
  auto run = [&](const std::string& host, std::vector<std::string> argv, std::string* out) -> bool {
    auto r = scontrol(argv);
    std::string error;
    if (!r.ok()) {
      error = r.status().message();
    } else if (!r->Succeeded()) {
      error = r->Describe();
    }
    if (!error.empty()) {
      actions.push_back({host, "error", error});
      return false;
    }
    if (out != nullptr) *out = r->stdout_text;
    return true;
  };
  for (const HostEntry& h : report.hosts) {
    const Verdict v = h.overall.verdict;
    if (v == Verdict::kUnknown) {
      actions.push_back({h.name, "left", "UNKNOWN: neither drained nor resumed"});
      continue;
    }
    if (v != Verdict::kFail && !Healthy(v)) continue;
    std::string shown;
    if (!run(h.name, {"scontrol", "show", "node", h.name, "-o"}, &shown)) continue;
    const bool drained = Field(shown, "State=").find("DRAIN") != std::string::npos;
    const std::string reason = Field(shown, "Reason=");
    const bool ours = reason.starts_with(kReasonPrefix);
    if (v == Verdict::kFail) {
      if (drained && !ours) {
        actions.push_back({h.name, "left", "already drained by someone else: " + reason});
        continue;
      }
      std::string why = OneLine(fmt::format("{} {}", kReasonPrefix, HostReason(h)));
      if (run(h.name, {"scontrol", "update", "NodeName=" + h.name, "State=DRAIN", "Reason=" + why},
              nullptr)) {
        actions.push_back({h.name, "drain", why});
      }
    } else if (drained && ours) {
      if (run(h.name, {"scontrol", "update", "NodeName=" + h.name, "State=RESUME"}, nullptr)) {
        actions.push_back({h.name, "resume", "its drain was railyard's: " + reason});
      }
    }
  }
  return actions;
}

std::string FormatSlurmActions(const std::vector<SlurmAction>& actions) {
  std::string out;
  for (const SlurmAction& a : actions) {
    std::string_view what = a.action == "drain"    ? "drained"
                            : a.action == "resume" ? "resumed"
                            : a.action == "left"   ? "left as it is"
                                                   : "scontrol failed";
    out += fmt::format("{}: {} ({})\n", a.host, what, a.detail);
  }
  return out;
}

std::string FormatKubernetesScript(const RunReport& report) {
  std::string out = fmt::format(
      "#!/bin/sh\n"
      "# railyard validate, plan {}, {}: label and taint the failing nodes, clear passing ones.\n"
      "# Removing a taint a node does not have is not an error here.\n",
      report.plan, report.started);
  for (const HostEntry& h : report.hosts) {
    const std::string node = ShellQuote(h.name);
    const Verdict v = h.overall.verdict;
    if (v == Verdict::kFail) {
      out += fmt::format("# {} FAIL {}\n", h.name, OneLine(HostReason(h)));
      out += fmt::format("kubectl label node {} railyard.io/validation=fail --overwrite\n", node);
      out += fmt::format("kubectl taint node {} railyard.io/unhealthy={}:NoSchedule --overwrite\n",
                         node, TaintValue(h));
    } else if (Healthy(v)) {
      out += fmt::format("kubectl label node {} railyard.io/validation=pass --overwrite\n", node);
      out += fmt::format(
          "kubectl taint node {} railyard.io/unhealthy:NoSchedule- 2>/dev/null || true\n", node);
    } else if (v == Verdict::kUnknown) {
      out += fmt::format("# {} UNKNOWN {}\n", h.name, OneLine(HostReason(h)));
      out +=
          fmt::format("kubectl label node {} railyard.io/validation=unknown --overwrite\n", node);
    }
  }
  return out;
}

}  // namespace railyard::validate
