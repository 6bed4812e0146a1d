#include "railyard/comm/bench.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "railyard/base/clock.h"
#include "railyard/base/units.h"

namespace railyard::comm {
namespace {

// Small integers: exact in every type, so any reduction order gives the expected bits.
double Value(int rank, size_t i) { return static_cast<double>(1 + (rank * 7 + i * 3) % 5); }

double ReduceValues(ReduceOp op, int n, size_t i) {
  double acc = Value(0, i);
  for (int r = 1; r < n; ++r) {
    double v = Value(r, i);
    acc = ReduceScalar(op, acc, v);
  }
  return acc;
}

struct Buffers {
  std::vector<char> send, recv, want;
};

bool Blocks(BenchOp op) {
  return op == BenchOp::kAllgather || op == BenchOp::kReduceScatter || op == BenchOp::kAlltoall;
}

// Per size: the element count of the measured buffer. For the block operations, nccl-tests'
// GetCollByteCount: (count / n) rounded down to a multiple of 16 bytes, times n.
uint64_t CountFor(BenchOp op, uint64_t bytes, size_t es, int n) {
  uint64_t count = bytes / es;
  if (Blocks(op)) {
    const uint64_t per_block = std::max<uint64_t>(1, 16 / es);
    count = count / static_cast<uint64_t>(n) / per_block * per_block * static_cast<uint64_t>(n);
  }
  return count;
}

// One out-of-place call. Broadcast has one buffer in Railyard: out of place, the root first
// copies its send buffer into its receive buffer.
Status RunOnce(Communicator& c, const CommBenchOptions& o, uint64_t count, Buffers& b) {
  const int n = c.size();
  CollectiveOptions co{.algorithm = o.algorithm};
  switch (o.op) {
    case BenchOp::kAllreduce:
      return c.Allreduce(b.send.data(), b.recv.data(), count, o.type, o.redop, co);
    case BenchOp::kAllgather:
      return c.Allgather(b.send.data(), b.recv.data(), count / n, o.type, co);
    case BenchOp::kReduceScatter:
      return c.ReduceScatter(b.send.data(), b.recv.data(), count / n, o.type, o.redop, co);
    case BenchOp::kBroadcast:
      if (c.rank() == 0) std::memcpy(b.recv.data(), b.send.data(), b.recv.size());
      return c.Broadcast(b.recv.data(), count, o.type, 0, co);
    case BenchOp::kAlltoall:
      return c.Alltoall(b.send.data(), b.recv.data(), count / n, o.type, co);
  }
  return Status::Ok();
}

// Fills inputs and the expected output of one iteration.
void Prepare(const CommBenchOptions& o, int rank, int n, uint64_t count, Buffers& b) {
  const size_t es = SizeOf(o.type);
  const uint64_t block = count / static_cast<uint64_t>(n);
  auto resize = [&](std::vector<char>& v, uint64_t elems) { v.assign(elems * es, 0); };
  switch (o.op) {
    case BenchOp::kAllreduce: {
      resize(b.send, count), resize(b.recv, count), resize(b.want, count);
      std::vector<char> one(es);
      for (uint64_t i = 0; i < count; ++i) {
        StoreValue(o.type, b.send.data(), i, Value(rank, i));
        StoreValue(o.type, b.want.data(), i, ReduceValues(o.redop, n, i));
      }
      if (o.redop == ReduceOp::kAvg) FinishAverage(o.type, o.redop, b.want.data(), count, n);
      break;
    }
    case BenchOp::kAllgather:
      resize(b.send, block), resize(b.recv, count), resize(b.want, count);
      for (uint64_t i = 0; i < block; ++i) StoreValue(o.type, b.send.data(), i, Value(rank, i));
      for (int r = 0; r < n; ++r) {
        for (uint64_t i = 0; i < block; ++i)
          StoreValue(o.type, b.want.data(), r * block + i, Value(r, i));
      }
      break;
    case BenchOp::kReduceScatter:
      resize(b.send, count), resize(b.recv, block), resize(b.want, block);
      for (uint64_t i = 0; i < count; ++i) StoreValue(o.type, b.send.data(), i, Value(rank, i));
      for (uint64_t i = 0; i < block; ++i) {
        StoreValue(o.type, b.want.data(), i, ReduceValues(o.redop, n, rank * block + i));
      }
      if (o.redop == ReduceOp::kAvg) FinishAverage(o.type, o.redop, b.want.data(), block, n);
      break;
    case BenchOp::kBroadcast:
      resize(b.send, rank == 0 ? count : 0), resize(b.recv, count), resize(b.want, count);
      for (uint64_t i = 0; i < count; ++i) {
        StoreValue(o.type, b.want.data(), i, Value(0, i));
        if (rank == 0) StoreValue(o.type, b.send.data(), i, Value(0, i));
      }
      break;
    case BenchOp::kAlltoall:
      resize(b.send, count), resize(b.recv, count), resize(b.want, count);
      for (int j = 0; j < n; ++j) {
        for (uint64_t i = 0; i < block; ++i) {
          StoreValue(o.type, b.send.data(), j * block + i, Value(rank * n + j, i));
          StoreValue(o.type, b.want.data(), j * block + i, Value(j * n + rank, i));
        }
      }
      break;
  }
}

uint64_t CountWrong(const std::vector<char>& got, const std::vector<char>& want, size_t es) {
  uint64_t wrong = 0;
  for (size_t off = 0; off + es <= got.size(); off += es) {
    if (std::memcmp(got.data() + off, want.data() + off, es) != 0) ++wrong;
  }
  return wrong;
}

// Every byte of element `i` of `result` becomes the inverse of the expected byte: a value
// no correct call leaves there, whatever the type.
void PoisonElement(std::vector<char>& result, const std::vector<char>& want, size_t es,
                   uint64_t i) {
  for (size_t k = i * es; k < (i + 1) * es; ++k) result[k] = static_cast<char>(~want[k]);
}

void PoisonAll(std::vector<char>& result, const std::vector<char>& want) {
  for (size_t k = 0; k < result.size(); ++k) result[k] = static_cast<char>(~want[k]);
}

// The positions one sampled timed iteration checks: the first and last element, and
// kCommBenchSamples drawn by splitmix64 from (size, iteration, rank), so they move from
// iteration to iteration and differ between ranks. No division: a multiply-shift maps the
// draw onto [0, elems).
struct Samples {
  std::array<uint64_t, kCommBenchSamples + 2> at{};
  int n = 0;
};

// `rank` -1: the same positions on every rank (the in-place check needs that).
Samples SamplePositions(uint64_t elems, uint64_t size_bytes, int iteration, int rank) {
  Samples s;
  if (elems == 0) return s;
  uint64_t state = size_bytes * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(iteration) << 20) ^
                   static_cast<uint64_t>(static_cast<int64_t>(rank));
  s.at[s.n++] = 0;
  if (elems > 1) s.at[s.n++] = elems - 1;
  for (int j = 0; j < kCommBenchSamples; ++j) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    s.at[s.n++] = static_cast<uint64_t>((static_cast<unsigned __int128>(z) * elems) >> 64);
  }
  return s;
}

