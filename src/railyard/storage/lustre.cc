#include "railyard/storage/lustre.h"

#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>

#include "railyard/base/files.h"
#include "railyard/base/logging.h"

namespace railyard::storage {
namespace {

const base::Logger kLog("ckpt");

class RealSyscalls final : public LustreSyscalls {
 public:
  int StatFsType(const std::string& path, uint64_t* f_type) override {
    struct statfs s;
    if (::statfs(path.c_str(), &s) != 0) return -errno;
    *f_type = static_cast<uint64_t>(s.f_type);
    return 0;
  }
  int Open(const std::string& path, int flags, mode_t mode) override {
    int fd = ::open(path.c_str(), flags, mode);
    return fd < 0 ? -errno : fd;
  }
  int Ioctl(int fd, unsigned long request, void* arg) override {  // NOLINT(runtime/int)
    return ::ioctl(fd, request, arg) < 0 ? -errno : 0;
  }
  int Close(int fd) override { return ::close(fd) < 0 ? -errno : 0; }
};

}  // namespace

LustreSyscalls* RealLustreSyscalls() {
  static RealSyscalls* sys = new RealSyscalls();
  return sys;
}

Status ValidateStripeOptions(const StripeOptions& o) {
  if (o.stripe_size % kLustreStripeUnit != 0 || o.stripe_size > 0xFFFF0000ULL) {
    return InvalidArgument(
        "lustre stripe_size {} must be a multiple of 64 KiB below 4 GiB (or 0 for the default)",
        o.stripe_size);
  }
  if (o.stripe_count < -1 || o.stripe_count > 65534) {
    return InvalidArgument("lustre stripe_count {} must be -1 (all OSTs), 0 (default) or 1..65534",
                           o.stripe_count);
  }
  if (o.stripe_offset < -1 || o.stripe_offset > 65534) {
    return InvalidArgument("lustre stripe_offset {} must be -1 (any OST) or 0..65534",
                           o.stripe_offset);
  }
  return Status::Ok();
}

Result<LovUserMdV1> MakeLovUserMd(const StripeOptions& o) {
  RY_RETURN_IF_ERROR(ValidateStripeOptions(o));
  LovUserMdV1 lum{};
  lum.lmm_magic = kLovUserMagicV1;
  lum.lmm_pattern = kLovPatternRaid0;
  lum.lmm_stripe_size = static_cast<uint32_t>(o.stripe_size);
  lum.lmm_stripe_count = static_cast<uint16_t>(o.stripe_count);    // -1 -> 0xFFFF
  lum.lmm_stripe_offset = static_cast<uint16_t>(o.stripe_offset);  // -1 -> 0xFFFF
  return lum;
}

Result<bool> IsLustre(const std::string& path, LustreSyscalls& sys) {
  uint64_t type = 0;
  int rc = sys.StatFsType(path, &type);
  if (rc < 0) return ErrnoStatus(-rc, fmt::format("statfs '{}'", path));
  return type == kLustreSuperMagic;
}

Status CreateStriped(const std::string& path, const StripeOptions& options, int mode,
                     LustreSyscalls& sys) {
  RY_ASSIGN_OR_RETURN(LovUserMdV1 lum, MakeLovUserMd(options));
  int fd =
      sys.Open(path, O_CREAT | O_WRONLY | O_CLOEXEC | kOLovDelayCreate, static_cast<mode_t>(mode));
  if (fd < 0) return ErrnoStatus(-fd, fmt::format("open '{}' with O_LOV_DELAY_CREATE", path));
  int rc = sys.Ioctl(fd, kLlIocLovSetStripe, &lum);
  int close_rc = sys.Close(fd);
  if (rc == -EEXIST) return AlreadyExists("'{}' already has a Lustre layout", path);
  if (rc < 0) {
    return ErrnoStatus(-rc, fmt::format("LL_IOC_LOV_SETSTRIPE on '{}' (stripe_count {}, "
                                        "stripe_size {})",
                                        path, options.stripe_count, options.stripe_size));
  }
  if (close_rc < 0) return ErrnoStatus(-close_rc, fmt::format("close '{}'", path));
  return Status::Ok();
}

Status LustreLayoutHook::PrepareFile(const std::string& path, int mode) {
  const std::string dir = base::ParentDir(path);
  bool lustre = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = is_lustre_.find(dir);
    if (it == is_lustre_.end()) {
      RY_ASSIGN_OR_RETURN(lustre, IsLustre(dir, *sys_));
      if (is_lustre_.size() > 1024) is_lustre_.clear();  // one entry per step directory
      is_lustre_[dir] = lustre;
      if (lustre) {
        kLog.Info("'{}' is on Lustre: striping shards over {} OST(s) of {} bytes", dir,
                  options_.stripe_count, options_.stripe_size);
      }
    } else {
      lustre = it->second;
    }
  }
  if (!lustre) return Status::Ok();
  Status st = CreateStriped(path, options_, mode, *sys_);
  if (st.code() == StatusCode::kAlreadyExists) return Status::Ok();  // keep the layout it has
  return st;
}

}  // namespace railyard::storage
