// What bench/compare/{mpi,gloo}_allreduce.cc share, so that both measure exactly like
// `railyard bench comm --op allreduce --type f32`: the input values, the option parsing, the
// expected result and its checks (the same as railyard's, comm/bench.h "Checking": the
// untimed iteration in full, every timed one but the last at the first, last and 16
// pseudo-random elements poisoned before the call, the last in full), and the JSON row.
// Header-only: each program is built on its own by bench/compare_comm.sh (mpicxx or g++), not by
// CMake.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace compare {

// The same values as railyard's comm/bench.cc (small integers: exact in any reduction
// order), so every system reduces the same data.
inline float Value(int rank, size_t i) {
  return static_cast<float>(1 + (static_cast<size_t>(rank) * 7 + i * 3) % 5);
}

struct Options {
  std::vector<uint64_t> sizes;
  int iters = 20;
  int warmup = 5;
  int timeout_s = 60;  // gloo only
};

// --sizes 4096,8192,... [--iters N] [--warmup N], and --timeout-s N where `with_timeout`.
inline bool ParseOptions(int argc, char** argv, bool with_timeout, Options& o, std::string& error) {
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
    } else if (arg == "--timeout-s" && with_timeout) {
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
      error = "unknown option '" + arg + "'; expected --sizes, --iters, --warmup" +
              (with_timeout ? " or --timeout-s" : "");
      return false;
    }
  }
  if (o.sizes.empty() || o.iters < 1 || o.warmup < 0 || o.timeout_s < 1) {
    error = "need --sizes, --iters >= 1, --warmup >= 0 and --timeout-s >= 1";
    return false;
  }
  return true;
}

// The positions one sampled timed iteration checks, drawn exactly as railyard's
// comm/bench.cc draws them: the first and last element and kSamples from splitmix64 seeded
// by (requested size, iteration, rank), mapped onto [0, elems) by a multiply-shift.
constexpr int kSamples = 16;
struct Samples {
  std::array<uint64_t, kSamples + 2> at{};
  int n = 0;
};

inline Samples SamplePositions(uint64_t elems, uint64_t size_bytes, int iteration, int rank) {
  Samples s;
  if (elems == 0) return s;
  uint64_t state = size_bytes * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(iteration) << 20) ^
                   static_cast<uint64_t>(rank);
  s.at[s.n++] = 0;
  if (elems > 1) s.at[s.n++] = elems - 1;
  for (int j = 0; j < kSamples; ++j) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    s.at[s.n++] = static_cast<uint64_t>((static_cast<unsigned __int128>(z) * elems) >> 64);
  }
  return s;
}

// One size's buffers: this rank's input, the output, and the sum every rank must get.
struct Buffers {
  std::vector<float> send, recv, want;
  Buffers(int rank, int n, uint64_t count) : send(count), recv(count, 0.0f), want(count) {
    for (uint64_t i = 0; i < count; ++i) {
      send[i] = Value(rank, i);
      float acc = Value(0, i);
      for (int r = 1; r < n; ++r) acc += Value(r, i);
      want[i] = acc;
    }
  }
  int64_t Wrong() const {
    int64_t wrong = 0;
    for (size_t i = 0; i < recv.size(); ++i) {
      if (std::memcmp(&recv[i], &want[i], sizeof(float)) != 0) ++wrong;
    }
    return wrong;
  }
  // Every byte of output element i becomes the inverse of the expected byte.
  void Poison(size_t i) {
    unsigned char bytes[sizeof(float)];
    std::memcpy(bytes, &want[i], sizeof bytes);
    for (unsigned char& c : bytes) c = static_cast<unsigned char>(~c);
    std::memcpy(&recv[i], bytes, sizeof bytes);
  }
  void PoisonAll() {
    for (size_t i = 0; i < recv.size(); ++i) Poison(i);
  }
  Samples PoisonSamples(uint64_t size_bytes, int iteration, int rank) {
    Samples s = SamplePositions(recv.size(), size_bytes, iteration, rank);
    for (int j = 0; j < s.n; ++j) Poison(s.at[j]);
    return s;
  }
  int64_t WrongAt(const Samples& s) const {
    int64_t wrong = 0;
    for (int j = 0; j < s.n; ++j) {
      if (std::memcmp(&recv[s.at[j]], &want[s.at[j]], sizeof(float)) != 0) ++wrong;
    }
    return wrong;
  }
};

// The JSON object of one size (keys of `railyard bench comm --json`), with a leading comma
// after the first; `seconds` is the slowest rank's mean per iteration; `wrong` and `checked`
// the failed and all element comparisons over all ranks.
inline std::string Row(bool first, uint64_t count, double seconds, int n, int64_t wrong,
                       int64_t checked) {
  const uint64_t bytes = count * sizeof(float);
  const double algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  const double busbw = algbw * 2.0 * (n - 1) / n;
  char row[256];
  std::snprintf(row, sizeof(row),
                "%s\n  {\"size_bytes\": %llu, \"count\": %llu, \"type\": \"f32\", "
                "\"time_us\": %.4f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, "
                "\"wrong\": %lld, \"checked\": %lld}",
                first ? "" : ",", static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(count), seconds * 1e6, algbw, busbw,
                static_cast<long long>(wrong), static_cast<long long>(checked));
  return row;
}

}  // namespace compare
