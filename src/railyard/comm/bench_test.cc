// comm/bench: size lists, their checks, nccl-tests' busbw factors and block rounding, rows
// from a real run of rank threads over tcp, the checking of timed iterations in both variants
// (a corrupted result is caught and named), and the table against nccl-tests output samples.
#include "railyard/comm/bench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

TEST(CheckCommBenchSizes, EverySizeMustHoldAnElementAndBlocksSixteenBytes) {
  CommBenchOptions o;
  o.type = DataType::kF64;
  o.sizes = {8, 3};
  Status s = CheckCommBenchSizes(o, 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("3 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("f64"), std::string::npos) << s.message();
  // Allreduce needs one element; allgather 16 bytes per rank (nccl-tests' block rounding).
  o.sizes = {16};
  EXPECT_TRUE(CheckCommBenchSizes(o, 4).ok());
  o.op = BenchOp::kAllgather;
  EXPECT_EQ(CheckCommBenchSizes(o, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckCommBenchSizes(o, 2).code(), StatusCode::kInvalidArgument);
  o.sizes = {32};
  EXPECT_TRUE(CheckCommBenchSizes(o, 2).ok());
  s = CheckCommBenchSizes(o, 3);
  EXPECT_NE(s.message().find("per rank (48 bytes)"), std::string::npos) << s.message();
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

// nccl-tests' test_typenames (src/common.cu) for the types Railyard has.
TEST(NcclTestsTypeName, AsNcclTestsPrintsThem) {
  EXPECT_EQ(NcclTestsTypeName(DataType::kF32), "float");
  EXPECT_EQ(NcclTestsTypeName(DataType::kF64), "double");
  EXPECT_EQ(NcclTestsTypeName(DataType::kF16), "half");
  EXPECT_EQ(NcclTestsTypeName(DataType::kBF16), "bfloat16");
  EXPECT_EQ(NcclTestsTypeName(DataType::kI32), "int32");
  EXPECT_EQ(NcclTestsTypeName(DataType::kI64), "int64");
  EXPECT_EQ(NcclTestsTypeName(DataType::kU8), "uint8");
}

void ExpectFiguresAgree(const CommBenchFigures& a, const CommBenchFigures& b, BenchOp op) {
  EXPECT_EQ(a.time_us, b.time_us) << BenchOpName(op);
  EXPECT_EQ(a.wrong, b.wrong) << BenchOpName(op);
  EXPECT_EQ(a.checked, b.checked) << BenchOpName(op);
}

// Three rank threads over tcp: one row per size, in the order given, sized and counted as
// nccl-tests does, with the same figures on every rank, no wrong elements in either variant,
// and busbw = algbw x the operation's factor.
TEST(RunCommBench, RowsFollowTheSizesOnEveryRank) {
  auto g = MakeCommGroupForTest(AvailableTestTransports()[0].factory, 3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  for (BenchOp op : {BenchOp::kAllreduce, BenchOp::kAllgather, BenchOp::kBroadcast,
                     BenchOp::kReduceScatter, BenchOp::kAlltoall}) {
    CommBenchOptions o;
    o.op = op;
    o.sizes = {96, 4096, 1000};
    o.iters = 2;
    o.warmup = 1;
    std::vector<std::vector<CommBenchRow>> rows(3);
    auto st = RunCommRanksForTest(g, [&](Communicator& c) -> Status {
      RY_ASSIGN_OR_RETURN(rows[c.rank()], RunCommBench(c, o));
      return Status::Ok();
    });
    for (auto& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(rows[0].size(), 3u) << BenchOpName(op);
    const bool blocks =
        op == BenchOp::kAllgather || op == BenchOp::kReduceScatter || op == BenchOp::kAlltoall;
    for (size_t i = 0; i < 3; ++i) {
      const CommBenchRow& row = rows[0][i];
      // nccl-tests' GetCollByteCount: count = size / 4; for the block operations a block of
      // (count / 3) & ~3 floats per rank (16 bytes), the size that of all three blocks.
      const uint64_t count = o.sizes[i] / 4;
      const uint64_t block = (count / 3) & ~uint64_t{3};
      EXPECT_EQ(row.size_bytes, blocks ? block * 3 * 4 : count * 4) << BenchOpName(op);
      EXPECT_EQ(row.nccl_count, blocks ? block : count) << BenchOpName(op);
      EXPECT_EQ(row.count * 4, row.size_bytes) << BenchOpName(op);
      EXPECT_EQ(row.root, op == BenchOp::kBroadcast ? 0 : -1) << BenchOpName(op);
      EXPECT_EQ(row.in_place.has_value(), op != BenchOp::kAlltoall) << BenchOpName(op);
      std::vector<CommBenchFigures> variants = {row.out_of_place};
      if (row.in_place) variants.push_back(*row.in_place);
      for (const CommBenchFigures& f : variants) {
        EXPECT_EQ(f.wrong, 0u) << BenchOpName(op);
        EXPECT_EQ(f.ranks_wrong, 0) << BenchOpName(op);
        EXPECT_GT(f.checked, 0u) << BenchOpName(op);
        EXPECT_NEAR(f.busbw_gbps, f.algbw_gbps * BusBandwidthFactor(op, 3),
                    1e-12 + f.busbw_gbps * 1e-9);
      }
      for (int r = 1; r < 3; ++r) {
        ExpectFiguresAgree(rows[r][i].out_of_place, row.out_of_place, op);
        ASSERT_EQ(rows[r][i].in_place.has_value(), row.in_place.has_value());
        if (row.in_place) ExpectFiguresAgree(*rows[r][i].in_place, *row.in_place, op);
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
      EXPECT_EQ(rows[r][i].out_of_place.wrong, rows[0][i].out_of_place.wrong)
          << "rank " << r << " row " << i;
    }
  }
  return rows[0];
}

// Every rank checks the untimed iteration and the last timed one in full, and every other
// timed iteration at the first, the last and kCommBenchSamples drawn elements; in place,
// untimed iterations before and after the loop in full and every timed one sampled.
TEST(RunCommBench, EveryTimedIterationIsChecked) {
  CommBenchOptions o;
  o.sizes = {4096, 64};  // 1024 and 16 f32 elements
  o.iters = 5;
  o.warmup = 1;
  auto rows = RunThreeRanks(o);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.out_of_place.wrong, 0u) << row.size_bytes;
    EXPECT_EQ(row.out_of_place.checked,
              3 * (2 * row.count + (o.iters - 1) * (kCommBenchSamples + 2)))
        << row.size_bytes;
    ASSERT_TRUE(row.in_place.has_value());
    EXPECT_EQ(row.in_place->wrong, 0u) << row.size_bytes;
    EXPECT_EQ(row.in_place->checked, 3 * (2 * row.count + o.iters * (kCommBenchSamples + 2)))
        << row.size_bytes;
  }
  EXPECT_TRUE(CheckCommBenchRows(rows, o.op).ok());
}

// One rank's result of one timed iteration is corrupted (every byte inverted), in both
// variants: out of place, neither the untimed check nor the final one sees an iteration in
// the middle, the sampled check does, and the last iteration is checked in full; in place,
// the sampled check sees either. Only that row counts wrong values, and CheckCommBenchRows
// names the row and the variants.
TEST(RunCommBench, CorruptedTimedIterationIsCaughtAndNamed) {
  for (BenchOp op : {BenchOp::kAllreduce, BenchOp::kAllgather, BenchOp::kBroadcast,
                     BenchOp::kReduceScatter, BenchOp::kAlltoall}) {
    for (int bad_iteration : {2, 4}) {  // sampled, and the last (out of place: in full)
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
      for (size_t i : {0, 2}) {
        EXPECT_EQ(rows[i].out_of_place.wrong, 0u) << BenchOpName(op);
        if (rows[i].in_place) EXPECT_EQ(rows[i].in_place->wrong, 0u) << BenchOpName(op);
      }
      // The sampled check sees all of its positions wrong; the full one every element.
      const uint64_t elems = op == BenchOp::kReduceScatter ? rows[1].count / 3 : rows[1].count;
      EXPECT_EQ(rows[1].out_of_place.wrong, bad_iteration == 4 ? elems : kCommBenchSamples + 2)
          << BenchOpName(op) << " iteration " << bad_iteration;
      EXPECT_EQ(rows[1].out_of_place.ranks_wrong, 1) << BenchOpName(op);
      if (op != BenchOp::kAlltoall) {
        ASSERT_TRUE(rows[1].in_place.has_value());
        EXPECT_EQ(rows[1].in_place->wrong, kCommBenchSamples + 2)
            << BenchOpName(op) << " iteration " << bad_iteration;
        EXPECT_EQ(rows[1].in_place->ranks_wrong, 1) << BenchOpName(op);
      }
      Status s = CheckCommBenchRows(rows, op);
      EXPECT_EQ(s.code(), StatusCode::kDataLoss) << BenchOpName(op);
      EXPECT_NE(s.message().find(fmt::format("{} 12288 B", BenchOpName(op))), std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("out-of-place: "), std::string::npos) << s.message();
      EXPECT_EQ(s.message().find("in-place: 18 of") != std::string::npos, op != BenchOp::kAlltoall)
          << s.message();
      EXPECT_EQ(s.message().find("1536 B"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("1 of 3 rows"), std::string::npos) << s.message();
    }
  }
}

// --- The table against nccl-tests' own output. ---

const std::filesystem::path kTestdata = std::filesystem::path(__FILE__).parent_path() / "testdata";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string w; in >> w;) f.push_back(w);
  return f;
}

// What the scripts people run over nccl-tests output do, from nccl-tests' column order
// (src/util.cu: size count type redop root, then time algbw busbw #wrong out of place and in
// place): `awk '$1 ~ /^[0-9]+$/'` picks the data lines, then $1.. $13 by position.
struct ScriptRow {
  std::string size, count, type, redop, root;
  std::string oop_time, oop_algbw, oop_busbw, oop_wrong, ip_time, ip_algbw, ip_busbw, ip_wrong;
  size_t fields = 0;
};

std::vector<ScriptRow> ParseLikeAScript(const std::string& text) {
  std::vector<ScriptRow> rows;
  for (const std::string& line : Lines(text)) {
    std::vector<std::string> f = Fields(line);
    if (f.empty() || f[0].find_first_not_of("0123456789") != std::string::npos) continue;
    f.resize(std::max<size_t>(f.size(), 13));
    rows.push_back({f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12],
                    Fields(line).size()});
  }
  return rows;
}

// Where each whitespace-separated field of `line` ends: nccl-tests right-aligns every column,
// so a parser cutting by character positions relies on these.
std::vector<size_t> FieldEnds(const std::string& line) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != ' ' && (i + 1 == line.size() || line[i + 1] == ' ')) ends.push_back(i + 1);
  }
  return ends;
}