uint64_t CountWrongAt(const std::vector<char>& got, const std::vector<char>& want, size_t es,
                      const Samples& s) {
  uint64_t wrong = 0;
  for (int j = 0; j < s.n; ++j) {
    if (std::memcmp(got.data() + s.at[j] * es, want.data() + s.at[j] * es, es) != 0) ++wrong;
  }
  return wrong;
}

// Per variant and rank: seconds per timed iteration and {wrong, checked, wrong > 0}.
struct Measured {
  double seconds = 0;
  int64_t tally[3] = {0, 0, 0};
  void Count(uint64_t wrong, uint64_t checked) {
    tally[0] += static_cast<int64_t>(wrong);
    tally[1] += static_cast<int64_t>(checked);
  }
};

Result<Measured> MeasureOutOfPlace(Communicator& c, const CommBenchOptions& o, uint64_t bytes,
                                   uint64_t count) {
  const int n = c.size();
  const size_t es = SizeOf(o.type);
  Buffers b;
  Prepare(o, c.rank(), n, count, b);
  const uint64_t elems = b.recv.size() / es;
  Measured m;
  // Correctness first, on known data, in full; then warm-up and timed iterations.
  PoisonAll(b.recv, b.want);
  RY_RETURN_IF_ERROR(RunOnce(c, o, count, b));
  m.Count(CountWrong(b.recv, b.want, es), elems);
  for (int i = 0; i < o.warmup; ++i) RY_RETURN_IF_ERROR(RunOnce(c, o, count, b));
  PoisonAll(b.recv, b.want);
  RY_RETURN_IF_ERROR(c.Barrier());
  if (o.on_timing_start) o.on_timing_start(count * es);
  auto start = base::Clock::now();
  for (int i = 0; i < o.iters; ++i) {
    const bool sampled = i + 1 < o.iters;  // the last one is checked in full below
    Samples at;
    if (sampled) {
      at = SamplePositions(elems, bytes, i, c.rank());
      for (int j = 0; j < at.n; ++j) PoisonElement(b.recv, b.want, es, at.at[j]);
    }
    RY_RETURN_IF_ERROR(RunOnce(c, o, count, b));
    if (o.after_timed_iteration_for_test) {
      o.after_timed_iteration_for_test(count * es, i, std::span<char>(b.recv));
    }
    if (sampled) m.Count(CountWrongAt(b.recv, b.want, es, at), at.n);
  }
  m.seconds = base::SecondsSince(start) / std::max(1, o.iters);
  m.Count(CountWrong(b.recv, b.want, es), elems);
  return m;
}

