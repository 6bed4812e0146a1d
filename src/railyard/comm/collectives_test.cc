// Every collective x type x size x world size 1..8, against references computed here, for
// every transport available in this build (threads of one process on an in-memory store).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "railyard/comm/comm_testing.h"
#include "railyard/comm/test_transports.h"

namespace railyard::comm {
namespace {

constexpr DataType kTypes[] = {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                               DataType::kI32, DataType::kI64, DataType::kU8};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

// Small integers, exact in every type, so that any summation order gives the same bits.
double Input(ReduceOp op, int rank, size_t i) {
  switch (op) {
    case ReduceOp::kProd:
      return (rank < 2 && i % 3 == 0) ? 2 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return static_cast<double>((rank * 13 + i * 7) % 11);
    default:
      return static_cast<double>(1 + (rank * 7 + i * 3) % 5);
  }
}

// The reduction of element i over n ranks, stored in type t at index `at` (default i) of `out`.
void Expected(DataType t, ReduceOp op, int n, size_t i, void* out, size_t at = SIZE_MAX) {
  if (at == SIZE_MAX) at = i;
  double acc = Input(op, 0, i);
  for (int r = 1; r < n; ++r) {
    double v = Input(op, r, i);
    acc = ReduceScalar(op, acc, v);
  }
  if (op != ReduceOp::kAvg || n == 1) return StoreValue(t, out, at, acc);
  switch (t) {
    case DataType::kF32:
      return StoreValue(t, out, at, static_cast<float>(acc) / static_cast<float>(n));
    case DataType::kF64:
      return StoreValue(t, out, at, acc / n);
    case DataType::kF16:
      static_cast<uint16_t*>(out)[at] =
          FloatToHalf(static_cast<float>(acc) / static_cast<float>(n));
      return;
    case DataType::kBF16:
      static_cast<uint16_t*>(out)[at] =
          FloatToBf16(static_cast<float>(acc) / static_cast<float>(n));
      return;
    default:
      return StoreValue(t, out, at, std::trunc(acc / n));
  }
}

std::vector<char> Inputs(DataType t, ReduceOp op, int rank, size_t count, size_t offset = 0) {
  std::vector<char> v(count * SizeOf(t));
  for (size_t i = 0; i < count; ++i) StoreValue(t, v.data(), i, Input(op, rank, i + offset));
  return v;
}

std::vector<size_t> Counts(int n, bool large) {
  std::vector<size_t> c = {
      0, 1, 7, static_cast<size_t>(n > 1 ? n - 1 : 0), static_cast<size_t>(n + 1), 1000};
  if (large) c.push_back((size_t{1} << 20) + 3);
  return c;
}

Status CheckBytes(const std::vector<char>& got, const std::vector<char>& want,
                  std::string_view what) {
  if (got.size() != want.size())
    return Internal("{}: size {} != {}", what, got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return Internal("{}: first wrong byte at {}", what, i);
  }
  return Status::Ok();
}

class CollectivesTest : public ::testing::TestWithParam<TestTransport> {};

TEST_P(CollectivesTest, AllreduceEveryTypeOpAndSize) {
  for (int n = 1; n <= 8; ++n) {
    auto g = MakeCommGroupForTest(GetParam().factory, n);
    ASSERT_TRUE(g.status.ok()) << g.status.ToString();
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      for (DataType t : kTypes) {
        for (ReduceOp op : kOps) {
          // 1 Mi + 3 elements: every type with sum, every op with f32 (the suite's time).
          for (size_t count : Counts(n, op == ReduceOp::kSum || t == DataType::kF32)) {
            for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                Algorithm::kWindow}) {
              if (a != Algorithm::kAuto && count > 100000) continue;
              auto in = Inputs(t, op, c.rank(), count);
              std::vector<char> out(in.size()), want(in.size());
              for (size_t i = 0; i < count; ++i) Expected(t, op, n, i, want.data());
              RY_RETURN_IF_ERROR(
                  c.Allreduce(in.data(), out.data(), count, t, op, {.algorithm = a}));
              RY_RETURN_IF_ERROR(
                  CheckBytes(out, want,
                             fmt::format("n={} {} {} count {} {}", n, DataTypeName(t),
                                         ReduceOpName(op), count, AlgorithmName(a))));
              // In place.
              RY_RETURN_IF_ERROR(c.Allreduce(in.data(), in.data(), count, t, op, {.algorithm = a}));
              RY_RETURN_IF_ERROR(CheckBytes(in, want, "in place"));
            }
          }
        }
      }
      return Status::Ok();
    });
    for (auto& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

TEST_P(CollectivesTest, ReduceScatterAllgatherBroadcastReduceAlltoall) {
  for (int n = 1; n <= 8; ++n) {
    auto g = MakeCommGroupForTest(GetParam().factory, n);
    ASSERT_TRUE(g.status.ok()) << g.status.ToString();
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      const int r = c.rank();
      for (DataType t : kTypes) {
        const size_t es = SizeOf(t);
        for (size_t count : Counts(n, t == DataType::kF32)) {
          std::string what = fmt::format("n={} {} count {}", n, DataTypeName(t), count);
          for (ReduceOp op : kOps) {
            // The large size skips prod and min (the suite's time; they share max's code).
            if (count > 100000 && (op == ReduceOp::kProd || op == ReduceOp::kMin)) continue;
            // reduce_scatter: block b of the input holds elements b*count...
            auto in = Inputs(t, op, r, count * n);
            std::vector<char> out(count * es), want(count * es);
            for (size_t i = 0; i < count; ++i) Expected(t, op, n, r * count + i, want.data(), i);
            RY_RETURN_IF_ERROR(c.ReduceScatter(in.data(), out.data(), count, t, op));
            RY_RETURN_IF_ERROR(CheckBytes(out, want, "reduce_scatter " + what));
            // reduce, to a root that moves with the op and the count.
            const int root = static_cast<int>((static_cast<size_t>(op) + count) % n);
            auto rin = Inputs(t, op, r, count);
            std::vector<char> rout(count * es), rwant(count * es);
            for (size_t i = 0; i < count; ++i) Expected(t, op, n, i, rwant.data());
            RY_RETURN_IF_ERROR(c.Reduce(rin.data(), rout.data(), count, t, op, root));
            if (r == root) {
              RY_RETURN_IF_ERROR(CheckBytes(
                  rout, rwant, fmt::format("reduce root {} {} {}", root, ReduceOpName(op), what)));
            }
          }
          // allgather: rank q contributes Inputs(q).
          auto mine = Inputs(t, ReduceOp::kSum, r, count);
          std::vector<char> all(count * n * es), want(count * n * es);
          for (int q = 0; q < n; ++q) {
            auto theirs = Inputs(t, ReduceOp::kSum, q, count);
            if (!theirs.empty())
              std::memcpy(want.data() + q * count * es, theirs.data(), theirs.size());
          }
          RY_RETURN_IF_ERROR(c.Allgather(mine.data(), all.data(), count, t));
          RY_RETURN_IF_ERROR(CheckBytes(all, want, "allgather " + what));
          // broadcast from every root (the large size: the first and last), both algorithms.
          for (int root = 0; root<n; root += count> 100000 ? std::max(1, n - 1) : 1) {
            for (Algorithm a : {Algorithm::kTree, Algorithm::kRing}) {
              auto buf = r == root ? Inputs(t, ReduceOp::kSum, root, count)
                                   : std::vector<char>(count * es, 0x5a);
              RY_RETURN_IF_ERROR(c.Broadcast(buf.data(), count, t, root, {.algorithm = a}));
              RY_RETURN_IF_ERROR(CheckBytes(buf, Inputs(t, ReduceOp::kSum, root, count),
                                            fmt::format("broadcast root {} {}", root, what)));
            }
          }
          // alltoall: block j from rank r carries Inputs(r, offset j*count).
          {
            std::vector<char> send(count * n * es), recv(count * n * es), awant(count * n * es);
            for (int j = 0; j < n; ++j) {
              auto blk = Inputs(t, ReduceOp::kMin, r * 100 + j, count);
              if (!blk.empty()) std::memcpy(send.data() + j * count * es, blk.data(), blk.size());
              auto from = Inputs(t, ReduceOp::kMin, j * 100 + r, count);
              if (!from.empty())
                std::memcpy(awant.data() + j * count * es, from.data(), from.size());
            }
            RY_RETURN_IF_ERROR(c.Alltoall(send.data(), recv.data(), count, t));
            RY_RETURN_IF_ERROR(CheckBytes(recv, awant, "alltoall " + what));
          }
        }
      }
      RY_RETURN_IF_ERROR(c.Barrier());
      return Status::Ok();
    });
    for (auto& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

// Every rank sends to its successor and receives from its predecessor, for several types and
// sizes; even ranks send first, so no cycle of blocked sends can form.
TEST_P(CollectivesTest, SendRecvAroundTheRing) {
  for (int n : {2, 3, 8}) {
    auto g = MakeCommGroupForTest(GetParam().factory, n);
    ASSERT_TRUE(g.status.ok()) << g.status.ToString();
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      const int r = c.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
      for (DataType t : {DataType::kF32, DataType::kU8, DataType::kF64}) {
        for (size_t count : {size_t{0}, size_t{7}, (size_t{1} << 20) + 3}) {
          auto mine = Inputs(t, ReduceOp::kSum, r, count);
          std::vector<char> got(mine.size(), 0x5a);
          if (r % 2 == 0) RY_RETURN_IF_ERROR(c.Send(mine.data(), count, t, next));
          RY_RETURN_IF_ERROR(c.Recv(got.data(), count, t, prev));
          if (r % 2 == 1) RY_RETURN_IF_ERROR(c.Send(mine.data(), count, t, next));
          RY_RETURN_IF_ERROR(
              CheckBytes(got, Inputs(t, ReduceOp::kSum, prev, count),
                         fmt::format("n={} rank {} recv {} x {}", n, r, count, DataTypeName(t))));
        }
      }
      return Status::Ok();
    });
    for (auto& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

// Every non-blocking variant, queued back to back with a blocking call behind them: they run
// in issue order on every rank (the blocking call waits for them) and give the same results
// as the blocking calls.
TEST_P(CollectivesTest, AsyncVariantsRunInIssueOrder) {
  constexpr int n = 3;
  auto g = MakeCommGroupForTest(GetParam().factory, n);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
    const int r = c.rank();
    const DataType t = DataType::kF32;
    constexpr size_t count = 50000;
    const size_t bytes = count * SizeOf(t);
    std::vector<std::vector<float>> sums(3, std::vector<float>(count, static_cast<float>(r + 1)));
    auto red_in = Inputs(t, ReduceOp::kMax, r, count);
    std::vector<char> red_out(bytes);
    auto rs_in = Inputs(t, ReduceOp::kProd, r, count * n);
    std::vector<char> rs_out(bytes);
    auto ag_in = Inputs(t, ReduceOp::kSum, r, count);
    std::vector<char> ag_out(bytes * n);
    auto bc = r == 2 ? Inputs(t, ReduceOp::kSum, 2, count) : std::vector<char>(bytes, 0);
    std::vector<char> a2a_in(bytes * n), a2a_out(bytes * n);
    for (int j = 0; j < n; ++j) {
      auto blk = Inputs(t, ReduceOp::kMin, r * 100 + j, count);
      std::memcpy(a2a_in.data() + j * bytes, blk.data(), bytes);
    }
    auto p2p_in = Inputs(t, ReduceOp::kSum, r + 10, count);
    std::vector<char> p2p_out(bytes);
    const int next = (r + 1) % n, prev = (r + n - 1) % n;

    std::vector<std::pair<std::string, std::shared_ptr<Work>>> works;
    for (auto& b : sums) {
      works.emplace_back("allreduce",
                         c.AllreduceAsync(b.data(), b.data(), count, t, ReduceOp::kSum));
    }
    works.emplace_back("reduce",
                       c.ReduceAsync(red_in.data(), red_out.data(), count, t, ReduceOp::kMax, 1));
    works.emplace_back("reduce_scatter", c.ReduceScatterAsync(rs_in.data(), rs_out.data(), count, t,
                                                              ReduceOp::kProd));
    works.emplace_back("allgather", c.AllgatherAsync(ag_in.data(), ag_out.data(), count, t));
    works.emplace_back("broadcast", c.BroadcastAsync(bc.data(), count, t, 2));
    works.emplace_back("alltoall", c.AlltoallAsync(a2a_in.data(), a2a_out.data(), count, t));
    works.emplace_back("barrier", c.BarrierAsync());
    if (r % 2 == 0) works.emplace_back("send", c.SendAsync(p2p_in.data(), count, t, next));
    works.emplace_back("recv", c.RecvAsync(p2p_out.data(), count, t, prev));
    if (r % 2 == 1) works.emplace_back("send", c.SendAsync(p2p_in.data(), count, t, next));
    float x = 1;
    RY_RETURN_IF_ERROR(c.Allreduce(&x, &x, 1, t, ReduceOp::kSum));
    if (x != n) return Internal("blocking allreduce after the async ones: {}", x);
    for (auto& [name, w] : works) {
      if (!w->Done()) return Internal("{} not done when a later blocking call returned", name);
      RY_RETURN_IF_ERROR(w->Wait().WithContext(name));
    }

    for (auto& b : sums) {
      if (b[0] != n * (n + 1) / 2 || b.back() != b[0]) return Internal("allreduce {}", b[0]);
    }
    std::vector<char> want(bytes);
    if (r == 1) {
      for (size_t i = 0; i < count; ++i) Expected(t, ReduceOp::kMax, n, i, want.data());
      RY_RETURN_IF_ERROR(CheckBytes(red_out, want, "reduce"));
    }
    for (size_t i = 0; i < count; ++i) {
      Expected(t, ReduceOp::kProd, n, r * count + i, want.data(), i);
    }
    RY_RETURN_IF_ERROR(CheckBytes(rs_out, want, "reduce_scatter"));
    for (int q = 0; q < n; ++q) {
      auto theirs = Inputs(t, ReduceOp::kSum, q, count);
      if (std::memcmp(ag_out.data() + q * bytes, theirs.data(), bytes) != 0) {
        return Internal("allgather block {}", q);
      }
      auto from = Inputs(t, ReduceOp::kMin, q * 100 + r, count);
      if (std::memcmp(a2a_out.data() + q * bytes, from.data(), bytes) != 0) {
        return Internal("alltoall block {}", q);
      }
    }
    RY_RETURN_IF_ERROR(CheckBytes(bc, Inputs(t, ReduceOp::kSum, 2, count), "broadcast"));
    return CheckBytes(p2p_out, Inputs(t, ReduceOp::kSum, prev + 10, count), "recv");
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_P(CollectivesTest, MismatchedCountsAreDetectedWithTheCheck) {
  CommOptions o;
  o.check_consistency = true;
  o.timeout = std::chrono::seconds(20);
  auto g = MakeCommGroupForTest(GetParam().factory, 4, o);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
    std::vector<float> v(1000, 1.0f);
    size_t count = c.rank() == 2 ? 999 : 1000;
    return c.Allreduce(v.data(), v.data(), count, DataType::kF32, ReduceOp::kSum);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(st[r].ok()) << r;
    // Every rank's error names the odd one out, rank 2, and its count.
    EXPECT_NE(st[r].message().find("rank 2"), std::string::npos) << st[r].ToString();
    EXPECT_NE(st[r].message().find("999"), std::string::npos) << st[r].ToString();
  }
}

// The other fields the check compares: the operation itself, the type, the reduction and
// the root. Rank 1 is the odd one out; every rank's error names it and what it called.
TEST_P(CollectivesTest, MismatchedOperationTypeOpAndRootAreDetected) {
  struct Case {
    std::string field;
    std::function<Status(Communicator&, std::vector<float>&, bool odd)> call;
    std::string odd_text;
  };
  const std::vector<Case> cases = {
      {"operation",
       [](Communicator& c, std::vector<float>& v, bool odd) {
         return odd ? c.Allgather(v.data(), v.data() + 100, 100, DataType::kF32)
                    : c.Allreduce(v.data(), v.data(), 100, DataType::kF32, ReduceOp::kSum);
       },
       "allgather"},
      {"type",
       [](Communicator& c, std::vector<float>& v, bool odd) {
         return c.Allreduce(v.data(), v.data(), 100, odd ? DataType::kI32 : DataType::kF32,
                            ReduceOp::kSum);
       },
       "x i32"},
      {"reduction",
       [](Communicator& c, std::vector<float>& v, bool odd) {
         return c.Allreduce(v.data(), v.data(), 100, DataType::kF32,
                            odd ? ReduceOp::kMax : ReduceOp::kSum);
       },
       "max"},
      {"root",
       [](Communicator& c, std::vector<float>& v, bool odd) {
         return c.Broadcast(v.data(), 100, DataType::kF32, odd ? 2 : 0);
       },
       "root 2"},
  };
  CommOptions o;
  o.check_consistency = true;
  o.timeout = std::chrono::seconds(20);
  for (const Case& k : cases) {
    auto g = MakeCommGroupForTest(GetParam().factory, 3, o);
    ASSERT_TRUE(g.status.ok()) << g.status.ToString();
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      std::vector<float> v(1000, 1.0f);
      Status first = k.call(c, v, c.rank() == 1);
      // A rank whose part needs nothing from rank 1 (the root of a broadcast) may finish
      // before the abort arrives: it must get the error from its next call.
      return first.ok() ? c.Barrier() : first;
    });
    for (int r = 0; r < 3; ++r) {
      // The ranks that compared with rank 1 found it; the others learn it through the abort.
      EXPECT_TRUE(st[r].code() == StatusCode::kFailedPrecondition ||
                  st[r].code() == StatusCode::kAborted)
          << k.field << ": " << st[r].ToString();
      EXPECT_NE(st[r].message().find("mismatched collective calls"), std::string::npos)
          << k.field << ": " << st[r].ToString();
      EXPECT_NE(st[r].message().find("rank 1 ("), std::string::npos)
          << k.field << ": " << st[r].ToString();
      EXPECT_NE(st[r].message().find(k.odd_text), std::string::npos)
          << k.field << ": " << st[r].ToString();
    }
  }
}

// An algorithm an operation cannot run is refused per call (locally: the communicator stays
// usable), while a job-wide default that does not fit an operation leaves that one on auto.
TEST(Collectives, AlgorithmsAreCheckedPerOperation) {
  EXPECT_TRUE(CheckAlgorithm("allreduce", Algorithm::kRecursiveDoubling).ok());
  EXPECT_TRUE(CheckAlgorithm("broadcast", Algorithm::kTree).ok());
  EXPECT_TRUE(CheckAlgorithm("barrier", Algorithm::kAuto).ok());
  Status bad = CheckAlgorithm("allgather", Algorithm::kRecursiveDoubling);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("allgather cannot run algorithm 'rd'; expected auto, ring"),
            std::string::npos)
      << bad.ToString();
  EXPECT_FALSE(CheckAlgorithm("allreduce", Algorithm::kTree).ok());
  EXPECT_FALSE(CheckAlgorithm("barrier", Algorithm::kRing).ok());

  CommOptions o;
  o.algorithm = Algorithm::kTree;  // fits broadcast and reduce, not allreduce
  auto g = MakeCommGroupForTest(AvailableTestTransports()[0].factory, 2, o);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
    float x = 1;
    Status refused =
        c.Allreduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum, {.algorithm = Algorithm::kPairwise});
    if (refused.code() != StatusCode::kInvalidArgument) {
      return Internal("pairwise allreduce was not refused: {}", refused.ToString());
    }
    RY_RETURN_IF_ERROR(c.Allreduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum));
    if (x != 2) return Internal("allreduce after the refusal gave {}", x);
    float y = c.rank() == 1 ? 7.0f : 0.0f;
    RY_RETURN_IF_ERROR(c.Broadcast(&y, 1, DataType::kF32, 1));
    return y == 7.0f ? Status::Ok() : Internal("broadcast gave {}", y);
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

