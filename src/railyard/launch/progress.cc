#include "railyard/launch/progress.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace railyard::launch {
namespace {

// The datagram quoted in an error, cut so a flood of junk cannot make huge messages.
std::string Quote(std::string_view text) {
  constexpr size_t kMax = 48;
  std::string out;
  for (char c : text.substr(0, kMax)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > kMax) out += "...";
  return "'" + out + "'";
}

// Non-negative decimal, no sign, no spaces.
bool ParseCount(std::string_view s, int64_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> SplitSpaces(std::string_view s) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t space = s.find(' ', pos);
    if (space == std::string_view::npos) space = s.size();
    words.push_back(s.substr(pos, space - pos));
    pos = space + 1;
  }
  return words;
}

Result<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument("progress socket path '{}' must be 1 to {} bytes long", path,
                           sizeof(addr.sun_path) - 1);
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

}  // namespace

std::string FormatProgressEvent(const ProgressEvent& event) {
  if (event.kind == ProgressEvent::Kind::kStep) {
    return fmt::format("step {} {} {}", event.rank, event.step, event.unix_ns);
  }
  return fmt::format("beat {} {}", event.rank, event.unix_ns);
}

Result<ProgressEvent> ParseProgressEvent(std::string_view datagram) {
  // A trailing newline is tolerated: `echo` and print() habits should not count as junk.
  if (!datagram.empty() && datagram.back() == '\n') datagram.remove_suffix(1);
  std::vector<std::string_view> words = SplitSpaces(datagram);
  ProgressEvent event;
  size_t want;
  if (words[0] == "beat") {
    event.kind = ProgressEvent::Kind::kBeat;
    want = 3;
  } else if (words[0] == "step") {
    event.kind = ProgressEvent::Kind::kStep;
    want = 4;
  } else {
    return InvalidArgument(
        "progress datagram {}: expected 'beat <rank> <unix_ns>' or "
        "'step <rank> <n> <unix_ns>'",
        Quote(datagram));
  }
  if (words.size() != want) {
    return InvalidArgument(
        "progress datagram {}: '{}' takes {} numbers separated by single "
        "spaces, got {} fields",
        Quote(datagram), words[0], want - 1, words.size() - 1);
  }
  int64_t rank = 0;
  if (!ParseCount(words[1], &rank) || rank > INT32_MAX) {
    return InvalidArgument("progress datagram {}: rank must be a non-negative decimal",
                           Quote(datagram));
  }
  event.rank = static_cast<int>(rank);
  if (event.kind == ProgressEvent::Kind::kStep && !ParseCount(words[2], &event.step)) {
    return InvalidArgument("progress datagram {}: step must be a non-negative decimal",
                           Quote(datagram));
  }
  if (!ParseCount(words.back(), &event.unix_ns)) {
    return InvalidArgument("progress datagram {}: unix_ns must be a non-negative decimal",
                           Quote(datagram));
  }
  return event;
}

int64_t UnixNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// ---------------------------------------------------------------------------------------
// ProgressReporter

Result<ProgressReporter> ProgressReporter::FromEnvironment(const EnvGetter& getenv) {
  auto get = [&](const char* name) -> std::string_view {
    const char* v = getenv ? getenv(name) : std::getenv(name);
    return v == nullptr ? std::string_view() : std::string_view(v);
  };
  std::string_view path = get(kProgressEnvVar);
  if (path.empty()) return Disabled();
  const char* rank_var = "RAILYARD_RANK";
  std::string_view rank_text = get(rank_var);
  if (rank_text.empty()) {
    rank_var = "RANK";
    rank_text = get(rank_var);
  }
  int64_t rank = 0;
  if (!ParseCount(rank_text, &rank) || rank > INT32_MAX) {
    return InvalidArgument(
        "{} is set to '{}', so the rank must come from RAILYARD_RANK or RANK, "
        "but {} is '{}' (expected a non-negative decimal)",
        kProgressEnvVar, path, rank_var, rank_text);
  }
  return Connect(std::string(path), static_cast<int>(rank));
}

Result<ProgressReporter> ProgressReporter::Connect(std::string socket_path, int rank) {
  RY_RETURN_IF_ERROR(UnixAddress(socket_path));
  if (rank < 0) return InvalidArgument("progress reporter: rank {} is negative", rank);
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "progress reporter: socket(AF_UNIX, SOCK_DGRAM)");
  ProgressReporter reporter;
  reporter.fd_ = std::move(fd);
  reporter.path_ = std::move(socket_path);
  reporter.rank_ = rank;
  return reporter;
}

Status ProgressReporter::Heartbeat() {
  return Send({.kind = ProgressEvent::Kind::kBeat, .rank = rank_, .unix_ns = UnixNowNs()});
}

Status ProgressReporter::Step(int64_t n) {
  if (n < 0) return InvalidArgument("progress reporter: step {} is negative", n);
  return Send(
      {.kind = ProgressEvent::Kind::kStep, .rank = rank_, .step = n, .unix_ns = UnixNowNs()});
}