// The in-place variant's one buffer: `buf`; this rank's input `in` laid out as in `buf`; the
// result is `buf` from element `result_at` on, and should equal `want`.
struct InPlace {
  BenchOp op;
  DataType type;
  size_t es;
  int rank, n;
  uint64_t count, block;
  std::vector<char> buf, in, want;
  uint64_t result_at = 0;

  uint64_t result_elems() const { return want.size() / es; }
  char* result() { return buf.data() + result_at * es; }
  bool IsInput(uint64_t i) const {
    switch (op) {
      case BenchOp::kAllgather:
        return i / block == static_cast<uint64_t>(rank);
      case BenchOp::kBroadcast:
        return rank == 0;
      default:
        return true;
    }
  }
  // Element i of `buf` becomes this rank's input, or, where it holds none, poison.
  void Set(uint64_t i) {
    const uint64_t r = i - result_at;
    if (IsInput(i)) {
      std::memcpy(buf.data() + i * es, in.data() + i * es, es);
    } else {
      for (size_t k = 0; k < es; ++k) buf[i * es + k] = static_cast<char>(~want[r * es + k]);
    }
  }
  void SetAll() {
    for (uint64_t i = 0; i < count; ++i) Set(i);
  }
  // Result position r and, for reduce_scatter, the same offset in every block: the elements
  // whose inputs make result r.
  template <typename F>
  void ForSources(uint64_t r, F f) const {
    if (op == BenchOp::kReduceScatter) {
      for (int b = 0; b < n; ++b) f(static_cast<uint64_t>(b) * block + r);
    } else {
      f(result_at + r);
    }
  }
  // Reductions: the buffer holds zeros between samples, a fixed point of every operation.
  bool Reduces() const { return op == BenchOp::kAllreduce || op == BenchOp::kReduceScatter; }
};

