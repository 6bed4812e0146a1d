// MPI_Allreduce measured exactly like `railyard bench comm --op allreduce --type f32`, so that
// bench/compare_comm.sh compares like with like: f32 sum, separate send and receive buffers,
// the same input values (small integers, exact in any reduction order), and per size one
// checked iteration, `--warmup` untimed ones, a barrier, then `--iters` timed ones, each
// checked as railyard checks them (allreduce_measure.h); the time of a size is the slowest
// rank's mean per iteration. Rank 0 prints one JSON array with the keys
// of `railyard bench comm --json` (size_bytes, count, type, time_us, algbw_gbps, busbw_gbps,
// wrong). Transport and algorithm are chosen by the caller through mpirun's --mca options.
//
//   mpirun -np N mpi_allreduce --sizes 4096,8192,... [--iters 20] [--warmup 5]
//
// Built by bench/compare_comm.sh with mpicxx; not part of the CMake build.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "allreduce_measure.h"

namespace {

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
  compare::Options o;
  std::string error;
  if (!compare::ParseOptions(argc, argv, /*with_timeout=*/false, o, error)) {
    if (rank == 0) std::fprintf(stderr, "mpi_allreduce: %s\n", error.c_str());
    MPI_Finalize();
    return 2;
  }
  std::string json = "[";
  for (size_t s = 0; s < o.sizes.size(); ++s) {
    const uint64_t count = o.sizes[s] / sizeof(float);
    // MPI counts are int; 64 MiB of f32 is 16 Mi elements, far below the limit.
    const int icount = static_cast<int>(count);
    compare::Buffers b(rank, n, count);
    float* send = b.send.data();
    float* recv = b.recv.data();
    b.PoisonAll();
    Check(MPI_Allreduce(send, recv, icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), rank,
          "MPI_Allreduce (checked iteration)");
    // {wrong, checked}, summed over ranks after the timed loop.
    int64_t tally[2] = {b.Wrong(), static_cast<int64_t>(count)};
    for (int i = 0; i < o.warmup; ++i) {
      Check(MPI_Allreduce(send, recv, icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), rank,
            "MPI_Allreduce (warm-up)");
    }
    b.PoisonAll();
    Check(MPI_Barrier(MPI_COMM_WORLD), rank, "MPI_Barrier");
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) {
      const bool sampled = i + 1 < o.iters;  // the last one is checked in full below
      compare::Samples at;
      if (sampled) at = b.PoisonSamples(o.sizes[s], i, rank);
      Check(MPI_Allreduce(send, recv, icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), rank,
            "MPI_Allreduce (timed)");
      if (sampled) tally[0] += b.WrongAt(at), tally[1] += at.n;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.iters;
    tally[0] += b.Wrong();
    tally[1] += static_cast<int64_t>(count);
    Check(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), rank,
          "MPI_Allreduce (max time)");
    Check(MPI_Allreduce(MPI_IN_PLACE, tally, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), rank,
          "MPI_Allreduce (wrong count)");
    json += compare::Row(s == 0, count, seconds, n, tally[0], tally[1]);
  }
  json += "\n]\n";
  if (rank == 0) std::fputs(json.c_str(), stdout);
  MPI_Finalize();
  return 0;
}
