#include "railyard/net/store/file_store.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <thread>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"

namespace railyard::net {
namespace {

// NAME_MAX is 255; leave room for the "k."/"l." prefix and WriteFileAtomic's
// ".tmp.<pid>.<n>" suffix.
constexpr size_t kMaxEscapedName = 200;
constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kMaxPoll = std::chrono::milliseconds(50);
// A signed value file: this line, 64 hex digits of the HMAC, a newline, then the value.
constexpr std::string_view kSignedPrefix = "railyard-signed hmac-sha256 ";
constexpr size_t kSignedHeaderBytes = kSignedPrefix.size() + 64 + 1;

void PutField(std::string& out, std::string_view field) {
  for (int i = 3; i >= 0; --i) out += static_cast<char>(field.size() >> (8 * i));
  out += field;
}

// HMAC over the key and the value, so that a signed value cannot be moved to another key.
std::string ValueMac(std::string_view secret, std::string_view key, std::string_view value) {
  std::string msg;
  PutField(msg, "railyard-file-store");
  PutField(msg, key);
  PutField(msg, value);
  base::Sha256Digest d = base::HmacSha256(secret, msg);
  return base::ToHex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

std::string Escape(std::string_view key) {
  std::string out;
  for (char c : key) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
    if (plain) {
      out += c;
    } else {
      // '.' is escaped too: escaped names never contain a dot, so they can never look like
      // ".", "..", or one of WriteFileAtomic's temporary files.
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

// Sleeps between polls of the shared directory: short at first (the key is often just about
// to appear), growing so hundreds of waiting ranks do not hammer the metadata server.
class Backoff {
 public:
  // False when the deadline has passed (no sleep then).
  bool Wait(base::Deadline deadline) {
    if (deadline.Expired()) return false;
    std::this_thread::sleep_for(std::min<base::Duration>(next_, deadline.Remaining()));
    next_ = std::min<base::Duration>(next_ * 2, kMaxPoll);
    return true;
  }

 private:
  base::Duration next_ = kFirstPoll;
};

class FileStore final : public Store {
 public:
  FileStore(std::string dir, std::string secret)
      : dir_(std::move(dir)), secret_(std::move(secret)) {}

  Status Set(std::string_view key, std::string_view value, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    RY_RETURN_IF_ERROR(CheckValue(key, value));
    RY_ASSIGN_OR_RETURN(base::FileLock lock, Lock(key, deadline));
    return Write(key, value);
  }

  Result<std::string> Get(std::string_view key, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    Backoff backoff;
    for (;;) {
      Result<std::string> value = base::ReadFile(ValuePath(key));
      if (value.ok()) return Open(key, std::move(value).value());
      if (value.status().code() != StatusCode::kNotFound) {
        return value.status().WithContext(fmt::format("{}: Get '{}'", Describe(), key));
      }
      if (!backoff.Wait(deadline)) {
        return DeadlineExceeded("{}: key '{}' was not set before the deadline (file {})",
                                Describe(), key, ValuePath(key));
      }
    }
  }

  Result<int64_t> Add(std::string_view key, int64_t delta, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    RY_ASSIGN_OR_RETURN(base::FileLock lock, Lock(key, deadline));
    RY_ASSIGN_OR_RETURN(std::string present, ReadPresent(key));
    int64_t current = 0;
    if (!present.empty()) {
      auto [end, ec] = std::from_chars(present.data(), present.data() + present.size(), current);
      if (ec != std::errc() || end != present.data() + present.size()) {
        return InvalidArgument("{}: key '{}' holds '{}', not an integer", Describe(), key,
                               present.substr(0, 64));
      }
    }
    if (__builtin_add_overflow(current, delta, &current)) {
      return InvalidArgument("{}: adding {} to key '{}' ({}) overflows a 64-bit integer",
                             Describe(), delta, key, present);
    }
    RY_RETURN_IF_ERROR(Write(key, std::to_string(current)));
    return current;
  }

  Result<std::string> CompareAndSet(std::string_view key, std::string_view expected,
                                    std::string_view desired, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    RY_RETURN_IF_ERROR(CheckValue(key, desired));
    RY_ASSIGN_OR_RETURN(base::FileLock lock, Lock(key, deadline));
    RY_ASSIGN_OR_RETURN(std::string present, ReadPresent(key));
    if (present != expected) return present;
    RY_RETURN_IF_ERROR(Write(key, desired));
    return std::string(desired);
  }

  using Store::Wait;
  Status Wait(std::span<const std::string> keys, base::Deadline deadline,
              std::vector<std::string>* missing_out) override {
    for (const auto& k : keys) RY_RETURN_IF_ERROR(CheckKey(k));
    std::vector<std::string> missing(keys.begin(), keys.end());
    Backoff backoff;
    for (;;) {
      // Keys once seen stay set (the store never deletes), so only the rest are looked at.
      // A key counts as set once its value is there and, with a secret, signed by it.
      Status forged;
      std::erase_if(missing, [&](const std::string& k) {
        if (!forged.ok() || !base::PathExists(ValuePath(k))) return false;
        if (secret_.empty()) return true;
        Result<std::string> value = ReadPresent(k);
        if (!value.ok()) forged = value.status();
        return value.ok();
      });
      RY_RETURN_IF_ERROR(forged);
      if (missing.empty()) return Status::Ok();
      if (!backoff.Wait(deadline)) {
        if (missing_out != nullptr) *missing_out = missing;
        return DeadlineExceeded("{}: keys not set before the deadline: {}", Describe(),
                                fmt::join(missing, ", "));
      }
    }
  }

  std::string Describe() const override { return "file store " + dir_; }

 private:
  std::string ValuePath(std::string_view key) const {
    return dir_ + "/k." + FileStoreKeyFileName(key);
  }

  Result<base::FileLock> Lock(std::string_view key, base::Deadline deadline) const {
    std::string path = dir_ + "/l." + FileStoreKeyFileName(key);
    // Created owner-only here: FileLock would create it with the default mode.
    base::UniqueFd created(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    auto lock = base::FileLock::Acquire(path, deadline);
    if (!lock.ok()) {
      return lock.status().WithContext(fmt::format("{}: locking key '{}'", Describe(), key));
    }
    return lock;
  }

  // The present value, "" when the key is absent (as Add and CompareAndSet define it).
  Result<std::string> ReadPresent(std::string_view key) const {
    Result<std::string> value = base::ReadFile(ValuePath(key));
    if (value.ok()) return Open(key, std::move(value).value());
    if (value.status().code() == StatusCode::kNotFound) return std::string();
    return value.status().WithContext(fmt::format("{}: reading key '{}'", Describe(), key));
  }

  // The value in a key's file: checked against the secret's signature when there is one.
  Result<std::string> Open(std::string_view key, std::string contents) const {
    if (secret_.empty()) return contents;
    std::string_view c = contents;
    bool signed_form = c.size() >= kSignedHeaderBytes && c.starts_with(kSignedPrefix) &&
                       c[kSignedHeaderBytes - 1] == '\n';
    if (!signed_form) {
      return PermissionDenied(
          "{}: key '{}' (file {}) is not signed with the job secret: written by something "
          "other than this job's ranks; refusing it",
          Describe(), key, ValuePath(key));
    }
    std::string_view mac = c.substr(kSignedPrefix.size(), 64);
    std::string_view value = c.substr(kSignedHeaderBytes);
    if (!base::ConstantTimeEqual(mac, ValueMac(secret_, key, value))) {
      return PermissionDenied(
          "{}: key '{}' (file {}) carries a signature that does not match the job secret: "
          "forged, moved from another key, or written with a different RAILYARD_JOB_SECRET; "
          "refusing it",
          Describe(), key, ValuePath(key));
    }
    return std::string(value);
  }

  Status Write(std::string_view key, std::string_view value) const {
    std::string contents;
    if (!secret_.empty()) {
      contents.reserve(kSignedHeaderBytes + value.size());
      contents += kSignedPrefix;
      contents += ValueMac(secret_, key, value);
      contents += '\n';
    }
    contents += value;
    Status s = base::WriteFileAtomic(ValuePath(key), contents, 0600);
    if (s.ok()) return s;
    return s.WithContext(fmt::format("{}: writing key '{}'", Describe(), key));
  }

  Status CheckKey(std::string_view key) const { return CheckStoreKey(Describe(), key); }
  Status CheckValue(std::string_view key, std::string_view value) const {
    return CheckStoreValue(Describe(), key, value);
  }

  const std::string dir_;
  const std::string secret_;
};

}  // namespace

std::string FileStoreKeyFileName(std::string_view key) {
  std::string escaped = Escape(key);
  if (escaped.size() <= kMaxEscapedName) return escaped;
  // The cut keeps the name readable; the hash of the whole key keeps distinct keys distinct.
  base::Sha256Digest d = base::Sha256(key);
  std::string hash =
      base::ToHex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
  // Cut only between escapes, never inside a "%XX".
  size_t cut = kMaxEscapedName - hash.size() - 1;
  while (cut > 0 && (escaped[cut - 1] == '%' || (cut > 1 && escaped[cut - 2] == '%'))) --cut;
  return escaped.substr(0, cut) + "~" + hash;
}

Result<std::unique_ptr<Store>> OpenFileStore(std::string dir, std::string secret) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return InvalidArgument("file store directory is empty");
  size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    RY_RETURN_IF_ERROR(base::MakeDirs(dir.substr(0, slash)).WithContext("file store " + dir));
  }
  // The store's own directory is owner-only when this call creates it; one made beforehand
  // keeps its mode (values are signed when there is a secret, whoever can write there).
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, fmt::format("file store {}: cannot create the directory", dir));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus(errno, "file store " + dir);
  if (!S_ISDIR(st.st_mode)) {
    return FailedPrecondition("file store {}: not a directory", dir);
  }
  return std::unique_ptr<Store>(std::make_unique<FileStore>(std::move(dir), std::move(secret)));
}

}  // namespace railyard::net
