// Logging: one facade over spdlog, with a component tag on every line and a run-time level.
//
// Each module keeps a Logger named after itself and logs through it; lines go to stderr as
//
//   [2026-11-30 19:00:01.123] [warn] [vcluster] node n3 did not answer, retrying
//
//   const Logger kLog("vcluster");               // or a member; construction is cheap
//   kLog.Info("started {} nodes in {}", n, FormatDuration(elapsed));
//
// A CLI tool is quiet by default: the level is warn unless the --log-level flag or the
// RAILYARD_LOG environment variable says otherwise (InitLogging). A message below the level
// costs one relaxed atomic load: its arguments are not formatted.
//
// Thread-safety: every function and Logger method may be called from any thread. Lines are
// written whole, never interleaved.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "railyard/base/status.h"

namespace railyard::base {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// "trace", "debug", "info", "warn", "error", "off".
std::string_view LogLevelName(LogLevel level);

// The names above, case-insensitive, and "warning" for warn. INVALID_ARGUMENT listing the
// valid names otherwise.
Result<LogLevel> ParseLogLevel(std::string_view text);

// Sets the level once at startup: `cli_level` (the --log-level flag) when given, else
// $RAILYARD_LOG when set and non-empty, else warn. An invalid $RAILYARD_LOG is not fatal: it
// logs one warning naming the variable and uses warn. May be called again (tests do).
void InitLogging(std::optional<LogLevel> cli_level);

// Messages at `level` or above are written; kOff silences everything.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

namespace internal {
// The threshold, read on every log call; written only by SetLogLevel.
inline std::atomic<int> g_log_level{static_cast<int>(LogLevel::kWarn)};
// Writes one already-formatted line. Out of line so spdlog stays out of this header.
void EmitLog(LogLevel level, std::string_view component, std::string_view message);
}  // namespace internal

// Whether a message at `level` would be written; for skipping expensive preparation.
inline bool LogEnabled(LogLevel level) {
  return level != LogLevel::kOff &&
         static_cast<int>(level) >= internal::g_log_level.load(std::memory_order_relaxed);
}

// A component's handle for logging: prefixes "[component] " to each message. Messages use fmt
// syntax, checked at compile time.
class Logger {
 public:
  explicit Logger(std::string component) : component_(std::move(component)) {}

  template <typename... Args>
  void Trace(fmt::format_string<Args...> format, Args&&... args) const {
    Log(LogLevel::kTrace, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Debug(fmt::format_string<Args...> format, Args&&... args) const {
    Log(LogLevel::kDebug, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Info(fmt::format_string<Args...> format, Args&&... args) const {
    Log(LogLevel::kInfo, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Warn(fmt::format_string<Args...> format, Args&&... args) const {
    Log(LogLevel::kWarn, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Error(fmt::format_string<Args...> format, Args&&... args) const {
    Log(LogLevel::kError, format, std::forward<Args>(args)...);
  }

  // `level` must not be kOff.
  template <typename... Args>
  void Log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) const {
    if (!LogEnabled(level)) return;  // before formatting: filtered messages cost nothing
    internal::EmitLog(level, component_, fmt::format(format, std::forward<Args>(args)...));
  }

  const std::string& component() const { return component_; }

 private:
  std::string component_;
};

// Routes every written line to `sink` instead of stderr, as (level, "[component] message")
// without timestamp or newline; an empty function restores stderr. Filtering by level still
// applies. `sink` runs under the logging lock, one line at a time: it must not log itself.
void SetLogSinkForTest(std::function<void(LogLevel, std::string_view)> sink);

}  // namespace railyard::base
