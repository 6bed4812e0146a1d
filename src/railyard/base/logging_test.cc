#include "railyard/base/logging.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace railyard::base {
namespace {

// Counts how often it is formatted, to prove filtered messages are never formatted.
struct Expensive {
  int* formatted;
};

}  // namespace
}  // namespace railyard::base

template <>
struct fmt::formatter<railyard::base::Expensive> : fmt::formatter<std::string_view> {
  auto format(const railyard::base::Expensive& e, fmt::format_context& ctx) const {
    ++*e.formatted;
    return fmt::formatter<std::string_view>::format("expensive", ctx);
  }
};

namespace railyard::base {
namespace {

struct Line {
  LogLevel level;
  std::string text;
  bool operator==(const Line&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Line& line) {
  return os << LogLevelName(line.level) << " " << line.text;
}

// Captures lines through the test hook; restores stderr, the level and the environment after.
class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_level_ = GetLogLevel();
    SetLogSinkForTest([this](LogLevel level, std::string_view text) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back({level, std::string(text)});
    });
  }
  void TearDown() override {
    SetLogSinkForTest(nullptr);
    SetLogLevel(saved_level_);
    unsetenv("RAILYARD_LOG");
  }
  std::vector<Line> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  LogLevel saved_level_ = LogLevel::kWarn;
  std::mutex mu_;
  std::vector<Line> lines_;
};

TEST(ParseLogLevel, AcceptsNamesInAnyCase) {
  EXPECT_EQ(ParseLogLevel("trace").value_or(LogLevel::kOff), LogLevel::kTrace);
  EXPECT_EQ(ParseLogLevel("DEBUG").value_or(LogLevel::kOff), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("Info").value_or(LogLevel::kOff), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("warn").value_or(LogLevel::kOff), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("WARNING").value_or(LogLevel::kOff), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("error").value_or(LogLevel::kOff), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("off").value_or(LogLevel::kTrace), LogLevel::kOff);
}

TEST(ParseLogLevel, RejectsOthersListingValidNames) {
  for (std::string_view bad : {"", "loud", "err", "fatal", " info"}) {
    Result<LogLevel> r = ParseLogLevel(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              fmt::format("invalid log level '{}' (expected one of trace, debug, info, warn, "
                          "error, off)",
                          bad));
  }
}

TEST(LogLevelName, RoundTrips) {
  for (LogLevel level : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn,
                         LogLevel::kError, LogLevel::kOff}) {
    EXPECT_EQ(ParseLogLevel(LogLevelName(level)).value_or(LogLevel::kOff), level);
  }
}

TEST_F(LoggingTest, EmitsAtOrAboveLevelWithComponentTag) {
  SetLogLevel(LogLevel::kInfo);
  Logger log("vcluster");
  log.Trace("t {}", 1);
  log.Debug("d {}", 2);
  log.Info("node {} up", "n0");
  log.Warn("slow link {}", 3.5);
  log.Error("lost {} of {}", 1, 8);
  EXPECT_EQ(Lines(), (std::vector<Line>{{LogLevel::kInfo, "[vcluster] node n0 up"},
                                        {LogLevel::kWarn, "[vcluster] slow link 3.5"},
                                        {LogLevel::kError, "[vcluster] lost 1 of 8"}}));
}

TEST_F(LoggingTest, LevelChangesTakeEffectImmediately) {
  Logger log("ckpt");
  SetLogLevel(LogLevel::kError);
  EXPECT_EQ(GetLogLevel(), LogLevel::kError);
  log.Warn("hidden");
  SetLogLevel(LogLevel::kTrace);
  EXPECT_TRUE(LogEnabled(LogLevel::kTrace));
  log.Trace("shown");
  SetLogLevel(LogLevel::kOff);
  EXPECT_FALSE(LogEnabled(LogLevel::kError));
  log.Error("hidden too");
  EXPECT_EQ(Lines(), (std::vector<Line>{{LogLevel::kTrace, "[ckpt] shown"}}));
}

TEST_F(LoggingTest, FilteredMessagesAreNotFormatted) {
  int formatted = 0;
  Logger log("comm");
  SetLogLevel(LogLevel::kWarn);
  log.Debug("{}", Expensive{&formatted});
  log.Info("{}", Expensive{&formatted});
  EXPECT_EQ(formatted, 0);
  log.Warn("{}", Expensive{&formatted});
  EXPECT_EQ(formatted, 1);
  EXPECT_EQ(Lines(), (std::vector<Line>{{LogLevel::kWarn, "[comm] expensive"}}));
}

TEST_F(LoggingTest, ConcurrentLoggingKeepsLinesWhole) {
  SetLogLevel(LogLevel::kInfo);
  constexpr int kThreads = 8, kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      Logger log(fmt::format("worker{}", t));
      for (int i = 0; i < kPerThread; ++i) log.Info("message {} of thread {}", i, t);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<Line> lines = Lines();
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kPerThread));
  std::vector<int> next(kThreads, 0);  // per-thread order is preserved
  std::regex pattern(R"(\[worker(\d)\] message (\d+) of thread (\d))");
  for (const Line& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line.text, m, pattern)) << line.text;
    int t = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[3]), t);
    EXPECT_EQ(std::stoi(m[2]), next[t]++);
  }
}

TEST_F(LoggingTest, InitLoggingPrefersFlagThenEnvThenWarn) {
  setenv("RAILYARD_LOG", "debug", 1);
  InitLogging(LogLevel::kError);
  EXPECT_EQ(GetLogLevel(), LogLevel::kError);
  InitLogging(std::nullopt);
  EXPECT_EQ(GetLogLevel(), LogLevel::kDebug);
  setenv("RAILYARD_LOG", "", 1);
  InitLogging(std::nullopt);
  EXPECT_EQ(GetLogLevel(), LogLevel::kWarn);
  unsetenv("RAILYARD_LOG");
  SetLogLevel(LogLevel::kTrace);
  InitLogging(std::nullopt);
  EXPECT_EQ(GetLogLevel(), LogLevel::kWarn);
  EXPECT_TRUE(Lines().empty());
}

TEST_F(LoggingTest, InvalidEnvWarnsOnceAndUsesWarn) {
  setenv("RAILYARD_LOG", "loud", 1);
  InitLogging(std::nullopt);
  EXPECT_EQ(GetLogLevel(), LogLevel::kWarn);
  EXPECT_EQ(Lines(), (std::vector<Line>{{LogLevel::kWarn,
                                         "[log] ignoring RAILYARD_LOG: invalid log level 'loud' "
                                         "(expected one of trace, debug, info, warn, error, "
                                         "off); using warn"}}));
}

// The real stderr line: timestamp, our short level name, component tag, message.
TEST_F(LoggingTest, StderrLineFormat) {
  SetLogSinkForTest(nullptr);
  SetLogLevel(LogLevel::kInfo);
  testing::internal::CaptureStderr();
  Logger("vcluster").Warn("node {} did not answer", "n3");
  Logger("comm").Info("ready");
  Logger("comm").Debug("filtered");
  std::string out = testing::internal::GetCapturedStderr();
  std::regex expected(
      R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[warn\] \[vcluster\] node n3 did not answer\n)"
      R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[info\] \[comm\] ready\n)");
  EXPECT_TRUE(std::regex_match(out, expected)) << out;
}

}  // namespace
}  // namespace railyard::base
