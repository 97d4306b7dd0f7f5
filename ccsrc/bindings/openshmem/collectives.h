// What the OpenSHMEM C library's collectives share (docs/openshmem.md, "How it works"),
// private to collectives.cc (the data movers and the small collectives), collectives_calls.cc
// (barriers and the team and active-set entry points) and collectives_reduce.cc (reductions).
//
// Thread-safety: as the Runtime's collectives; the reductions' scratch block has its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/mutex.h"
#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library.h"

namespace hyper_parallel::shmem::openshmem {

/// Runs the Runtime's collective `unit` on `team`, failing as `call`.
void Run(std::string_view call, const TeamEntry& team, std::string_view unit,
         const CollectiveOperands& operands);
void Barrier(std::string_view call, const TeamEntry& team);
const TeamEntry& TeamArg(std::string_view call, shmem_team_t team);
/// Byte-wise operands: `output` bytes at symmetric `dest`, `input` bytes from `source`.
CollectiveOperands ByteOperands(std::string_view call, void* dest, std::uint64_t output,
                                const void* source, std::uint64_t input);

// ---- small collectives: one barrier, then copies ------------------------------------------
//
// On a team whose every member's heap is mapped here (TeamEntry::direct), a collective whose
// contribution per PE is at most kSmallBytes skips the Runtime's unit (an agreement round and
// the unit's own synchronisation: 2 to 5 times a barrier for a few bytes). Each PE writes a
// header and its contribution into its own slot of the team's scratch area, the team's Runtime
// barrier follows, and each PE reads what it needs from the members' slots through the mapping
// and writes its own dest. Slots alternate by the team's small-call count: call k + 2 writes the
// slot call k was read from, and every member finished those reads before it entered call
// k + 1's barrier. The headers are compared after the barrier: a member that called another
// collective, root, size or type is COLLECTIVE_MISMATCH on every PE, naming the field, as the
// Runtime's agreement would be.

constexpr std::uint64_t kSmallBytes = 1024;
struct SmallHeader {
  std::uint64_t op = 0;    // which collective
  std::uint64_t root = 0;
  std::uint64_t bytes = 0;  // this member's contribution (kTooBig: collect's, past kSmallBytes)
  std::uint64_t unit = 0;   // the element's size, and the reduction's operator
};
constexpr std::uint64_t kTooBig = ~std::uint64_t{0};
constexpr std::uint64_t kSlotBytes = 64 + kSmallBytes;
constexpr std::uint64_t kAreaBytes = 2 * kSlotBytes;
enum SmallOp : std::uint64_t { kSmallBroadcast = 1, kSmallFcollect, kSmallCollect, kSmallAlltoall,
                               kSmallReduce };

/// Whether a collective of `bytes` per PE on `team` takes the small path.
bool Small(const TeamEntry& team, std::uint64_t bytes);

class SmallCall {
 public:
  explicit SmallCall(const TeamEntry& team);
  std::byte* Payload() { return mine_ + 64; }
  // Writes this member's header, then the barrier; then checks every member's header.
  void Exchange(std::string_view call, const SmallHeader& header, bool sizes_agree);
  // Member `p`'s payload as this process maps it.
  const std::byte* Of(int p) const {
    const int pe = team_.pes[static_cast<std::size_t>(p)];
    return static_cast<const std::byte*>(Direct(pe, SymmetricView{0, mine_, kSlotBytes})) + 64;
  }
  std::uint64_t BytesOf(int p) const {
    SmallHeader theirs;
    std::memcpy(&theirs, Of(p) - 64, sizeof(theirs));
    return theirs.bytes;
  }

 private:
  const TeamEntry& team_;
  std::byte* mine_ = nullptr;
};

/// The data movers (collectives.cc), each a call's whole work on `team`.
int Broadcast(std::string_view call, const TeamEntry& team, void* dest, const void* source,
              std::uint64_t bytes, int root);
int Collect(std::string_view call, const TeamEntry& team, void* dest, const void* source,
            std::uint64_t bytes);
int Fcollect(std::string_view call, const TeamEntry& team, void* dest, const void* source,
             std::uint64_t bytes);
int Alltoall(std::string_view call, const TeamEntry& team, void* dest, const void* source,
             std::uint64_t bytes);
int Alltoalls(std::string_view call, const TeamEntry& team, void* dest, const void* source,
              std::ptrdiff_t dst, std::ptrdiff_t sst, std::size_t nelems, std::size_t size);

/// The reductions' scratch block (collectives_reduce.cc): made and dropped with the small
/// collectives' areas (MakeScratch, DropScratch).
void MakeReduceScratch();
void DropReduceScratch();

}  // namespace hyper_parallel::shmem::openshmem
