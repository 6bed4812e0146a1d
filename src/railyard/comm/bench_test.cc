// comm/bench: size lists, their checks, nccl-tests' busbw factors, rows from a real run of
// rank threads over tcp, and the checking of timed iterations (a corrupted result is caught
// and named).
#include "railyard/comm/bench.h"

#include <gtest/gtest.h>

#include "railyard/comm/comm_testing.h"
#include "railyard/comm/test_transports.h"

namespace railyard::comm {
namespace {

std::vector<uint64_t> Sizes(std::string_view text) {
  auto s = ParseSizes(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().ToString();
  return s.ok() ? *s : std::vector<uint64_t>{};
}

TEST(ParseSizes, RangeDoublesListKeepsOrderAndOneSizeIsOne) {
  EXPECT_EQ(Sizes("4KiB:32KiB"), (std::vector<uint64_t>{4096, 8192, 16384, 32768}));
  // MAX need not be MIN times a power of two: the doubling stops below it.
  EXPECT_EQ(Sizes("3KiB:13KiB"), (std::vector<uint64_t>{3072, 6144, 12288}));
  EXPECT_EQ(Sizes("1MiB,4KiB,1MiB"), (std::vector<uint64_t>{1 << 20, 4096, 1 << 20}));
  EXPECT_EQ(Sizes("64MiB"), (std::vector<uint64_t>{64 << 20}));
  EXPECT_EQ(Sizes("16GiB").size(), 1u);
}

TEST(ParseSizes, MalformedInputSaysWhichFormsAreAccepted) {
  for (const char* bad : {"", ":", "4KiB:", ":4KiB", "4KiB,", ",4KiB", "4KiB,,1MiB",
                          "4KiB:1MiB,2MiB", "lots", "4KiB:1MiB:2MiB"}) {
    auto s = ParseSizes(bad);
    ASSERT_FALSE(s.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find("MIN:MAX"), std::string::npos)
        << bad << ": " << s.status().message();
  }
  EXPECT_FALSE(ParseSizes("0:4KiB").ok());
  EXPECT_FALSE(ParseSizes("8KiB:4KiB").ok());
  EXPECT_FALSE(ParseSizes("4KiB,0").ok());
  auto huge = ParseSizes("4KiB,17GiB");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("17GiB"), std::string::npos) << huge.status().message();
}

TEST(CheckCommBenchSizes, EverySizeMustHoldAnElementPerBlock) {
  CommBenchOptions o;
  o.type = DataType::kF64;
  o.sizes = {8, 3};
  Status s = CheckCommBenchSizes(o, 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("3 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("f64"), std::string::npos) << s.message();
  // Allreduce needs one element; allgather one per rank.
  o.sizes = {16};
  EXPECT_TRUE(CheckCommBenchSizes(o, 4).ok());
  o.op = BenchOp::kAllgather;
  EXPECT_EQ(CheckCommBenchSizes(o, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckCommBenchSizes(o, 2).ok());
  o.sizes = {};
  EXPECT_FALSE(CheckCommBenchSizes(o, 2).ok());
}

TEST(BusBandwidthFactor, FollowsNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAlltoall, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kBroadcast, 8), 1.0);
  for (const char* name : {"allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall"}) {
    auto op = ParseBenchOp(name);
    ASSERT_TRUE(op.ok()) << name;
    EXPECT_EQ(BenchOpName(*op), name);
  }
  EXPECT_FALSE(ParseBenchOp("allreduce2").ok());
}

// Three rank threads over tcp: one row per size, in the order given, with the same figures
// on every rank, no wrong elements, and busbw = algbw x the operation's factor.
TEST(RunCommBench, RowsFollowTheSizesOnEveryRank) {
  auto g = MakeCommGroupForTest(AvailableTestTransports()[0].factory, 3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  for (BenchOp op : {BenchOp::kAllreduce, BenchOp::kAllgather, BenchOp::kBroadcast}) {
    CommBenchOptions o;
    o.op = op;
    o.sizes = {96, 4096, 12};
    o.iters = 2;
    o.warmup = 1;
    std::vector<std::vector<CommBenchRow>> rows(3);
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      RY_ASSIGN_OR_RETURN(rows[c.rank()], RunCommBench(c, o));
      return Status::Ok();
    });
    for (auto& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(rows[0].size(), 3u) << BenchOpName(op);
    for (size_t i = 0; i < 3; ++i) {
      // As in nccl-tests, a size splits into whole elements, per rank for allgather.
      const uint64_t unit = op == BenchOp::kAllgather ? 4 * 3 : 4;
      EXPECT_EQ(rows[0][i].size_bytes, o.sizes[i] / unit * unit) << BenchOpName(op);
      EXPECT_EQ(rows[0][i].count * 4, rows[0][i].size_bytes) << BenchOpName(op);
      EXPECT_EQ(rows[0][i].wrong, 0u) << BenchOpName(op);
      EXPECT_GT(rows[0][i].checked, 0u) << BenchOpName(op);
      EXPECT_NEAR(rows[0][i].busbw_gbps, rows[0][i].algbw_gbps * BusBandwidthFactor(op, 3),
                  1e-12 + rows[0][i].busbw_gbps * 1e-9);
      for (int r = 1; r < 3; ++r) {
        EXPECT_EQ(rows[r][i].time_us, rows[0][i].time_us) << "rank " << r;
      }
    }
  }
}

// Runs `o` on three tcp rank threads and returns rank 0's rows (every rank's are the same);
// o.after_timed_iteration_for_test runs on rank `hooked_rank` only.
std::vector<CommBenchRow> RunThreeRanks(const CommBenchOptions& o, int hooked_rank = -1) {
  auto g = MakeCommGroupForTest(AvailableTestTransports()[0].factory, 3);
  EXPECT_TRUE(g.status.ok()) << g.status.ToString();
  if (!g.status.ok()) return {};
  std::vector<std::vector<CommBenchRow>> rows(3);
  auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
    CommBenchOptions mine = o;
    if (c.rank() != hooked_rank) mine.after_timed_iteration_for_test = nullptr;
    RY_ASSIGN_OR_RETURN(rows[c.rank()], RunCommBench(c, mine));
    return Status::Ok();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
  for (int r = 1; r < 3; ++r) {
    for (size_t i = 0; i < rows[0].size() && i < rows[r].size(); ++i) {
      EXPECT_EQ(rows[r][i].wrong, rows[0][i].wrong) << "rank " << r << " row " << i;
    }
  }
  return rows[0];
}

// Every rank checks the untimed iteration and the last timed one in full, and every other
// timed iteration at the first, the last and kCommBenchSamples drawn elements.
TEST(RunCommBench, EveryTimedIterationIsChecked) {
  CommBenchOptions o;
  o.sizes = {4096, 64};  // 1024 and 16 f32 elements
  o.iters = 5;
  o.warmup = 1;
  auto rows = RunThreeRanks(o);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0u) << row.size_bytes;
    EXPECT_EQ(row.checked, 3 * (2 * row.count + (o.iters - 1) * (kCommBenchSamples + 2)))
        << row.size_bytes;
  }
  EXPECT_TRUE(CheckCommBenchRows(rows, o.op).ok());
}

// One rank's result of one timed iteration in the middle of the loop is corrupted (every
// byte inverted): neither the untimed check nor the final one sees it, the sampled check
// does, on that row only, and CheckCommBenchRows names the row.
TEST(RunCommBench, CorruptedTimedIterationIsCaughtAndNamed) {
  for (BenchOp op : {BenchOp::kAllreduce, BenchOp::kAllgather, BenchOp::kBroadcast,
                     BenchOp::kReduceScatter, BenchOp::kAlltoall}) {
    for (int bad_iteration : {2, 4}) {  // sampled, and the last (checked in full)
      CommBenchOptions o;
      o.op = op;
      o.sizes = {1536, 12288, 3072};
      o.iters = 5;
      o.warmup = 1;
      // Rank 2 (not the broadcast root), on the 12 KiB row only.
      o.after_timed_iteration_for_test = [&](uint64_t size, int iteration, std::span<char> result) {
        if (size != 12288 || iteration != bad_iteration) return;
        for (char& byte : result) byte = static_cast<char>(~byte);
      };
      auto rows = RunThreeRanks(o, /*hooked_rank=*/2);
      ASSERT_EQ(rows.size(), 3u) << BenchOpName(op);
      EXPECT_EQ(rows[0].wrong, 0u) << BenchOpName(op);
      EXPECT_EQ(rows[2].wrong, 0u) << BenchOpName(op);
      // The sampled check sees all of its positions wrong; the full one every element.
      const uint64_t elems = op == BenchOp::kReduceScatter ? rows[1].count / 3 : rows[1].count;
      EXPECT_EQ(rows[1].wrong, bad_iteration == 4 ? elems : kCommBenchSamples + 2)
          << BenchOpName(op) << " iteration " << bad_iteration;
      Status s = CheckCommBenchRows(rows, op);
      EXPECT_EQ(s.code(), StatusCode::kDataLoss) << BenchOpName(op);
      EXPECT_NE(s.message().find(fmt::format("{} 12288 B", BenchOpName(op))), std::string::npos)
          << s.message();
      EXPECT_EQ(s.message().find("1536 B"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("1 of 3 rows"), std::string::npos) << s.message();
    }
  }
}

}  // namespace
}  // namespace railyard::comm
