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

#include "backends/collective_descriptor.h"
#include "backends/wait/doorbell.h"

namespace hyper_parallel::shmem::host {

inline constexpr std::uint64_t kControlMagic = 0x4850534d43544c31ull;  // "HPSMCTL1"
// 11: round words per team slot (collectives that move data in rounds among hosts), and a
// word through which a PE of this host passes on a loss across hosts (told_lost)
inline constexpr std::uint32_t kControlVersion = 11;

/// The arrival counters of a team slot and parity that PEs which map the block add to (PE p to
/// lane p % kArrivalLanes, so up to that many PEs of a host add to lines of their own, as the
/// per-source words before them did); one more lane takes the network's adds.
inline constexpr int kArrivalLanes = 8;

/// The rounds of a dissemination among `count` parties: ceil(log2(count)).
inline constexpr int DisseminationRounds(std::uint64_t count) {
  int rounds = 0;
  while ((std::uint64_t{1} << rounds) < count) ++rounds;
  return rounds;
}

struct alignas(64) PaddedCounter {
  std::atomic<std::uint64_t> value{0};
};

/// One published collective descriptor (see backends/collective_descriptor.h), or one members-only
/// exchange's words: `sequence` (word 0) is stored last (release) and read first (acquire). Its
/// first cache line holds the core words every collective compares, so a barrier reads one line
/// per peer.
struct alignas(64) CollectiveSlot {
  std::atomic<std::uint64_t> sequence{0};
  std::atomic<std::uint64_t> words[CollectiveDescriptor::kWords - 1] = {};
};

/// One published DescriptorSummary (backends/collective_descriptor.h): `sequence` (word 0) stored last
/// (release) and read first (acquire).
struct alignas(64) SummarySlot {
  std::atomic<std::uint64_t> sequence{0};
  std::atomic<std::uint64_t> words[DescriptorSummary::kWords - 1] = {};
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
  /// A PE on another host that a PE of this host learned is lost (-1: none), set once by that
  /// PE (compare-and-swap) before it rings this block's doorbell: a PE whose watched peers
  /// are all on its own host learns of a loss across hosts from its neighbours
  /// (docs/scale-out.md, "Liveness"). Beside lost_peer: written only when the job fails.
  std::atomic<std::int32_t> told_lost{-1};
  /// 1 once this PE's shutdown agreed with every PE's (Backend::Departing): its exit from then
  /// on is a departure, not a loss, so a PE of its host that sees it exit neither fails nor
  /// passes it on to other hosts still finishing their own agreement.
  std::atomic<std::int32_t> departed{0};
};

/// Where the arrays of a control block of `teams` team slots and `pes` PEs lie, after the head
/// (R = DisseminationRounds(pes); docs/scale-out.md, "Cost model", has the formula):
///   collective [teams][2]   CollectiveSlot: this PE's descriptor of its team-slot t's
///                           collective n lives in [t][n % 2]; it publishes n + 2 only after
///                           every member published n + 1, which each does only after it read n
///   verdicts   [teams][2]   SummarySlot: a host leader's summary of its team-slot t's collective
///                           n across hosts, for the members on its host to read
///   rounds     [teams][R][2] SummarySlot: the summary a host leader receives in round k of the
///                           dissemination among leaders for collective n, in [t][k][n % 2]
///                           (one sender per round; docs/architecture.md, "Agreement across
///                           hosts")
///   steps      [teams][R]   PaddedCounter: the round words of collectives that move data in
///                           rounds among hosts (KernelApi::PutBlocksAndSetRound): in one call
///                           one PE sets word k here, to growing values (no parity: call n + 1's
///                           data moves only once every member finished call n)
///   arrivals   [teams][2][kArrivalLanes + 1] PaddedCounter: how many arrivals (a peer's data
///                           is in) the collectives of team slot t with parity p received, in
///                           [t][p][src % kArrivalLanes] from PEs src that map this block and in
///                           [t][p][kArrivalLanes] through the network (each word has one kind
///                           of writer; see HostDevice::Publish)
///   offers     [pes][2]     CollectiveSlot: the members-only exchange words PE src sent this PE
///                           for its round r with this PE, in [src][r % 2] (team creation)
///   beats      [pes]        PaddedCounter: heartbeats remote PE src adds to (liveness of hosts)
/// Nothing per team grows with the PEs but `rounds` and `steps`, which grow with their
/// logarithm. Every array is written by one PE per element (its owner or its source), `arrivals` by adds, and
/// read by others.
struct ControlLayout {
  ControlLayout(int team_slots, int pe_count)
      : teams(static_cast<std::uint64_t>(team_slots)),
        pes(static_cast<std::uint64_t>(pe_count)),
        rounds(static_cast<std::uint64_t>(DisseminationRounds(pes))) {
    collective = (sizeof(ControlBlock) + 63) / 64 * 64;
    verdicts = collective + teams * 2 * sizeof(CollectiveSlot);
    round_slots = verdicts + teams * 2 * sizeof(SummarySlot);
    steps = round_slots + teams * rounds * 2 * sizeof(SummarySlot);
    arrivals = steps + teams * rounds * sizeof(PaddedCounter);
    offers = arrivals + teams * 2 * (kArrivalLanes + 1) * sizeof(PaddedCounter);
    beats = offers + pes * 2 * sizeof(CollectiveSlot);
    bytes = beats + pes * sizeof(PaddedCounter);
  }

