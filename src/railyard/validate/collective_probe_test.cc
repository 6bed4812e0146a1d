// The allreduce sweep with ranks as threads of this process, meeting through an in-memory
// store and talking tcp over loopback (the address 127.0.0.1 picks lo).
#include "railyard/validate/collective_probe.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace railyard::validate {
namespace {

using namespace std::chrono_literals;

struct Sweeps {
  std::vector<Result<std::vector<CollectiveFigure>>> results;
};

// Runs ranks [0, started) of `world`; the others never join.
Sweeps RunRanks(int world, int started, std::vector<uint64_t> sizes, base::Duration timeout,
                std::string address = "127.0.0.1") {
  std::unique_ptr<net::Store> store = net::NewInMemoryStore();
  std::vector<std::string> hosts;
  for (int r = 0; r < world; ++r) hosts.push_back("node" + std::to_string(r));
  Sweeps s;
  s.results.assign(started, Status(StatusCode::kInternal, "not run"));
  base::Deadline deadline = base::Deadline::After(timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < started; ++r) {
    threads.emplace_back([&, r] {
      CollectiveProbeOptions o{.secret = "s3cret",
                               .address = address,
                               .host = hosts[r],
                               .hosts = hosts,
                               .warmup = 1,
                               .iters = 2};
      s.results[r] = RunAllreduceSweep(*store, "run/allreduce", r, world, sizes, deadline, o);
    });
  }
  for (auto& t : threads) t.join();
  return s;
}

TEST(CollectiveProbe, FourRanksGiveOneFigurePerSizeInOrder) {
  std::vector<uint64_t> sizes = {64 << 10, 4 << 10, 1 << 20};  // as given, not sorted
  Sweeps s = RunRanks(4, 4, sizes, 60s);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(s.results[r].ok()) << "rank " << r << ": " << s.results[r].status().ToString();
    const std::vector<CollectiveFigure>& f = *s.results[r];
    ASSERT_EQ(f.size(), sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(f[i].bytes, sizes[i]);
      EXPECT_GT(f[i].seconds, 0);
      EXPECT_GT(f[i].algbw_bytes_per_s, 0);
      // nccl-tests' allreduce factor 2(n-1)/n = 1.5 for 4 ranks.
      EXPECT_NEAR(f[i].busbw_bytes_per_s / f[i].algbw_bytes_per_s, 1.5, 0.01);
    }
  }
  // The slowest rank's mean: every rank reports the same figures.
  EXPECT_EQ((*s.results[0])[2].seconds, (*s.results[3])[2].seconds);
}

TEST(CollectiveProbe, OneRankMovesNothing) {
  Sweeps s = RunRanks(1, 1, {4 << 10}, 30s);
  ASSERT_TRUE(s.results[0].ok()) << s.results[0].status().ToString();
  ASSERT_EQ(s.results[0]->size(), 1u);
  EXPECT_EQ((*s.results[0])[0].busbw_bytes_per_s, 0);
}

TEST(CollectiveProbe, RankThatNeverJoinsIsNamedByTheDeadline) {
  Sweeps s = RunRanks(3, 2, {4 << 10}, 2s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(s.results[r].ok()) << "rank " << r;
    const Status& st = s.results[r].status();
    EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
    EXPECT_NE(st.message().find("rank 2 never published"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("2 node2"), std::string::npos) << st.ToString();
  }
}

TEST(CollectiveProbe, AddressNotOnThisHostIsNotFound) {
  // 198.51.100.0/24 is TEST-NET-2: documentation only, on no interface here.
  Sweeps s = RunRanks(1, 1, {4 << 10}, 5s, "198.51.100.7");
  ASSERT_FALSE(s.results[0].ok());
  EXPECT_EQ(s.results[0].status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.results[0].status().message().find("198.51.100.7"), std::string::npos);
}

TEST(CollectiveProbe, BadArgumentsAreInvalid) {
  std::unique_ptr<net::Store> store = net::NewInMemoryStore();
  std::vector<uint64_t> sizes = {4096};
  auto d = base::Deadline::After(1s);
  EXPECT_EQ(RunAllreduceSweep(*store, "p", 3, 3, sizes, d).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RunAllreduceSweep(*store, "p", 0, 1, {}, d).status().code(),
            StatusCode::kInvalidArgument);
  // A size with no whole f32 in it measures nothing.
  std::vector<uint64_t> tiny = {2};
  EXPECT_EQ(RunAllreduceSweep(*store, "p", 0, 1, tiny, d, {.address = "127.0.0.1"}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::validate
