// Config: the Runtime's settings, read from the environment once per initialisation and then
// frozen for the lifecycle (docs/api.md, Configuration).
//
// Parsing is strict: a value is the whole string, a positive decimal without sign, blanks or
// leading zeros, within range; anything else is INVALID_CONFIG naming the variable and value.
// base/ knows no backend: the backend's name and the host backend's wait setting are kept as
// given, and the backends check them when a Runtime initialises (backends/backend_kind.h,
// backends/wait/wait_policy.h), with errors of the same shape (InvalidConfig).
// Config is a plain value; the parsers are pure functions and safe to call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace hyper_parallel::shmem {

inline constexpr std::string_view kEnvHeapSize = "HYPER_PARALLEL_SHMEM_HEAP_SIZE";
inline constexpr std::string_view kEnvTimeoutSec = "HYPER_PARALLEL_SHMEM_TIMEOUT_SEC";
inline constexpr std::string_view kEnvLogLevel = "HYPER_PARALLEL_SHMEM_LOG_LEVEL";
inline constexpr std::string_view kEnvBackend = "HYPER_PARALLEL_SHMEM_BACKEND";
inline constexpr std::string_view kEnvCopyWorkers = "HYPER_PARALLEL_SHMEM_COPY_WORKERS";
inline constexpr std::string_view kEnvWait = "HYPER_PARALLEL_SHMEM_WAIT";
inline constexpr std::string_view kEnvQuarantineBytes = "HYPER_PARALLEL_SHMEM_QUARANTINE_BYTES";
inline constexpr std::string_view kEnvMaxTeams = "HYPER_PARALLEL_SHMEM_MAX_TEAMS";
// Bytes of heap each team slot's reductions stage through (docs/architecture.md, "Reductions").
inline constexpr std::string_view kEnvReduceWorkspace = "HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE";
inline constexpr std::string_view kEnvMaxPes = "HYPER_PARALLEL_SHMEM_MAX_PES";
// PEs on several hosts (docs/scale-out.md). Never UCX_-prefixed: UCX parses every such
// variable as its own setting.
inline constexpr std::string_view kEnvRemotePeers = "HYPER_PARALLEL_SHMEM_REMOTE_PEERS";
inline constexpr std::string_view kEnvUcxLibrary = "HYPER_PARALLEL_SHMEM_UCX_LIBRARY";
inline constexpr std::string_view kEnvRemotePath = "HYPER_PARALLEL_SHMEM_REMOTE_PATH";
inline constexpr std::string_view kEnvRemoteTransport = "HYPER_PARALLEL_SHMEM_REMOTE_TRANSPORT";
inline constexpr std::string_view kEnvPeerSilenceMs = "HYPER_PARALLEL_SHMEM_PEER_SILENCE_MS";
// Which algorithm a collective runs (docs/architecture.md, "Algorithms").
inline constexpr std::string_view kEnvAlgorithms = "HYPER_PARALLEL_SHMEM_ALGORITHMS";

/// Log levels of HYPER_PARALLEL_SHMEM_LOG_LEVEL: 0 debug, 1 info, 2 error.
enum class LogLevel : std::uint8_t { kDebug = 0, kInfo = 1, kError = 2 };

