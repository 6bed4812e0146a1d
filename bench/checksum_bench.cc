// Micro-benchmarks of base/ primitives on the checkpoint hot path: XXH3 over buffers of
// checkpoint-extent sizes (as used, per compiled variant, and the system's libxxhash for
// comparison), and the atomic file commit. Run: build/bench/railyard_base_bench
#include <benchmark/benchmark.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "railyard/base/checksum.h"
#include "railyard/base/checksum_variants.h"
#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"

namespace {

void BM_Xxh3(benchmark::State& state) {
  std::vector<char> buf(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(railyard::base::Xxh3(buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Xxh3)->Arg(4 << 10)->Arg(1 << 20)->Arg(8 << 20)->Arg(64 << 20);

// The same over each way of computing it: hash(data, n) -> digest.
template <typename Hash>
void HashBench(benchmark::State& state, Hash hash) {
  std::vector<char> buf(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(hash(buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_Xxh3Library(benchmark::State& state) { HashBench(state, XXH3_64bits); }
BENCHMARK(BM_Xxh3Library)->Arg(8 << 20)->Arg(256 << 20);

void BM_Xxh3Baseline(benchmark::State& state) {
  HashBench(state, railyard::base::checksum_internal::Xxh3Baseline().hash);
}
BENCHMARK(BM_Xxh3Baseline)->Arg(8 << 20)->Arg(256 << 20);

void BM_Xxh3Avx2(benchmark::State& state) {
  const auto* avx2 = railyard::base::checksum_internal::Xxh3Avx2();
  if (avx2 == nullptr) {
    state.SkipWithError("AVX2 not compiled in or not supported by this CPU");
    return;
  }
  HashBench(state, avx2->hash);
}
BENCHMARK(BM_Xxh3Avx2)->Arg(8 << 20)->Arg(256 << 20);

void BM_WriteFileAtomic(benchmark::State& state) {
  railyard::base::ScopedTempDir dir("bench");
  if (dir.path().empty()) {
    state.SkipWithError("cannot create a temporary directory");
    return;
  }
  const std::string path = dir.Sub("manifest.json");
  const std::string data(static_cast<size_t>(state.range(0)), 'm');
  for (auto _ : state) {
    if (!railyard::base::WriteFileAtomic(path, data).ok()) state.SkipWithError("write failed");
  }
}
BENCHMARK(BM_WriteFileAtomic)->Arg(4 << 10)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
