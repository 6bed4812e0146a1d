// The most loopback TCP can carry in an allreduce's traffic pattern on this host: N processes
// in a ring, each sending to the next and receiving from the previous at the same time, over
// K connections per neighbour, blocking send/recv in one thread per connection and direction,
// no reduction and no protocol. Every rank sends --bytes; the figure printed is bytes / time
// of the slowest rank, in GB/s. Sends read from, and receives write to, buffers of --buffer
// bytes, cycled through in --chunk pieces: with the allreduce's size there, user memory is
// as cold (or as cached) as in the allreduce itself.
//
// Why this is the ceiling for allreduce busbw: a ring (or any bandwidth-optimal) allreduce of
// S bytes makes every rank send and receive 2(n-1)/n x S, and busbw is defined as
// S/t x 2(n-1)/n, i.e. exactly the bytes each rank sent divided by the time. An allreduce
// over the same kernel path also has to reduce, so its busbw can only be lower.
//
//   tcp_ring_ceiling --ranks N [--streams K] [--bytes B] [--chunk C] [--buffer S]
//                    [--io threads|poll] [--cc NAME]
//
// --cc sets the TCP congestion control of every connection (default: the system's). With a
// pacing algorithm such as BBR as the system default, loopback connections are paced by
// per-socket timers; the kernel's copy ceiling shows only with one that does not pace
// (cubic, reno).
//
// Built and run by bench/compare_comm.sh; plain POSIX, no railyard code. Every wait is bounded
// by an alarm: a rank that has not finished after 120 s exits non-zero.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "tcp_ring_ceiling: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

const char* g_congestion = nullptr;  // --cc

void SetBuffers(int fd) {
  if (g_congestion != nullptr &&
      setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, g_congestion, std::strlen(g_congestion)) != 0) {
    Die("--cc: setsockopt TCP_CONGESTION");
  }
  int bytes = 4 << 20, one = 1;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Moves `total` bytes through `buf` of `size` bytes, `chunk` at a time, wrapping at its end:
// sends them when `sending`, else receives them.
void TransferAll(bool sending, int fd, char* buf, size_t size, size_t chunk, size_t total) {
  for (size_t done = 0, at = 0; done < total;) {
    if (at + chunk > size) at = 0;
    const size_t n = std::min(chunk, total - done);
    ssize_t k = sending ? send(fd, buf + at, n, 0) : recv(fd, buf + at, n, 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      Die(sending ? "send" : "recv");
    }
    if (k == 0 && !sending) Die("peer closed early");
    done += static_cast<size_t>(k);
    at += static_cast<size_t>(k);
  }
}

// The same transfer from one thread: non-blocking sockets and poll(), sending on every
// writable connection and receiving on every readable one, as an event-driven transport
// does (no thread switches between sending and receiving).
void MoveBytesPolling(const std::vector<int>& out, const std::vector<int>& in, const char* sendbuf,
                      size_t send_size, char* recvbuf, size_t slice, size_t chunk, size_t bytes) {
  const size_t k = out.size();
  std::vector<size_t> sent(k, 0), got(k, 0), send_at(k, 0), recv_at(k, 0), want(k);
  for (size_t i = 0; i < k; ++i) want[i] = bytes / k + (i == 0 ? bytes % k : 0);
  std::vector<pollfd> fds(2 * k);
  for (;;) {
    size_t active = 0;
    for (size_t i = 0; i < k; ++i) {
      fds[i] = {out[i], static_cast<short>(sent[i] < want[i] ? POLLOUT : 0), 0};
      fds[k + i] = {in[i], static_cast<short>(got[i] < want[i] ? POLLIN : 0), 0};
      active += (sent[i] < want[i]) + (got[i] < want[i]);
    }
    if (active == 0) return;
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) Die("poll");
    for (size_t i = 0; i < k; ++i) {
      if (fds[i].revents & (POLLOUT | POLLERR | POLLHUP)) {
        if (send_at[i] + chunk > send_size) send_at[i] = 0;
        ssize_t n =
            send(out[i], sendbuf + send_at[i], std::min(chunk, want[i] - sent[i]), MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) Die("send");
        if (n > 0) sent[i] += n, send_at[i] += n;
      }
      if (fds[k + i].revents & (POLLIN | POLLERR | POLLHUP)) {
        if (recv_at[i] + chunk > slice) recv_at[i] = 0;
        ssize_t n = recv(in[i], recvbuf + i * slice + recv_at[i], std::min(chunk, want[i] - got[i]),
                         MSG_DONTWAIT);
        if (n == 0) Die("peer closed early");
        if (n < 0 && errno != EAGAIN && errno != EINTR) Die("recv");
        if (n > 0) got[i] += n, recv_at[i] += n;
      }
    }
  }
}

