// Storage probes on real files in temporary directories; the read-only and full cases on a
// read-only bind mount and a 1 MiB tmpfs when root (chmod when not root), skipped with the
// reason where neither can be arranged.
#include "railyard/validate/storage_probe.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "railyard/base/temp_dir_testing.h"

namespace railyard::validate {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A mount at `path` that is detached on destruction, so a failing test leaves none behind.
class ScopedMount {
 public:
  // Empty `why` on success.
  ScopedMount(const char* source, const std::string& path, const char* type, unsigned long flags,
              const char* data) {
    if (::geteuid() != 0) {
      why_ = "not root: cannot mount";
    } else if (::mount(source, path.c_str(), type, flags, data) != 0) {
      why_ = fmt::format("mount at {} failed: {}", path, std::strerror(errno));
    } else {
      path_ = path;
    }
  }
  ~ScopedMount() {
    if (!path_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
  }
  const std::string& why() const { return why_; }

 private:
  std::string path_;
  std::string why_;
};

class StorageProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }

  StorageProbeOptions Options(const std::string& host) {
    return {.dir = tmp_.Sub(host),
            .bytes_per_file = 256 << 10,
            .block_bytes = 64 << 10,
            .files = 2,
            .deadline = base::Deadline::After(30s)};
  }

  base::ScopedTempDir tmp_{"storage-probe"};
};

TEST_F(StorageProbeTest, WritesOwnFilesAndReadsTheNeighbours) {
  StorageProbeOptions a = Options("node0"), b = Options("node1");
  Result<StorageRate> wa = WriteOwnFiles(a);
  Result<StorageRate> wb = WriteOwnFiles(b);
  ASSERT_TRUE(wa.ok()) << wa.status().ToString();
  ASSERT_TRUE(wb.ok()) << wb.status().ToString();
  EXPECT_EQ(wa->bytes, 512u << 10);
  EXPECT_EQ(wa->files, 2);
  EXPECT_GT(wa->bytes_per_s, 0);
  EXPECT_EQ(fs::file_size(a.dir + "/" + StorageProbeFileName(1)), 256u << 10);

  Result<StorageRate> r = ReadNeighbourFiles(b.dir, a);  // node0 reads node1's files
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bytes, 512u << 10);
  EXPECT_GT(r->bytes_per_s, 0);
  // Either O_DIRECT held or the note says how the page cache was kept out instead.
  EXPECT_TRUE(r->direct || r->note.find("POSIX_FADV_DONTNEED") != std::string::npos) << r->note;

  // Cleanup removes the probe's files and the then empty directory, nothing else.
  std::ofstream(b.dir + "/keep.txt") << "operator's file";
  ASSERT_TRUE(RemoveProbeFiles(a.dir).ok());
  ASSERT_TRUE(RemoveProbeFiles(b.dir).ok());
  EXPECT_FALSE(fs::exists(a.dir));
  EXPECT_TRUE(fs::exists(b.dir + "/keep.txt"));
  EXPECT_FALSE(fs::exists(b.dir + "/" + StorageProbeFileName(0)));
  EXPECT_TRUE(RemoveProbeFiles(tmp_.Sub("never-written")).ok());
}