Status RunInPlace(Communicator& c, const CommBenchOptions& o, InPlace& p) {
  CollectiveOptions co{.algorithm = o.algorithm};
  char* base = p.buf.data();
  switch (o.op) {
    case BenchOp::kAllreduce:
      return c.Allreduce(base, base, p.count, o.type, o.redop, co);
    case BenchOp::kAllgather:
      return c.Allgather(base + p.rank * p.block * p.es, base, p.block, o.type, co);
    case BenchOp::kReduceScatter:
      return c.ReduceScatter(base, base + p.rank * p.block * p.es, p.block, o.type, o.redop, co);
    case BenchOp::kBroadcast:
      return c.Broadcast(base, p.count, o.type, 0, co);
    case BenchOp::kAlltoall:
      break;
  }
  return Unimplemented("alltoall has no in-place form");
}

Result<Measured> MeasureInPlace(Communicator& c, const CommBenchOptions& o, uint64_t bytes,
                                uint64_t count) {
  const int n = c.size();
  Buffers b;
  Prepare(o, c.rank(), n, count, b);
  InPlace p{o.op, o.type, SizeOf(o.type), c.rank(), n, count, count / n};
  p.want = std::move(b.want);
  p.buf.assign(count * p.es, 0);
  p.in.assign(count * p.es, 0);
  switch (o.op) {
    case BenchOp::kAllgather:
      std::memcpy(p.in.data() + p.rank * p.block * p.es, b.send.data(), b.send.size());
      break;
    case BenchOp::kReduceScatter:
      p.result_at = p.rank * p.block;
      p.in = std::move(b.send);
      break;
    default:
      if (!b.send.empty()) p.in = std::move(b.send);
      break;
  }
  const uint64_t elems = p.result_elems();
  auto full_check = [&](Measured& m) -> Status {
    p.SetAll();
    RY_RETURN_IF_ERROR(RunInPlace(c, o, p));
    std::vector<char> got(p.result(), p.result() + elems * p.es);
    m.Count(CountWrong(got, p.want, p.es), elems);
    return Status::Ok();
  };
  Measured m;
  RY_RETURN_IF_ERROR(full_check(m));
  if (p.Reduces()) std::fill(p.buf.begin(), p.buf.end(), 0);
  for (int i = 0; i < o.warmup; ++i) RY_RETURN_IF_ERROR(RunInPlace(c, o, p));
  if (p.Reduces()) std::fill(p.buf.begin(), p.buf.end(), 0);
  RY_RETURN_IF_ERROR(c.Barrier());
  auto start = base::Clock::now();
  for (int i = 0; i < o.iters; ++i) {
    Samples at = SamplePositions(elems, bytes, i, /*rank=*/-1);
    for (int j = 0; j < at.n; ++j) p.ForSources(at.at[j], [&](uint64_t e) { p.Set(e); });
    RY_RETURN_IF_ERROR(RunInPlace(c, o, p));
    if (o.after_timed_iteration_for_test) {
      o.after_timed_iteration_for_test(count * p.es, i, std::span<char>(p.result(), elems * p.es));
    }
    uint64_t wrong = 0;
    for (int j = 0; j < at.n; ++j) {
      const uint64_t r = at.at[j];
      if (std::memcmp(p.result() + r * p.es, p.want.data() + r * p.es, p.es) != 0) ++wrong;
    }
    m.Count(wrong, at.n);
    if (p.Reduces()) {
      for (int j = 0; j < at.n; ++j) {
        p.ForSources(at.at[j], [&](uint64_t e) { std::memset(p.buf.data() + e * p.es, 0, p.es); });
      }
    }
  }
  m.seconds = base::SecondsSince(start) / std::max(1, o.iters);
  RY_RETURN_IF_ERROR(full_check(m));
  return m;
}

