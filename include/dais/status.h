// Status and StatusOr<T>: the one error type of dais (see docs/architecture.md, "Errors").
//
// Codes follow gRPC and are chosen by what the caller should do: kUnavailable (retry),
// kResourceExhausted (queue full, back off), kDeadlineExceeded (timed out), kInvalidArgument
// (fix the request), kNotFound (no such model/version), kFailedPrecondition (state forbids it),
// kAborted (conflict), kInternal (a bug). Frontends translate a code to HTTP/gRPC in one place.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace dais {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;
  // Returns a copy whose message is "prefix: message"; OK stays OK.
  Status WithPrefix(std::string_view prefix) const;

  bool operator==(const Status& other) const {
    return code_ == other.code_ && message_ == other.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status Unavailable(std::string message);
Status ResourceExhausted(std::string message);
Status DeadlineExceeded(std::string message);
Status FailedPrecondition(std::string message);
Status Internal(std::string message);
Status Unimplemented(std::string message);
Status AlreadyExists(std::string message);
Status Cancelled(std::string message);

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "StatusOr built from an OK status");
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace dais

#define DAIS_CONCAT_INNER(a, b) a##b
#define DAIS_CONCAT(a, b) DAIS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::dais::Status dais_status_ = (expr);        \
    if (!dais_status_.ok()) return dais_status_; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(DAIS_CONCAT(dais_statusor_, __LINE__), lhs, expr)
