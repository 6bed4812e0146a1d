// `railyard ckpt` and `railyard data` through the real binary, on checkpoints written with
// the library: listing, verification (and naming the corrupt file and the fallback step),
// safetensors export, and clear errors for bad input.
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_harness.h"
#include "railyard/storage/agreement.h"
#include "railyard/storage/checkpoint.h"

namespace railyard::testing {
namespace {

class CkptCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    ASSERT_FALSE(dir_.empty());
    storage::InProcessAgreementGroup group(1);
    storage::WriterOptions o;
    o.dir = dir_;
    o.agreement = group.ForRank(0);
    auto writer = storage::CheckpointWriter::Open(o);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    for (int64_t step : {10, 20}) {
      for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<float>(i + step);
      storage::TensorView v{
          .name = "w", .dtype = storage::DType::kF32, .shape = {4, 256}, .data = data_.data()};
      ASSERT_TRUE((*writer)->Save(step, {&v, 1}, {{"loader", "epoch=1"}}).ok());
    }
  }
  base::ScopedTempDir tmp_{"ckcli"};
  std::string dir_;
  std::vector<float> data_ = std::vector<float>(4 * 256);
};

TEST_F(CkptCliTest, ListVerifyExport) {
  CliResult ls = RunRailyard({"ckpt", "ls", dir_});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("committed"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("(latest)"), std::string::npos) << ls.out;

  CliResult ok = RunRailyard({"ckpt", "verify", dir_});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("step 20 OK"), std::string::npos) << ok.out;

  const std::string out = dir_ + "/w.safetensors";
  CliResult ex = RunRailyard({"ckpt", "export", dir_, "--step", "10", "--out", out});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  // 8-byte header length + header + 4*256 floats.
  EXPECT_GT(std::filesystem::file_size(out), 8u + 4 * 256 * 4);
}

