// The hierarchical allreduce: ranks grouped into pretend hosts, a host-local communicator
// over shm and a leaders' communicator over tcp, against references computed here.
#include <gtest/gtest.h>

#include "railyard/comm/comm_testing.h"
#include "railyard/comm/test_transports.h"

namespace railyard::comm {
namespace {

// Builds a job of hosts.size() hosts with hosts[h] ranks each (ranks numbered host by host).
struct HierJob {
  CommGroup flat;
  std::vector<CommGroup> locals;
  CommGroup leaders;
};

HierJob MakeJob(const std::vector<int>& hosts) {
  HierJob j;
  int n = 0;
  for (int h : hosts) n += h;
  auto tcp = AvailableTestTransports()[0].factory;  // tcp
  j.flat = MakeCommGroupForTest(tcp, n);
  EXPECT_TRUE(j.flat.status.ok()) << j.flat.status.ToString();
  net::TransportFactory shm = [](const net::TransportOptions& o) {
    return net::NewTransport("shm", o);
  };
  int first = 0;
  std::vector<std::unique_ptr<Communicator>> leaders_by_host;
  j.leaders = MakeCommGroupForTest(tcp, static_cast<int>(hosts.size()));
  EXPECT_TRUE(j.leaders.status.ok()) << j.leaders.status.ToString();
  for (size_t h = 0; h < hosts.size(); ++h) {
    CommOptions o;
    o.group_name = "ranks on host" + std::to_string(h);
    j.locals.push_back(MakeCommGroupForTest(shm, hosts[h], o));
    EXPECT_TRUE(j.locals.back().status.ok()) << j.locals.back().status.ToString();
    for (int l = 0; l < hosts[h]; ++l) {
      j.flat.ranks[first + l]->AttachHierarchy(std::move(j.locals[h].ranks[l]),
                                               l == 0 ? std::move(j.leaders.ranks[h]) : nullptr);
    }
    first += hosts[h];
  }
  return j;
}

TEST(Hierarchy, AllreduceMatchesTheReferenceForEveryTypeAndOp) {
  for (const std::vector<int>& hosts : {std::vector<int>{2, 2}, std::vector<int>{3, 1, 2}}) {
    HierJob j = MakeJob(hosts);
    ASSERT_TRUE(j.flat.status.ok());
    const int n = static_cast<int>(j.flat.ranks.size());
    auto st = RunCommRanksForTest(j.flat, [&](Communicator& c) -> Status {
      if (!c.hierarchical()) return Internal("rank {}: no hierarchy attached", c.rank());
      for (DataType t :
           {DataType::kF32, DataType::kF64, DataType::kBF16, DataType::kI32, DataType::kU8}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
          for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}}) {
            // Element i of rank r: 1 + (r + i) % 4; exact in every type.
            std::vector<double> want(count);
            std::vector<char> in(count * SizeOf(t)), out(count * SizeOf(t)), ref(count * SizeOf(t));
            auto put = [&](std::vector<char>& v, size_t i, double x) {
              StoreValue(t, v.data(), i, x);
            };
            for (size_t i = 0; i < count; ++i) {
              put(in, i, 1 + (c.rank() + i) % 4);
              double acc = op == ReduceOp::kMax ? 0 : 0;
              for (int r = 0; r < n; ++r) {
                double v = 1 + (r + i) % 4;
                acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
              }
              put(ref, i, acc);
            }
            if (op == ReduceOp::kAvg) FinishAverage(t, op, ref.data(), count, n);
            RY_RETURN_IF_ERROR(c.Allreduce(in.data(), out.data(), count, t, op,
                                           {.algorithm = Algorithm::kHierarchical}));
            if (out != ref) {
              return Internal("hosts {} rank {} {} {} count {}: wrong result", hosts.size(),
                              c.rank(), DataTypeName(t), ReduceOpName(op), count);
            }
          }
        }
      }
      return Status::Ok();
    });
    for (auto& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

// Abort on one rank must reach ranks that wait inside the sub-groups' separate transports
// (host-local and leaders), not only the job-wide one, and name the aborting rank.
TEST(Hierarchy, AbortReachesRanksWaitingInsideTheSubGroups) {
  HierJob j = MakeJob({2, 2});
  ASSERT_TRUE(j.flat.status.ok());
  constexpr int kAborter = 3;  // not a leader: its host's leader waits for it over shm
  auto st = RunCommRanksForTest(j.flat, [&](Communicator& c) -> Status {
    std::vector<float> v(1000, 1.0f);
    if (c.rank() == kAborter) {
      c.Abort("operator asked");
      return c.Allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum);
    }
    // A deadline far beyond the test's run: only the abort can end these calls quickly, and
    // a timeout would be a different error code.
    return c.Allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum,
                       {.timeout = std::chrono::minutes(2), .algorithm = Algorithm::kHierarchical});
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kAborted) << "rank " << r << ": " << st[r].ToString();
    EXPECT_NE(st[r].message().find("rank 3 called abort: operator asked"), std::string::npos)
        << "rank " << r << ": " << st[r].ToString();
  }
}

}  // namespace
}  // namespace railyard::comm
