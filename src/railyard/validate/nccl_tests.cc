#include "railyard/validate/nccl_tests.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "railyard/base/strings.h"
#include "railyard/base/subprocess.h"

namespace railyard::validate {
namespace {

constexpr size_t kRowFields = 13;  // 5 of the row, 4 per variant

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

template <typename T>
std::optional<T> Number(std::string_view s) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool StartsWithDigit(std::string_view s) { return !s.empty() && s[0] >= '0' && s[0] <= '9'; }

// One variant's four fields (time, algbw, busbw, #wrong): nullopt for N/A (not measured);
// `bad` names the field that is neither.
std::optional<CollectiveFigure> Variant(std::span<const std::string_view> f, uint64_t bytes,
                                        uint64_t& wrong, std::string* bad) {
  static constexpr const char* kName[] = {"time", "algbw", "busbw", "#wrong"};
  if (f[0] == "N/A") return std::nullopt;
  double v[3];
  for (int i = 0; i < 3; ++i) {
    std::optional<double> d = Number<double>(f[i]);
    if (!d || *d < 0) {
      *bad = fmt::format("{} '{}' is not a number", kName[i], f[i]);
      return std::nullopt;
    }
    v[i] = *d;
  }
  if (f[3] != "N/A") {  // nccl-tests prints N/A here when run without checking (-c 0)
    std::optional<double> w = Number<double>(f[3]);
    if (!w || *w < 0) {
      *bad = fmt::format("#wrong '{}' is not a count", f[3]);
      return std::nullopt;
    }
    wrong += static_cast<uint64_t>(*w);
  }
  return CollectiveFigure{.bytes = bytes,
                          .seconds = v[0] * 1e-6,
                          .algbw_bytes_per_s = v[1] * 1e9,
                          .busbw_bytes_per_s = v[2] * 1e9};
}

// "# Avg bus bandwidth    : 98.8889" -> the text after the colon.
std::optional<std::string_view> CommentValue(std::string_view line, std::string_view key) {
  size_t at = line.find(key);
  if (at == line.npos) return std::nullopt;
  size_t colon = line.find(':', at + key.size());
  if (colon == line.npos) return std::nullopt;
  return base::StripAsciiWhitespace(line.substr(colon + 1));
}

Status BadLine(int number, std::string_view line, std::string_view why) {
  return InvalidArgument("nccl-tests output line {}: {}: '{}'", number, why,
                         base::StripAsciiWhitespace(line));
}

}  // namespace

Result<std::string> FindAllReducePerf(std::string_view explicit_path) {
  if (!explicit_path.empty()) {
    std::string path(explicit_path);
    if (path.find('/') == path.npos) path = base::FindInPath(path);
    if (path.empty() || ::access(path.c_str(), X_OK) != 0) {
      return NotFound("nccl-tests binary '{}' not found or not executable", explicit_path);
    }
    return path;
  }
  std::string found = base::FindInPath("all_reduce_perf");
  if (found.empty()) return NotFound("{}", kNcclTestsNotInstalled);
  return found;
}

Result<NcclTestsRun> ParseNcclTestsOutput(std::string_view text) {
  NcclTestsRun run;
  std::vector<std::string_view> lines = base::SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const int number = static_cast<int>(i) + 1;
    std::string_view line = lines[i];
    std::string_view trimmed = base::StripAsciiWhitespace(line);
    if (trimmed.starts_with('#')) {
      if (auto v = CommentValue(trimmed, "Avg bus bandwidth")) {
        std::optional<double> d = Number<double>(*v);
        if (!d) return BadLine(number, line, "the average bus bandwidth is not a number");
        run.avg_busbw_bytes_per_s = *d * 1e9;
      } else if (auto v = CommentValue(trimmed, "Out of bounds values")) {
        run.out_of_bounds_ok = v->ends_with("OK");
      }
      continue;
    }
    // Rows start with their size; anything else is NCCL's or the launcher's own logging
    // (NCCL_DEBUG=INFO lines, mpirun warnings), not part of the table.
    std::vector<std::string_view> f = Fields(trimmed);
    if (f.empty() || !StartsWithDigit(f[0])) continue;
    if (f.size() != kRowFields) {
      return BadLine(number, line,
                     fmt::format("a row has {} fields (size count type redop root, then time "
                                 "algbw busbw #wrong out of place and in place), this one {}",
                                 kRowFields, f.size()));
    }
    std::optional<uint64_t> bytes = Number<uint64_t>(f[0]);
    if (!bytes || !Number<uint64_t>(f[1])) {
      return BadLine(number, line, "size and count must be whole numbers");
    }
    std::string bad;
    std::optional<CollectiveFigure> out =
        Variant(std::span(f).subspan(5, 4), *bytes, run.wrong, &bad);
    std::optional<CollectiveFigure> in =
        bad.empty() ? Variant(std::span(f).subspan(9, 4), *bytes, run.wrong, &bad) : std::nullopt;
    if (!bad.empty()) return BadLine(number, line, bad);
    if (!out) return BadLine(number, line, "the out-of-place variant was not measured (N/A)");
    run.figures.push_back(*out);
    if (in) run.in_place.push_back(*in);
  }
  if (run.figures.empty()) {
    return InvalidArgument(
        "nccl-tests output holds no result row ({} lines; rows start with the size in bytes)",
        lines.size());
  }
  return run;
}

Result<NcclTestsRun> RunNcclTests(const NcclTestsOptions& options) {
  RY_ASSIGN_OR_RETURN(std::string binary, FindAllReducePerf(options.binary));
  base::SpawnOptions spawn;
  spawn.argv = options.launcher;
  spawn.argv.push_back(binary);
  spawn.argv.insert(spawn.argv.end(), options.args.begin(), options.args.end());
  if (options.gpus > 0 &&
      std::find(options.args.begin(), options.args.end(), "-g") == options.args.end()) {
    spawn.argv.insert(spawn.argv.end(), {"-g", std::to_string(options.gpus)});
  }
  RY_ASSIGN_OR_RETURN(base::ExitInfo done, base::RunCommand(spawn, options.deadline));
  if (!done.Succeeded()) return Internal("{}", done.Describe());
  Result<NcclTestsRun> run = ParseNcclTestsOutput(done.stdout_text);
  if (!run.ok()) return run.status().WithContext(fmt::format("output of '{}'", done.command));
  run->command = done.command;
  return run;
}

}  // namespace railyard::validate
