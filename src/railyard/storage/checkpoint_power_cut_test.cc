// Power cuts during a save, on the in-memory file system that keeps only what was fsynced
// (mem_fs.h): the power goes at every call a save makes, and after the cut the last
// committed step must load bit for bit, every step directory that is visible must be
// complete, and the next writer must clean up and commit. A commit path that skips any fsync
// (of a shard, a piece list, the manifest, a step directory, or a new directory's parent)
// fails these tests, where a process kill (checkpoint_fault_test.cc) could not tell.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <thread>

#include "railyard/storage/checkpoint.h"
#include "railyard/storage/checkpoint_catalog.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fs_util.h"
#include "railyard/storage/mem_fs.h"
#include "railyard/storage/power_cut_fs.h"

namespace railyard::storage {
namespace {

constexpr char kDir[] = "/jobs/run7/ckpt";  // none of it exists before the first save
constexpr int64_t kFloatsPerRank = 6000;    // 24 KB per rank: two writes of 16 KiB extents

std::vector<float> Values(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(seed * 1000003 + static_cast<int>(i));
  return v;
}

struct Saved {
  bool ok = false;         // every rank's Save returned OK
  bool latest_ok = false;  // and `latest` was rewritten (no warning about it)
};

// Saves `step` of tensor "w" (rank r holds its slice) and "b" (rank 0), from `world` threads
// through `fs`.
Saved SaveStep(Fs* fs, int world, int64_t step, int seed, int keep_last) {
  InProcessAgreementGroup group(world);
  const std::vector<float> w = Values(static_cast<size_t>(world * kFloatsPerRank), seed);
  const std::vector<float> b = Values(100, seed + 1);
  std::vector<Status> results(static_cast<size_t>(world));
  std::string warning;  // rank 0's
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      WriterOptions o;
      o.dir = kDir;
      o.fs = fs;
      o.rank = r;
      o.world_size = world;
      o.agreement = group.ForRank(r);
      o.io_threads = 2;
      o.extent_bytes = 16384;
      o.write_behind_bytes = 16384;  // the page-cache hints are calls too
      o.keep_last = keep_last;
      auto writer = CheckpointWriter::Open(o);
      if (!writer.ok()) {
        results[static_cast<size_t>(r)] = writer.status();
        return;
      }
      std::vector<TensorView> views = {{"w",
                                        DType::kF32,
                                        {world * kFloatsPerRank},
                                        {r * kFloatsPerRank},
                                        {kFloatsPerRank},
                                        w.data() + r * kFloatsPerRank}};
      if (r == 0) views.push_back({"b", DType::kF32, {100}, {}, {}, b.data()});
      results[static_cast<size_t>(r)] =
          (*writer)->Save(step, views, {{"seed", std::to_string(seed)}});
      if (r == 0) warning = (*writer)->last_stats().warning;
    });
  }
  for (auto& t : threads) t.join();
  Saved saved;
  saved.ok = std::all_of(results.begin(), results.end(), [](const Status& s) { return s.ok(); });
  saved.latest_ok = saved.ok && warning.find("latest") == std::string::npos;
  return saved;
}

// The step's data is what SaveStep(seed = step) wrote.
void ExpectStepHolds(const CheckpointReader& reader, int world, const std::string& where) {
  const int seed = static_cast<int>(reader.step());
  auto w = reader.ReadTensor("w");
  ASSERT_TRUE(w.ok()) << where << ": " << w.status().ToString();
  std::vector<float> expect = Values(static_cast<size_t>(world * kFloatsPerRank), seed);
  ASSERT_EQ(w->size(), expect.size() * sizeof(float)) << where;
  EXPECT_EQ(std::memcmp(w->data(), expect.data(), w->size()), 0) << where;
  auto b = reader.ReadTensor("b");
  ASSERT_TRUE(b.ok()) << where << ": " << b.status().ToString();
  std::vector<float> expect_b = Values(100, seed + 1);
  EXPECT_EQ(std::memcmp(b->data(), expect_b.data(), b->size()), 0) << where;
  EXPECT_EQ(reader.manifest().metadata.at("seed"), std::to_string(seed)) << where;
}

