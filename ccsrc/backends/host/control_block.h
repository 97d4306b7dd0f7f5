// ControlBlock: the synchronisation words at the end of each PE's shared segment.
//
// Each PE's block is written by its peers (barrier arrivals, doorbell rings) and by itself
// (its agreement record), and read by everyone. Counters are monotonic epochs, never flags
// reset to zero, so a late reader can never confuse two rounds. Each counter a different PE
// writes sits on its own cache line. The segment starts zeroed, which is the initial state of
// every field; the owner constructs the block in place before anyone maps it.
#pragma once

#include <atomic>
#include <cstdint>

#include "backends/host/doorbell.h"

namespace hyper_parallel::shmem::host {

/// The largest Root WORLD the host backend serves (one machine).
inline constexpr int kMaxHostPes = 256;

/// Synchronisation points an op kernel can publish epochs on (see HostDevice::Publish).
inline constexpr int kOpSlots = 2;

inline constexpr std::uint64_t kControlMagic = 0x4850534d43544c31ull;  // "HPSMCTL1"
inline constexpr std::uint32_t kControlVersion = 2;

struct alignas(64) PaddedCounter {
  std::atomic<std::uint64_t> value{0};
};

/// One published agreement record; `epoch` is stored last (release) and read first (acquire).
struct alignas(64) AgreementSlot {
  std::atomic<std::uint64_t> epoch{0};
  std::atomic<std::uint64_t> words[6] = {};
};

struct ControlBlock {
  std::uint64_t magic = kControlMagic;
  std::uint32_t version = kControlVersion;
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::uint64_t heap_bytes = 0;

  alignas(64) Doorbell doorbell;
  /// Agreement e lives in slot e % 2: a peer is at most one agreement ahead of a reader.
  AgreementSlot agreement[2];
  /// barrier_arrivals[src]: how many barriers PE src has entered (written by src only).
  PaddedCounter barrier_arrivals[kMaxHostPes];
  /// op_epochs[slot][src]: the latest epoch PE src published to this PE for an op's sync
  /// point `slot` (see HostDevice); written by src only.
  PaddedCounter op_epochs[kOpSlots][kMaxHostPes];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "shared-memory counters must be lock-free to be address-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

}  // namespace hyper_parallel::shmem::host
