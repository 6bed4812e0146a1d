#include "railyard/base/files.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>

#include "railyard/base/strings.h"

namespace railyard::base {
namespace {

std::atomic<uint64_t> temp_counter{0};

}  // namespace

std::string ParentDir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
  std::string out;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, fmt::format("cannot read '{}'", path));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<std::string> ReadFileTail(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
  off_t end = ::lseek(fd.get(), 0, SEEK_END);
  if (end < 0) return ErrnoStatus(errno, fmt::format("cannot seek in '{}'", path));
  off_t from = end > static_cast<off_t>(max_bytes) ? end - static_cast<off_t>(max_bytes) : 0;
  std::string out(static_cast<size_t>(end - from), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd.get(), out.data() + got, out.size() - got, from + got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, fmt::format("cannot read '{}'", path));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

Status AppendToFile(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot open '{}' to append", path));
  return WriteAll(fd.get(), data, path);
}

std::optional<std::string> ReadTrimmedFile(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  return std::string(StripAsciiWhitespace(*text));
}

Status WaitFd(int fd, short events, Deadline deadline, std::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, deadline.PollTimeoutMs());
    if (r > 0) return Status::Ok();
    if (r == 0) return DeadlineExceeded("{}: no progress before the deadline", what);
    if (errno != EINTR) return ErrnoStatus(errno, what);
  }
}

Status WriteAll(int fd, std::string_view data, std::string_view what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, fmt::format("write to {}", what));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FsyncDirectory(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot open directory '{}'", dir));
  if (::fsync(fd.get()) != 0) {
    return ErrnoStatus(errno, fmt::format("fsync of directory '{}'", dir));
  }
  return Status::Ok();
}

std::string TempPathFor(const std::string& path) {
  return fmt::format("{}.tmp.{}.{}", path, ::getpid(), temp_counter.fetch_add(1));
}

Status ReplaceFileAtomic(const std::string& path, const AtomicReplaceSteps& steps) {
  const std::string tmp = TempPathFor(path);
  Status st = steps.write_synced(tmp);
  if (st.ok()) st = steps.rename(tmp, path);
  if (!st.ok()) {
    steps.remove(tmp);  // best effort; IsStaleTempFileName finds what is left after a crash
    return st;
  }
  // Without this fsync a crash can undo the rename: the directory entry is what changed.
  return steps.sync_dir(ParentDir(path));
}

Status WriteFileAtomic(const std::string& path, std::string_view data, int mode) {
  AtomicReplaceSteps steps;
  steps.write_synced = [&](const std::string& tmp) -> Status {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot create '{}'", tmp));
    RY_RETURN_IF_ERROR(WriteAll(fd.get(), data, fmt::format("'{}'", tmp)));
    // The umask may have narrowed `mode` at creation; the caller asked for exactly it.
    if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) {
      return ErrnoStatus(errno, fmt::format("chmod of '{}'", tmp));
    }
    if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, fmt::format("fsync of '{}'", tmp));
    if (::close(fd.Release()) != 0) return ErrnoStatus(errno, fmt::format("close of '{}'", tmp));
    return Status::Ok();
  };
  steps.rename = [](const std::string& from, const std::string& to) -> Status {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(errno, fmt::format("rename '{}' -> '{}'", from, to));
    }
    return Status::Ok();
  };
  steps.sync_dir = FsyncDirectory;
  steps.remove = [](const std::string& tmp) { ::unlink(tmp.c_str()); };
  return ReplaceFileAtomic(path, steps);
}

bool IsStaleTempFileName(std::string_view name) {
  auto pos = name.rfind(".tmp.");
  if (pos == std::string_view::npos) return false;
  // "<target>.tmp.<pid>.<n>": pid between ".tmp." and the next dot.
  std::string_view rest = name.substr(pos + 5);
  auto dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  pid_t pid = 0;
  for (char c : rest.substr(0, dot)) {
    if (c < '0' || c > '9' || pid > 100000000) return false;
    pid = pid * 10 + (c - '0');
  }
  if (pid == ::getpid()) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;  // EPERM: alive, someone else's
}

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), fmt::format("cannot create directory '{}'", dir));
  return Status::Ok();
}

Result<FileLock> FileLock::Acquire(const std::string& path, Deadline deadline) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot open lock file '{}'", path));
  // flock has no timeout: retry the non-blocking form until the deadline.
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return FileLock(std::move(fd));
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return ErrnoStatus(errno, fmt::format("cannot lock '{}'", path));
    }
    if (deadline.Expired()) {
      return DeadlineExceeded("lock '{}' is held by another command", path);
    }
    ::usleep(20000);
  }
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace railyard::base
