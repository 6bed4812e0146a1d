// Lustre awareness: detect a Lustre mount and set the striping of new checkpoint shards.
//
// On Lustre a file's layout (how many object storage targets it is spread over, in which
// stripe size) is fixed when its first byte is written, so it has to be set between creating
// the file and writing it: open(O_CREAT | O_LOV_DELAY_CREATE) creates the file without
// objects, ioctl(LL_IOC_LOV_SETSTRIPE) with a `lov_user_md_v1` gives it its layout. This file
// does that with the structure and constants of lustre_user.h re-declared here, so the build
// needs no Lustre headers. On any other file system (statfs f_type != 0x0BD00BD0) everything
// is skipped, without error.
//
//   auto hook = std::make_shared<LustreLayoutHook>(StripeOptions{.stripe_count = 1});
//   auto fs = NewPosixFs(hook);    // shards created through fs get the layout on Lustre
//
// Every system call goes through `LustreSyscalls`, so tests inject the file-system type and
// check the exact call sequence without a Lustre client.
//
// Thread-safety: the free functions are safe to call concurrently when `sys` is;
// LustreLayoutHook is thread-safe.
#pragma once

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "railyard/base/status.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {

inline constexpr uint64_t kLustreSuperMagic = 0x0BD00BD0;  // statfs f_type
inline constexpr uint32_t kLovUserMagicV1 = 0x0BD10BD0;
inline constexpr uint32_t kLovPatternRaid0 = 1;
// Lustre's O_LOV_DELAY_CREATE: create the inode without objects so the layout can be set.
inline constexpr int kOLovDelayCreate = O_NOCTTY | FASYNC;
inline constexpr unsigned long kLlIocLovSetStripe = _IOW('f', 154, long);  // NOLINT(runtime/int)
inline constexpr uint64_t kLustreStripeUnit = 64 * 1024;  // stripe sizes are multiples of this

// lustre_user.h's struct lov_user_md_v1 without the trailing object array.
struct __attribute__((packed)) LovUserMdV1 {
  uint32_t lmm_magic;
  uint32_t lmm_pattern;
  uint64_t lmm_oi_id;  // struct ost_id lmm_oi: zero when setting a layout
  uint64_t lmm_oi_seq;
  uint32_t lmm_stripe_size;
  uint16_t lmm_stripe_count;
  uint16_t lmm_stripe_offset;
};
static_assert(sizeof(LovUserMdV1) == 32, "lov_user_md_v1 is 32 bytes");

struct StripeOptions {
  // Defaults for file-per-rank checkpoints: one stripe per file (ranks usually outnumber OSTs,
  // so each rank's file on its own OST spreads the load without lock contention), 4 MiB
  // stripes to match the writer's large aligned extents.
  uint64_t stripe_size = 4 << 20;  // bytes; a multiple of 64 KiB, or 0 for the FS default
  int stripe_count = 1;            // 0 = FS default, -1 = all OSTs
  int stripe_offset = -1;          // first OST index, -1 = any
};

// INVALID_ARGUMENT naming the field when the options cannot be encoded.
Status ValidateStripeOptions(const StripeOptions& options);

// The lov_user_md_v1 for `options` (validated first).
Result<LovUserMdV1> MakeLovUserMd(const StripeOptions& options);

// The system calls this file makes. Each returns >= 0 on success or -errno on failure.
class LustreSyscalls {
 public:
  virtual ~LustreSyscalls() = default;
  virtual int StatFsType(const std::string& path, uint64_t* f_type) = 0;
  virtual int Open(const std::string& path, int flags, mode_t mode) = 0;
  virtual int Ioctl(int fd, unsigned long request, void* arg) = 0;  // NOLINT(runtime/int)
  virtual int Close(int fd) = 0;
};

// The real calls. Never null; not owned.
LustreSyscalls* RealLustreSyscalls();

// Whether `path` (a file or directory that exists) is on Lustre.
Result<bool> IsLustre(const std::string& path, LustreSyscalls& sys);

// Creates `path` with the layout: open(O_CREAT|O_WRONLY|O_LOV_DELAY_CREATE|O_CLOEXEC, mode),
// ioctl(LL_IOC_LOV_SETSTRIPE), close. ALREADY_EXISTS when the file already has a layout
// (EEXIST from the ioctl); other errors name the path and the call.
Status CreateStriped(const std::string& path, const StripeOptions& options, int mode,
                     LustreSyscalls& sys);

// A LayoutHook that stripes data files on Lustre and does nothing elsewhere. Detection is
// done once per directory and cached.
class LustreLayoutHook final : public LayoutHook {
 public:
  explicit LustreLayoutHook(StripeOptions options, LustreSyscalls* sys = RealLustreSyscalls())
      : options_(options), sys_(sys) {}

  // OK and no call beyond statfs off Lustre; OK when the file already has a layout.
  Status PrepareFile(const std::string& path, int mode) override;

 private:
  StripeOptions options_;
  LustreSyscalls* sys_;
  std::mutex mu_;
  std::map<std::string, bool> is_lustre_;  // directory -> detected
};

}  // namespace railyard::storage