std::string ReadSample(const std::string& name) {
  std::ifstream in(kTestdata / name);
  EXPECT_TRUE(in.good()) << (kTestdata / name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Railyard rows holding the figures the sample prints (type given as Railyard names it).
std::vector<CommBenchRow> RowsFromSample(const std::string& sample, uint64_t blocks) {
  std::vector<CommBenchRow> rows;
  for (const ScriptRow& s : ParseLikeAScript(sample)) {
    CommBenchRow r;
    r.size_bytes = std::stoull(s.size);
    r.nccl_count = std::stoull(s.count);
    r.count = r.size_bytes / 4;
    EXPECT_EQ(r.nccl_count * blocks, r.count) << s.size;
    r.type = "f32";
    r.redop = s.redop == "none" ? "" : s.redop;
    r.root = std::stoi(s.root);
    auto figures = [](const std::string& t, const std::string& a, const std::string& b,
                      const std::string& w) {
      CommBenchFigures f;
      f.time_us = std::stod(t);
      f.algbw_gbps = std::stod(a);
      f.busbw_gbps = std::stod(b);
      f.wrong = std::stoull(w);
      return f;
    };
    r.out_of_place = figures(s.oop_time, s.oop_algbw, s.oop_busbw, s.oop_wrong);
    r.in_place = figures(s.ip_time, s.ip_algbw, s.ip_busbw, s.ip_wrong);
    rows.push_back(r);
  }
  return rows;
}

// The samples (testdata/nccl_tests_*_perf_8gpu.txt) are written in the layout of
// NVIDIA/nccl-tests 2.19.6 (commit a0b82b2, src/util.cu writeResultHeader,
// writeBenchmarkLinePreamble, writeBenchmarkLineBody, writeResultFooter; src/all_reduce.cu and
// src/all_gather.cu GetCollByteCount for size and count). Railyard's table of the same
// figures must be the same text, line for line, from the "#" before the header to "Avg bus
// bandwidth"; so a script reads the same columns from both.
TEST(FormatCommBenchTable, SameTextAsNcclTestsForTheSameFigures) {
  for (auto [name, blocks] :
       {std::pair<const char*, uint64_t>{"nccl_tests_all_reduce_perf_8gpu.txt", 1},
        {"nccl_tests_all_gather_perf_8gpu.txt", 8}}) {
    const std::string sample = ReadSample(name);
    std::vector<std::string> want = Lines(sample);
    auto table_start = std::find(want.begin(), want.end(), "#");
    table_start = std::find(table_start + 1, want.end(), "#");  // the one before the header
    ASSERT_NE(table_start, want.end()) << name;
    auto table_end = std::find_if(want.begin(), want.end(), [](const std::string& l) {
      return l.rfind("# Avg bus bandwidth", 0) == 0;
    });
    ASSERT_NE(table_end, want.end()) << name;
    want = std::vector<std::string>(table_start, table_end + 1);

    std::vector<CommBenchRow> rows = RowsFromSample(sample, blocks);
    ASSERT_EQ(rows.size() + 6, want.size()) << name;
    std::vector<std::string> got = Lines(FormatCommBenchTable(rows, "railyard bench comm"));
    ASSERT_GE(got.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << name << " line " << i;
    }
    // Railyard's own lines after it are comments.
    for (size_t i = want.size(); i < got.size(); ++i) EXPECT_EQ(got[i][0], '#') << got[i];
    EXPECT_EQ(got.back(), "# Collective test concluded: railyard bench comm");
  }
}

// Rows from a real run: every data line has nccl-tests' 13 fields, its columns end where the
// sample's do, and a script reads the figures Railyard measured from the positions it reads
// in nccl-tests output ($8 out-of-place busbw, $12 in-place busbw). Alltoall has no in-place
// form: N/A keeps the field count.
TEST(FormatCommBenchTable, ScriptsReadRailyardRowsLikeNcclTestsRows) {
  const std::string sample = ReadSample("nccl_tests_all_reduce_perf_8gpu.txt");
  std::vector<size_t> sample_ends;
  for (const std::string& line : Lines(sample)) {
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line.back())) &&
        Fields(line).size() == 13 && std::isdigit(static_cast<unsigned char>(Fields(line)[0][0]))) {
      sample_ends = FieldEnds(line);
      break;
    }
  }
  ASSERT_EQ(sample_ends.size(), 13u);
  for (BenchOp op : {BenchOp::kAllreduce, BenchOp::kAlltoall}) {
    CommBenchOptions o;
    o.op = op;
    o.sizes = {4096, 65536};
    o.iters = 2;
    o.warmup = 1;
    auto rows = RunThreeRanks(o);
    ASSERT_EQ(rows.size(), 2u);
    const std::string table = FormatCommBenchTable(rows, "railyard bench comm");
    auto parsed = ParseLikeAScript(table);
    ASSERT_EQ(parsed.size(), 2u) << table;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(parsed[i].fields, 13u) << table;
      EXPECT_EQ(std::stoull(parsed[i].size), rows[i].size_bytes);
      EXPECT_EQ(parsed[i].type, "float");
      EXPECT_EQ(parsed[i].redop, op == BenchOp::kAllreduce ? "sum" : "none");
      EXPECT_EQ(parsed[i].root, "-1");
      EXPECT_NEAR(std::stod(parsed[i].oop_busbw), rows[i].out_of_place.busbw_gbps, 0.006);
      EXPECT_EQ(parsed[i].oop_wrong, "0");
      if (op == BenchOp::kAllreduce) {
        EXPECT_NEAR(std::stod(parsed[i].ip_busbw), rows[i].in_place->busbw_gbps, 0.006);
        EXPECT_EQ(parsed[i].ip_wrong, "0");
      } else {
        EXPECT_EQ(parsed[i].ip_busbw, "N/A");
        EXPECT_EQ(parsed[i].ip_wrong, "N/A");
      }
    }
    for (const std::string& line : Lines(table)) {
      if (line.empty() || line[0] == '#') continue;
      EXPECT_EQ(FieldEnds(line), sample_ends) << line;
    }
    EXPECT_NE(table.find("# Out of bounds values : 0 OK\n"), std::string::npos) << table;
  }
}

