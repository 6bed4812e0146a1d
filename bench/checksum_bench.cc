// Micro-benchmarks of base/ primitives on the checkpoint hot path: XXH3 over buffers of
// checkpoint-extent sizes, and the atomic file commit. Run: build/bench/railyard_base_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "railyard/base/checksum.h"
#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"

namespace {

void BM_Xxh3(benchmark::State& state) {
  std::vector<char> buf(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(railyard::base::Xxh3(buf.data(), buf.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Xxh3)->Arg(4 << 10)->Arg(1 << 20)->Arg(64 << 20);

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
