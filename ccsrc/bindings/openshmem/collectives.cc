// The OpenSHMEM C library's collectives (docs/openshmem.md, "How it works"): broadcast,
// collect, fcollect and alltoall(s) over the Runtime's collective units on teams, and the small
// collectives' path (one barrier, then copies). The entry points are collectives_calls.cc's,
// the reductions collectives_reduce.cc's.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bindings/openshmem/collectives.h"
#include "ops/collectives.h"

namespace hyper_parallel::shmem::openshmem {
namespace {

const data_plane::Collective& Unit(std::string_view name) {
  const data_plane::Collective* unit = ops::FindCollective(name);
  if (unit == nullptr) {
    Fail("shmem", Status::Assertion(ErrorCode::kUnsupportedCapability,
                                    "this build has no such collective", {{"name", std::string(name)}}));
  }
  return *unit;
}

}  // namespace

void Run(std::string_view call, const TeamEntry& team, std::string_view unit,
         const CollectiveOperands& operands) {
  Runtime& runtime = Ready(call);
  RefusalScope::Entered();
  const Status s = team.handle == kWorldTeam
                       ? runtime.RunCollective(Unit(unit), operands, kDefaultStream)
                       : runtime.RunCollective(team.handle, Unit(unit), operands, kDefaultStream);
  if (!s.ok()) Fail(call, s);
}

void Barrier(std::string_view call, const TeamEntry& team) { Run(call, team, "barrier", {}); }

const TeamEntry& TeamArg(std::string_view call, shmem_team_t team) {
  return *FindTeam(call, reinterpret_cast<std::uintptr_t>(team));
}

// Byte-wise operands: `output` bytes at symmetric `dest`, `input` bytes from `source`.
CollectiveOperands ByteOperands(std::string_view call, void* dest, std::uint64_t output,
                         const void* source, std::uint64_t input) {
  CollectiveOperands operands;
  operands.output = Resolve(call, "dest", dest, output);
  operands.input = source;
  operands.input_bytes = input;
  operands.element_bytes = 1;
  operands.dtype = "uint8";
  return operands;
}

namespace {

std::byte* small_scratch = nullptr;  // max_teams areas, set by MakeScratch
int small_areas = 0;

}  // namespace

bool Small(const TeamEntry& team, std::uint64_t bytes) {
  return team.direct && small_scratch != nullptr && team.slot < small_areas && bytes <= kSmallBytes;
}

SmallCall::SmallCall(const TeamEntry& team) : team_(team) {
  const std::uint64_t parity = team.small_calls++ % 2;
  mine_ = small_scratch + static_cast<std::uint64_t>(team.slot) * kAreaBytes + parity * kSlotBytes;
}

void SmallCall::Exchange(std::string_view call, const SmallHeader& header, bool sizes_agree) {
  std::memcpy(mine_, &header, sizeof(header));
  std::atomic_thread_fence(std::memory_order_release);
  Barrier(call, team_);
  std::atomic_thread_fence(std::memory_order_acquire);
  for (std::size_t p = 0; p < team_.pes.size(); ++p) {
    SmallHeader theirs;
    std::memcpy(&theirs, Of(static_cast<int>(p)) - 64, sizeof(theirs));
    const char* field = theirs.op != header.op       ? "collective"
                        : theirs.root != header.root ? "root"
                        : theirs.unit != header.unit ? "element type or operator"
                        : sizes_agree && theirs.bytes != header.bytes ? "size"
                                                                        : nullptr;
    if (field != nullptr) {
      Fail(call, Status::Assertion(ErrorCode::kCollectiveMismatch,
                                   "the team's PEs called different collectives",
                                   {{"field", field},
                                    {"pe", std::to_string(team_.pes[p])}}));
    }
  }
}

int Broadcast(std::string_view call, const TeamEntry& team, void* dest, const void* source,
              std::uint64_t bytes, int root) {
  RefusalScope refusal(team.handle);  // a failed check takes the call's place
  const int n = static_cast<int>(team.pes.size());
  if (root < 0 || root >= n) {
    FailArgument(call, "PE_root", "in [0, " + std::to_string(n) + ") of the team", std::to_string(root));
  }
  if (bytes == 0) return 0;
  if (Small(team, bytes)) {
    Resolve(call, "dest", dest, bytes);
    SmallCall small(team);
    const bool is_root = team.my_pe == root;
    if (is_root) std::memcpy(small.Payload(), source, bytes);
    small.Exchange(call, {kSmallBroadcast, static_cast<std::uint64_t>(root), bytes, 1}, true);
    std::memmove(dest, is_root ? source : small.Of(root), bytes);
    return 0;
  }
  CollectiveOperands operands = ByteOperands(call, dest, bytes, source, bytes);
  operands.arguments[0] = root;
  Run(call, team, "broadcast", operands);
  return 0;
}

int Collect(std::string_view call, const TeamEntry& team, void* dest, const void* source,
            std::uint64_t bytes) {
  RefusalScope refusal(team.handle);  // a failed check takes the call's place
  const std::uint64_t room = BytesToEnd(dest);
  // A PE that gives nothing and names no symmetric dest (null) takes no part: every PE of a
  // collect of nothing may do so (tests-sos's zero-length collectives).
  if (room == 0 && bytes == 0) return 0;
  if (room == 0) Resolve(call, "dest", dest, 1);  // fails naming it
  if (Small(team, 0)) {  // every member takes this path: the sizes are seen after the barrier
    SmallCall small(team);
    const bool fits = bytes <= kSmallBytes;
    if (fits) std::memcpy(small.Payload(), source, bytes);
    small.Exchange(call, {kSmallCollect, 0, fits ? bytes : kTooBig, 1}, false);
    const int n = static_cast<int>(team.pes.size());
    std::uint64_t total = 0;
    bool all_fit = true;
    for (int p = 0; p < n; ++p) {
      const std::uint64_t b = small.BytesOf(p);
      all_fit = all_fit && b != kTooBig;
      total += all_fit ? b : 0;
    }
    if (all_fit) {
      if (total > room) {
        FailArgument(call, "dest", "room for every PE's elements (" + std::to_string(total) + " bytes)",
                     std::to_string(room) + " bytes");
      }
      std::uint64_t at = 0;
      for (int p = 0; p < n; ++p) {
        const std::uint64_t b = small.BytesOf(p);
        std::memcpy(static_cast<std::byte*>(dest) + at, small.Of(p), b);
        at += b;
      }
      return 0;
    }
    // Some member's contribution is larger: every member saw it and goes to the unit.
  }
  CollectiveOperands operands = ByteOperands(call, dest, room, source, bytes);
  operands.results = std::make_shared<std::vector<std::uint64_t>>();
  Run(call, team, "all_gather_v", operands);
  return 0;
}

int Fcollect(std::string_view call, const TeamEntry& team, void* dest, const void* source,
             std::uint64_t bytes) {
  RefusalScope refusal(team.handle);  // a failed check takes the call's place
  if (bytes == 0) return 0;
  if (Small(team, bytes)) {
    Resolve(call, "dest", dest, Bytes(call, bytes, team.pes.size()));
    SmallCall small(team);
    std::memcpy(small.Payload(), source, bytes);
    small.Exchange(call, {kSmallFcollect, 0, bytes, 1}, true);
    for (std::size_t p = 0; p < team.pes.size(); ++p) {
      std::memcpy(static_cast<std::byte*>(dest) + p * bytes, small.Of(static_cast<int>(p)), bytes);
    }
    return 0;
  }
  Run(call, team, "all_gather", ByteOperands(call, dest, bytes * team.pes.size(), source, bytes));
  return 0;
}

int Alltoall(std::string_view call, const TeamEntry& team, void* dest, const void* source,
             std::uint64_t bytes) {
  RefusalScope refusal(team.handle);  // a failed check takes the call's place
  if (bytes == 0) return 0;
  const std::uint64_t total = Bytes(call, bytes, team.pes.size());
  if (Small(team, total)) {
    Resolve(call, "dest", dest, total);
    SmallCall small(team);
    std::memcpy(small.Payload(), source, total);
    small.Exchange(call, {kSmallAlltoall, 0, bytes, 1}, true);
    const auto me = static_cast<std::uint64_t>(team.my_pe);
    for (std::size_t p = 0; p < team.pes.size(); ++p) {
      std::memcpy(static_cast<std::byte*>(dest) + p * bytes,
                  small.Of(static_cast<int>(p)) + me * bytes, bytes);
    }
    return 0;
  }
  Run(call, team, "all_to_all", ByteOperands(call, dest, total, source, total));
  return 0;
}

// Strided all-to-all: element i of the block for team PE j, source[(j * nelems + i) * sst],
// lands at dest[(me * nelems + i) * dst] on j; puts between two barriers of the team.
int Alltoalls(std::string_view call, const TeamEntry& team, void* dest, const void* source,
              std::ptrdiff_t dst, std::ptrdiff_t sst, std::size_t nelems, std::size_t size) {
  RefusalScope refusal(team.handle);  // a failed check takes the call's place
  Barrier(call, team);
  const auto me = static_cast<std::ptrdiff_t>(team.my_pe);
  const auto n = static_cast<std::ptrdiff_t>(nelems);
  const auto bytes = static_cast<std::ptrdiff_t>(size);
  for (std::size_t j = 0; j < team.pes.size(); ++j) {
    const auto jj = static_cast<std::ptrdiff_t>(j);
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      shmem_putmem_nbi(static_cast<char*>(dest) + (me * n + i) * dst * bytes,
                       static_cast<const char*>(source) + (jj * n + i) * sst * bytes, size,
                       team.pes[j]);
    }
  }
  Quiet(call);
  Barrier(call, team);
  return 0;
}

void MakeScratch(int max_teams) {
  MakeReduceScratch();
  small_scratch = static_cast<std::byte*>(
      Allocate("shmem_init", static_cast<std::uint64_t>(max_teams) * kAreaBytes, 64));
  small_areas = small_scratch != nullptr ? max_teams : 0;
}
void DropScratch() {
  DropReduceScratch();  // shmem_finalize frees every block
  small_scratch = nullptr;
  small_areas = 0;
}

}  // namespace hyper_parallel::shmem::openshmem
