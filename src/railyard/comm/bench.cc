#include "railyard/comm/bench.h"

#include <algorithm>
#include <array>
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
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  return acc;
}

struct Buffers {
  std::vector<char> send, recv, want;
};

// Per size: the element count of the measured buffer and the buffers of one iteration.
uint64_t CountFor(BenchOp op, uint64_t bytes, size_t es, int n) {
  uint64_t count = bytes / es;
  if (op == BenchOp::kAllgather || op == BenchOp::kReduceScatter || op == BenchOp::kAlltoall) {
    count -= count % static_cast<uint64_t>(n);
  }
  return count;
}

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
      resize(b.recv, count), resize(b.want, count);
      for (uint64_t i = 0; i < count; ++i) {
        StoreValue(o.type, b.want.data(), i, Value(0, i));
        if (rank == 0) StoreValue(o.type, b.recv.data(), i, Value(0, i));
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

Samples SamplePositions(uint64_t elems, uint64_t size_bytes, int iteration, int rank) {
  Samples s;
  if (elems == 0) return s;
  uint64_t state = size_bytes * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(iteration) << 20) ^
                   static_cast<uint64_t>(rank);
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

}  // namespace

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
  const bool blocks =
      o.op == BenchOp::kAllgather || o.op == BenchOp::kReduceScatter || o.op == BenchOp::kAlltoall;
  const uint64_t need = blocks ? static_cast<uint64_t>(std::max(ranks, 1)) : 1;
  if (o.sizes.empty()) return InvalidArgument("no sizes to measure");
  for (uint64_t bytes : o.sizes) {
    if (bytes < es) {
      return InvalidArgument("a size of {} bytes is smaller than one {} element ({} bytes)", bytes,
                             DataTypeName(o.type), es);
    }
    if (bytes / es < need) {
      return InvalidArgument(
          "a size of {} bytes is too small: {} over {} ranks needs at least "
          "one {} element per rank ({} bytes)",
          bytes, BenchOpName(o.op), ranks, DataTypeName(o.type), need * es);
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
    uint64_t count = CountFor(o.op, bytes, es, n);
    Buffers b;
    Prepare(o, c.rank(), n, count, b);
    const uint64_t elems = b.recv.size() / es;
    // The broadcast root's buffer is its input: never poisoned (its check is trivial).
    const bool poison = !(o.op == BenchOp::kBroadcast && c.rank() == 0);
    // Correctness first, on known data, in full; then warm-up and timed iterations.
    if (poison) PoisonAll(b.recv, b.want);
    RY_RETURN_IF_ERROR(RunOnce(c, o, count, b));
    // {wrong, checked}, summed over ranks after the timed loop.
    int64_t tally[2] = {static_cast<int64_t>(CountWrong(b.recv, b.want, es)),
                        static_cast<int64_t>(elems)};
    for (int i = 0; i < o.warmup; ++i) RY_RETURN_IF_ERROR(RunOnce(c, o, count, b));
    if (poison) PoisonAll(b.recv, b.want);
    RY_RETURN_IF_ERROR(c.Barrier());
    if (o.on_timing_start) o.on_timing_start(count * es);
    auto start = base::Clock::now();
    for (int i = 0; i < o.iters; ++i) {
      const bool sampled = i + 1 < o.iters;  // the last one is checked in full below
      Samples at;
      if (sampled) {
        at = SamplePositions(elems, bytes, i, c.rank());
        if (poison) {
          for (int j = 0; j < at.n; ++j) PoisonElement(b.recv, b.want, es, at.at[j]);
        }
      }
      RY_RETURN_IF_ERROR(RunOnce(c, o, count, b));
      if (o.after_timed_iteration_for_test) {
        o.after_timed_iteration_for_test(count * es, i, std::span<char>(b.recv));
      }
      if (sampled) {
        tally[0] += static_cast<int64_t>(CountWrongAt(b.recv, b.want, es, at));
        tally[1] += at.n;
      }
    }
    double seconds = base::SecondsSince(start) / std::max(1, o.iters);
    tally[0] += static_cast<int64_t>(CountWrong(b.recv, b.want, es));
    tally[1] += static_cast<int64_t>(elems);
    RY_RETURN_IF_ERROR(c.Allreduce(&seconds, &seconds, 1, DataType::kF64, ReduceOp::kMax));
    RY_RETURN_IF_ERROR(c.Allreduce(tally, tally, 2, DataType::kI64, ReduceOp::kSum));
    CommBenchRow row;
    row.size_bytes = count * es;
    row.count = count;
    row.type = std::string(DataTypeName(o.type));
    if (o.op == BenchOp::kAllreduce || o.op == BenchOp::kReduceScatter) {
      row.redop = std::string(ReduceOpName(o.redop));
    }
    row.time_us = seconds * 1e6;
    row.algbw_gbps = seconds > 0 ? static_cast<double>(row.size_bytes) / seconds / 1e9 : 0;
    row.busbw_gbps = row.algbw_gbps * BusBandwidthFactor(o.op, n);
    row.wrong = static_cast<uint64_t>(tally[0]);
    row.checked = static_cast<uint64_t>(tally[1]);
    rows.push_back(row);
  }
  return rows;
}

Status CheckCommBenchRows(const std::vector<CommBenchRow>& rows, BenchOp op) {
  std::string bad;
  int count = 0;
  for (const auto& r : rows) {
    if (r.wrong == 0) continue;
    ++count;
    bad += fmt::format("{}{} {} B ({}{}{}): {} of {} checked elements wrong",
                       bad.empty() ? "" : "; ", BenchOpName(op), r.size_bytes, r.type,
                       r.redop.empty() ? "" : " ", r.redop, r.wrong, r.checked);
  }
  if (count == 0) return Status::Ok();
  return DataLoss("wrong values in {} of {} rows: {}", count, rows.size(), bad);
}

std::string FormatCommBenchTable(const std::vector<CommBenchRow>& rows, const std::string& title) {
  std::string out = fmt::format("# {}\n", title);
  out += fmt::format("#{:>12} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8} {:>7}\n", "size", "count",
                     "type", "redop", "time", "algbw", "busbw", "#wrong");
  out += fmt::format("#{:>12} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8} {:>7}\n", "(B)", "(elements)",
                     "", "", "(us)", "(GB/s)", "(GB/s)", "");
  uint64_t wrong = 0, checked = 0;
  double busbw = 0;
  for (const auto& r : rows) {
    out += fmt::format(" {:>12} {:>12} {:>6} {:>6} {:>10.2f} {:>8.3f} {:>8.3f} {:>7}\n",
                       r.size_bytes, r.count, r.type, r.redop.empty() ? "none" : r.redop, r.time_us,
                       r.algbw_gbps, r.busbw_gbps, r.wrong);
    wrong += r.wrong;
    checked += r.checked;
    busbw += r.busbw_gbps;
  }
  out += fmt::format("# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  out += fmt::format("# Checked values       : {} (every timed iteration, sampled)\n", checked);
  out += fmt::format("# Avg bus bandwidth    : {:.3f}\n", rows.empty() ? 0.0 : busbw / rows.size());
  return out;
}

std::string CommBenchJson(const std::vector<CommBenchRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows) {
    j.push_back({{"size_bytes", r.size_bytes},
                 {"count", r.count},
                 {"type", r.type},
                 {"time_us", r.time_us},
                 {"algbw_gbps", r.algbw_gbps},
                 {"busbw_gbps", r.busbw_gbps},
                 {"wrong", r.wrong},
                 {"checked", r.checked}});
  }
  return j.dump(2) + "\n";
}

}  // namespace railyard::comm
