// Helpers for tests that run the real `railyard` binary: a temporary state directory per
// test, and a Run() that captures exit code and output with a deadline.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"  // base::ScopedTempDir, for the CLI tests

namespace railyard::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline CliResult RunRailyard(const std::vector<std::string>& args,
                             std::vector<std::pair<std::string, std::string>> env = {},
                             std::chrono::seconds timeout = std::chrono::seconds(120)) {
  std::vector<std::string> argv = {RAILYARD_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  base::SpawnOptions o{.argv = argv, .env = std::move(env)};
  auto r = base::RunCommand(o, base::Deadline::After(timeout));
  CliResult c;
  if (!r.ok()) {
    c.err = r.status().ToString();
    return c;
  }
  c.exit_code = r->signal ? 128 + r->signal : r->exit_code;
  c.out = r->stdout_text;
  c.err = r->stderr_text;
  return c;
}

inline int CountLines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace railyard::testing
