// Status: the error value of the native core.
//
// Every fallible native call returns a Status; no exception crosses the core. The Python
// boundary is the one place that turns a failed Status into an exception. A Status carries an
// error code, the operation and phase it failed in, and a message in one of the two shapes of
// docs/api.md, "Errors and logs", which are built here and nowhere else:
//
//   contract  "<what> must be <rule>, but got <value>"
//   assertion "<fact>: key=value, key=value"
//
// Status is a plain value: copyable, not synchronised; share it like an int. Like LevelDB's,
// an OK status is a null pointer, so the success path of every entry costs nothing to build,
// move or destroy; only a failure allocates its code, message and tags.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hyper_parallel::shmem {

/// Error codes reported across the native boundary. The names are part of the contract.
enum class ErrorCode : std::uint8_t {
  kOk = 0,
  kInvalidArgument,        ///< a broken argument contract (range, size, type, view)
  kInvalidState,           ///< the call is not allowed in the Runtime's current state
  kInvalidConfig,          ///< a malformed or inconsistent configuration value
  kDoubleFree,             ///< free of an allocation that was already released
  kUseAfterFree,           ///< an RMA operand whose allocation was already released
  kStaleLifecycle,         ///< an allocation from an earlier Runtime lifecycle
  kDeviceMismatch,         ///< the current device differs from the one frozen at init
  kOutOfMemory,            ///< the symmetric heap cannot satisfy the request
  kCollectiveMismatch,     ///< PEs disagree on a collective call (size, alignment, order)
  kUnsupportedCapability,  ///< the build or the backend cannot do what was asked
  kBackendError,           ///< a backend (system or vendor) call failed
  kTimeout,                ///< a bounded wait expired
  kPeerLost,               ///< a peer PE exited or was killed while this PE depended on it
};

/// Canonical upper-case name of a code, e.g. "INVALID_ARGUMENT".
std::string_view ErrorCodeName(ErrorCode code);

/// One key=value pair of an assertion message. The value is already formatted.
struct Field {
  std::string_view key;
  std::string value;
};

/// Formats a pointer or offset as lower-case hex with a 0x prefix.
std::string Hex(std::uint64_t value);
std::string Hex(const void* pointer);

class Status {
 public:
  Status() = default;  // OK
  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }

  /// A broken contract: "<what> must be <rule>, but got <got>".
  static Status Contract(ErrorCode code, std::string_view what, std::string_view rule,
                         std::string_view got);

  /// A state assertion: "<fact>: k=v, k=v".
  static Status Assertion(ErrorCode code, std::string_view fact,
                          std::initializer_list<Field> fields = {});
  /// The same, with fields gathered at run time.
  static Status Assertion(ErrorCode code, std::string_view fact,
                          const std::vector<Field>& fields);

  bool ok() const { return rep_ == nullptr; }
  ErrorCode code() const { return rep_ ? rep_->code : ErrorCode::kOk; }
  const std::string& message() const { return rep_ ? rep_->message : Empty(); }
  const std::string& operation() const { return rep_ ? rep_->operation : Empty(); }
  const std::string& phase() const { return rep_ ? rep_->phase : Empty(); }

  /// Tags the status with the entry point and phase it failed in, unless already tagged, so
  /// the innermost (most precise) tag wins. No effect on OK.
  Status& At(std::string_view operation, std::string_view phase) & {
    if (rep_ && rep_->operation.empty()) Tag(operation, phase);
    return *this;
  }
  Status&& At(std::string_view operation, std::string_view phase) && {
    if (rep_ && rep_->operation.empty()) Tag(operation, phase);
    return std::move(*this);
  }

  /// The same code and message, tagged with another entry point and phase (a terminal
  /// failure reported again by every later call).
  Status Retagged(std::string_view operation, std::string_view phase) const;

  /// "[HYPER_PARALLEL_SHMEM_ERROR] error_code=<CODE> operation=<op> phase=<phase> <message>",
  /// or "OK".
  std::string ToString() const;

  bool operator==(const Status& other) const;

 private:
  struct Rep {
    ErrorCode code;
    std::string message;
    std::string operation;
    std::string phase;
  };
  Status(ErrorCode code, std::string message);
  void Tag(std::string_view operation, std::string_view phase);
  static const std::string& Empty();

  std::unique_ptr<Rep> rep_;  // null: OK
};

}  // namespace hyper_parallel::shmem

/// Returns from the enclosing function when `expr` yields a failed Status.
#define HPS_RETURN_IF_ERROR(expr)                       \
  do {                                                  \
    ::hyper_parallel::shmem::Status hps_status_ = (expr); \
    if (!hps_status_.ok()) return hps_status_;          \
  } while (false)
