// Helpers shared by the subcommands.
#include "railyard/cli/cli_common.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/topo/hostlist.h"

namespace railyard::cli {

std::string SelfExecutable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "railyard";
  buf[n] = '\0';
  return buf;
}

void PrintError(const Status& status) {
  std::fflush(stdout);
  fmt::print(stderr, "railyard: error: {}\n", status.message());
}

// HOSTS is a comma list or Slurm hostlist expression; @FILE reads one per line.
Result<std::vector<std::string>> ReadHostsArg(const std::string& flag, const std::string& spec) {
  std::vector<std::string> out;
  if (spec.empty()) return out;
  std::string text = spec;
  if (spec[0] == '@') {
    auto file = base::ReadFile(spec.substr(1));
    if (!file.ok()) return file.status().WithContext(flag);
    text = *file;
  }
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    line.resize(base::StripTrailingChars(line, " \r").size());
    if (line.empty() || line[0] == '#') continue;
    auto names = topo::ExpandHostlist(line);
    if (!names.ok()) {
      return names.status().WithContext(
          spec[0] == '@' ? fmt::format("{} {}:{}", flag, spec.substr(1), line_no) : flag);
    }
    out.insert(out.end(), names->begin(), names->end());
  }
  return out;
}

}  // namespace railyard::cli
