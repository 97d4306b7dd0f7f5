// CollectiveDescriptor: what one PE says a collective call is, exchanged by every PE before any
// of them moves data (docs/architecture.md, "Every collective is checked before data moves").
//
// Every collective (empty, free and close, and every collective unit: barrier, all_gather,
// all_to_all, ...) gets the next number of this PE's collective sequence (1, 2, ... per
// lifecycle, in enqueue order) and a compact descriptor: kind (the collective's name), sequence
// number, and the fields it declared that PEs must agree on (byte counts, dtype, the symmetric
// offset it works on, ...). A backend
// publishes its own descriptor and reads every peer's (the publication doubles as "I have
// entered call n"), then MatchDescriptors decides: all alike, or COLLECTIVE_MISMATCH on every
// PE at once, naming the first field that differs and what each PE called, e.g.
//
//   collective calls differ across PEs (call: barrier on PE 0, all_gather on PE 1): sequence=3,
//   field=kind,
//   calls=pe 0: barrier #3; pe 1: all_gather #3 bytes=64 dtype=float32 offset=0x40
//
// Every PE reads the same descriptors, so every PE reaches the same verdict, and every PE has
// consumed sequence number n either way: a mismatch leaves the sequences in step.
//
// A call one PE refuses (its local checks failed) still takes its number there: that PE
// publishes a refusal (CollectiveDescriptor::Refusal: the kind, the error code and the start of
// its reason) in the call's place, so every other member's call of that number fails with
// "refused on PE p: <reason>" and the next call pairs with the next call (docs/architecture.md,
// "A refused call keeps its place").
//
// A plain value type with pure functions; safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "data_plane/collective.h"

namespace hyper_parallel::shmem {

/// The offset of a descriptor that names no symmetric memory.
inline constexpr std::uint64_t kNoOffset = ~std::uint64_t{0};

struct CollectiveDescriptor {
  /// How many 64-bit words a descriptor packs into (the sequence number among them).
  static constexpr int kWords = 12;
  /// Words [0, kCoreWords) hold the sequence number, the kind, the compared-field bits, the
  /// local outcome, bytes, offset and dtype (one cache line); the rest hold the alignment
  /// (compared for empty only) and close's facts.
  static constexpr int kCoreWords = 8;
  /// How many bytes of a refusal's reason travel (NUL-terminated): words 4 to 11.
  static constexpr int kReasonBytes = 8 * (kWords - 4);

  /// The collective's name, NUL-padded ("" until something is published): "barrier",
  /// "all_gather", "empty", ...
  std::array<char, 16> kind{};
  /// data_plane::AgreedField bits: the fields besides kind and number that PEs must agree on.
  unsigned fields = 0;
  /// Outcome of this PE's local step (empty: whether the heap could place the block; close:
  /// whether this PE is ready to shut down). Compared when `fields` says so.
  ErrorCode local = ErrorCode::kOk;
  std::uint64_t sequence = 0;
  std::uint64_t bytes = 0;      ///< empty/free: allocation bytes; a collective's input bytes
  std::uint64_t alignment = 0;  ///< empty only
  std::uint64_t offset = kNoOffset;  ///< heap offset of the allocation or output
  std::array<char, 16> dtype{};      ///< element type name, NUL-padded
  /// close: the Runtime's shutdown facts (not matched); a team split: its arguments (matched,
  /// kAgreeArguments).
  std::array<std::uint64_t, 3> extra{};
  /// A refusal (Refusal()): `local` holds the error code and `reason` the start of the message;
  /// no other field is set. Packed in the words of bytes, offset, dtype, alignment and extra.
  bool refused = false;
  std::array<char, kReasonBytes> reason{};

  bool operator==(const CollectiveDescriptor&) const = default;

  /// A descriptor of kind `kind` (up to 15 characters) comparing `fields`.
  static CollectiveDescriptor Of(std::string_view kind, unsigned fields);
  /// This PE's refusal of a call of kind `kind`: `why`'s code and the start of its message.
  static CollectiveDescriptor Refusal(std::string_view kind, const Status& why);

  /// A refusal's reason: "INVALID_ARGUMENT: broadcast root must be ..." (the message cut to
  /// kReasonBytes - 1 characters, ending "..." where it was cut).
  std::string reason_text() const;

  std::string_view kind_name() const;
  /// Stores up to 15 characters of `name` as the dtype.
  void SetDtype(std::string_view name);
  std::string_view dtype_name() const;

  /// True when equal core words certainly mean equal descriptors (no compared field lies past
  /// them), so a backend may compare the core words in place.
  bool DecidedByCoreWords() const;

  /// Packs into words (word 0 is the sequence number) and back.
  std::array<std::uint64_t, kWords> Pack() const;
  static CollectiveDescriptor Unpack(const std::array<std::uint64_t, kWords>& words);

