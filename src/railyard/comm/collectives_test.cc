// Every collective x type x size x world size 1..8, against references computed here, for
// every transport available in this build (threads of one process on an in-memory store).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

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
    case ReduceOp::kProd: return (rank < 2 && i % 3 == 0) ? 2 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return static_cast<double>((rank * 13 + i * 7) % 11);
    default: return static_cast<double>(1 + (rank * 7 + i * 3) % 5);
  }
}

// The reduction of element i over n ranks, stored in type t at index `at` (default i) of `out`.
void Expected(DataType t, ReduceOp op, int n, size_t i, void* out, size_t at = SIZE_MAX) {
  if (at == SIZE_MAX) at = i;
  double acc = Input(op, 0, i);
  for (int r = 1; r < n; ++r) {
    double v = Input(op, r, i);
    switch (op) {
      case ReduceOp::kSum: case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  if (op != ReduceOp::kAvg || n == 1) return StoreValue(t, out, at, acc);
  switch (t) {
    case DataType::kF32: return StoreValue(t, out, at, static_cast<float>(acc) / static_cast<float>(n));
    case DataType::kF64: return StoreValue(t, out, at, acc / n);
    case DataType::kF16:
      static_cast<uint16_t*>(out)[at] = FloatToHalf(static_cast<float>(acc) / static_cast<float>(n));
      return;
    case DataType::kBF16:
      static_cast<uint16_t*>(out)[at] = FloatToBf16(static_cast<float>(acc) / static_cast<float>(n));
      return;
    default: return StoreValue(t, out, at, std::trunc(acc / n));
  }
}

std::vector<char> Inputs(DataType t, ReduceOp op, int rank, size_t count, size_t offset = 0) {
  std::vector<char> v(count * SizeOf(t));
  for (size_t i = 0; i < count; ++i) StoreValue(t, v.data(), i, Input(op, rank, i + offset));
  return v;
}

std::vector<size_t> Counts(int n, bool large) {
  std::vector<size_t> c = {0, 1, 7, static_cast<size_t>(n > 1 ? n - 1 : 0),
                           static_cast<size_t>(n + 1), 1000};
  if (large) c.push_back((size_t{1} << 20) + 3);
  return c;
}

Status CheckBytes(const std::vector<char>& got, const std::vector<char>& want,
                  std::string_view what) {
  if (got.size() != want.size()) return Internal("{}: size {} != {}", what, got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return Internal("{}: first wrong byte at {}", what, i);
  }
  return Status::Ok();
}

class CollectivesTest : public ::testing::TestWithParam<TestTransport> {};

// The 1 Mi + 3 element size runs for a subset of world sizes to keep the suite fast on two
// cores; every other size runs for every world size.
bool LargeFor(int n) { return n == 2 || n == 3 || n == 8; }

TEST_P(CollectivesTest, AllreduceEveryTypeOpAndSize) {
  for (int n = 1; n <= 8; ++n) {
    auto g = MakeCommGroupForTest(GetParam().factory, n);
    ASSERT_TRUE(g.status.ok()) << g.status.ToString();
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      for (DataType t : kTypes) {
        for (ReduceOp op : kOps) {
          for (size_t count : Counts(n, LargeFor(n) && (op == ReduceOp::kSum || t == DataType::kF32))) {
            for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                Algorithm::kWindow}) {
              if (a != Algorithm::kAuto && count > 100000) continue;
              auto in = Inputs(t, op, c.rank(), count);
              std::vector<char> out(in.size()), want(in.size());
              for (size_t i = 0; i < count; ++i) Expected(t, op, n, i, want.data());
              RY_RETURN_IF_ERROR(c.Allreduce(in.data(), out.data(), count, t, op, {.algorithm = a}));
              RY_RETURN_IF_ERROR(CheckBytes(out, want, fmt::format("n={} {} {} count {} {}", n,
                  DataTypeName(t), ReduceOpName(op), count, AlgorithmName(a))));
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
        for (size_t count : Counts(n, LargeFor(n) && t == DataType::kF32)) {
          std::string what = fmt::format("n={} {} count {}", n, DataTypeName(t), count);
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
            // reduce_scatter: block b of the input holds elements b*count...
            auto in = Inputs(t, op, r, count * n);
            std::vector<char> out(count * es), want(count * es);
            for (size_t i = 0; i < count; ++i) Expected(t, op, n, r * count + i, want.data(), i);
            RY_RETURN_IF_ERROR(c.ReduceScatter(in.data(), out.data(), count, t, op));
            RY_RETURN_IF_ERROR(CheckBytes(out, want, "reduce_scatter " + what));
            // reduce to the last rank.
            auto rin = Inputs(t, op, r, count);
            std::vector<char> rout(count * es), rwant(count * es);
            for (size_t i = 0; i < count; ++i) Expected(t, op, n, i, rwant.data());
            RY_RETURN_IF_ERROR(c.Reduce(rin.data(), rout.data(), count, t, op, n - 1));
            if (r == n - 1) RY_RETURN_IF_ERROR(CheckBytes(rout, rwant, "reduce " + what));
          }
          // allgather: rank q contributes Inputs(q).
          auto mine = Inputs(t, ReduceOp::kSum, r, count);
          std::vector<char> all(count * n * es), want(count * n * es);
          for (int q = 0; q < n; ++q) {
            auto theirs = Inputs(t, ReduceOp::kSum, q, count);
            if (!theirs.empty()) std::memcpy(want.data() + q * count * es, theirs.data(), theirs.size());
          }
          RY_RETURN_IF_ERROR(c.Allgather(mine.data(), all.data(), count, t));
          RY_RETURN_IF_ERROR(CheckBytes(all, want, "allgather " + what));
          // broadcast from each root, both algorithms.
          for (int root = 0; root < n; root += (n > 3 ? 3 : 1)) {
            for (Algorithm a : {Algorithm::kTree, Algorithm::kRing}) {
              auto buf = r == root ? Inputs(t, ReduceOp::kSum, root, count)
                                   : std::vector<char>(count * es, 0x5a);
              RY_RETURN_IF_ERROR(c.Broadcast(buf.data(), count, t, root, {.algorithm = a}));
              RY_RETURN_IF_ERROR(CheckBytes(buf, Inputs(t, ReduceOp::kSum, root, count),
                                            fmt::format("broadcast root {} {}", root, what)));
            }
          }
          // alltoall: block j from rank r carries Inputs(r, offset j*count).
          if (count <= 100000) {
            std::vector<char> send(count * n * es), recv(count * n * es), awant(count * n * es);
            for (int j = 0; j < n; ++j) {
              auto blk = Inputs(t, ReduceOp::kMin, r * 100 + j, count);
              if (!blk.empty()) std::memcpy(send.data() + j * count * es, blk.data(), blk.size());
              auto from = Inputs(t, ReduceOp::kMin, j * 100 + r, count);
              if (!from.empty()) std::memcpy(awant.data() + j * count * es, from.data(), from.size());
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

TEST_P(CollectivesTest, SendRecvAndAsyncKeepOrder) {
  auto g = MakeCommGroupForTest(GetParam().factory, 3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
    const int r = c.rank(), n = c.size();
    int32_t token = r * 10;
    int32_t got = -1;
    if (r == 0) {
      RY_RETURN_IF_ERROR(c.Send(&token, 1, DataType::kI32, 1));
    } else if (r == 1) {
      RY_RETURN_IF_ERROR(c.Recv(&got, 1, DataType::kI32, 0));
      if (got != 0) return Internal("recv got {}", got);
    }
    // Three async allreduces and a blocking one, issued back to back.
    std::vector<std::vector<float>> bufs(3, std::vector<float>(50000, static_cast<float>(r + 1)));
    std::vector<std::shared_ptr<Work>> works;
    for (auto& b : bufs) {
      works.push_back(c.AllreduceAsync(b.data(), b.data(), b.size(), DataType::kF32, ReduceOp::kSum));
    }
    float x = 1;
    RY_RETURN_IF_ERROR(c.Allreduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum));
    if (x != n) return Internal("blocking allreduce after async: {}", x);
    for (auto& w : works) RY_RETURN_IF_ERROR(w->Wait());
    for (auto& b : bufs) {
      if (b[0] != n * (n + 1) / 2 || b.back() != b[0]) return Internal("async result {}", b[0]);
    }
    return Status::Ok();
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
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);           // overflow to inf
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
