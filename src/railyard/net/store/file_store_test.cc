#include "railyard/net/store/file_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::net {
namespace {

using base::Deadline;
using std::chrono::milliseconds;
using std::chrono::seconds;

Deadline Soon() { return Deadline::After(seconds(30)); }

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.Sub("rdzv");
    auto store = OpenFileStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  base::ScopedTempDir tmp_{"filestore"};
  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(FileStoreTest, SetGetAddCompareAndSetWait) {
  EXPECT_EQ(store_->Describe(), "file store " + dir_);
  ASSERT_TRUE(store_->Set("a", "1", Soon()).ok());
  ASSERT_TRUE(store_->Set("a", "alpha", Soon()).ok());
  EXPECT_EQ(*store_->Get("a", Soon()), "alpha");
  ASSERT_TRUE(store_->Set("empty", "", Soon()).ok());
  EXPECT_EQ(*store_->Get("empty", Soon()), "");

  EXPECT_EQ(*store_->Add("n", 5, Soon()), 5);
  EXPECT_EQ(*store_->Add("n", -7, Soon()), -2);
  auto bad = store_->Add("a", 1, Soon());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status().message(), "'a'")) << bad.status().message();
  EXPECT_EQ(*store_->Get("a", Soon()), "alpha");

  EXPECT_EQ(*store_->CompareAndSet("c", "", "first", Soon()), "first");
  EXPECT_EQ(*store_->CompareAndSet("c", "wrong", "x", Soon()), "first");
  EXPECT_EQ(*store_->CompareAndSet("c", "first", "second", Soon()), "second");
  EXPECT_EQ(*store_->Get("c", Soon()), "second");

  std::vector<std::string> keys = {"a", "n", "c"};
  EXPECT_TRUE(store_->Wait(keys, Soon()).ok());

  // A second store object on the same directory sees the same keys.
  auto other = OpenFileStore(dir_ + "/");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*(*other)->Get("c", Soon()), "second");
}

TEST_F(FileStoreTest, KeysMapToSafeDistinctFileNames) {
  std::vector<std::string> keys = {
      "../escape",  "a/b", "a%2Fb", ".", "..", "a.tmp.1.0", std::string("nul\0byte", 8),
      "job/addr/3", "~x"};
  std::string long_a(kMaxStoreKeyBytes, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';  // differs only past the cut
  keys.push_back(long_a);
  keys.push_back(long_b);
  keys.push_back(std::string(kMaxStoreKeyBytes, '/'));  // all escapes: the cut must not split one
  std::set<std::string> names;
  for (const auto& k : keys) {
    std::string name = FileStoreKeyFileName(k);
    EXPECT_LE(name.size(), 200u) << k;
    EXPECT_EQ(name.find('/'), std::string::npos) << name;
    EXPECT_EQ(name.find('.'), std::string::npos) << name;
    names.insert(name);
    ASSERT_TRUE(store_->Set(k, "v:" + k, Soon()).ok()) << k;
  }
  EXPECT_EQ(names.size(), keys.size());
  for (const auto& k : keys) EXPECT_EQ(*store_->Get(k, Soon()), "v:" + k);
  // Everything stayed inside the directory, as plain files.
  EXPECT_FALSE(base::PathExists(tmp_.Sub("escape")));
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_TRUE(e.is_regular_file()) << e.path();
  }
  auto too_long = store_->Set(std::string(kMaxStoreKeyBytes + 1, 'k'), "v", Soon());
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Get(std::string(kMaxStoreKeyBytes + 1, 'k'), Soon()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(FileStoreTest, GetWaitsUntilAnotherWriterSets) {
  auto writer = OpenFileStore(dir_);
  ASSERT_TRUE(writer.ok());
  Status set_status;
  std::thread t([&] { set_status = (*writer)->Set("late", "value", Soon()); });
  auto got = store_->Get("late", Soon());
  t.join();
  ASSERT_TRUE(set_status.ok()) << set_status.ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "value");
}

TEST_F(FileStoreTest, DeadlinesNameKeysAndDirectory) {
  auto r = store_->Get("never/set", Deadline::After(milliseconds(100)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(r.status().message(), "'never/set'")) << r.status().message();
  EXPECT_TRUE(Contains(r.status().message(), dir_)) << r.status().message();

  ASSERT_TRUE(store_->Set("present", "1", Soon()).ok());
  std::vector<std::string> keys = {"present", "missing1", "missing2"};
  std::vector<std::string> missing;
  Status s = store_->Wait(keys, Deadline::After(milliseconds(100)), &missing);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(s.message(), ": missing1, missing2")) << s.message();
  EXPECT_EQ(missing, (std::vector<std::string>{"missing1", "missing2"}));
}

TEST_F(FileStoreTest, OpenRejectsAFile) {
  ASSERT_TRUE(base::WriteFileAtomic(tmp_.Sub("plain"), "x").ok());
  auto r = OpenFileStore(tmp_.Sub("plain"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), tmp_.Sub("plain"))) << r.status().message();
}

