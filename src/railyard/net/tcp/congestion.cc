#include "railyard/net/tcp/congestion.h"

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "railyard/base/files.h"

namespace railyard::net {
namespace {

// TCP_CA_NAME_MAX in <linux/tcp.h>: names are at most 15 bytes and a NUL.
constexpr size_t kNameMax = 16;

// The kernel's list in /proc/sys/net/ipv4/<file>, or "unknown".
std::string KernelList(const char* file) {
  return base::ReadTrimmedFile(std::string("/proc/sys/net/ipv4/") + file).value_or("unknown");
}

bool SetAlgorithm(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                      static_cast<socklen_t>(name.size())) == 0;
}

}  // namespace

Result<CongestionControl> CongestionControl::Parse(std::string_view text) {
  bool ok = !text.empty() && text.size() < kNameMax;
  for (char ch : text) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
  }
  if (!ok) {
    return InvalidArgument(
        "tcp congestion control '{}': expected auto, system or an algorithm "
        "name such as cubic, reno or bbr",
        text);
  }
  CongestionControl c;
  c.text_ = std::string(text);
  return c;
}

Status CongestionControl::Check() const {
  if (text_ == "auto" || text_ == "system") return Status::Ok();
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "tcp congestion control: socket");
  if (SetAlgorithm(fd.get(), text_)) return Status::Ok();
  if (errno == EPERM) {
    return FailedPrecondition(
        "tcp congestion control '{}' is not permitted to this process "
        "(permitted: {}; root or CAP_NET_ADMIN may use any of: {})",
        text_, KernelList("tcp_allowed_congestion_control"),
        KernelList("tcp_available_congestion_control"));
  }
  return NotFound(
      "tcp congestion control '{}' is not available in this kernel (available: "
      "{}; `modprobe tcp_{}` may add it)",
      text_, KernelList("tcp_available_congestion_control"), text_);
}

std::string CongestionControl::Apply(int fd, bool same_kernel) const {
  if (text_ == "system") return "";
  if (text_ != "auto") return SetAlgorithm(fd, text_) ? text_ : "";
  if (!same_kernel) return "";
  for (const char* name : {"cubic", "reno"}) {
    if (SetAlgorithm(fd, name)) return name;
  }
  return "";
}

bool SameHost(const sockaddr_in& self, const sockaddr_in& peer) {
  const uint32_t p = ntohl(peer.sin_addr.s_addr);
  return (p >> 24) == 127 || peer.sin_addr.s_addr == self.sin_addr.s_addr;
}

}  // namespace railyard::net
