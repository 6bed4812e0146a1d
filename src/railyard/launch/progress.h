// Progress: how a rank tells its supervisor it is alive (heartbeat) and how far it got (step).
//
// The wire is language-neutral so that a Python script needs no Railyard binding: the launcher
// names a UNIX datagram socket in RAILYARD_PROGRESS, and a rank sends one datagram per event,
// plain ASCII text with single spaces:
//
//   beat <rank> <unix_ns>          the rank is alive
//   step <rank> <n> <unix_ns>      the rank finished step n (also counts as a heartbeat)
//
// <unix_ns> is the sender's CLOCK_REALTIME in nanoseconds; step durations come from the
// difference between consecutive step events of one rank, so they are measured on the rank's
// own host clock. docs/progress.md has the three lines of Python.
//
// Rank side:
//   RY_ASSIGN_OR_RETURN(auto reporter, launch::ProgressReporter::FromEnvironment());
//   for (int64_t step = 0; ...; ++step) { ...; reporter.Step(step).IgnoreError(); }
// Without RAILYARD_PROGRESS the reporter does nothing, so the same program runs outside the
// launcher. Sending never blocks: when the supervisor's queue is full or it is gone the event
// is dropped and the call returns UNAVAILABLE, which a training loop may ignore.
//
// Supervisor side: ProgressListener binds the socket and, on each Poll, drains queued events
// into per-rank state (when it last heard from the rank, its last step, its recent step
// durations). Malformed datagrams and ranks out of range are counted, never fatal.
//
// Thread-safety: a ProgressReporter may be used from several threads (each call is one
// sendto). A ProgressListener is used by one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/base/status.h"

namespace railyard::launch {

// The environment variable naming the supervisor's socket path.
inline constexpr char kProgressEnvVar[] = "RAILYARD_PROGRESS";

// The longest datagram the listener accepts; longer ones are malformed.
inline constexpr size_t kMaxProgressDatagram = 128;

struct ProgressEvent {
  enum class Kind { kBeat, kStep };
  Kind kind = Kind::kBeat;
  int rank = 0;
  int64_t step = 0;     // kStep only
  int64_t unix_ns = 0;  // sender's CLOCK_REALTIME
  friend bool operator==(const ProgressEvent&, const ProgressEvent&) = default;
};

// The datagram text for `event` ("beat 3 1700000000000000000").
std::string FormatProgressEvent(const ProgressEvent& event);
// Parses one datagram. INVALID_ARGUMENT quoting (a prefix of) the text and saying what was
// expected: an unknown word, a missing or extra field, a non-decimal or negative number.
Result<ProgressEvent> ParseProgressEvent(std::string_view datagram);

// Nanoseconds since the UNIX epoch (CLOCK_REALTIME).
int64_t UnixNowNs();

class ProgressReporter {
 public:
  // Looks a variable up by name; nullptr when unset. ::getenv by default.
  using EnvGetter = std::function<const char*(const char*)>;

  // RAILYARD_PROGRESS unset or empty: a disabled reporter. Set: the rank comes from
  // RAILYARD_RANK (else torchrun's RANK); INVALID_ARGUMENT when neither is a rank number.
  static Result<ProgressReporter> FromEnvironment(const EnvGetter& getenv = nullptr);
  // Sends to the socket at `socket_path` as `rank`. Errors creating the local socket only;
  // the supervisor need not be listening yet.
  static Result<ProgressReporter> Connect(std::string socket_path, int rank);
  // A reporter that sends nothing.
  static ProgressReporter Disabled() { return ProgressReporter(); }

  ProgressReporter(ProgressReporter&&) = default;
  ProgressReporter& operator=(ProgressReporter&&) = default;

  bool enabled() const { return fd_.valid(); }
  int rank() const { return rank_; }

  // OK when sent or disabled; UNAVAILABLE (naming the socket) when the event was dropped:
  // no supervisor at the path, or its queue is full.
  Status Heartbeat();
  Status Step(int64_t n);

 private:
  ProgressReporter() = default;
  Status Send(const ProgressEvent& event);

  base::UniqueFd fd_;
  std::string path_;
  int rank_ = -1;
};

struct ProgressListenerOptions {
  int world_size = 0;                  // ranks outside [0, world_size) are counted as malformed
  size_t step_history = 64;            // step durations kept per rank (oldest dropped)
  size_t max_batch = 4096;             // datagrams drained per Poll, so one Poll cannot run forever
  int receive_buffer_bytes = 1 << 20;  // SO_RCVBUF asked for; the kernel may grant less
};

// What the supervisor knows about one rank.
struct RankProgress {
  bool heard = false;                  // any valid event received
  base::Clock::time_point last_heard;  // supervisor's monotonic time of the last event
  int64_t last_unix_ns = 0;            // the sender's stamp on the last event
  int64_t last_step = -1;              // -1: no step reported yet
  int64_t last_step_unix_ns = 0;
  // Duration of each recent step, oldest first: (t_n - t_prev) / (n - prev) between
  // consecutive step events; at most step_history entries.
  std::deque<base::Duration> step_times;
};

class ProgressListener {
 public:
  // Binds a datagram socket at `socket_path` (its directory must exist; a stale socket left
  // there is replaced, any other kind of file is not). INVALID_ARGUMENT for a path longer than
  // sun_path or a world_size < 1; the OS error naming the path otherwise.
  static Result<std::unique_ptr<ProgressListener>> Bind(std::string socket_path,
                                                        ProgressListenerOptions options);
  ~ProgressListener();  // closes, and removes the socket file unless another listener took it
  ProgressListener(const ProgressListener&) = delete;
  ProgressListener& operator=(const ProgressListener&) = delete;

  // Waits until a datagram is queued or `deadline` passes, then drains what is queued (at
  // most max_batch). Returns the number of valid events applied; 0 at the deadline. Errors
  // only for an unexpected OS answer on the socket.
  Result<size_t> Poll(base::Deadline deadline);

  const std::string& path() const { return path_; }
  const std::vector<RankProgress>& ranks() const { return ranks_; }
  uint64_t received() const { return received_; }    // valid events
  uint64_t malformed() const { return malformed_; }  // rejected datagrams
  // The reason the most recent malformed datagram was rejected; empty when none was.
  const std::string& last_malformed() const { return last_malformed_; }

 private:
  struct FileId {
    uint64_t dev = 0, ino = 0;
  };
  ProgressListener(base::UniqueFd fd, std::string path, FileId file,
                   ProgressListenerOptions options);
  void Apply(const ProgressEvent& event, base::Clock::time_point now);
  void Reject(std::string why);

  base::UniqueFd fd_;
  std::string path_;
  FileId file_;  // the socket file we bound, removed on destruction if still ours
  ProgressListenerOptions options_;
  std::vector<RankProgress> ranks_;
  uint64_t received_ = 0;
  uint64_t malformed_ = 0;
  std::string last_malformed_;
};

}  // namespace railyard::launch