// One rank's share of the work: kEach Adds, then kEach increments through CompareAndSet.
Status IncrementBoth(Store& store, int each, std::string_view who) {
  for (int i = 0; i < each; ++i) RY_RETURN_IF_ERROR(store.Add("counter", 1, Soon()));
  for (int i = 0; i < each; ++i) {
    RY_ASSIGN_OR_RETURN(std::string cur, store.CompareAndSet("cas", "", "0", Soon()));
    for (;;) {
      // `who` in the value makes success unambiguous (see the tcp store test).
      std::string next = std::to_string(std::stoi(cur) + 1) + "/" + std::string(who);
      RY_ASSIGN_OR_RETURN(std::string now, store.CompareAndSet("cas", cur, next, Soon()));
      if (now == next) break;
      cur = now;
    }
  }
  return Status::Ok();
}

TEST_F(FileStoreTest, TwoProcessesIncrementAtomically) {
  constexpr int kEach = 200;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child has its own Store object (and lock descriptors), as another rank would.
    ::close(ready[0]);
    auto store = OpenFileStore(dir_);
    if (!store.ok()) std::_Exit(2);
    char go = 1;
    if (::write(ready[1], &go, 1) != 1) std::_Exit(3);
    std::_Exit(IncrementBoth(**store, kEach, "child").ok() ? 0 : 4);
  }
  ::close(ready[1]);
  char go = 0;
  // Start together, so the increments really overlap. EOF (a child that died) ends the read.
  ASSERT_EQ(::read(ready[0], &go, 1), 1);
  ::close(ready[0]);
  Status mine = IncrementBoth(*store_, kEach, "parent");
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(mine.ok()) << mine.ToString();
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(*store_->Get("counter", Soon()), "400");
  EXPECT_EQ(std::stoi(*store_->Get("cas", Soon())), 400);
}

TEST_F(FileStoreTest, KeyLockHeldElsewhereEndsWritesAtTheDeadlineUntilReleased) {
  // The store's per-key lock file, held through a descriptor of our own: flock locks belong
  // to the open file description, so the store's own open() contends like another process.
  std::string lock_path = dir_ + "/l." + FileStoreKeyFileName("held/key");
  base::UniqueFd held(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(held.valid()) << lock_path;
  ASSERT_EQ(::flock(held.get(), LOCK_EX | LOCK_NB), 0);

  auto check = [&](const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), dir_)) << s.message();
    EXPECT_TRUE(Contains(s.message(), "'held/key'")) << s.message();
  };
  check(store_->Add("held/key", 1, Deadline::After(milliseconds(100))).status());
  check(store_->CompareAndSet("held/key", "", "v", Deadline::After(milliseconds(100))).status());
  check(store_->Set("held/key", "v", Deadline::After(milliseconds(100))));
  // Nothing was written, and other keys are not affected by this key's lock.
  EXPECT_EQ(store_->Get("held/key", Deadline::After(milliseconds(20))).status().code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*store_->Add("other/key", 1, Soon()), 1);

  held.Reset();  // releases the lock
  EXPECT_EQ(*store_->Add("held/key", 2, Soon()), 2);
  EXPECT_EQ(*store_->CompareAndSet("held/key", "2", "three", Soon()), "three");
  ASSERT_TRUE(store_->Set("held/key", "four", Soon()).ok());
  EXPECT_EQ(*store_->Get("held/key", Soon()), "four");
}

