// The host backend's wait setting (HYPER_PARALLEL_SHMEM_WAIT): how a PE waits for a peer.
// Only the host backend waits on the CPU, so the setting is its own; the configuration keeps
// the text as given and the host backend's entry in the registry checks it here when a Runtime
// initialises (on every backend, so a typo never passes silently). The policy each mode picks
// (spin, yield and sleep bounds) is WaitPolicy, in doorbell.h.
//
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace hyper_parallel::shmem {

/// How a PE waits for a peer:
///   kAuto   with no more PEs than cores: pin the initialising thread to a core of its own,
///           spin briefly, then yield, then sleep; with more PEs than cores: no pin, no spin;
///   kSpin   never sleep: poll until the condition, the timeout or a lost peer (for PEs that
///           each own a core; starves peers that share one);
///   kBlock  sleep on the futex after one check (least CPU, a wake-up per wait).
enum class WaitMode : std::uint8_t { kAuto, kSpin, kBlock };

/// "auto", "spin", "block"; "unknown" for a value outside the enum.
std::string_view WaitModeName(WaitMode mode);

/// The mode a configured text means; INVALID_CONFIG naming HYPER_PARALLEL_SHMEM_WAIT and the
/// value otherwise.
Status ParseWaitMode(std::string_view text, WaitMode* out);

}  // namespace hyper_parallel::shmem