// The slowest rank's time and the sums of the tallies, as one variant's figures.
Result<CommBenchFigures> Combine(Communicator& c, Measured m, BenchOp op, uint64_t size_bytes) {
  m.tally[2] = m.tally[0] > 0 ? 1 : 0;
  RY_RETURN_IF_ERROR(c.Allreduce(&m.seconds, &m.seconds, 1, DataType::kF64, ReduceOp::kMax));
  RY_RETURN_IF_ERROR(c.Allreduce(m.tally, m.tally, 3, DataType::kI64, ReduceOp::kSum));
  CommBenchFigures f;
  f.time_us = m.seconds * 1e6;
  f.algbw_gbps = m.seconds > 0 ? static_cast<double>(size_bytes) / m.seconds / 1e9 : 0;
  f.busbw_gbps = f.algbw_gbps * BusBandwidthFactor(op, c.size());
  f.wrong = static_cast<uint64_t>(m.tally[0]);
  f.checked = static_cast<uint64_t>(m.tally[1]);
  f.ranks_wrong = static_cast<int>(m.tally[2]);
  return f;
}

// nccl-tests' getFloatStr (src/util.cu): the value in `width` characters, with 2, 1 or 0
// decimals, else in exponent form cut to `width`.
std::string FloatStr(double value, int width) {
  char str[32];
  for (const char* f : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (std::snprintf(str, width + 1, f, width, value) <= width) return str;
  }
  std::snprintf(str, width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return str;
}

}  // namespace

std::string_view NcclTestsTypeName(DataType type) {
  switch (type) {
    case DataType::kF32:
      return "float";
    case DataType::kF64:
      return "double";
    case DataType::kF16:
      return "half";
    case DataType::kBF16:
      return "bfloat16";
    case DataType::kI32:
      return "int32";
    case DataType::kI64:
      return "int64";
    case DataType::kU8:
      return "uint8";
  }
  return "?";
}

std::string_view BenchOpName(BenchOp op) {
  switch (op) {
    case BenchOp::kAllreduce:
      return "allreduce";
    case BenchOp::kAllgather:
      return "allgather";
    case BenchOp::kReduceScatter:
      return "reduce_scatter";
    case BenchOp::kBroadcast:
      return "broadcast";
    case BenchOp::kAlltoall:
      return "alltoall";
  }
  return "?";
}

Result<BenchOp> ParseBenchOp(std::string_view text) {
  for (BenchOp op : {BenchOp::kAllreduce, BenchOp::kAllgather, BenchOp::kReduceScatter,
                     BenchOp::kBroadcast, BenchOp::kAlltoall}) {
    if (text == BenchOpName(op)) return op;
  }
  return InvalidArgument(
      "unknown operation '{}'; expected allreduce, allgather, "
      "reduce_scatter, broadcast or alltoall",
      text);
}

double BusBandwidthFactor(BenchOp op, int n) {
  switch (op) {
    case BenchOp::kAllreduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::kBroadcast:
      return 1.0;
    default:
      return static_cast<double>(n - 1) / n;
  }
}

Result<std::vector<uint64_t>> ParseSizes(std::string_view text) {
  constexpr uint64_t kMaxBytes = uint64_t{16} << 30;
  auto malformed = [&] {
    return InvalidArgument(
        "sizes '{}' are malformed; expected MIN:MAX such as 4KiB:64MiB, a "
        "comma list such as 4KiB,1MiB,64MiB, or one size such as 1MiB",
        text);
  };
  std::vector<uint64_t> sizes;
  if (text.find(',') != std::string_view::npos) {
    if (text.find(':') != std::string_view::npos) return malformed();
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = std::min(text.find(',', start), text.size());
      std::string_view item = text.substr(start, comma - start);
      auto b = base::ParseBytes(item);
      if (item.empty() || !b.ok()) return malformed();
      if (*b == 0 || *b > kMaxBytes) {
        return InvalidArgument("size list '{}': {} is outside 1B to 16GiB per rank", text, item);
      }
      sizes.push_back(*b);
      start = comma + 1;
    }
    return sizes;
  }
  auto colon = text.find(':');
  std::string_view lo = text.substr(0, colon);
  std::string_view hi = colon == std::string_view::npos ? lo : text.substr(colon + 1);
  auto a = base::ParseBytes(lo);
  auto b = base::ParseBytes(hi);
  if (!a.ok() || !b.ok() || lo.empty() || hi.empty()) return malformed();
  if (*a == 0 || *b < *a) {
    return InvalidArgument("size range '{}': need 0 < MIN <= MAX", text);
  }
  if (*b > kMaxBytes) {
    return InvalidArgument("size range '{}': MAX above 16GiB per rank is not supported", text);
  }
  // Doubling stays below 2^35 here, far from overflow.
  for (uint64_t s = *a; s <= *b; s *= 2) sizes.push_back(s);
  return sizes;
}

