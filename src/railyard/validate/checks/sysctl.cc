// node.sysctl: kernel settings that cap RDMA and TCP performance, read from /proc/sys.
//
//   net.core.rmem_max, wmem_max   the most a socket may ask for with SO_RCVBUF/SO_SNDBUF;
//                                 Railyard's tcp transport asks for large buffers and gets
//                                 at most this. Below the bandwidth-delay product (100 Gbit/s
//                                 x 1 ms = 12.5 MB) a single stream cannot fill the link.
//   net.ipv4.tcp_rmem, tcp_wmem   the third value caps the kernel's buffer autotuning, which
//                                 sockets that set no size (NCCL's socket transport) rely on.
//   vm.zone_reclaim_mode          non-zero makes an allocation reclaim page cache on its own
//                                 NUMA node before using another's: stalls mid-step.
//   kernel.numa_balancing         non-zero unmaps pages periodically to sample accesses, and
//                                 migrates them: page faults on pinned or registered buffers
//                                 and jitter in the ranks' steps. Absent on kernels without it.
//
// Each setting off its mark WARNs (the job runs, slower); an unreadable one is UNKNOWN.
#include <fmt/format.h>

#include <optional>
#include <vector>

#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/validate/check.h"
#include "railyard/validate/internal/proc_text.h"

namespace railyard::validate {
namespace {

// The last whitespace-separated field of `text` ("4096 131072 6291456" -> 6291456).
std::optional<uint64_t> LastField(std::string_view text) {
  text = base::StripAsciiWhitespace(text);
  size_t sp = text.find_last_of(" \t");
  return internal::ParseUnsigned(sp == text.npos ? text : text.substr(sp + 1));
}

class SysctlCheck final : public BasicCheck {
 public:
  SysctlCheck()
      : BasicCheck({.id = "node.sysctl",
                    .summary = "socket buffer limits, zone_reclaim_mode and numa_balancing",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2),
                    .params = {{"socket_buffer_min", "16MiB",
                                "smallest rmem_max, wmem_max and tcp_[rw]mem maximum"}}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    const std::string& min_text = ctx.settings->params.find("socket_buffer_min")->second;
    Result<uint64_t> min_buffer = base::ParseBytes(min_text);
    if (!min_buffer.ok()) {
      return Outcome::Unknown(
          fmt::format("parameter socket_buffer_min: {}", min_buffer.status().message()));
    }
    std::vector<Outcome> parts;
    std::vector<std::string> values;
    auto read = [&](std::string_view key, bool optional) -> std::optional<std::string> {
      std::string path = "/proc/sys/" + std::string(key);
      for (char& c : path) c = c == '.' ? '/' : c;
      Result<std::string> text = ctx.env->ReadFile(path);
      if (text.ok()) return *text;
      if (!(optional && text.status().code() == StatusCode::kNotFound)) {
        parts.push_back(Outcome::Unknown(fmt::format("{}: {}", key, text.status().message())));
      }
      return std::nullopt;
    };
    for (std::string_view key :
         {"net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}) {
      std::optional<std::string> text = read(key, false);
      if (!text) continue;
      std::optional<uint64_t> v = LastField(*text);
      if (!v) {
        parts.push_back(Outcome::Unknown(
            fmt::format("{}: '{}' is not a number", key, base::StripAsciiWhitespace(*text))));
        continue;
      }
      values.push_back(fmt::format("{} {}", key, base::FormatBytes(*v)));
      if (*v < *min_buffer) {
        parts.push_back(Outcome::Warn(fmt::format("{} {} below {}", key, base::FormatBytes(*v),
                                                  base::FormatBytes(*min_buffer))));
      }
    }
    for (std::string_view key : {"vm.zone_reclaim_mode", "kernel.numa_balancing"}) {
      std::optional<std::string> text = read(key, key == "kernel.numa_balancing");
      if (!text) continue;
      std::optional<uint64_t> v = internal::ParseUnsigned(*text);
      if (!v) {
        parts.push_back(Outcome::Unknown(
            fmt::format("{}: '{}' is not a number", key, base::StripAsciiWhitespace(*text))));
        continue;
      }
      values.push_back(fmt::format("{} {}", key, *v));
      if (*v != 0) parts.push_back(Outcome::Warn(fmt::format("{} is {}, expected 0", key, *v)));
    }
    std::string expected =
        fmt::format("buffers >= {}, reclaim/balancing 0", base::FormatBytes(*min_buffer));
    if (parts.empty()) {
      return Outcome::Pass(fmt::format("{}", fmt::join(values, ", ")))
          .With("as expected", expected);
    }
    Outcome worst = Worst(parts);
    return std::move(worst).With(fmt::format("{} of 6 off", parts.size()), expected);
  }
};

}  // namespace

std::unique_ptr<Check> NewSysctlCheck() { return std::make_unique<SysctlCheck>(); }

}  // namespace railyard::validate