// The ring's pieces follow placement: 1 MiB on one host, 128 KiB when ranks report different
// hosts, an explicit size always; the smaller pieces give the same results.
TEST(Collectives, RingPiecesFollowPlacement) {
  net::TransportFactory per_host = [](const net::TransportOptions& o) {
    net::TransportOptions mine = o;
    mine.host = "host" + std::to_string(o.rank);
    return net::NewTransport("tcp", mine);
  };
  auto one = MakeCommGroupForTest(AvailableTestTransports()[0].factory, 2);
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  EXPECT_EQ(one.ranks[0]->piece_bytes(), kPieceOneHost);
  CommOptions fixed;
  fixed.piece_bytes = 256 << 10;
  auto set = MakeCommGroupForTest(per_host, 2, fixed);
  ASSERT_TRUE(set.status.ok()) << set.status.ToString();
  EXPECT_EQ(set.ranks[0]->piece_bytes(), size_t{256} << 10);

  auto g = MakeCommGroupForTest(per_host, 4);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  EXPECT_EQ(g.ranks[0]->piece_bytes(), kPieceAcrossHosts);
  auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
    for (size_t count : {size_t{1000}, (size_t{1} << 20) + 3}) {
      auto in = Inputs(DataType::kF32, ReduceOp::kSum, c.rank(), count);
      std::vector<char> out(in.size()), want(in.size());
      for (size_t i = 0; i < count; ++i) {
        Expected(DataType::kF32, ReduceOp::kSum, 4, i, want.data());
      }
      RY_RETURN_IF_ERROR(c.Allreduce(in.data(), out.data(), count, DataType::kF32, ReduceOp::kSum,
                                     {.algorithm = Algorithm::kRing}));
      RY_RETURN_IF_ERROR(CheckBytes(out, want, fmt::format("count {}", count)));
    }
    return Status::Ok();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

// Reducing straight from the transport and reducing from a scratch copy give the same bytes
// (ring allreduce and reduce_scatter, on every transport; only shm and tcp reduce on receive).
TEST_P(CollectivesTest, ReduceOnReceiveOffGivesTheSameResults) {
  for (bool on : {true, false}) {
    CommOptions o;
    o.reduce_on_receive = on;
    o.piece_bytes = 64 << 10;  // several pieces per block
    auto g = MakeCommGroupForTest(GetParam().factory, 3, o);
    ASSERT_TRUE(g.status.ok()) << g.status.ToString();
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      const size_t count = (size_t{3} << 16) + 5;
      auto in = Inputs(DataType::kF32, ReduceOp::kSum, c.rank(), count);
      std::vector<char> out(in.size()), want(in.size());
      for (size_t i = 0; i < count; ++i) {
        Expected(DataType::kF32, ReduceOp::kSum, 3, i, want.data());
      }
      RY_RETURN_IF_ERROR(c.Allreduce(in.data(), out.data(), count, DataType::kF32, ReduceOp::kSum,
                                     {.algorithm = Algorithm::kRing}));
      RY_RETURN_IF_ERROR(CheckBytes(out, want, fmt::format("allreduce, on={}", on)));
      const size_t block = count / 3;
      std::vector<char> mine(block * SizeOf(DataType::kF32));
      RY_RETURN_IF_ERROR(
          c.ReduceScatter(in.data(), mine.data(), block, DataType::kF32, ReduceOp::kSum));
      std::vector<char> want_block(want.begin() + c.rank() * mine.size(),
                                   want.begin() + (c.rank() + 1) * mine.size());
      return CheckBytes(mine, want_block, fmt::format("reduce_scatter, on={}", on));
    });
    for (auto& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

// The ring allreduce in waves (ring.cc): one segment per wave on one host, every segment at
// once across hosts. More waves than it keeps receives posted for, and a last segment so
// short that some of its blocks are empty (zero-byte messages), in and out of place, and
// reducing on receive or from scratch: every rank ends with the same, right bytes.
TEST_P(CollectivesTest, RingWavesGiveTheSameResultsAsTheReference) {
  net::TransportFactory per_host = [](const net::TransportOptions& o) {
    net::TransportOptions mine = o;
    mine.host = "host" + std::to_string(o.rank);
    return net::NewTransport("tcp", mine);
  };
  constexpr size_t kPieceElems = 1024;
  for (int n : {2, 3, 5}) {
    for (bool one_host : {true, false}) {
      for (bool on_receive : {true, false}) {
        CommOptions o;
        o.piece_bytes = kPieceElems * SizeOf(DataType::kF32);
        o.reduce_on_receive = on_receive;
        auto g = MakeCommGroupForTest(one_host ? GetParam().factory : per_host, n, o);
        ASSERT_TRUE(g.status.ok()) << g.status.ToString();
        const size_t segment = kPieceElems * static_cast<size_t>(n);
        auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
          for (size_t count :
               {7 * segment + 1, 9 * segment + static_cast<size_t>(n) + 1, segment - 1}) {
            const std::string what = fmt::format("n={} one_host={} on_receive={} count {}", n,
                                                 one_host, on_receive, count);
            auto in = Inputs(DataType::kF32, ReduceOp::kSum, c.rank(), count);
            std::vector<char> out(in.size()), want(in.size());
            for (size_t i = 0; i < count; ++i) {
              Expected(DataType::kF32, ReduceOp::kSum, n, i, want.data());
            }
            RY_RETURN_IF_ERROR(c.Allreduce(in.data(), out.data(), count, DataType::kF32,
                                           ReduceOp::kSum, {.algorithm = Algorithm::kRing}));
            RY_RETURN_IF_ERROR(CheckBytes(out, want, what));
            RY_RETURN_IF_ERROR(c.Allreduce(in.data(), in.data(), count, DataType::kF32,
                                           ReduceOp::kMax, {.algorithm = Algorithm::kRing}));
            std::vector<char> max_want(in.size());
            for (size_t i = 0; i < count; ++i) {
              double m = Input(ReduceOp::kSum, 0, i);
              for (int r = 1; r < n; ++r) m = std::max(m, Input(ReduceOp::kSum, r, i));
              StoreValue(DataType::kF32, max_want.data(), i, m);
            }
            RY_RETURN_IF_ERROR(CheckBytes(in, max_want, what + " max in place"));
          }
          return Status::Ok();
        });
        for (auto& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
      }
    }
  }
}

TEST(Collectives, BadArgumentsAreRejected) {
  auto g = MakeCommGroupForTest(AvailableTestTransports()[0].factory, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  float v[4] = {};
  EXPECT_EQ(g.ranks[0]->Broadcast(v, 4, DataType::kF32, 5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.ranks[0]->Alltoall(v, v, 2, DataType::kF32).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.ranks[0]->Send(v, 1, DataType::kF32, -1).code(), StatusCode::kInvalidArgument);
  CommOptions o;
  o.ring_order = {0, 0};
  auto t = net::StartTransportGroupForTest(AvailableTestTransports()[0].factory, 2);
  ASSERT_TRUE(t.status.ok());
  EXPECT_EQ(Communicator::Create(std::move(t.ranks[0]), o).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(Collectives, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);            // overflow to inf
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // tie rounds to even
  EXPECT_EQ(FloatToHalf(5.96046448e-08f), 0x0001);     // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x0001), 5.96046448e-08f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CollectivesTest,
                         ::testing::ValuesIn(AvailableTestTransports()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace railyard::comm