TEST_F(StorageProbeTest, MissingNeighbourIsNotFoundNamingTheFile) {
  StorageProbeOptions a = Options("node0");
  ASSERT_TRUE(WriteOwnFiles(a).ok());
  Result<StorageRate> r = ReadNeighbourFiles(tmp_.Sub("node1"), a);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  EXPECT_NE(r.status().message().find(tmp_.Sub("node1") + "/" + StorageProbeFileName(0)),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(StorageProbeTest, ShortOrForeignNeighbourFileIsDataLoss) {
  StorageProbeOptions a = Options("node0"), b = Options("node1");
  ASSERT_TRUE(WriteOwnFiles(b).ok());
  fs::resize_file(b.dir + "/" + StorageProbeFileName(1), 1000);
  Result<StorageRate> r = ReadNeighbourFiles(b.dir, a);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  EXPECT_NE(r.status().message().find("holds 1000 bytes"), std::string::npos);

  // A file of the right size whose blocks are not this probe's.
  std::ofstream(b.dir + "/" + StorageProbeFileName(1), std::ios::trunc)
      << std::string(256 << 10, 'x');
  r = ReadNeighbourFiles(b.dir, a);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  EXPECT_NE(r.status().message().find("offset 0"), std::string::npos) << r.status().ToString();
}

TEST_F(StorageProbeTest, ReadOnlyDirectoryIsPermissionDeniedNamingThePath) {
  StorageProbeOptions a = Options("node0");
  fs::create_directories(a.dir);
  std::optional<ScopedMount> bind, readonly;
  if (::geteuid() == 0) {
    // Root ignores permission bits: a read-only bind mount of the directory on itself.
    bind.emplace(a.dir.c_str(), a.dir, nullptr, MS_BIND, nullptr);
    if (!bind->why().empty()) GTEST_SKIP() << "root without a bind mount: " << bind->why();
    readonly.emplace(nullptr, a.dir, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr);
    if (!readonly->why().empty()) GTEST_SKIP() << "cannot remount read-only: " << readonly->why();
  } else {
    fs::permissions(a.dir, fs::perms(0555));
  }
  Result<StorageRate> w = WriteOwnFiles(a);
  Result<MetadataRate> m = MetadataProbe(a.dir, 10, base::Deadline::After(30s));
  if (::geteuid() != 0) fs::permissions(a.dir, fs::perms::owner_all);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kPermissionDenied) << w.status().ToString();
  EXPECT_NE(w.status().message().find(a.dir), std::string::npos) << w.status().ToString();

  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kPermissionDenied) << m.status().ToString();
}

TEST_F(StorageProbeTest, FullFileSystemIsResourceExhaustedAndLeavesNoPartialFile) {
  StorageProbeOptions a = Options("node0");
  fs::create_directories(a.dir);
  ScopedMount tmpfs("tmpfs", a.dir, "tmpfs", 0, "size=1m");
  if (!tmpfs.why().empty()) GTEST_SKIP() << "no 1 MiB tmpfs: " << tmpfs.why();
  a.bytes_per_file = 4 << 20;
  Result<StorageRate> w = WriteOwnFiles(a);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kResourceExhausted) << w.status().ToString();
  EXPECT_NE(w.status().message().find(a.dir), std::string::npos) << w.status().ToString();
  EXPECT_FALSE(fs::exists(a.dir + "/" + StorageProbeFileName(0)));
}

TEST_F(StorageProbeTest, PassedDeadlineIsDeadlineExceeded) {
  StorageProbeOptions a = Options("node0");
  a.deadline = base::Deadline::After(0s);
  Result<StorageRate> w = WriteOwnFiles(a);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kDeadlineExceeded) << w.status().ToString();

  Result<MetadataRate> m = MetadataProbe(a.dir, 10, base::Deadline::After(0s));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDeadlineExceeded) << m.status().ToString();
  EXPECT_FALSE(fs::exists(a.dir + "/ry-mdtest"));
}

TEST_F(StorageProbeTest, MetadataProbeCreatesStatsAndUnlinks) {
  Result<MetadataRate> m = MetadataProbe(tmp_.Sub("node0"), 200, base::Deadline::After(30s));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->items, 200);
  EXPECT_GT(m->create_ops_per_s, 0);
  EXPECT_GT(m->stat_ops_per_s, 0);
  EXPECT_GT(m->unlink_ops_per_s, 0);
  EXPECT_GT(m->total_ops_per_s, 0);
  EXPECT_FALSE(fs::exists(tmp_.Sub("node0") + "/ry-mdtest"));
}

TEST_F(StorageProbeTest, BadOptionsAreInvalidArgument) {
  StorageProbeOptions a = Options("node0");
  a.files = 0;
  EXPECT_EQ(WriteOwnFiles(a).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadNeighbourFiles(tmp_.Sub("x"), a).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MetadataProbe(tmp_.Sub("x"), 0, base::Deadline::After(1s)).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::validate