  /// "all_gather #3 bytes=64 dtype=float32 offset=0x40": the kind, the sequence number and the
  /// fields it compares.
  std::string Describe() const;
};

/// Checks that every member's descriptor (indexed by member), `mine` among them, has the same
/// kind and sequence number as member 0's and the same value of every field member 0's
/// descriptor compares (generic over the fields: a collective declares them,
/// data_plane/collective.h). COLLECTIVE_MISMATCH otherwise, naming the field and every PE's
/// call (and the team, for a group other than the world); every member that reads the same
/// descriptors gets the same message. Without `group`, member i is PE i of the world.
Status MatchDescriptors(const CollectiveDescriptor& mine,
                        const std::vector<CollectiveDescriptor>& all,
                        const data_plane::CollectiveGroup* group = nullptr);

/// How errors and diagnostics name a group: "world", or "team 3 pes=[0,2]".
std::string GroupLabel(const data_plane::CollectiveGroup& group);

/// How mismatch messages name the integer arguments (kAgreeArguments) of a kind of call: the
/// collective units say it themselves (data_plane::Collective::ArgumentName / ArgumentValue);
/// the Runtime notes them and its own calls' names at initialisation. Unnoted kinds print
/// "arguments=[a,b,c]". Safe from any thread; the collective must outlive the process.
void NoteArgumentNames(const data_plane::Collective& collective);
void NoteArgumentNames(std::string_view kind, std::array<std::string_view, 3> names);

/// What the Runtime reads of the members' descriptors besides the verdict (close's facts),
/// reduced to a size that does not grow with the group: the first PEs of two lists, and the
/// least and greatest value of each `extra` word.
struct DescriptorFacts {
  /// How many PEs each list names at most (the lowest PE numbers).
  static constexpr int kListed = 8;
  std::vector<int> not_ok;   ///< PEs whose `local` is not OK
  bool not_ok_more = false;  ///< more PEs than `not_ok` names
  std::vector<int> holding;  ///< PEs whose extra[0] is not 0
  bool holding_more = false;
  std::array<std::uint64_t, 3> extra_low{};
  std::array<std::uint64_t, 3> extra_high{};

  /// Whether every member has the same extra[word].
  bool Uniform(int word) const { return extra_low[word] == extra_high[word]; }
};

/// The outcome of a descriptor agreement (Backend::Agree): the verdict and the facts.
struct Agreement {
  Status verdict;  ///< OK, or COLLECTIVE_MISMATCH naming the field and the PEs' calls
  DescriptorFacts facts;

  /// From every member's descriptor, in member order (a backend that reads them all): the
  /// verdict of MatchDescriptors, and the facts.
  static Agreement FromAll(const CollectiveDescriptor& mine,
                           const std::vector<CollectiveDescriptor>& all,
                           const data_plane::CollectiveGroup* group = nullptr);
};

/// The descriptors of a set of PEs reduced to a fixed size, for an agreement in rounds
/// (docs/architecture.md, "Agreement across hosts"): the least and the greatest descriptor (by
/// the fields each compares, then by PE) and the facts. Combining is commutative, associative
/// and idempotent, so a dissemination that sees some PEs twice still reaches the same summary
/// on every PE; all members agree exactly when the least equals the greatest.
struct DescriptorSummary {
  /// Packed size in 64-bit words; word 0 is the sequence number (stored last).
  static constexpr int kWords = 41;

  std::uint64_t sequence = 0;
  CollectiveDescriptor low;
  CollectiveDescriptor high;
  int low_pe = -1;  ///< -1: nothing folded in yet
  int high_pe = -1;
  std::array<int, DescriptorFacts::kListed> not_ok{};  ///< ascending; -1 after the last
  std::array<int, DescriptorFacts::kListed> holding{};
  bool not_ok_more = false;
  bool holding_more = false;
  std::array<std::uint64_t, 3> extra_low{};
  std::array<std::uint64_t, 3> extra_high{};

  /// An empty summary of call `sequence`.
  explicit DescriptorSummary(std::uint64_t sequence_number = 0);

  /// Adds PE `pe`'s descriptor.
  void Fold(const CollectiveDescriptor& descriptor, int pe);
  /// Adds everything `other` holds.
  void Combine(const DescriptorSummary& other);

  std::array<std::uint64_t, kWords> Pack() const;
  static DescriptorSummary Unpack(const std::array<std::uint64_t, kWords>& words);

  /// The verdict (OK when the least descriptor equals the greatest; else COLLECTIVE_MISMATCH
  /// naming the first field in which they differ and those two PEs' calls) and the facts.
  Agreement Conclude(const data_plane::CollectiveGroup& group) const;
};

/// One peer of a members-only exchange and the round of it (Backend::ExchangeWithPeers).
struct PeerRound {
  int pe = 0;
  std::uint64_t round = 0;
};

/// The words of one members-only exchange (word 0: the round).
using ExchangeWords = std::array<std::uint64_t, CollectiveDescriptor::kWords>;

}  // namespace hyper_parallel::shmem
