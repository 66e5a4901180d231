// Status and Expected<T>: how errors cross module boundaries, inside the engine and through the
// public API alike (src/base/status.h includes this header; status.cc implements it).
//
// A user mistake (bad path, malformed checkpoint, bad config field, invalid parameter) becomes a
// Status whose message names the thing (file, tensor, field) and says what was expected or how
// to fix it. DI_CHECK (check.h) is reserved for our own invariants.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace deepinfer {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller passed something malformed (parameter, config field)
  kNotFound,          // a file, tensor or field that must exist does not
  kDataLoss,          // a file exists but is truncated or corrupt
  kOutOfRange,        // an offset, id or length outside what is allowed
  kUnimplemented,     // a valid input we do not support (e.g. another model_type)
  kResourceExhausted, // memory or KV blocks ran out
  kFailedPrecondition,
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CodeName: message", for logs and CLI output.
  std::string to_string() const;

  // Prefixes context ("while loading /x/config.json: ...") to a non-OK status.
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Expected<T>: a value or a non-OK Status (std::expected is C++23; we build as C++20).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : state_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(state_).ok()) {
      state_ = Status(StatusCode::kInternal, "Expected constructed from an OK status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Expected*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return const_cast<Expected*>(this)->checked(); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Expected*>(this)->checked(); }

 private:
  T& checked();
  std::variant<T, Status> state_;
};

[[noreturn]] void die_on_bad_expected_access(const Status& status);

template <typename T>
T& Expected<T>::checked() {
  if (!ok()) die_on_bad_expected_access(std::get<Status>(state_));
  return std::get<T>(state_);
}

}  // namespace deepinfer

// Propagation helpers. DI_TRY(expr) returns a non-OK Status from the enclosing function;
// DI_ASSIGN_OR_RETURN(lhs, expr) unwraps an Expected.
#define DI_CONCAT_INNER(a, b) a##b
#define DI_CONCAT(a, b) DI_CONCAT_INNER(a, b)

#define DI_TRY(expr)                                   \
  do {                                                 \
    ::deepinfer::Status di_try_status_ = (expr);       \
    if (!di_try_status_.ok()) return di_try_status_;   \
  } while (0)

#define DI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define DI_ASSIGN_OR_RETURN(lhs, expr) \
  DI_ASSIGN_OR_RETURN_IMPL(DI_CONCAT(di_expected_, __LINE__), lhs, expr)
