// ControlBlock: the synchronisation words at the end of each PE's shared segment.
//
// Each PE's block is written by its peers (op epochs, doorbell rings) and by itself (its
// collective descriptors), and read by everyone. Counters are monotonic epochs, never flags
// reset to zero, so a late reader can never confuse two rounds. Each counter a different PE
// writes sits on its own cache line. The segment starts zeroed, which is the initial state of
// every field; the owner constructs the block in place before anyone maps it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "backends/collective.h"
#include "backends/host/doorbell.h"

namespace hyper_parallel::shmem::host {

/// The largest Root WORLD the host backend serves (one machine).
inline constexpr int kMaxHostPes = 256;

inline constexpr std::uint64_t kControlMagic = 0x4850534d43544c31ull;  // "HPSMCTL1"
inline constexpr std::uint32_t kControlVersion = 8;  // 8: the doorbell names a wake socket

struct alignas(64) PaddedCounter {
  std::atomic<std::uint64_t> value{0};
};

/// One published collective descriptor (see backends/collective.h), or one members-only
/// exchange's words: `sequence` (word 0) is stored last (release) and read first (acquire). Its
/// first cache line holds the core words every collective compares, so a barrier reads one line
/// per peer.
struct alignas(64) CollectiveSlot {
  std::atomic<std::uint64_t> sequence{0};
  std::atomic<std::uint64_t> words[CollectiveDescriptor::kWords - 1] = {};
};

/// The fixed head of a control block; the per-team and per-peer arrays follow it
/// (ControlLayout).
struct ControlBlock {
  std::uint64_t magic = kControlMagic;
  std::uint32_t version = kControlVersion;
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::int32_t teams = 0;
  std::uint64_t heap_bytes = 0;

  alignas(64) Doorbell doorbell;
  /// The peer whose exit made this PE terminal (-1: none); written once by the owner's peer
  /// monitor, so a PE that sees this one exit can name the first cause (see liveness.h).
  alignas(64) std::atomic<std::int32_t> lost_peer{-1};
};

/// Where the arrays of a control block of `teams` team slots and `pes` PEs lie, after the head:
///   collective [teams][2]   CollectiveSlot: this PE's descriptor of its team-slot t's
///                           collective n lives in [t][n % 2]; it publishes n + 2 only after
///                           every member published n + 1, which each does only after it read n
///   epochs     [teams][pes] PaddedCounter: the latest epoch PE src published to this PE on
///                           team slot t (the kernel-side API's epochs, see HostDevice)
///   offers     [pes][2]     CollectiveSlot: the members-only exchange words PE src sent this PE
///                           for its round r with this PE, in [src][r % 2] (team creation)
///   mirrors    [teams][2][pes] CollectiveSlot: a copy of remote PE src's own collective slot
///                           [t][n % 2], pushed here by src (a remote peer's block cannot be
///                           read by a load, so a PE reached through UCX writes its descriptor
///                           into every remote member's mirror instead; docs/scale-out.md)
///   beats      [pes]        PaddedCounter: heartbeats remote PE src adds to (liveness of hosts)
/// Every array is written by one PE per element (its owner or its source) and read by others.
struct ControlLayout {
  ControlLayout(int team_slots, int pe_count)
      : teams(static_cast<std::uint64_t>(team_slots)), pes(static_cast<std::uint64_t>(pe_count)) {
    collective = (sizeof(ControlBlock) + 63) / 64 * 64;
    epochs = collective + teams * 2 * sizeof(CollectiveSlot);
    offers = epochs + teams * pes * sizeof(PaddedCounter);
    mirrors = offers + pes * 2 * sizeof(CollectiveSlot);
    beats = mirrors + teams * 2 * pes * sizeof(CollectiveSlot);
    bytes = beats + pes * sizeof(PaddedCounter);
  }

  /// Constructs the arrays of a zeroed block in place (the owner, before anyone maps it).
  void Construct(ControlBlock* block) const {
    auto* base = reinterpret_cast<std::byte*>(block);
    for (std::uint64_t i = 0; i < teams * 2; ++i) {
      new (base + collective + i * sizeof(CollectiveSlot)) CollectiveSlot();
    }
    for (std::uint64_t i = 0; i < teams * pes; ++i) {
      new (base + epochs + i * sizeof(PaddedCounter)) PaddedCounter();
    }
    for (std::uint64_t i = 0; i < pes * 2; ++i) {
      new (base + offers + i * sizeof(CollectiveSlot)) CollectiveSlot();
    }
    for (std::uint64_t i = 0; i < teams * 2 * pes; ++i) {
      new (base + mirrors + i * sizeof(CollectiveSlot)) CollectiveSlot();
    }
    for (std::uint64_t i = 0; i < pes; ++i) {
      new (base + beats + i * sizeof(PaddedCounter)) PaddedCounter();
    }
  }

  CollectiveSlot& Collective(ControlBlock* block, int team, std::uint64_t sequence) const {
    return At<CollectiveSlot>(block, collective, static_cast<std::uint64_t>(team) * 2 + sequence % 2);
  }
  PaddedCounter& Epoch(ControlBlock* block, int team, int source) const {
    return At<PaddedCounter>(block, epochs,
                             static_cast<std::uint64_t>(team) * pes + static_cast<std::uint64_t>(source));
  }
  CollectiveSlot& Offer(ControlBlock* block, int source, std::uint64_t round) const {
    return At<CollectiveSlot>(block, offers, static_cast<std::uint64_t>(source) * 2 + round % 2);
  }
  CollectiveSlot& Mirror(ControlBlock* block, int team, std::uint64_t sequence, int source) const {
    return At<CollectiveSlot>(
        block, mirrors,
        (static_cast<std::uint64_t>(team) * 2 + sequence % 2) * pes + static_cast<std::uint64_t>(source));
  }
  PaddedCounter& Beat(ControlBlock* block, int source) const {
    return At<PaddedCounter>(block, beats, static_cast<std::uint64_t>(source));
  }
  /// Where `field` (a reference into `block`) lies from the block's start: the same in every
  /// PE's block, so a remote peer's field is at its control block's segment offset plus this.
  static std::uint64_t OffsetIn(const ControlBlock* block, const void* field) {
    return static_cast<std::uint64_t>(static_cast<const std::byte*>(field) -
                                      reinterpret_cast<const std::byte*>(block));
  }

  std::uint64_t teams;
  std::uint64_t pes;
  std::uint64_t collective = 0;
  std::uint64_t epochs = 0;
  std::uint64_t offers = 0;
  std::uint64_t mirrors = 0;
  std::uint64_t beats = 0;
  std::uint64_t bytes = 0;

 private:
  template <class T>
  static T& At(ControlBlock* block, std::uint64_t array, std::uint64_t index) {
    return *std::launder(reinterpret_cast<T*>(reinterpret_cast<std::byte*>(block) + array +
                                              index * sizeof(T)));
  }
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "shared-memory counters must be lock-free to be address-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

}  // namespace hyper_parallel::shmem::host
