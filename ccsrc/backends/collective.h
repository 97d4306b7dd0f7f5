// CollectiveDescriptor: what one PE says a collective call is, exchanged by every PE before any
// of them moves data (DESIGN §4.8).
//
// Every collective (empty, free, barrier, all_gather, close) gets the next number of this PE's
// collective sequence (1, 2, ... per lifecycle, in enqueue order) and a compact descriptor:
// kind, sequence number, byte counts, dtype, the symmetric offset it works on. A backend
// publishes its own descriptor and reads every peer's (the publication doubles as "I have
// entered call n"), then MatchDescriptors decides: all alike, or COLLECTIVE_MISMATCH on every
// PE at once, naming the first field that differs and what each PE called, e.g.
//
//   collective calls differ across PEs: sequence=3, field=kind,
//   calls=pe 0: barrier #3; pe 1: all_gather #3 bytes=64 dtype=float32 offset=0x40
//
// Every PE reads the same descriptors, so every PE reaches the same verdict, and every PE has
// consumed sequence number n either way: a mismatch leaves the sequences in step.
//
// A plain value type with pure functions; safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hyper_parallel::shmem {

enum class CollectiveKind : std::uint8_t {
  kNone = 0,  ///< nothing published yet
  kEmpty = 1,
  kFree = 2,
  kBarrier = 3,
  kAllGather = 4,
  kClose = 5,
};

std::string_view CollectiveKindName(CollectiveKind kind);

/// The offset of a descriptor that names no symmetric memory.
inline constexpr std::uint64_t kNoOffset = ~std::uint64_t{0};

struct CollectiveDescriptor {
  /// How many 64-bit words a descriptor packs into (the sequence number among them).
  static constexpr int kWords = 10;
  /// Words [0, kCoreWords) hold the sequence number and every field MatchDescriptors compares
  /// (they fit one cache line); the rest hold close's facts, read only for close.
  static constexpr int kCoreWords = 7;

  CollectiveKind kind = CollectiveKind::kNone;
  /// Outcome of this PE's local step (empty: whether the heap could place the block; close:
  /// whether this PE is ready to shut down). Compared only where the kind says so.
  ErrorCode local = ErrorCode::kOk;
  std::uint64_t sequence = 0;
  std::uint64_t bytes = 0;      ///< empty/free: allocation bytes; all_gather: bytes per PE
  std::uint64_t alignment = 0;  ///< empty only
  std::uint64_t offset = kNoOffset;  ///< heap offset of the allocation or output
  std::array<char, 16> dtype{};      ///< element type name, NUL-padded (all_gather)
  std::array<std::uint64_t, 3> extra{};  ///< close: the Runtime's shutdown facts; not matched

  bool operator==(const CollectiveDescriptor&) const = default;

  /// Stores up to 15 characters of `name` as the dtype.
  void SetDtype(std::string_view name);
  std::string_view dtype_name() const;

  /// Packs into words (word 0 is the sequence number) and back.
  std::array<std::uint64_t, kWords> Pack() const;
  static CollectiveDescriptor Unpack(const std::array<std::uint64_t, kWords>& words);

  /// "all_gather #3 bytes=64 dtype=float32 offset=0x40": the kind, the sequence number and the
  /// fields its kind compares.
  std::string Describe() const;
};

/// Checks that every PE's descriptor (indexed by rank), `mine` among them, has the same kind and
/// sequence number as PE 0's and, per kind, the same fields: empty (bytes, alignment, offset, local outcome), free (bytes,
/// offset), all_gather (bytes, dtype, offset); barrier and close only kind and sequence.
/// COLLECTIVE_MISMATCH otherwise, naming the field and every PE's call; every PE that reads the
/// same descriptors gets the same message.
Status MatchDescriptors(const CollectiveDescriptor& mine,
                        const std::vector<CollectiveDescriptor>& all);

}  // namespace hyper_parallel::shmem
