#include "railyard/storage/mem_fs.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "railyard/storage/fs_util.h"
#include "railyard/storage/power_cut_fs.h"

namespace railyard::storage {
namespace {

// Writes `data` to `path` and fsyncs the file (not its directory).
void WriteSynced(Fs& fs, const std::string& path, std::string_view data) {
  auto file = fs.NewWritableFile(path, {});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE((*file)->Write(data).ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Close().ok());
}

std::vector<std::string> Names(Fs& fs, const std::string& dir) {
  std::vector<std::string> out;
  auto entries = fs.ListDir(dir);
  if (!entries.ok()) return {"<" + entries.status().ToString() + ">"};
  for (const DirEntry& e : *entries) out.push_back(e.name + (e.is_dir ? "/" : ""));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(MemFsTest, BehavesLikeAFileSystem) {
  auto mem = NewMemFs();
  Fs& fs = *mem;
  ASSERT_TRUE(MakeDirs(fs, "/a/b").ok());
  WriteSynced(fs, "/a/b/f", "hello");
  EXPECT_EQ(*ReadWholeFile(fs, "/a/b/f"), "hello");
  EXPECT_EQ(*fs.FileSize("/a/b/f"), 5u);
  EXPECT_EQ(Names(fs, "/a"), std::vector<std::string>{"b/"});
  EXPECT_EQ(fs.NewReadableFile("/a/none").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs.CreateDir("/x/y").code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs.RemoveDir("/a/b").ok());       // not empty
  EXPECT_FALSE(fs.RemoveFile("/a/b").ok());      // a directory
  EXPECT_FALSE(fs.Rename("/a", "/a/b/c").ok());  // into itself
  ASSERT_TRUE(WriteFileAtomic(fs, "/a/b/f", "bye").ok());
  EXPECT_EQ(*ReadWholeFile(fs, "/a/b/f"), "bye");
  char buf[8];
  auto file = fs.NewReadableFile("/a/b/f");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->PRead(1, buf, 8).code(), StatusCode::kDataLoss);
  ASSERT_TRUE(RemoveTree(fs, "/a").ok());
  EXPECT_FALSE(fs.Exists("/a"));
}

TEST(MemFsTest, PowerCutKeepsOnlyWhatWasFsynced) {
  auto mem = NewMemFs();
  Fs& fs = *mem;
  ASSERT_TRUE(fs.CreateDir("/d").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  WriteSynced(fs, "/d/synced", "one");
  ASSERT_TRUE(fs.SyncDir("/d").ok());
  {  // data written after the last fsync is lost, the synced size and bytes stay
    auto f = fs.NewWritableFile("/d/synced", {});
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Write("two, longer").ok());
  }
  WriteSynced(fs, "/d/entry-not-synced", "x");  // file fsynced, directory not
  ASSERT_TRUE(fs.CreateDir("/d/sub").ok());     // parent not fsynced
  ASSERT_TRUE(fs.CreateDir("/new").ok());
  ASSERT_TRUE(fs.SyncDir("/new").ok());  // its own fsync does not make its name durable
  mem->PowerCut();
  EXPECT_EQ(Names(fs, "/"), std::vector<std::string>{"d/"});
  EXPECT_EQ(Names(fs, "/d"), std::vector<std::string>{"synced"});
  EXPECT_EQ(*ReadWholeFile(fs, "/d/synced"), "one");
}

TEST(MemFsTest, RenameIsDurableWithItsDirectory) {
  auto mem = NewMemFs();
  Fs& fs = *mem;
  WriteSynced(fs, "/a", "A");
  ASSERT_TRUE(fs.SyncDir("/").ok());
  ASSERT_TRUE(fs.Rename("/a", "/b").ok());
  mem->PowerCut();
  EXPECT_EQ(Names(fs, "/"), std::vector<std::string>{"a"});
  ASSERT_TRUE(fs.Rename("/a", "/b").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  mem->PowerCut();
  EXPECT_EQ(Names(fs, "/"), std::vector<std::string>{"b"});
  EXPECT_EQ(*ReadWholeFile(fs, "/b"), "A");
}

TEST(MemFsTest, MakeDirsMakesNewDirectoriesDurable) {
  auto mem = NewMemFs();
  ASSERT_TRUE(MakeDirs(*mem, "/x/y/z").ok());
  mem->PowerCut();
  EXPECT_TRUE(mem->Exists("/x/y/z"));
}

TEST(PowerCutFsTest, CallsAfterTheCutFailAndChangeNothing) {
  auto mem = NewMemFs();
  PowerCutFs fs(mem.get());
  auto file = fs.NewWritableFile("/f", {});  // call 1
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Write("abc").ok());  // call 2
  fs.CutPowerAfter(3);
  ASSERT_TRUE((*file)->Sync().ok());  // call 3: the last one to happen
  Status st = fs.SyncDir("/");        // call 4: refused
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("power cut"), std::string::npos) << st.ToString();
  EXPECT_TRUE(fs.power_lost());
  EXPECT_EQ(fs.calls(), 4u);
  EXPECT_EQ(fs.trace().back(), "4 fsync-dir /");
  fs.PowerCut();
  EXPECT_FALSE(fs.power_lost());
  EXPECT_FALSE(fs.Exists("/f"));  // its directory entry was never made durable
  // A handle from before the cut is dead.
  EXPECT_EQ((*file)->Write("more").code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace railyard::storage