// One rank: connect K times to the next rank (on `next_port`), accept K from the
// previous, say so, wait for the start byte from the parent, move the bytes, report seconds taken.
double RunRank(int rank, int k, size_t bytes, size_t chunk, size_t buffer, bool polling,
               int next_port, int ready_fd, int start_fd, int listen_fd) {
  std::vector<int> out(k), in(k);
  sockaddr_in next{};
  next.sin_family = AF_INET;
  next.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  next.sin_port = htons(static_cast<uint16_t>(next_port));
  for (int i = 0; i < k; ++i) {
    out[i] = socket(AF_INET, SOCK_STREAM, 0);
    SetBuffers(out[i]);
    if (connect(out[i], reinterpret_cast<sockaddr*>(&next), sizeof next) != 0) Die("connect");
  }
  for (int i = 0; i < k; ++i) {
    in[i] = accept(listen_fd, nullptr, nullptr);
    if (in[i] < 0) Die("accept");
    SetBuffers(in[i]);
  }
  // Each receiving connection fills its own slice of the receive buffer; the sends share one.
  const size_t slice = std::max(chunk, buffer / k);
  std::vector<char> sendbuf(std::max(chunk, buffer), static_cast<char>(rank)),
      recvbuf(slice * k, 0);
  if (write(ready_fd, "r", 1) != 1) Die("ready pipe");
  char go;
  if (read(start_fd, &go, 1) != 1) Die("start pipe");
  auto t0 = std::chrono::steady_clock::now();
  if (polling) {
    MoveBytesPolling(out, in, sendbuf.data(), sendbuf.size(), recvbuf.data(), slice, chunk, bytes);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < k; ++i) {
    size_t share = bytes / k + (i == 0 ? bytes % k : 0);
    threads.emplace_back(TransferAll, true, out[i], sendbuf.data(), sendbuf.size(), chunk, share);
    threads.emplace_back(TransferAll, false, in[i], recvbuf.data() + i * slice, slice, chunk,
                         share);
  }
  for (auto& t : threads) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2, k = 1;
  size_t bytes = size_t{1} << 30, chunk = size_t{1} << 20, buffer = 0;
  bool polling = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ranks")
      n = std::atoi(argv[i + 1]);
    else if (a == "--streams")
      k = std::atoi(argv[i + 1]);
    else if (a == "--bytes")
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--chunk")
      chunk = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--buffer")
      buffer = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--cc")
      g_congestion = argv[i + 1];
    else if (a == "--io") {
      std::string io = argv[i + 1];
      if (io != "poll" && io != "threads") {
        std::fprintf(stderr, "tcp_ring_ceiling: --io takes threads or poll, got '%s'\n",
                     io.c_str());
        return 2;
      }
      polling = io == "poll";
    } else {
      std::fprintf(stderr, "tcp_ring_ceiling: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (n < 2 || k < 1 || bytes == 0 || chunk == 0) {
    std::fprintf(stderr, "tcp_ring_ceiling: need --ranks >= 2, --streams >= 1, sizes > 0\n");
    return 2;
  }
  // Listening sockets are opened here, before any fork, so no rank connects to a port that is
  // not listening yet; port 0 lets the kernel pick, and each rank learns the others' ports.
  std::vector<int> listeners(n);
  std::vector<int> ports(n);
  for (int r = 0; r < n; ++r) {
    listeners[r] = socket(AF_INET, SOCK_STREAM, 0);
    SetBuffers(listeners[r]);  // accepted sockets inherit the buffer sizes
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listeners[r], reinterpret_cast<sockaddr*>(&a), len) != 0) Die("bind");
    if (listen(listeners[r], 64) != 0) Die("listen");
    getsockname(listeners[r], reinterpret_cast<sockaddr*>(&a), &len);
    ports[r] = ntohs(a.sin_port);
  }
  int ready[2], start[2], result[2];
  if (pipe(ready) != 0 || pipe(start) != 0 || pipe(result) != 0) Die("pipe");
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid < 0) Die("fork");
    if (pid == 0) {
      alarm(120);
      double s = RunRank(r, k, bytes, chunk, buffer, polling, ports[(r + 1) % n], ready[1],
                         start[0], listeners[r]);
      if (write(result[1], &s, sizeof s) != sizeof s) Die("result pipe");
      _exit(0);
    }
    pids.push_back(pid);
  }
  alarm(150);
  for (int r = 0; r < n; ++r) {  // every rank connected: start them together
    char c;
    if (read(ready[0], &c, 1) != 1) Die("ready pipe");
  }
  for (int r = 0; r < n; ++r) {
    if (write(start[1], "g", 1) != 1) Die("start pipe");
  }
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    double s;
    if (read(result[0], &s, sizeof s) != sizeof s) Die("result pipe");
    worst = std::max(worst, s);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    failed |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  if (failed) return 1;
  std::printf("%.3f\n", static_cast<double>(bytes) / worst / 1e9);
  return 0;
}
