#include "railyard/net/internal/sockaddr.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>

#include "railyard/base/strings.h"

namespace railyard::net::internal {
namespace {

// Host text and a connectable port (not 0) split from `text`.
Status SplitConnectable(std::string_view text, std::string* host, sockaddr_in* a) {
  uint16_t port = 0;
  RY_RETURN_IF_ERROR(base::SplitHostPort(text, host, &port));
  if (port == 0) return InvalidArgument("'{}': port 0 cannot be connected to", text);
  *a = sockaddr_in{};
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  return Status::Ok();
}

}  // namespace

std::string SockaddrText(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return fmt::format("{}:{}", ip, ntohs(a.sin_port));
}

Result<sockaddr_in> ParseIpv4HostPort(std::string_view text) {
  std::string host;
  sockaddr_in a{};
  RY_RETURN_IF_ERROR(SplitConnectable(text, &host, &a));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return InvalidArgument("'{}' is not an IPv4 address:port", text);
  }
  return a;
}

Result<sockaddr_in> ResolveHostPort(std::string_view text) {
  std::string host;
  sockaddr_in a{};
  RY_RETURN_IF_ERROR(SplitConnectable(text, &host, &a));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1) return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Unavailable("{}: cannot resolve host '{}': {}", text, host, ::gai_strerror(rc));
  }
  a.sin_addr = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return a;
}

}  // namespace railyard::net::internal
