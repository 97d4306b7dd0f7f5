// ControlBlock: the synchronisation words at the end of each PE's shared segment.
//
// Each PE's block is written by its peers (op epochs, doorbell rings) and by itself (its
// collective descriptors), and read by everyone. Counters are monotonic epochs, never flags
// reset to zero, so a late reader can never confuse two rounds. Each counter a different PE
// writes sits on its own cache line. The segment starts zeroed, which is the initial state of
// every field; the owner constructs the block in place before anyone maps it.
#pragma once

#include <atomic>
#include <cstdint>

#include "backends/collective.h"
#include "backends/host/doorbell.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem::host {

/// The largest Root WORLD the host backend serves (one machine).
inline constexpr int kMaxHostPes = 256;

/// Synchronisation points an op kernel can publish epochs on (see HostDevice::Publish): the
/// kernel-side API's epoch slots.
inline constexpr int kOpSlots = data_plane::kEpochSlots;

inline constexpr std::uint64_t kControlMagic = 0x4850534d43544c31ull;  // "HPSMCTL1"
inline constexpr std::uint32_t kControlVersion = 5;

struct alignas(64) PaddedCounter {
  std::atomic<std::uint64_t> value{0};
};

/// One published collective descriptor (see backends/collective.h): `sequence` (word 0) is
/// stored last (release) and read first (acquire). Its first cache line holds the core words
/// every collective compares, so a barrier reads one line per peer.
struct alignas(64) CollectiveSlot {
  std::atomic<std::uint64_t> sequence{0};
  std::atomic<std::uint64_t> words[CollectiveDescriptor::kWords - 1] = {};
};

struct ControlBlock {
  std::uint64_t magic = kControlMagic;
  std::uint32_t version = kControlVersion;
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::uint64_t heap_bytes = 0;

  alignas(64) Doorbell doorbell;
  /// The peer whose exit made this PE terminal (-1: none); written once by the owner's peer
  /// monitor, so a PE that sees this one exit can name the first cause (see liveness.h).
  alignas(64) std::atomic<std::int32_t> lost_peer{-1};
  /// The descriptor of this PE's collective n lives in slot n % 2: a PE publishes n + 2 only
  /// after every peer published n + 1, which each does only after it read n.
  CollectiveSlot collective[2];
  /// op_epochs[slot][src]: the latest epoch PE src published to this PE for an op's sync
  /// point `slot` (see HostDevice); written by src only.
  PaddedCounter op_epochs[kOpSlots][kMaxHostPes];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "shared-memory counters must be lock-free to be address-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

}  // namespace hyper_parallel::shmem::host