// After a power cut: every visible step directory is complete and holds its data, and the
// newest one is at least `committed` (the newest step whose Save returned OK; -1: none);
// `latest` names a visible step, and `committed` when its Save rewrote `latest` without a
// warning. Then a writer opens (removing leftovers) and commits `next`, which survives
// another cut.
void CheckAfterCut(PowerCutFs& fs, int world, int64_t committed, bool latest_ok, int64_t next,
                   const std::string& where) {
  ReaderOptions ropt;
  ropt.fs = &fs;
  auto steps = ListStepDirs(fs, kDir);
  std::vector<int64_t> visible = steps.ok() ? *steps : std::vector<int64_t>{};
  for (int64_t step : visible) {
    auto reader = CheckpointReader::Open(kDir, step, ropt);
    ASSERT_TRUE(reader.ok()) << where << ": visible step " << step
                             << " is not complete: " << reader.status().ToString();
    ExpectStepHolds(**reader, world, where);
  }
  // `latest`, where there is one, is whole and names a step that is there.
  auto latest_text = ReadWholeFile(fs, std::string(kDir) + "/latest");
  if (latest_text.ok()) {
    bool names_visible = false;
    for (int64_t step : visible) names_visible |= *latest_text == std::to_string(step) + "\n";
    EXPECT_TRUE(names_visible) << where << ": 'latest' is '" << *latest_text << "'";
  }
  if (committed >= 0 && latest_ok) {
    ASSERT_TRUE(latest_text.ok()) << where << ": " << latest_text.status().ToString();
    EXPECT_EQ(*latest_text, std::to_string(committed) + "\n") << where;
  }
  if (committed >= 0) {
    ASSERT_FALSE(visible.empty()) << where << ": committed step " << committed << " is gone";
    EXPECT_GE(visible.back(), committed) << where;
    auto latest = LoadLatest(kDir, ropt);
    ASSERT_TRUE(latest.ok()) << where << ": " << latest.status().ToString();
    EXPECT_TRUE((*latest)->fallback_notes().empty()) << where;
  }
  ASSERT_TRUE(SaveStep(&fs, world, next, static_cast<int>(next), 0).ok) << where;
  auto entries = fs.ListDir(kDir);
  ASSERT_TRUE(entries.ok());
  for (const DirEntry& e : *entries) {
    EXPECT_FALSE(e.name.starts_with(".tmp")) << where << ": leftover " << e.name;
  }
  fs.PowerCut();
  auto latest = LoadLatest(kDir, ropt);
  ASSERT_TRUE(latest.ok()) << where << ": " << latest.status().ToString();
  EXPECT_EQ((*latest)->step(), next) << where;
  ExpectStepHolds(**latest, world, where);
}

std::string Where(const PowerCutFs& fs, uint64_t cut_at) {
  std::vector<std::string> trace = fs.trace();
  std::string at = cut_at <= trace.size() ? trace[cut_at - 1] : "after the last call";
  return "power cut at call " + std::to_string(cut_at) + " (" + at + ")";
}

class PowerCutTest : public ::testing::TestWithParam<int> {};

// The first save creates the directory: a cut anywhere, the mkdirs included, leaves nothing
// or a complete step 1, and step 1 once Save returned OK.
TEST_P(PowerCutTest, FirstSaveIntoANewDirectory) {
  const int world = GetParam();
  uint64_t total = 0;
  {
    auto mem = NewMemFs();
    PowerCutFs fs(mem.get());
    ASSERT_TRUE(SaveStep(&fs, world, 1, 1, 0).ok);
    total = fs.calls();
  }
  ASSERT_GT(total, 20u);
  int committed = 0;
  // A few calls past the end: with several ranks the count varies a little between runs.
  for (uint64_t n = 0; n <= total + 8; ++n) {
    auto mem = NewMemFs();
    PowerCutFs fs(mem.get());
    fs.CutPowerAfter(n);
    const Saved saved = SaveStep(&fs, world, 1, 1, 0);
    const std::string where = Where(fs, n + 1);
    // Save may still succeed after a cut past its commit point (`latest`, retention).
    EXPECT_TRUE(saved.ok || fs.power_lost()) << where;
    fs.PowerCut();
    committed += saved.ok ? 1 : 0;
    CheckAfterCut(fs, world, saved.ok ? 1 : -1, saved.latest_ok, 2, where);
    if (HasFatalFailure()) return;
  }
  std::cerr << "cut the power at " << total + 9 << " points of a first save (" << world
            << " rank(s)); it had committed at " << committed << "\n";
  EXPECT_GE(committed, 1);
}

// A save after a committed step, with retention keeping one step: the committed step
// survives every cut, as does the new one once Save returned OK.
TEST_P(PowerCutTest, SaveAfterACommittedStep) {
  const int world = GetParam();
  uint64_t total = 0;
  {
    auto mem = NewMemFs();
    PowerCutFs fs(mem.get());
    ASSERT_TRUE(SaveStep(&fs, world, 1, 1, 1).ok);
    const uint64_t before = fs.calls();
    ASSERT_TRUE(SaveStep(&fs, world, 2, 2, 1).ok);
    total = fs.calls() - before;
  }
  ASSERT_GT(total, 20u);
  int committed = 0;
  for (uint64_t n = 0; n <= total + 8; ++n) {
    auto mem = NewMemFs();
    PowerCutFs fs(mem.get());
    ASSERT_TRUE(SaveStep(&fs, world, 1, 1, 1).ok);
    fs.PowerCut();
    const uint64_t start = fs.calls();
    fs.CutPowerAfter(start + n);
    const Saved saved = SaveStep(&fs, world, 2, 2, 1);
    const std::string where = Where(fs, start + n + 1);
    // Save may still succeed after a cut past its commit point (`latest`, retention).
    EXPECT_TRUE(saved.ok || fs.power_lost()) << where;
    fs.PowerCut();
    committed += saved.ok ? 1 : 0;
    CheckAfterCut(fs, world, saved.ok ? 2 : 1, saved.latest_ok, 3, where);
    if (HasFatalFailure()) return;
  }
  std::cerr << "cut the power at " << total + 9 << " points of a second save (" << world
            << " rank(s)); it had committed at " << committed << "\n";
  EXPECT_GE(committed, 1);
}

INSTANTIATE_TEST_SUITE_P(Ranks, PowerCutTest, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "rank"; });

}  // namespace
}  // namespace railyard::storage