std::string_view LogLevelName(LogLevel level);

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
  static constexpr std::uint64_t kDefaultMaxTeams = 64;
  /// A creation's free-slot mask must fit its exchange (docs/teams.md).
  static constexpr std::uint64_t kMaxMaxTeams = 256;
  static constexpr std::uint64_t kDefaultMaxPes = 4096;
  /// The most the setting allows (16 dissemination rounds; docs/scale-out.md, "Cost model").
  static constexpr std::uint64_t kMaxMaxPes = 65536;

  std::uint64_t heap_bytes = kDefaultHeapBytes;
  std::uint64_t timeout_sec = kDefaultTimeoutSec;
  LogLevel log_level = LogLevel::kError;
  /// HYPER_PARALLEL_SHMEM_BACKEND as given; the backend registry checks the name.
  std::string backend = "auto";
  /// Threads per PE for collective copies (all_gather); 0 means: the machine's cores shared
  /// among the PEs.
  std::uint64_t copy_workers = 0;
  /// HYPER_PARALLEL_SHMEM_WAIT as given: the host backend's setting, which it checks.
  std::string wait = "auto";
  /// Bytes of freed heap held back from reuse (HYPER_PARALLEL_SHMEM_QUARANTINE_BYTES; 0: off);
  /// unset means an eighth of the heap.
  std::optional<std::uint64_t> quarantine_bytes;
  /// Team slots per PE, the world's included (HYPER_PARALLEL_SHMEM_MAX_TEAMS): each has its
  /// own sync words beside the heap.
  std::uint64_t max_teams = kDefaultMaxTeams;
  static constexpr std::uint64_t kDefaultReduceWorkspace = 512ull << 10;
  static constexpr std::uint64_t kMinReduceWorkspace = 4ull << 10;
  static constexpr std::uint64_t kMaxReduceWorkspace = 1ull << 30;
  /// Bytes per team slot that the reductions (all_reduce, reduce_scatter) stage partial sums
  /// through (HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE, a multiple of 4096): the backend maps
  /// max_teams of them past the heap, where the allocator never places a block. Pages a team
  /// never reduces on are never touched.
  std::uint64_t reduce_workspace = kDefaultReduceWorkspace;
  /// The largest world this job accepts (HYPER_PARALLEL_SHMEM_MAX_PES): a larger one fails at
  /// init on every PE.
  std::uint64_t max_pes = kDefaultMaxPes;
  static constexpr std::uint64_t kDefaultPeerSilenceMs = 3000;
  static constexpr std::uint64_t kMaxPeerSilenceMs = 3'600'000;
  /// Which peers are reached through the network (HYPER_PARALLEL_SHMEM_REMOTE_PEERS):
  /// "other-hosts" (default: same-host peers are mapped), "all" (every peer through UCX, also
  /// on this host: the quick way to test the network path over loopback) or "blocks:K" (PEs
  /// in blocks of K consecutive PEs act as hosts: several hosts of several PEs on one machine).
  std::string remote_peers = "other-hosts";
  /// The UCX library loaded when a peer is remote (empty: libucp.so.0).
  std::string ucx_library;
  /// How remote peers are reached (HYPER_PARALLEL_SHMEM_REMOTE_PATH): "auto" (active messages
  /// unless UCX has hardware RMA to the peer), "messages" or "rma" for every peer.
  std::string remote_path = "auto";
  /// Which transport reaches remote peers (HYPER_PARALLEL_SHMEM_REMOTE_TRANSPORT): "ucx"
  /// (default) or "reordering", UCX behind a layer that delays and reorders what it sends
  /// between ordering points (for tests: the host code must rely on the transport's ordering
  /// guarantees alone; docs/scale-out.md).
  std::string remote_transport = "ucx";
  /// How long a remote peer's heartbeats may stay away before it counts as lost.
  std::uint64_t peer_silence_ms = kDefaultPeerSilenceMs;
  /// HYPER_PARALLEL_SHMEM_ALGORITHMS as pairs (collective, algorithm), in the order given
  /// ("all_gather=bruck,all_to_all=direct"); a collective not named chooses by itself ("auto").
  /// Parsed for its shape only: the Runtime checks the names against its collectives.
  std::vector<std::pair<std::string, std::string>> algorithms;

  /// The algorithm set for `collective`, or "auto".
  std::string_view AlgorithmOf(std::string_view collective) const {
    for (const auto& [name, algorithm] : algorithms) {
      if (name == collective) return algorithm;
    }
    return "auto";
  }

  /// The quarantine budget in force.
  std::uint64_t quarantine() const { return quarantine_bytes.value_or(heap_bytes / 8); }

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_sec * 1000);
  }

  /// Reads and validates every variable; unset ones keep their defaults.
  static Status FromEnvironment(const EnvLookup& env, Config* out);

  bool operator==(const Config&) const = default;
};

/// INVALID_CONFIG in the shape every setting's error has: '<name> must be <rule>, but got
/// "<text>"', at operation config, phase parse.
Status InvalidConfig(std::string_view name, std::string_view rule, std::string_view text);

/// Strict whole-string positive decimal in [1, max]. `name` is used in the error message.
Status ParsePositiveDecimal(std::string_view name, std::string_view text, std::uint64_t max,
                            std::uint64_t* out);

/// K of HYPER_PARALLEL_SHMEM_REMOTE_PEERS=blocks:K (PEs in blocks of K consecutive PEs act as
/// hosts of their own: peers of other blocks are reached through the network), or nullopt when
/// `setting` is not of that form.
std::optional<std::uint64_t> RemotePeerBlock(std::string_view setting);

/// HYPER_PARALLEL_SHMEM_ALGORITHMS' shape: comma-separated collective=algorithm pairs of
/// lower-case names, each collective once ("": none).
Status ParseAlgorithms(std::string_view text,
                       std::vector<std::pair<std::string, std::string>>* out);

}  // namespace hyper_parallel::shmem
