// Gloo's ring allreduce over its TCP transport, measured exactly like
// `railyard bench comm --op allreduce --type f32` so that bench/compare_comm.sh compares like
// with like: f32 sum (gloo::sum<float>, Gloo's own reduction), separate input and output
// buffers, the same input values, and per size one checked iteration, `--warmup` untimed ones,
// a barrier, then `--iters` timed ones; the time of a size is the slowest rank's mean per
// iteration. Rank 0 prints one JSON array with the keys of `railyard bench comm --json`.
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

namespace {

// The same values as railyard's comm/bench.cc, so both sides reduce the same data.
float Value(int rank, size_t i) {
  return static_cast<float>(1 + (static_cast<size_t>(rank) * 7 + i * 3) % 5);
}

struct Options {
  std::vector<uint64_t> sizes;
  int iters = 20;
  int warmup = 5;
  int timeout_s = 60;
};

bool ParseOptions(int argc, char** argv, Options& o, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) {
      error = "option '" + arg + "' needs a value";
      return false;
    }
    std::string value = argv[++i];
    if (arg == "--iters") {
      o.iters = std::atoi(value.c_str());
    } else if (arg == "--warmup") {
      o.warmup = std::atoi(value.c_str());
    } else if (arg == "--timeout-s") {
      o.timeout_s = std::atoi(value.c_str());
    } else if (arg == "--sizes") {
      size_t pos = 0;
      while (pos <= value.size()) {
        size_t comma = value.find(',', pos);
        if (comma == std::string::npos) comma = value.size();
        uint64_t bytes = std::strtoull(value.substr(pos, comma - pos).c_str(), nullptr, 10);
        if (bytes < sizeof(float)) {
          error = "--sizes '" + value + "': expected a comma list of byte counts >= 4";
          return false;
        }
        o.sizes.push_back(bytes);
        pos = comma + 1;
      }
    } else {
      error = "unknown option '" + arg + "'; expected --sizes, --iters, --warmup or --timeout-s";
      return false;
    }
  }
  if (o.sizes.empty() || o.iters < 1 || o.warmup < 0 || o.timeout_s < 1) {
    error = "need --sizes, --iters >= 1, --warmup >= 0 and --timeout-s >= 1";
    return false;
  }
  return true;
}

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

std::string Run(const Options& o, int rank, int n, const std::string& store_dir,
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

  // Fixed tags: the measured allreduce, the barrier and the two scalar reductions never run
  // concurrently, but distinct tags keep a late message of one from matching another.
  constexpr uint32_t kDataTag = 1, kBarrierTag = 2, kTimeTag = 3, kWrongTag = 4;
  std::string json = "[";
  for (size_t s = 0; s < o.sizes.size(); ++s) {
    const uint64_t count = o.sizes[s] / sizeof(float);
    std::vector<float> send(count), recv(count, 0.0f), want(count);
    for (uint64_t i = 0; i < count; ++i) {
      send[i] = Value(rank, i);
      float acc = Value(0, i);
      for (int r = 1; r < n; ++r) acc += Value(r, i);
      want[i] = acc;
    }
    // The options (and their unbound buffers) are built once per size and reused for every
    // iteration: the best case for Gloo, as a framework that caches them would see.
    gloo::AllreduceOptions opts(ctx);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setInput(send.data(), count);
    opts.setOutput(recv.data(), count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(kDataTag);

    gloo::allreduce(opts);
    int64_t wrong = 0;
    for (uint64_t i = 0; i < count; ++i) {
      if (std::memcmp(&recv[i], &want[i], sizeof(float)) != 0) ++wrong;
    }
    for (int i = 0; i < o.warmup; ++i) gloo::allreduce(opts);
    gloo::BarrierOptions barrier(ctx);
    barrier.setTag(kBarrierTag);
    gloo::barrier(barrier);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) gloo::allreduce(opts);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.iters;
    seconds = ReduceScalar<double>(
        ctx, seconds,
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>),
        kTimeTag);
    wrong = ReduceScalar<int64_t>(
        ctx, wrong,
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int64_t>),
        kWrongTag);
    const uint64_t bytes = count * sizeof(float);
    const double algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
    const double busbw = algbw * 2.0 * (n - 1) / n;
    char row[256];
    std::snprintf(row, sizeof(row),
                  "%s\n  {\"size_bytes\": %llu, \"count\": %llu, \"type\": \"f32\", "
                  "\"time_us\": %.4f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, "
                  "\"wrong\": %lld}",
                  s == 0 ? "" : ",", static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(count), seconds * 1e6, algbw, busbw,
                  static_cast<long long>(wrong));
    json += row;
  }
  return json + "\n]\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string error;
  if (!ParseOptions(argc, argv, o, error)) {
    std::fprintf(stderr, "gloo_allreduce: %s\n", error.c_str());
    return 2;
  }
  const int rank = EnvInt("RANK", -1);
  const int n = EnvInt("WORLD_SIZE", -1);
  const char* dir = std::getenv("GLOO_STORE_DIR");
  const char* host = std::getenv("GLOO_HOST");
  if (rank < 0 || n < 1 || rank >= n || dir == nullptr || *dir == '\0') {
    std::fprintf(stderr, "gloo_allreduce: need RANK (0..WORLD_SIZE-1), WORLD_SIZE >= 1 and "
                         "GLOO_STORE_DIR (an empty directory shared by the ranks) in the "
                         "environment; got RANK=%d WORLD_SIZE=%d\n", rank, n);
    return 2;
  }
  // Gloo reports failures (a peer gone, a timeout) by throwing; name this rank and the store
  // so that the script's log says which process saw what.
  try {
    std::string json = Run(o, rank, n, dir, host != nullptr ? host : "127.0.0.1");
    if (rank == 0) std::fputs(json.c_str(), stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce: rank %d of %d (store %s): %s\n", rank, n, dir,
                 e.what());
    return 1;
  }
  return 0;
}
