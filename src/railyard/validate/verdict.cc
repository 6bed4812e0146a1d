#include "railyard/validate/verdict.h"

#include <fmt/format.h>

#include <vector>

namespace railyard::validate {

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kWarn:
      return "WARN";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kUnknown:
      return "UNKNOWN";
    case Verdict::kSkipped:
      return "SKIPPED";
  }
  return "UNKNOWN";
}

int VerdictExitCode(Verdict v) {
  switch (v) {
    case Verdict::kPass:
    case Verdict::kSkipped:
      return 0;
    case Verdict::kWarn:
      return 1;
    case Verdict::kFail:
      return 2;
    case Verdict::kUnknown:
      return 3;
  }
  return 3;
}

Verdict WorseOf(Verdict a, Verdict b) { return static_cast<int>(a) >= static_cast<int>(b) ? a : b; }

std::string Outcome::ToString() const {
  if (reason.empty()) return std::string(VerdictName(verdict));
  return fmt::format("{}: {}", VerdictName(verdict), reason);
}

Outcome Worst(std::span<const Outcome> outcomes) {
  if (outcomes.empty()) return Outcome::Skipped("nothing ran");
  const Outcome* worst = &outcomes[0];
  for (const Outcome& o : outcomes) {
    if (WorseOf(worst->verdict, o.verdict) != worst->verdict) worst = &o;
  }
  int others = -1;
  for (const Outcome& o : outcomes) others += o.verdict == worst->verdict;
  Outcome out = *worst;
  if (others > 0) out.reason += fmt::format(" (+{} more)", others);
  return out;
}

Outcome Worst(std::initializer_list<Outcome> outcomes) {
  return Worst(std::span<const Outcome>(outcomes.begin(), outcomes.size()));
}

}  // namespace railyard::validate