// Wide figures fall back as nccl-tests' getFloatStr does (fewer decimals, then exponent), and
// wrong counts print as %6g; ranks that saw wrong values are what "Out of bounds" counts.
TEST(FormatCommBenchTable, WideFiguresAndFailures) {
  CommBenchRow r;
  r.size_bytes = 17179869184;
  r.count = r.nccl_count = r.size_bytes / 2;
  r.type = "bf16";
  r.redop = "max";
  r.out_of_place = {.time_us = 12345678.9,
                    .algbw_gbps = 1234.5678,
                    .busbw_gbps = 123456.7,
                    .wrong = 1234567,
                    .checked = 9999999,
                    .ranks_wrong = 2};
  r.in_place = CommBenchFigures{.time_us = 1.5, .algbw_gbps = 0.125, .busbw_gbps = 12345678};
  std::vector<std::string> lines = Lines(FormatCommBenchTable({r}, "railyard bench comm"));
  ASSERT_GE(lines.size(), 7u);
  EXPECT_EQ(
      lines[4],
      " 17179869184    8589934592  bfloat16     max      -1  1.2e+07  1234.6  123457  1.23457e+06  "
      "   1.50    0.12   1e+07       0");
  EXPECT_EQ(lines[5], "# Out of bounds values : 2 FAILED");
}

}  // namespace
}  // namespace railyard::comm
