#include "railyard/validate/report.h"

namespace railyard::validate {

void RollUp(RunReport& report) {
  std::vector<Outcome> all;
  for (HostEntry& host : report.hosts) {
    std::vector<Outcome> mine;
    mine.reserve(host.checks.size());
    for (const CheckResult& c : host.checks) mine.push_back(c.outcome);
    host.overall = Worst(mine);
    // The host's name leads the reason, so the run's reason says where.
    Outcome o = host.overall;
    o.reason = o.reason.empty() ? host.name : host.name + ": " + o.reason;
    all.push_back(std::move(o));
  }
  for (const CheckResult& c : report.cluster_checks) {
    Outcome o = c.outcome;
    o.reason = o.reason.empty() ? c.id : c.id + ": " + o.reason;
    all.push_back(std::move(o));
  }
  for (const Finding& f : report.findings) {
    Outcome o = f.outcome;
    o.reason = f.subject + ": " + o.reason;
    all.push_back(std::move(o));
  }
  report.overall = Worst(all);
}

}  // namespace railyard::validate
