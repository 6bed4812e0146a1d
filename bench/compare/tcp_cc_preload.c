/* LD_PRELOAD shim for bench/compare_comm.sh --peer-cc: every TCP socket the process creates
 * through socket() gets the congestion control named by RY_PRELOAD_TCP_CC (e.g. cubic), so
 * OpenMPI and Gloo can be measured with the algorithm Railyard picks for same-host
 * connections, where the host's default cannot be changed (net.ipv4.tcp_congestion_control
 * needs privileges the benchmark does not assume). A socket that refuses the name keeps the
 * default; RY_PRELOAD_TCP_CC_LOG=1 reports each socket on stderr. Bench only: nothing of
 * Railyard links or loads it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol) {
  static int (*real_socket)(int, int, int);
  if (real_socket == NULL) real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
  int fd = real_socket(domain, type, protocol);
  const char* cc = getenv("RY_PRELOAD_TCP_CC");
  if (fd >= 0 && cc != NULL && *cc != '\0' && (domain == AF_INET || domain == AF_INET6) &&
      (type & 0xf) == SOCK_STREAM) {
    int rc = setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
    const char* log = getenv("RY_PRELOAD_TCP_CC_LOG");
    if (log != NULL && log[0] == '1') {
      fprintf(stderr, "tcp_cc_preload: socket %d -> %s%s\n", fd, cc, rc == 0 ? "" : " (refused)");
    }
  }
  return fd;
}
