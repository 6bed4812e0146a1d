#include "railyard/storage/lustre.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "railyard/base/temp_dir_testing.h"

namespace railyard::storage {
namespace {

// Records every call; answers with an injected file-system type and ioctl result.
class FakeSyscalls final : public LustreSyscalls {
 public:
  struct Call {
    std::string name;
    std::string path;
    int flags = 0;
    mode_t mode = 0;
    unsigned long request = 0;  // NOLINT(runtime/int)
    LovUserMdV1 lum{};
    int fd = -1;
  };

  uint64_t fs_type = kLustreSuperMagic;
  int ioctl_result = 0;
  int open_result = 42;
  std::vector<Call> calls;

  int StatFsType(const std::string& path, uint64_t* f_type) override {
    calls.push_back({"statfs", path});
    *f_type = fs_type;
    return 0;
  }
  int Open(const std::string& path, int flags, mode_t mode) override {
    calls.push_back({"open", path, flags, mode});
    return open_result;
  }
  int Ioctl(int fd, unsigned long request, void* arg) override {  // NOLINT(runtime/int)
    Call c{"ioctl"};
    c.fd = fd;
    c.request = request;
    std::memcpy(&c.lum, arg, sizeof c.lum);
    calls.push_back(c);
    return ioctl_result;
  }
  int Close(int fd) override {
    Call c{"close"};
    c.fd = fd;
    calls.push_back(c);
    return 0;
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const Call& c : calls) out.push_back(c.name);
    return out;
  }
};

TEST(LustreTest, ConstantsMatchLustreUserHeader) {
  EXPECT_EQ(sizeof(LovUserMdV1), 32u);
  EXPECT_EQ(offsetof(LovUserMdV1, lmm_stripe_size), 24u);
  EXPECT_EQ(offsetof(LovUserMdV1, lmm_stripe_count), 28u);
  EXPECT_EQ(offsetof(LovUserMdV1, lmm_stripe_offset), 30u);
  // _IOW('f', 154, long) on a 64-bit host: direction write (1 << 30), size 8, type 'f', nr 154.
  EXPECT_EQ(kLlIocLovSetStripe, (1UL << 30) | (8UL << 16) | ('f' << 8) | 154UL);
  EXPECT_EQ(kOLovDelayCreate, O_NOCTTY | FASYNC);
}

TEST(LustreTest, DetectsByStatfsType) {
  FakeSyscalls sys;
  EXPECT_TRUE(*IsLustre("/lustre/x", sys));
  sys.fs_type = 0xEF53;  // ext4
  EXPECT_FALSE(*IsLustre("/lustre/x", sys));
  // The real call on a real directory: not Lustre here, and no error.
  auto here = IsLustre("/tmp", *RealLustreSyscalls());
  ASSERT_TRUE(here.ok());
  EXPECT_FALSE(*here);
  auto missing = IsLustre("/no/such/dir", *RealLustreSyscalls());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(LustreTest, CreateStripedCallSequence) {
  FakeSyscalls sys;
  StripeOptions o;
  o.stripe_count = 4;
  o.stripe_size = 1 << 20;
  ASSERT_TRUE(CreateStriped("/lustre/ckpt/rank-00001.bin", o, 0640, sys).ok());
  ASSERT_EQ(sys.Names(), (std::vector<std::string>{"open", "ioctl", "close"}));
  const auto& open = sys.calls[0];
  EXPECT_EQ(open.path, "/lustre/ckpt/rank-00001.bin");
  EXPECT_EQ(open.flags & (O_CREAT | O_WRONLY), O_CREAT | O_WRONLY);
  EXPECT_EQ(open.flags & kOLovDelayCreate, kOLovDelayCreate);
  EXPECT_EQ(open.mode, 0640u);
  const auto& ioctl = sys.calls[1];
  EXPECT_EQ(ioctl.fd, 42);
  EXPECT_EQ(ioctl.request, kLlIocLovSetStripe);
  EXPECT_EQ(ioctl.lum.lmm_magic, 0x0BD10BD0u);
  EXPECT_EQ(ioctl.lum.lmm_pattern, 1u);
  EXPECT_EQ(ioctl.lum.lmm_stripe_size, 1u << 20);
  EXPECT_EQ(ioctl.lum.lmm_stripe_count, 4);
  EXPECT_EQ(ioctl.lum.lmm_stripe_offset, 0xFFFF);  // -1: any OST
  EXPECT_EQ(ioctl.lum.lmm_oi_id, 0u);
  EXPECT_EQ(sys.calls[2].fd, 42);
}

TEST(LustreTest, AllOstsAndExistingLayout) {
  FakeSyscalls sys;
  StripeOptions o;
  o.stripe_count = -1;
  sys.ioctl_result = -EEXIST;
  Status st = CreateStriped("/lustre/f", o, 0644, sys);
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(st.message().find("already has a Lustre layout"), std::string::npos);
  EXPECT_EQ(sys.calls[1].lum.lmm_stripe_count, 0xFFFF);
  EXPECT_EQ(sys.Names().back(), "close");  // the descriptor is closed on every path
}

TEST(LustreTest, ErrorsNameTheCallAndPath) {
  FakeSyscalls sys;
  sys.ioctl_result = -EINVAL;
  Status st = CreateStriped("/lustre/f", StripeOptions{}, 0644, sys);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("LL_IOC_LOV_SETSTRIPE on '/lustre/f'"), std::string::npos)
      << st.ToString();
  EXPECT_EQ(sys.Names().back(), "close");
  FakeSyscalls no_open;
  no_open.open_result = -EACCES;
  st = CreateStriped("/lustre/f", StripeOptions{}, 0644, no_open);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(no_open.Names(), (std::vector<std::string>{"open"}));
}

TEST(LustreTest, StripeOptionsAreValidated) {
  StripeOptions o;
  o.stripe_size = 100000;  // not a multiple of 64 KiB
  EXPECT_EQ(ValidateStripeOptions(o).code(), StatusCode::kInvalidArgument);
  FakeSyscalls sys;
  EXPECT_FALSE(CreateStriped("/lustre/f", o, 0644, sys).ok());
  EXPECT_TRUE(sys.calls.empty());  // nothing touched the file system
  o = StripeOptions{};
  o.stripe_count = -2;
  EXPECT_FALSE(ValidateStripeOptions(o).ok());
  o = StripeOptions{};
  o.stripe_size = 0;  // file-system default
  EXPECT_TRUE(ValidateStripeOptions(o).ok());
}

TEST(LustreTest, HookSkipsEverythingOffLustre) {
  FakeSyscalls sys;
  sys.fs_type = 0x01021994;  // tmpfs
  LustreLayoutHook hook(StripeOptions{}, &sys);
  EXPECT_TRUE(hook.PrepareFile("/scratch/step/rank-00000.bin", 0644).ok());
  EXPECT_TRUE(hook.PrepareFile("/scratch/step/rank-00001.bin", 0644).ok());
  // One statfs for the directory (cached), no open or ioctl.
  EXPECT_EQ(sys.Names(), (std::vector<std::string>{"statfs"}));
  EXPECT_EQ(sys.calls[0].path, "/scratch/step");
}

TEST(LustreTest, HookStripesOnLustreAndKeepsExistingLayouts) {
  FakeSyscalls sys;
  LustreLayoutHook hook(StripeOptions{}, &sys);
  ASSERT_TRUE(hook.PrepareFile("/lustre/step/rank-00000.bin", 0644).ok());
  EXPECT_EQ(sys.Names(), (std::vector<std::string>{"statfs", "open", "ioctl", "close"}));
  EXPECT_EQ(sys.calls[2].lum.lmm_stripe_count, 1);        // default: one OST per rank file
  EXPECT_EQ(sys.calls[2].lum.lmm_stripe_size, 4u << 20);  // 4 MiB
  sys.ioctl_result = -EEXIST;
  EXPECT_TRUE(hook.PrepareFile("/lustre/step/rank-00001.bin", 0644).ok());
}

TEST(LustreTest, PosixFsCallsTheHookForDataFilesOnly) {
  base::ScopedTempDir tmp("lustre-test");
  ASSERT_FALSE(tmp.path().empty());
  const std::string& dir = tmp.path();
  FakeSyscalls sys;  // pretends the directory is on Lustre
  auto fs = NewPosixFs(std::make_shared<LustreLayoutHook>(StripeOptions{}, &sys));
  OpenOptions data;
  data.data_file = true;
  auto shard = fs->NewWritableFile(dir + "/rank-00000.bin", data);
  ASSERT_TRUE(shard.ok());
  ASSERT_TRUE((*shard)->Write("abc").ok());
  ASSERT_TRUE((*shard)->Close().ok());
  EXPECT_EQ(sys.Names(), (std::vector<std::string>{"statfs", "open", "ioctl", "close"}));
  EXPECT_EQ(sys.calls[1].path, dir + "/rank-00000.bin");
  sys.calls.clear();
  auto small = fs->NewWritableFile(dir + "/manifest.json", OpenOptions{});
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(sys.calls.empty());
}

}  // namespace
}  // namespace railyard::storage
