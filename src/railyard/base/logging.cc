#include "railyard/base/logging.h"

#include <spdlog/details/log_msg.h>
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>

namespace railyard::base {
namespace {

constexpr std::string_view kValidLevels = "trace, debug, info, warn, error, off";

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::err;
}

LogLevel FromSpdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return LogLevel::kTrace;
    case spdlog::level::debug:
      return LogLevel::kDebug;
    case spdlog::level::info:
      return LogLevel::kInfo;
    case spdlog::level::warn:
      return LogLevel::kWarn;
    case spdlog::level::err:
    case spdlog::level::critical:
      return LogLevel::kError;
    default:
      return LogLevel::kOff;
  }
}

// "%*" in the pattern: our level names ("warn"), where spdlog's %l would say "warning".
class LevelFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*time*/,
              spdlog::memory_buf_t& dest) override {
    std::string_view name = LogLevelName(FromSpdlog(msg.level));
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelFlag>();
  }
};

// Writes formatted lines to stderr, or hands them to the test hook. One sink with a switch,
// rather than swapping spdlog sinks, because a logger's sink list must not change while other
// threads log.
class RoutingSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void SetTestHook(std::function<void(LogLevel, std::string_view)> hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    test_hook_ = std::move(hook);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (test_hook_) {
      test_hook_(FromSpdlog(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
      return;
    }
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  std::function<void(LogLevel, std::string_view)> test_hook_;
};

struct LogState {
  std::shared_ptr<RoutingSink> sink;
  std::shared_ptr<spdlog::logger> logger;
};

// Built on first use and never destroyed, so threads (and static destructors) that log
// during exit do not touch a dead logger. Not registered with spdlog's global registry:
// nothing else should find or reconfigure it by name.
LogState& State() {
  static LogState* state = [] {
    auto* s = new LogState;
    s->sink = std::make_shared<RoutingSink>();
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<LevelFlag>('*').set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%*] %v");
    s->sink->set_formatter(std::move(formatter));
    s->logger = std::make_shared<spdlog::logger>("railyard", s->sink);
    // Filtering happens in LogEnabled before formatting; spdlog passes everything through.
    s->logger->set_level(spdlog::level::trace);
    return s;
  }();
  return *state;
}

}  // namespace

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      return "off";
  }
  return "unknown";
}

Result<LogLevel> ParseLogLevel(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (LogLevel level : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn,
                         LogLevel::kError, LogLevel::kOff}) {
    if (lower == LogLevelName(level)) return level;
  }
  if (lower == "warning") return LogLevel::kWarn;
  return InvalidArgument("invalid log level '{}' (expected one of {})", text, kValidLevels);
}

void InitLogging(std::optional<LogLevel> cli_level) {
  State();  // build the logger now rather than inside the first, possibly hot, log call
  if (cli_level) {
    SetLogLevel(*cli_level);
    return;
  }
  const char* env = std::getenv("RAILYARD_LOG");
  if (env == nullptr || *env == '\0') {
    SetLogLevel(LogLevel::kWarn);
    return;
  }
  Result<LogLevel> parsed = ParseLogLevel(env);
  SetLogLevel(parsed.value_or(LogLevel::kWarn));
  if (!parsed.ok()) {
    // A typo in the environment should not stop a run, but must not pass silently either.
    Logger("log").Warn("ignoring RAILYARD_LOG: {}; using warn", parsed.status().message());
  }
}

void SetLogLevel(LogLevel level) {
  internal::g_log_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel GetLogLevel() {
  return static_cast<LogLevel>(internal::g_log_level.load(std::memory_order_relaxed));
}

void SetLogSinkForTest(std::function<void(LogLevel, std::string_view)> sink) {
  State().sink->SetTestHook(std::move(sink));
}

namespace internal {

void EmitLog(LogLevel level, std::string_view component, std::string_view message) {
  if (level == LogLevel::kOff) return;
  fmt::memory_buffer line;
  fmt::format_to(std::back_inserter(line), "[{}] {}", component, message);
  State().logger->log(ToSpdlog(level), spdlog::string_view_t(line.data(), line.size()));
}

}  // namespace internal

}  // namespace railyard::base