TEST_F(CkptCliTest, CorruptShardIsNamedWithTheFallbackStep) {
  const std::string shard = dir_ + "/" + storage::StepDirName(20) + "/" + storage::ShardFileName(0);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(100);
    char c = 0;
    f.read(&c, 1);
    f.seekp(100);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  CliResult r = RunRailyard({"ckpt", "verify", dir_});
  EXPECT_EQ(r.exit_code, 1);  // a verdict, not bad input
  EXPECT_NE(r.err.find("rank-00000.bin"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fall back to step 10"), std::string::npos) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
}

// Whatever makes a step fail verification, the exit code is the same (1); 2 is bad input.
TEST_F(CkptCliTest, VerifyExitCodes) {
  const std::string manifest = dir_ + "/" + storage::StepDirName(20) + "/manifest.json";
  { std::ofstream(manifest, std::ios::trunc) << "{\"format\": "; }  // cut short
  CliResult r = RunRailyard({"ckpt", "verify", dir_});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("step 20 is corrupt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("manifest.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fall back to step 10"), std::string::npos) << r.err;

  std::filesystem::remove(dir_ + "/" + storage::StepDirName(10) + "/" + storage::ShardFileName(0));
  CliResult missing = RunRailyard({"ckpt", "verify", dir_, "--step", "10"});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_NE(missing.err.find("rank-00000.bin"), std::string::npos) << missing.err;

  CliResult no_step = RunRailyard({"ckpt", "verify", dir_, "--step", "30"});
  EXPECT_EQ(no_step.exit_code, 2) << no_step.err;
  EXPECT_NE(no_step.err.find("step 30 is not in"), std::string::npos) << no_step.err;
  CliResult no_dir = RunRailyard({"ckpt", "verify", dir_ + "/none"});
  EXPECT_EQ(no_dir.exit_code, 2) << no_dir.err;
}

TEST(StorageCliBadInputTest, OneClearLine) {
  base::ScopedTempDir empty_tmp("ckempty");
  const std::string& empty = empty_tmp.path();
  CliResult notckpt = RunRailyard({"ckpt", "verify", empty});
  EXPECT_NE(notckpt.exit_code, 0);
  EXPECT_NE(notckpt.err.find("holds no checkpoint"), std::string::npos) << notckpt.err;
  CliResult step = RunRailyard({"ckpt", "export", empty, "--step", "3", "--out", empty + "/x"});
  EXPECT_NE(step.exit_code, 0);
  EXPECT_EQ(CountLines(step.err), 1) << step.err;
  CliResult fmt = RunRailyard(
      {"ckpt", "export", empty, "--step", "3", "--format", "pickle", "--out", empty + "/x"});
  EXPECT_EQ(fmt.exit_code, 2);
  EXPECT_NE(fmt.err.find("pickle"), std::string::npos);
  CliResult size = RunRailyard({"bench", "ckpt", "--dir", empty + "/b", "--size", "lots"});
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_NE(size.err.find("--size"), std::string::npos) << size.err;
  CliResult touch = RunRailyard({"bench", "ckpt", "--dir", empty + "/b", "--touch"});
  EXPECT_NE(touch.exit_code, 0);
  EXPECT_NE(touch.err.find("--touch needs --async"), std::string::npos) << touch.err;
  CliResult snap =
      RunRailyard({"bench", "ckpt", "--dir", empty + "/b", "--async", "--snapshot", "fork"});
  EXPECT_EQ(snap.exit_code, 2);
  EXPECT_NE(snap.err.find("--snapshot"), std::string::npos) << snap.err;
  CliResult pack = RunRailyard({"data", "pack", "--out", empty + "/d"});
  EXPECT_EQ(pack.exit_code, 2);
  EXPECT_NE(pack.err.find("--from"), std::string::npos) << pack.err;
  CliResult negative = RunRailyard({"data", "pack", "--synthetic", "-5", "--out", empty + "/d"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--synthetic -5: expected a positive number"), std::string::npos)
      << negative.err;
  EXPECT_EQ(negative.err.find("18446744073709551611"), std::string::npos) << negative.err;
  EXPECT_FALSE(std::filesystem::exists(empty + "/d"));
}

// As root, the benchmarks say that they will drop the machine's page cache before they do, and
// --no-drop-caches keeps it. (The failing --ranks 0 run stops before any drop.)
TEST(StorageCliBenchTest, CacheDropIsAnnouncedAndCanBeTurnedOff) {
  base::ScopedTempDir dir_tmp("ckdrop");
  const std::string& dir = dir_tmp.path();
  CliResult warned = RunRailyard({"bench", "ckpt", "--ranks", "0", "--dir", dir + "/b"});
  EXPECT_EQ(warned.exit_code, 2) << warned.err;
  const bool root = ::geteuid() == 0;
  EXPECT_EQ(warned.err.find("drops the page cache of the whole machine") != std::string::npos, root)
      << warned.err;
  EXPECT_NE(warned.err.find("--ranks 0"), std::string::npos) << warned.err;
  CliResult quiet =
      RunRailyard({"bench", "ckpt", "--ranks", "0", "--dir", dir + "/b", "--no-drop-caches"});
  EXPECT_EQ(quiet.exit_code, 2) << quiet.err;
  EXPECT_EQ(quiet.err.find("page cache"), std::string::npos) << quiet.err;
  EXPECT_EQ(CountLines(quiet.err), 1) << quiet.err;
}

TEST(StorageCliBenchTest, SmallCheckpointBenchReportsEveryKey) {
  base::ScopedTempDir dir_tmp("ckbench");
  const std::string& dir = dir_tmp.path();
  // --no-drop-caches: a test must not evict the machine's page cache.
  CliResult r =
      RunRailyard({"bench", "ckpt", "--ranks", "2", "--size", "4MiB", "--steps", "2", "--dir",
                   dir + "/b", "--async", "--touch", "--json", "--no-drop-caches"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("page cache"), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"write_gbps", "read_gbps", "save_ms", "stall_ms", "bytes", "ranks", "steps",
                        "snapshot", "touch_ms", "touch_base_ms"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["bytes"], 4 << 20);
  EXPECT_NE(j["notes"].dump().find("page cache not dropped"), std::string::npos) << j.dump();
  // Write-protection where the kernel allows it, else the copy; either way named.
  EXPECT_TRUE(j["snapshot"] == "protect" || j["snapshot"] == "copy") << j.dump();
  EXPECT_FALSE(std::filesystem::exists(dir + "/b/step-00000002"));  // cleaned up
}

}  // namespace
}  // namespace railyard::testing