  /// Constructs the arrays of a zeroed block in place (the owner, before anyone maps it).
  void Construct(ControlBlock* block) const {
    auto* base = reinterpret_cast<std::byte*>(block);
    for (std::uint64_t i = 0; i < teams * 2; ++i) {
      new (base + collective + i * sizeof(CollectiveSlot)) CollectiveSlot();
    }
    for (std::uint64_t i = 0; i < teams * 2 * (1 + rounds); ++i) {
      new (base + verdicts + i * sizeof(SummarySlot)) SummarySlot();  // verdicts, then rounds
    }
    for (std::uint64_t i = 0; i < teams * rounds; ++i) {
      new (base + steps + i * sizeof(PaddedCounter)) PaddedCounter();
    }
    for (std::uint64_t i = 0; i < teams * 2 * (kArrivalLanes + 1); ++i) {
      new (base + arrivals + i * sizeof(PaddedCounter)) PaddedCounter();
    }
    for (std::uint64_t i = 0; i < pes * 2; ++i) {
      new (base + offers + i * sizeof(CollectiveSlot)) CollectiveSlot();
    }
    for (std::uint64_t i = 0; i < pes; ++i) {
      new (base + beats + i * sizeof(PaddedCounter)) PaddedCounter();
    }
  }

  CollectiveSlot& Collective(ControlBlock* block, int team, std::uint64_t sequence) const {
    return At<CollectiveSlot>(block, collective, static_cast<std::uint64_t>(team) * 2 + sequence % 2);
  }
  SummarySlot& Verdict(ControlBlock* block, int team, std::uint64_t sequence) const {
    return At<SummarySlot>(block, verdicts, static_cast<std::uint64_t>(team) * 2 + sequence % 2);
  }
  SummarySlot& Round(ControlBlock* block, int team, int round, std::uint64_t sequence) const {
    return At<SummarySlot>(block, round_slots,
                           (static_cast<std::uint64_t>(team) * rounds +
                            static_cast<std::uint64_t>(round)) * 2 + sequence % 2);
  }
  /// Round word `word` (< rounds) of team slot `team`.
  PaddedCounter& Step(ControlBlock* block, int team, int word) const {
    return At<PaddedCounter>(block, steps,
                             static_cast<std::uint64_t>(team) * rounds +
                                 static_cast<std::uint64_t>(word));
  }
  /// Arrival counter `lane` of team slot `team` for collectives of `sequence`'s parity (lane
  /// kArrivalLanes: the one the network adds to).
  PaddedCounter& Arrivals(ControlBlock* block, int team, std::uint64_t sequence, int lane) const {
    return At<PaddedCounter>(block, arrivals,
                             (static_cast<std::uint64_t>(team) * 2 + sequence % 2) *
                                     (kArrivalLanes + 1) +
                                 static_cast<std::uint64_t>(lane));
  }
  CollectiveSlot& Offer(ControlBlock* block, int source, std::uint64_t round) const {
    return At<CollectiveSlot>(block, offers, static_cast<std::uint64_t>(source) * 2 + round % 2);
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
  std::uint64_t rounds;
  std::uint64_t collective = 0;
  std::uint64_t verdicts = 0;
  std::uint64_t round_slots = 0;
  std::uint64_t steps = 0;
  std::uint64_t arrivals = 0;
  std::uint64_t offers = 0;
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
