// MPI_Allreduce measured exactly like `railyard bench comm --op allreduce --type f32`, so that
// bench/compare_comm.sh compares like with like: f32 sum, separate send and receive buffers,
// the same input values (small integers, exact in any reduction order), and per size one
// checked iteration, `--warmup` untimed ones, a barrier, then `--iters` timed ones; the time of
// a size is the slowest rank's mean per iteration. Rank 0 prints one JSON array with the keys
// of `railyard bench comm --json` (size_bytes, count, type, time_us, algbw_gbps, busbw_gbps,
// wrong). Transport and algorithm are chosen by the caller through mpirun's --mca options.
//
//   mpirun -np N mpi_allreduce --sizes 4096,8192,... [--iters 20] [--warmup 5]
//
// Built by bench/compare_comm.sh with mpicxx; not part of the CMake build.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
      error = "unknown option '" + arg + "'; expected --sizes, --iters or --warmup";
      return false;
    }
  }
  if (o.sizes.empty() || o.iters < 1 || o.warmup < 0) {
    error = "need --sizes, --iters >= 1 and --warmup >= 0";
    return false;
  }
  return true;
}

// MPI's default error handler on MPI_COMM_WORLD aborts the job with a message naming the
// rank, so a failed call never returns here; this only names the operation for the log.
void Check(int rc, int rank, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "mpi_allreduce: rank %d: %s failed: %s\n", rank, what, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  Options o;
  std::string error;
  if (!ParseOptions(argc, argv, o, error)) {
    if (rank == 0) std::fprintf(stderr, "mpi_allreduce: %s\n", error.c_str());
    MPI_Finalize();
    return 2;
  }
  std::string json = "[";
  for (size_t s = 0; s < o.sizes.size(); ++s) {
    const uint64_t count = o.sizes[s] / sizeof(float);
    // MPI counts are int; 64 MiB of f32 is 16 Mi elements, far below the limit.
    const int icount = static_cast<int>(count);
    std::vector<float> send(count), recv(count, 0.0f), want(count);
    for (uint64_t i = 0; i < count; ++i) {
      send[i] = Value(rank, i);
      float acc = Value(0, i);
      for (int r = 1; r < n; ++r) acc += Value(r, i);
      want[i] = acc;
    }
    Check(MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
          rank, "MPI_Allreduce (checked iteration)");
    int64_t wrong = 0;
    for (uint64_t i = 0; i < count; ++i) {
      if (std::memcmp(&recv[i], &want[i], sizeof(float)) != 0) ++wrong;
    }
    for (int i = 0; i < o.warmup; ++i) {
      Check(MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            rank, "MPI_Allreduce (warm-up)");
    }
    Check(MPI_Barrier(MPI_COMM_WORLD), rank, "MPI_Barrier");
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) {
      Check(MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            rank, "MPI_Allreduce (timed)");
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.iters;
    Check(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), rank,
          "MPI_Allreduce (max time)");
    Check(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), rank,
          "MPI_Allreduce (wrong count)");
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
  json += "\n]\n";
  if (rank == 0) std::fputs(json.c_str(), stdout);
  MPI_Finalize();
  return 0;
}
