// Verdicts: what a check, a host or a whole validation run concluded, with the reason.
//
// Five verdicts, after NHC and gcm. UNKNOWN means the check could not decide (its agent died,
// it timed out, its tool crashed); SKIPPED means it did not run on purpose, and says why ("no
// GPU expected on profile cpu"). Nothing is PASS that did not run: a combination of verdicts
// is PASS only when at least one of them is PASS and none is worse.
//
//   Outcome o = Worst({memlock, swap, gpus});   // FAIL beats UNKNOWN beats WARN beats PASS
//   return o.ExitCode();                         // Nagios: 0 OK, 1 WARN, 2 FAIL, 3 UNKNOWN
//
// Thread-safety: values and pure functions.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace railyard::validate {

// Declared from least to most severe, apart from SKIPPED, which ranks below PASS so that a
// skipped check never hides a failed one and a run of skips alone is SKIPPED, not PASS.
enum class Verdict { kSkipped, kPass, kWarn, kUnknown, kFail };

// "PASS", "WARN", "FAIL", "UNKNOWN", "SKIPPED".
std::string_view VerdictName(Verdict v);

// Nagios plugin exit codes: 0 OK (PASS, and SKIPPED: nothing failed), 1 WARNING, 2 CRITICAL
// (FAIL), 3 UNKNOWN.
int VerdictExitCode(Verdict v);

// The more severe of the two, in the order SKIPPED < PASS < WARN < UNKNOWN < FAIL: a FAIL is
// what an operator acts on, so it outranks a check that could not decide.
Verdict WorseOf(Verdict a, Verdict b);

// A verdict and the one-line reason behind it: "memlock limit is 64 KiB, expected unlimited".
struct Outcome {
  Verdict verdict = Verdict::kUnknown;
  std::string reason;
  // For tables and reports, when the check measured something: "64 KiB", and what it was held
  // to: "unlimited", "fail < 1 MiB". Empty otherwise.
  std::string measured;
  std::string expected;

  static Outcome Pass(std::string reason = {}) { return {Verdict::kPass, std::move(reason)}; }
  static Outcome Warn(std::string reason) { return {Verdict::kWarn, std::move(reason)}; }
  static Outcome Fail(std::string reason) { return {Verdict::kFail, std::move(reason)}; }
  static Outcome Unknown(std::string reason) { return {Verdict::kUnknown, std::move(reason)}; }
  static Outcome Skipped(std::string reason) { return {Verdict::kSkipped, std::move(reason)}; }

  // This outcome with its measured and expected values set.
  Outcome With(std::string measured_value, std::string expected_value) && {
    measured = std::move(measured_value);
    expected = std::move(expected_value);
    return std::move(*this);
  }

  int ExitCode() const { return VerdictExitCode(verdict); }
  // "FAIL: memlock limit is 64 KiB, expected unlimited" (NHC's one-line form); "PASS" alone
  // when there is no reason.
  std::string ToString() const;

  friend bool operator==(const Outcome&, const Outcome&) = default;
};

// The worst of `outcomes`, keeping the reason of the first outcome with that verdict and
// adding "(+N more)" when N others share it. An empty list is SKIPPED "nothing ran".
Outcome Worst(std::span<const Outcome> outcomes);
Outcome Worst(std::initializer_list<Outcome> outcomes);

}  // namespace railyard::validate
