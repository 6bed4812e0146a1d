// Gloo's ring allreduce over its TCP transport, measured exactly like
// `railyard bench comm --op allreduce --type f32` so that bench/compare_comm.sh compares like
// with like: f32 sum (gloo::sum<float>, Gloo's own reduction), separate input and output
// buffers, the same input values, and per size one checked iteration, `--warmup` untimed ones,
// a barrier, then `--iters` timed ones, each checked as railyard checks them
// (allreduce_measure.h); the time of a size is the slowest rank's mean per iteration. Rank 0 prints
// one JSON array with the keys of `railyard bench comm --json`.
//
// One process per rank, started by the caller with RANK and WORLD_SIZE in the environment;
// ranks meet through a gloo::rendezvous::FileStore in GLOO_STORE_DIR (an empty directory) and
// connect over the tcp device bound to GLOO_HOST (default 127.0.0.1, loopback only).
//
//   RANK=r WORLD_SIZE=n GLOO_STORE_DIR=dir gloo_allreduce --sizes 4096,8192,...
//       [--iters 20] [--warmup 5] [--timeout-s 60]
//
// Built by bench/compare_comm.sh; not part of the CMake build.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "allreduce_measure.h"

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// One scalar reduced across ranks with Gloo itself (max of times, sum of wrong counts).
template <typename T>
T ReduceScalar(const std::shared_ptr<gloo::Context>& ctx, T value, gloo::AllreduceOptions::Func fn,
               uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(&value, 1);
  opts.setReduceFunction(fn);
  opts.setTag(tag);
  gloo::allreduce(opts);
  return value;
}

std::string Run(const compare::Options& o, int rank, int n, const std::string& store_dir,
                const std::string& host) {
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(store_dir);
  gloo::rendezvous::PrefixStore store("gloo_allreduce", file_store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
  context->setTimeout(std::chrono::seconds(o.timeout_s));
  context->connectFullMesh(store, device);
  std::shared_ptr<gloo::Context> ctx = context;

  // Fixed tags: the measured allreduce, the barrier and the three scalar reductions never run
  // concurrently, but distinct tags keep a late message of one from matching another.
  constexpr uint32_t kDataTag = 1, kBarrierTag = 2, kTimeTag = 3, kWrongTag = 4, kCheckedTag = 5;
  std::string json = "[";
  for (size_t s = 0; s < o.sizes.size(); ++s) {
    const uint64_t count = o.sizes[s] / sizeof(float);
    compare::Buffers b(rank, n, count);
    // The options (and their unbound buffers) are built once per size and reused for every
    // iteration: the best case for Gloo, as a framework that caches them would see.
    gloo::AllreduceOptions opts(ctx);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setInput(b.send.data(), count);
    opts.setOutput(b.recv.data(), count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(kDataTag);

    b.PoisonAll();
    gloo::allreduce(opts);
    // {wrong, checked}, summed over ranks after the timed loop.
    int64_t wrong = b.Wrong(), checked = static_cast<int64_t>(count);
    for (int i = 0; i < o.warmup; ++i) gloo::allreduce(opts);
    b.PoisonAll();
    gloo::BarrierOptions barrier(ctx);
    barrier.setTag(kBarrierTag);
    gloo::barrier(barrier);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) {
      const bool sampled = i + 1 < o.iters;  // the last one is checked in full below
      compare::Samples at;
      if (sampled) at = b.PoisonSamples(o.sizes[s], i, rank);
      gloo::allreduce(opts);
      if (sampled) wrong += b.WrongAt(at), checked += at.n;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.iters;
    wrong += b.Wrong();
    checked += static_cast<int64_t>(count);
    seconds = ReduceScalar<double>(
        ctx, seconds,
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>),
        kTimeTag);
    wrong = ReduceScalar<int64_t>(
        ctx, wrong,
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int64_t>),
        kWrongTag);
    checked = ReduceScalar<int64_t>(
        ctx, checked,
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int64_t>),
        kCheckedTag);
    json += compare::Row(s == 0, count, seconds, n, wrong, checked);
  }
  return json + "\n]\n";
}

}  // namespace

int main(int argc, char** argv) {
  compare::Options o;
  std::string error;
  if (!compare::ParseOptions(argc, argv, /*with_timeout=*/true, o, error)) {
    std::fprintf(stderr, "gloo_allreduce: %s\n", error.c_str());
    return 2;
  }
  const int rank = EnvInt("RANK", -1);
  const int n = EnvInt("WORLD_SIZE", -1);
  const char* dir = std::getenv("GLOO_STORE_DIR");
  const char* host = std::getenv("GLOO_HOST");
  if (rank < 0 || n < 1 || rank >= n || dir == nullptr || *dir == '\0') {
    std::fprintf(stderr,
                 "gloo_allreduce: need RANK (0..WORLD_SIZE-1), WORLD_SIZE >= 1 and "
                 "GLOO_STORE_DIR (an empty directory shared by the ranks) in the "
                 "environment; got RANK=%d WORLD_SIZE=%d\n",
                 rank, n);
    return 2;
  }
  // Gloo reports failures (a peer gone, a timeout) by throwing; name this rank and the store
  // so that the script's log says which process saw what.
  try {
    std::string json = Run(o, rank, n, dir, host != nullptr ? host : "127.0.0.1");
    if (rank == 0) std::fputs(json.c_str(), stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce: rank %d of %d (store %s): %s\n", rank, n, dir, e.what());
    return 1;
  }
  return 0;
}