Status CheckCommBenchSizes(const CommBenchOptions& o, int ranks) {
  const size_t es = SizeOf(o.type);
  const uint64_t n = static_cast<uint64_t>(std::max(ranks, 1));
  if (o.sizes.empty()) return InvalidArgument("no sizes to measure");
  for (uint64_t bytes : o.sizes) {
    if (bytes < es) {
      return InvalidArgument("a size of {} bytes is smaller than one {} element ({} bytes)", bytes,
                             DataTypeName(o.type), es);
    }
    if (Blocks(o.op) && CountFor(o.op, bytes, es, ranks) == 0) {
      const uint64_t need = std::max<uint64_t>(16, es) * n;
      return InvalidArgument(
          "a size of {} bytes is too small: {} over {} ranks needs at least 16 bytes and one "
          "{} element per rank ({} bytes), as nccl-tests rounds each rank's block down to "
          "16 bytes",
          bytes, BenchOpName(o.op), ranks, DataTypeName(o.type), need);
    }
  }
  return Status::Ok();
}

Result<std::vector<CommBenchRow>> RunCommBench(Communicator& c, const CommBenchOptions& o) {
  const int n = c.size();
  const size_t es = SizeOf(o.type);
  RY_RETURN_IF_ERROR(CheckCommBenchSizes(o, n));
  std::vector<CommBenchRow> rows;
  for (uint64_t bytes : o.sizes) {
    const uint64_t count = CountFor(o.op, bytes, es, n);
    CommBenchRow row;
    row.size_bytes = count * es;
    row.count = count;
    row.nccl_count = Blocks(o.op) ? count / n : count;
    row.type = std::string(DataTypeName(o.type));
    if (o.op == BenchOp::kAllreduce || o.op == BenchOp::kReduceScatter) {
      row.redop = std::string(ReduceOpName(o.redop));
    }
    row.root = o.op == BenchOp::kBroadcast ? 0 : -1;
    RY_ASSIGN_OR_RETURN(Measured out, MeasureOutOfPlace(c, o, bytes, count));
    RY_ASSIGN_OR_RETURN(row.out_of_place, Combine(c, out, o.op, row.size_bytes));
    if (o.op != BenchOp::kAlltoall) {
      RY_ASSIGN_OR_RETURN(Measured in, MeasureInPlace(c, o, bytes, count));
      RY_ASSIGN_OR_RETURN(row.in_place, Combine(c, in, o.op, row.size_bytes));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Status CheckCommBenchRows(const std::vector<CommBenchRow>& rows, BenchOp op) {
  std::string bad;
  int count = 0;
  for (const auto& r : rows) {
    std::string variants;
    auto add = [&](std::string_view name, const CommBenchFigures& f) {
      if (f.wrong == 0) return;
      variants += fmt::format("{}{}: {} of {} checked elements wrong", variants.empty() ? "" : ", ",
                              name, f.wrong, f.checked);
    };
    add("out-of-place", r.out_of_place);
    if (r.in_place) add("in-place", *r.in_place);
    if (variants.empty()) continue;
    ++count;
    bad += fmt::format("{}{} {} B ({}{}{}) {}", bad.empty() ? "" : "; ", BenchOpName(op),
                       r.size_bytes, r.type, r.redop.empty() ? "" : " ", r.redop, variants);
  }
  if (count == 0) return Status::Ok();
  return DataLoss("wrong values in {} of {} rows: {}", count, rows.size(), bad);
}

std::string FormatCommBenchTable(const std::vector<CommBenchRow>& rows, std::string_view program) {
  // nccl-tests' own format strings (src/util.cu), so that every column lands where its
  // parsers expect it; the timestamp column is off, which leaves a space at the end of the
  // header lines.
  char line[512];
  std::string out = "#\n";
  std::snprintf(line, sizeof line,
                "# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
                "in-place          \n",
                "", "", "", "", "");
  out += line;
  std::snprintf(line, sizeof line,
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong", 0, "");
  out += line;
  std::snprintf(line, sizeof line,
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "", 0, "");
  out += line;
  int errors = 0, measured = 0;
  uint64_t wrong[2] = {0, 0}, checked[2] = {0, 0};
  double busbw = 0;
  for (const auto& r : rows) {
    char root[16];
    std::snprintf(root, sizeof root, "%6i", r.root);
    auto parsed = ParseDataType(r.type);
    std::string type(parsed.ok() ? NcclTestsTypeName(*parsed) : r.type);
    std::snprintf(line, sizeof line, "%12li  %12li  %8s  %6s  %6s", static_cast<long>(r.size_bytes),
                  static_cast<long>(r.nccl_count), type.c_str(),
                  r.redop.empty() ? "none" : r.redop.c_str(), root);
    out += line;
    int v = 0;
    for (const std::optional<CommBenchFigures>& f : {std::optional(r.out_of_place), r.in_place}) {
      if (!f) {
        std::snprintf(line, sizeof line, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
      } else {
        std::snprintf(line, sizeof line, "  %7s  %6s  %6s  %6g", FloatStr(f->time_us, 7).c_str(),
                      FloatStr(f->algbw_gbps, 6).c_str(), FloatStr(f->busbw_gbps, 6).c_str(),
                      static_cast<double>(f->wrong));
        errors += f->ranks_wrong;
        busbw += f->busbw_gbps;
        ++measured;
        wrong[v] += f->wrong;
        checked[v] += f->checked;
      }
      out += line;
      ++v;
    }
    out += "\n";
  }
  std::snprintf(line, sizeof line, "# %-20s : %d %s\n", "Out of bounds values", errors,
                errors ? "FAILED" : "OK");
  out += line;
  std::snprintf(line, sizeof line, "# %-20s : %g %s\n", "Avg bus bandwidth",
                measured > 0 ? busbw / measured : 0.0, "");
  out += line;
  const bool any_in_place =
      std::any_of(rows.begin(), rows.end(), [](const CommBenchRow& r) { return r.in_place; });
  out += fmt::format(
      "# railyard checks      : out-of-place {} of {} values wrong, in-place {} (every timed "
      "iteration sampled, untimed ones in full; docs/comm.md)\n",
      wrong[0], checked[0],
      any_in_place ? fmt::format("{} of {}", wrong[1], checked[1]) : std::string("not run"));
  out += "#\n";
  out += fmt::format("# Collective test concluded: {}\n", program);
  return out;
}

std::string CommBenchJson(const std::vector<CommBenchRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows) {
    const CommBenchFigures& f = r.out_of_place;
    nlohmann::json in = nullptr;
    if (r.in_place) {
      in = {{"time_us", r.in_place->time_us},
            {"algbw_gbps", r.in_place->algbw_gbps},
            {"busbw_gbps", r.in_place->busbw_gbps},
            {"wrong", r.in_place->wrong},
            {"checked", r.in_place->checked}};
    }
    j.push_back({{"size_bytes", r.size_bytes},
                 {"count", r.count},
                 {"type", r.type},
                 {"time_us", f.time_us},
                 {"algbw_gbps", f.algbw_gbps},
                 {"busbw_gbps", f.busbw_gbps},
                 {"wrong", f.wrong},
                 {"checked", f.checked},
                 {"in_place", in}});
  }
  return j.dump(2) + "\n";
}

}  // namespace railyard::comm