// With the job secret, a value the job did not write is refused on every read path, naming
// the key and its file: unsigned, a made-up signature, a signed value moved from another key,
// and a value signed with another secret.
TEST_F(FileStoreTest, SignedStoreRefusesForgedValuesNamingKeyAndFile) {
  std::string dir = tmp_.Sub("signed");
  auto opened = OpenFileStore(dir, "job-secret");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  ASSERT_TRUE(store.Set("job/addr/0", "10.0.0.5:1234", Soon()).ok());
  ASSERT_TRUE(store.Set("job/addr/1", "10.0.0.6:1234", Soon()).ok());
  EXPECT_EQ(*store.Get("job/addr/0", Soon()), "10.0.0.5:1234");
  EXPECT_EQ(*store.Add("count", 2, Soon()), 2);
  EXPECT_EQ(*store.CompareAndSet("count", "2", "3", Soon()), "3");
  std::vector<std::string> keys = {"job/addr/0", "job/addr/1", "count"};
  EXPECT_TRUE(store.Wait(keys, Soon()).ok());

  const std::string file0 = dir + "/k." + FileStoreKeyFileName("job/addr/0");
  const std::string file1 = dir + "/k." + FileStoreKeyFileName("job/addr/1");
  auto signed1 = base::ReadFile(file1);
  ASSERT_TRUE(signed1.ok());
  EXPECT_TRUE(signed1->starts_with("railyard-signed hmac-sha256 ")) << *signed1;

  auto expect_refused = [&](const Status& st, std::string_view why) {
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << why << ": " << st.ToString();
    EXPECT_TRUE(Contains(st.message(), "'job/addr/0'")) << why << ": " << st.message();
    EXPECT_TRUE(Contains(st.message(), file0)) << why << ": " << st.message();
  };
  std::vector<std::string> one = {"job/addr/0"};
  struct Forgery {
    std::string what;
    std::string contents;
  };
  std::vector<Forgery> forgeries = {
      {"unsigned", "6.6.6.6:1"},
      {"made-up signature", "railyard-signed hmac-sha256 " + std::string(64, '0') + "\n6.6.6.6:1"},
      {"moved from another key", *signed1},
  };
  // Signed with another secret, by a store on the same directory.
  {
    auto other = OpenFileStore(tmp_.Sub("other"), "another-secret");
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->Set("job/addr/0", "6.6.6.6:1", Soon()).ok());
    auto contents = base::ReadFile(tmp_.Sub("other") + "/k." + FileStoreKeyFileName("job/addr/0"));
    ASSERT_TRUE(contents.ok());
    forgeries.push_back({"another secret", *contents});
  }
  for (const auto& f : forgeries) {
    ASSERT_TRUE(base::WriteFileAtomic(file0, f.contents).ok());
    expect_refused(store.Get("job/addr/0", Soon()).status(), f.what + ", Get");
    expect_refused(store.Wait(one, Soon()), f.what + ", Wait");
    expect_refused(store.CompareAndSet("job/addr/0", "", "x", Soon()).status(), f.what + ", CAS");
  }
  // A store without the secret cannot tell, which is why bootstrap always passes it.
  auto plain = OpenFileStore(dir);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*(*plain)->Get("job/addr/0", Soon()), forgeries.back().contents);
}

// Files the store creates are owner-only whatever the umask, and so is a directory it
// creates; the process umask is cleared for the test so that a default mode would show.
TEST_F(FileStoreTest, FilesAndDirectoryAreOwnerOnly) {
  mode_t old_umask = ::umask(0);
  std::string dir = tmp_.Sub("private/rdzv");
  auto opened = OpenFileStore(dir, "job-secret");
  Status set =
      opened.ok() ? (*opened)->Set("job/addr/0", "10.0.0.5:1234", Soon()) : opened.status();
  Status added = opened.ok() ? (*opened)->Add("n", 1, Soon()).status() : opened.status();
  ::umask(old_umask);
  ASSERT_TRUE(set.ok()) << set.ToString();
  ASSERT_TRUE(added.ok()) << added.ToString();
  auto mode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
  };
  EXPECT_EQ(mode(dir), 0700);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(mode(e.path().string()), 0600) << e.path();
    ++files;
  }
  EXPECT_EQ(files, 4);  // two values, two lock files
}

}  // namespace
}  // namespace railyard::net
