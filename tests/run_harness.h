// Helpers for the tests of `railyard run`: its JSON-lines events (--events -), a run watched
// event by event, and the processes a job left behind.
#pragma once

#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/subprocess.h"

namespace railyard::testing {

// Pids of the processes whose environment (or command line, when `in_cmdline`) holds
// `needle`: a job's ranks carry RAILYARD_JOB_ID=<job>, its agents "--job <job>".
inline std::vector<pid_t> ProcessesWith(const std::string& needle, bool in_cmdline,
                                        const std::string& also = "") {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = ::readdir(proc)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == ::getpid()) continue;
    auto text = base::ReadFile(fmt::format("/proc/{}/{}", pid, in_cmdline ? "cmdline" : "environ"));
    if (!text.ok()) continue;
    std::string words = *text;
    for (char& c : words) c = c == '\0' ? '\n' : c;
    words = "\n" + words + "\n";
    if (words.find(needle) != std::string::npos &&
        (also.empty() || words.find(also) != std::string::npos)) {
      found.push_back(pid);
    }
  }
  ::closedir(proc);
  return found;
}

// The parent of `pid`; 0 when it is gone.
inline pid_t ParentOf(pid_t pid) {
  auto stat = base::ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok() || stat->rfind(')') == std::string::npos) return 0;
  int ppid = 0;
  std::sscanf(stat->c_str() + stat->rfind(')') + 2, "%*c %d", &ppid);
  return static_cast<pid_t>(ppid);
}

// Whether `pid` still exists and is not a zombie.
inline bool Alive(pid_t pid) {
  auto stat = base::ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

// The example trainer's command line as the launcher tests give it: `steps` steps, a
// checkpoint every `ckpt_every`, no loss lines, its data set in `data`, its final weights to
// `out`.
inline std::vector<std::string> TrainCommand(const std::string& train, int steps, int ckpt_every,
                                             const std::string& data, const std::string& out) {
  return {train,
          "--steps",
          std::to_string(steps),
          "--ckpt-every",
          std::to_string(ckpt_every),
          "--log-every",
          "0",
          "--data",
          data,
          "--out",
          out};
}

inline void ParseEvents(const std::string& text, std::vector<nlohmann::json>* events) {
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    if (!line.starts_with("{")) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) events->push_back(std::move(j));
  }
}

// The events of one kind ("failure", "restart", ...), in order.
inline std::vector<nlohmann::json> EventsOf(const std::vector<nlohmann::json>& events,
                                            const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events) {
    if (e.value("event", "") == kind) out.push_back(e);
  }
  return out;
}

// Starts a run whose events come back one at a time; returns once `kind` was seen.
struct Live {
  base::Child child;
  std::vector<nlohmann::json> events;
};
inline std::optional<Live> StartAndWaitFor(const std::vector<std::string>& argv,
                                           const std::string& kind) {
  auto child = base::Child::Spawn({.argv = argv});
  if (!child.ok()) {
    ADD_FAILURE() << child.status().ToString();
    return std::nullopt;
  }
  Live live{.child = std::move(*child)};
  auto deadline = base::Deadline::After(std::chrono::seconds(60));
  for (;;) {
    auto line = live.child.ReadLine(deadline);
    if (!line.ok()) {
      ADD_FAILURE() << "no '" << kind << "' event: " << line.status().ToString();
      return std::nullopt;
    }
    ParseEvents(*line, &live.events);
    if (!live.events.empty() && live.events.back().value("event", "") == kind) break;
  }
  return live;
}

}  // namespace railyard::testing
