// Expected-style results for anything a user can cause (a bad file, a bad request).
// Programmer errors use assert instead; exceptions never cross module boundaries.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace trellis {

// A failure that can be shown to the user as is: the message names what was wrong and where.
struct Error {
  std::string message;
};

// Either a value of T or an error of type E (an Error, or a richer error type such as the
// server's ApiError). Check ok() before value().
template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const E& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }

 private:
  std::variant<T, E> state_;
};

// Success or an Error, for operations without a value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const {
    assert(!ok());
    return *error_;
  }

 private:
  std::optional<Error> error_;
};

inline Status ok_status() {
  return Status();
}

}  // namespace trellis

// Propagates a failed Status or Result out of the calling function.
#define TRELLIS_TRY(expr)                                              \
  do {                                                                 \
    auto&& trellis_try_result_ = (expr);                               \
    if (!trellis_try_result_.ok()) return trellis_try_result_.error(); \
  } while (0)

// Assigns the value of a Result expression to `target`, or returns its error.
#define TRELLIS_ASSIGN(target, expr)                                         \
  do {                                                                       \
    auto trellis_assign_result_ = (expr);                                    \
    if (!trellis_assign_result_.ok()) return trellis_assign_result_.error(); \
    target = std::move(trellis_assign_result_).value();                      \
  } while (0)
