// Config: the Runtime's settings, read from the environment once per initialisation and then
// frozen for the lifecycle (DESIGN §4.6).
//
// Parsing is strict: a value is the whole string, a positive decimal without sign, blanks or
// leading zeros, within range; anything else is INVALID_CONFIG naming the variable and value.
// Config is a plain value; the parsers are pure functions and safe to call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hyper_parallel::shmem {

inline constexpr std::string_view kEnvHeapSize = "HYPER_PARALLEL_SHMEM_HEAP_SIZE";
inline constexpr std::string_view kEnvTimeoutSec = "HYPER_PARALLEL_SHMEM_TIMEOUT_SEC";
inline constexpr std::string_view kEnvLogLevel = "HYPER_PARALLEL_SHMEM_LOG_LEVEL";
inline constexpr std::string_view kEnvBackend = "HYPER_PARALLEL_SHMEM_BACKEND";
inline constexpr std::string_view kEnvCopyWorkers = "HYPER_PARALLEL_SHMEM_COPY_WORKERS";
inline constexpr std::string_view kEnvWait = "HYPER_PARALLEL_SHMEM_WAIT";
inline constexpr std::string_view kEnvQuarantineBytes = "HYPER_PARALLEL_SHMEM_QUARANTINE_BYTES";

/// Log levels of HYPER_PARALLEL_SHMEM_LOG_LEVEL: 0 debug, 1 info, 2 error.
enum class LogLevel : std::uint8_t { kDebug = 0, kInfo = 1, kError = 2 };

/// Which backend to run on; kAuto picks the best one the build and machine offer.
enum class BackendKind : std::uint8_t { kAuto, kHost, kCuda, kCann };

/// How a PE waits for a peer (HYPER_PARALLEL_SHMEM_WAIT):
///   kAuto   with no more PEs than cores: pin the initialising thread to a core of its own,
///           spin briefly, then yield, then sleep; with more PEs than cores: no pin, no spin;
///   kSpin   never sleep: poll until the condition, the timeout or a lost peer (for PEs that
///           each own a core; starves peers that share one);
///   kBlock  sleep on the futex after one check (least CPU, a wake-up per wait).
enum class WaitMode : std::uint8_t { kAuto, kSpin, kBlock };

std::string_view LogLevelName(LogLevel level);
std::string_view BackendKindName(BackendKind kind);
std::string_view WaitModeName(WaitMode mode);

/// Looks up one environment variable; nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

/// The process environment (getenv).
EnvLookup ProcessEnvironment();

struct Config {
  static constexpr std::uint64_t kDefaultHeapBytes = 256ull << 20;
  /// The largest heap one PE may ask for (64 TiB): keeps every offset sum far from overflow.
  static constexpr std::uint64_t kMaxHeapBytes = 1ull << 46;
  static constexpr std::uint64_t kDefaultTimeoutSec = 120;
  /// About 11 days; keeps deadline arithmetic in nanoseconds far from overflow.
  static constexpr std::uint64_t kMaxTimeoutSec = 1'000'000;
  static constexpr std::uint64_t kMaxCopyWorkers = 64;

  std::uint64_t heap_bytes = kDefaultHeapBytes;
  std::uint64_t timeout_sec = kDefaultTimeoutSec;
  LogLevel log_level = LogLevel::kError;
  BackendKind backend = BackendKind::kAuto;
  /// Threads per PE for collective copies (all_gather); 0 means: the machine's cores shared
  /// among the PEs.
  std::uint64_t copy_workers = 0;
  WaitMode wait = WaitMode::kAuto;
  /// Bytes of freed heap held back from reuse (HYPER_PARALLEL_SHMEM_QUARANTINE_BYTES; 0: off);
  /// unset means an eighth of the heap.
  std::optional<std::uint64_t> quarantine_bytes;

  /// The quarantine budget in force.
  std::uint64_t quarantine() const { return quarantine_bytes.value_or(heap_bytes / 8); }

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_sec * 1000);
  }

  /// Reads and validates every variable; unset ones keep their defaults.
  static Status FromEnvironment(const EnvLookup& env, Config* out);

  bool operator==(const Config&) const = default;
};

/// Strict whole-string positive decimal in [1, max]. `name` is used in the error message.
Status ParsePositiveDecimal(std::string_view name, std::string_view text, std::uint64_t max,
                            std::uint64_t* out);

}  // namespace hyper_parallel::shmem
