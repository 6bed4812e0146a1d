// Status and Result<T>: Railyard's one error type.
//
// A Status is a code from a short fixed list plus a message that carries the context an
// operator needs (file and line, field, host, rank, operation). Functions that can fail
// return Status or Result<T>; both are [[nodiscard]]. Context is added as an error travels
// up: `return st.WithContext("vcluster up")` gives "vcluster up: <original message>".
//
//   Result<int> ParsePort(std::string_view s);
//   RY_ASSIGN_OR_RETURN(int port, ParsePort(text));
//   RY_RETURN_IF_ERROR(WriteFileAtomic(path, data));
//
// Exceptions never cross module boundaries: third-party throws are caught at the edge and
// turned into a Status. Thread-safety: values; no shared state.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace railyard {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input: a flag, a file, a field
  kNotFound,            // a named thing (host, file, key) does not exist
  kAlreadyExists,       // creating something that is already there
  kFailedPrecondition,  // the system is not in a state where this works (not root, not up)
  kDeadlineExceeded,    // a wait ran past its deadline
  kUnavailable,         // a peer, link or service cannot be reached (retry may help)
  kAborted,             // the operation was aborted (by a peer or the user)
  kDataLoss,            // corrupt or truncated data
  kPermissionDenied,    // the OS refused
  kResourceExhausted,   // out of memory, disk, descriptors
  kUnimplemented,       // not supported in this build or mode
  kInternal,            // a bug or an unexpected OS answer
};

// Short stable name, e.g. "INVALID_ARGUMENT".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "CODE: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: message". No-op on OK.
  Status WithContext(std::string_view context) const&;
  Status WithContext(std::string_view context) &&;

  // Process exit code for a CLI: 0 OK, 2 bad input (INVALID_ARGUMENT, NOT_FOUND,
  // ALREADY_EXISTS), 1 otherwise.
  int ExitCode() const;

  // Marks a Status as deliberately ignored (e.g. best-effort cleanup).
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Constructors that format their message with fmt: InvalidArgument("bad {}", x).
#define RY_DEFINE_STATUS_CTOR(Name, Code)                                              \
  template <typename... Args>                                                          \
  Status Name(fmt::format_string<Args...> format, Args&&... args) {                    \
    return Status(StatusCode::Code, fmt::format(format, std::forward<Args>(args)...)); \
  }
RY_DEFINE_STATUS_CTOR(InvalidArgument, kInvalidArgument)
RY_DEFINE_STATUS_CTOR(NotFound, kNotFound)
RY_DEFINE_STATUS_CTOR(AlreadyExists, kAlreadyExists)
RY_DEFINE_STATUS_CTOR(FailedPrecondition, kFailedPrecondition)
RY_DEFINE_STATUS_CTOR(DeadlineExceeded, kDeadlineExceeded)
RY_DEFINE_STATUS_CTOR(Unavailable, kUnavailable)
RY_DEFINE_STATUS_CTOR(Aborted, kAborted)
RY_DEFINE_STATUS_CTOR(DataLoss, kDataLoss)
RY_DEFINE_STATUS_CTOR(PermissionDenied, kPermissionDenied)
RY_DEFINE_STATUS_CTOR(ResourceExhausted, kResourceExhausted)
RY_DEFINE_STATUS_CTOR(Unimplemented, kUnimplemented)
RY_DEFINE_STATUS_CTOR(Internal, kInternal)
#undef RY_DEFINE_STATUS_CTOR

// A Status from errno: the code follows the errno (ENOENT -> NOT_FOUND, EACCES/EPERM/EROFS ->
// PERMISSION_DENIED, ENOSPC/EMFILE/ENOMEM -> RESOURCE_EXHAUSTED, ETIMEDOUT -> DEADLINE_EXCEEDED,
// ECONNREFUSED/ECONNRESET/EHOSTUNREACH -> UNAVAILABLE, else INTERNAL) and the message is
// "what: strerror (ERRNAME)".
Status ErrnoStatus(int err, std::string_view what);

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(value_).ok()) {
      value_ = Status(StatusCode::kInternal, "Result constructed from an OK Status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(value_); }

  // Preconditions: ok(). Accessing the value of an error is a programming bug.
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> value_;
};

namespace internal {
inline Status AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace railyard

#define RY_CONCAT_INNER(a, b) a##b
#define RY_CONCAT(a, b) RY_CONCAT_INNER(a, b)

// Returns the Status (or a Result's error) from the enclosing function when not OK.
#define RY_RETURN_IF_ERROR(expr)                                          \
  do {                                                                    \
    ::railyard::Status ry_status_ = ::railyard::internal::AsStatus(expr); \
    if (!ry_status_.ok()) return ry_status_;                              \
  } while (0)

// RY_ASSIGN_OR_RETURN(auto x, MakeX()); declares x from a Result or returns its error.
#define RY_ASSIGN_OR_RETURN(lhs, expr) \
  RY_ASSIGN_OR_RETURN_IMPL(RY_CONCAT(ry_result_, __LINE__), lhs, expr)
#define RY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