Status ProgressReporter::Send(const ProgressEvent& event) {
  if (!enabled()) return Status::Ok();
  // Addressed on every send rather than connected once: a supervisor that re-binds the
  // path (after its own restart) is found again.
  RY_ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(path_));
  std::string text = FormatProgressEvent(event);
  ssize_t n;
  do {
    n = ::sendto(fd_.get(), text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    int err = errno;
    return Unavailable("progress event of rank {} dropped: sendto {}: {}", rank_, path_,
                       std::strerror(err));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// ProgressListener

Result<std::unique_ptr<ProgressListener>> ProgressListener::Bind(std::string socket_path,
                                                                 ProgressListenerOptions options) {
  if (options.world_size < 1) {
    return InvalidArgument("progress listener at {}: world_size {} must be at least 1", socket_path,
                           options.world_size);
  }
  RY_ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(socket_path));
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "progress listener: socket(AF_UNIX, SOCK_DGRAM)");
  // A socket file left by a supervisor that died would make bind fail with EADDRINUSE. Only
  // a socket is removed: a regular file at a mistyped path is left alone and bind fails.
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      ::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, fmt::format("progress listener: removing stale {}", socket_path));
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus(errno, fmt::format("progress listener: bind {}", socket_path));
  }
  if (::lstat(socket_path.c_str(), &st) != 0) {
    return ErrnoStatus(errno, fmt::format("progress listener: stat {}", socket_path));
  }
  // Best effort: a larger queue keeps bursts of heartbeats from being dropped.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &options.receive_buffer_bytes,
               sizeof(options.receive_buffer_bytes));
  return std::unique_ptr<ProgressListener>(new ProgressListener(
      std::move(fd), std::move(socket_path), FileId{st.st_dev, st.st_ino}, options));
}

ProgressListener::ProgressListener(base::UniqueFd fd, std::string path, FileId file,
                                   ProgressListenerOptions options)
    : fd_(std::move(fd)),
      path_(std::move(path)),
      file_(file),
      options_(options),
      ranks_(options.world_size) {}

ProgressListener::~ProgressListener() {
  fd_.Reset();
  // Unless another listener has since taken the path over: its socket is not ours to remove.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == file_.dev && st.st_ino == file_.ino) {
    ::unlink(path_.c_str());
  }
}

Result<size_t> ProgressListener::Poll(base::Deadline deadline) {
  pollfd pfd{.fd = fd_.get(), .events = POLLIN, .revents = 0};
  for (;;) {
    int rc = ::poll(&pfd, 1, deadline.PollTimeoutMs());
    if (rc > 0) break;
    if (rc == 0) return size_t{0};
    if (errno != EINTR) return ErrnoStatus(errno, fmt::format("progress listener: poll {}", path_));
    if (deadline.Expired()) return size_t{0};
  }
  size_t applied = 0;
  // One byte more than the limit, so an over-long datagram is seen as such, not truncated.
  char buf[kMaxProgressDatagram + 1];
  for (size_t i = 0; i < options_.max_batch; ++i) {
    ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return ErrnoStatus(errno, fmt::format("progress listener: recv {}", path_));
    }
    if (static_cast<size_t>(n) > kMaxProgressDatagram) {
      Reject(fmt::format("datagram of {} bytes, over the limit of {}", n, kMaxProgressDatagram));
      continue;
    }
    Result<ProgressEvent> event = ParseProgressEvent(std::string_view(buf, n));
    if (!event.ok()) {
      Reject(event.status().message());
      continue;
    }
    if (event->rank >= options_.world_size) {
      Reject(fmt::format("progress datagram from rank {}, outside world size {}", event->rank,
                         options_.world_size));
      continue;
    }
    Apply(*event, base::Clock::now());
    ++applied;
  }
  return applied;
}

void ProgressListener::Apply(const ProgressEvent& event, base::Clock::time_point now) {
  RankProgress& r = ranks_[event.rank];
  r.heard = true;
  r.last_heard = now;
  r.last_unix_ns = event.unix_ns;
  ++received_;
  if (event.kind != ProgressEvent::Kind::kStep) return;
  // A step that goes backwards (a restarted rank's first steps arrive while old ones were
  // queued) starts the duration chain afresh rather than giving a negative time.
  if (r.last_step >= 0 && event.step > r.last_step && event.unix_ns >= r.last_step_unix_ns) {
    int64_t per_step = (event.unix_ns - r.last_step_unix_ns) / (event.step - r.last_step);
    r.step_times.push_back(base::Duration(per_step));
    while (r.step_times.size() > options_.step_history) r.step_times.pop_front();
  }
  if (r.last_step < 0 || event.step != r.last_step) {
    r.last_step = event.step;
    r.last_step_unix_ns = event.unix_ns;
  }
}

void ProgressListener::Reject(std::string why) {
  ++malformed_;
  last_malformed_ = std::move(why);
}

}  // namespace railyard::launch
