// Micro-benchmarks of the shm transport between two ranks (threads of this process on an
// in-memory store): an 8-byte ping-pong (the one-way latency is half the time per
// iteration) and a 64 MiB message answered by an 8-byte acknowledgement (bytes per second
// of the copy path). Run: build/bench/railyard_net_bench [--benchmark_filter=Shm]
#include <benchmark/benchmark.h>

#include <thread>
#include <vector>

#include "railyard/net/shm/shm_transport.h"
#include "railyard/net/transport_testing.h"

namespace railyard::net {
namespace {

using namespace std::chrono_literals;

base::Deadline Soon() { return base::Deadline::After(60s); }

constexpr Tag kData = 1, kAck = 2;

// Rank 1: answers every message of up to `bytes` on kData with 8 bytes on kAck, until an
// empty message says stop. Returns the first error.
Status Echo(Transport& t, size_t bytes) {
  std::vector<char> in(bytes);
  uint64_t ack = 0;
  for (;;) {
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, kData, in.data(), in.size()));
    RY_RETURN_IF_ERROR(t.WaitAll({&r, 1}, Soon()));
    if (t.ReceivedBytes(r) == 0) return Status::Ok();
    RY_ASSIGN_OR_RETURN(Request a, t.PostSend(0, kAck, &ack, sizeof ack));
    RY_RETURN_IF_ERROR(t.WaitAll({&a, 1}, Soon()));
  }
}

// Rank 0: one message of `bytes` and its acknowledgement per iteration.
void RoundTrips(benchmark::State& state, size_t bytes) {
  TransportGroup g =
      StartTransportGroupForTest([](const TransportOptions& o) { return NewShmTransport(o); }, 2);
  if (!g.status.ok()) {
    state.SkipWithError(g.status.ToString().c_str());
    return;
  }
  Status echo;
  std::thread peer([&] { echo = Echo(*g.ranks[1], bytes); });
  Transport& t = *g.ranks[0];
  std::vector<char> out(bytes, 1);
  uint64_t ack = 0;
  Status st;
  for (auto _ : state) {
    auto s = t.PostSend(1, kData, out.data(), out.size());
    auto a = t.PostRecv(1, kAck, &ack, sizeof ack);
    if (!s.ok() || !a.ok()) {
      st = s.ok() ? a.status() : s.status();
      break;
    }
    Request both[] = {*s, *a};
    st = t.WaitAll(both, Soon());
    if (!st.ok()) break;
  }
  if (st.ok()) {
    auto stop = t.PostSend(1, kData, out.data(), 0);
    st = stop.ok() ? t.WaitAll({&*stop, 1}, Soon()) : stop.status();
  }
  if (!st.ok()) t.Abort(st.message(), Soon());  // the echo thread must not wait a minute
  peer.join();
  if (!st.ok() || !echo.ok()) {
    state.SkipWithError((st.ok() ? echo : st).ToString().c_str());
    return;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_ShmPingPong8B(benchmark::State& state) { RoundTrips(state, 8); }
BENCHMARK(BM_ShmPingPong8B)->UseRealTime();

void BM_ShmMessage64MiB(benchmark::State& state) { RoundTrips(state, size_t{64} << 20); }
BENCHMARK(BM_ShmMessage64MiB)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace railyard::net

BENCHMARK_MAIN();
