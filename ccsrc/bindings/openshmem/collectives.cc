// The OpenSHMEM C library's collectives (docs/openshmem.md): barriers, broadcast, collect,
// fcollect, alltoall(s) and the reductions, over the Runtime's collective units on teams; the
// deprecated active-set forms run on the team of their active set.
#include <algorithm>
#include <atomic>
#include <complex>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library.h"
#include "bindings/openshmem/reduce_elements.h"
#include "ops/collectives.h"
#include "ops/reduce/element.h"

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

std::byte* small_scratch = nullptr;  // max_teams areas, set by MakeScratch
int small_areas = 0;

bool Small(const TeamEntry& team, std::uint64_t bytes) {
  return team.direct && small_scratch != nullptr && team.slot < small_areas && bytes <= kSmallBytes;
}

class SmallCall {
 public:
  SmallCall(const TeamEntry& team) : team_(team) {
    const std::uint64_t parity = team.small_calls++ % 2;
    mine_ = small_scratch + static_cast<std::uint64_t>(team.slot) * kAreaBytes + parity * kSlotBytes;
  }
  std::byte* Payload() { return mine_ + 64; }
  // Writes this member's header, then the barrier; then checks every member's header.
  void Exchange(std::string_view call, const SmallHeader& header, bool sizes_agree) {
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

// ---- reductions ---------------------------------------------------------------------------

// One shared scratch block for the reductions the Runtime's unit does not take: each pass
// gathers every member's slice into it and combines them in team-PE order (the same bits on
// every PE), then the team's barrier frees it for the next pass.
std::mutex scratch_mutex;
constexpr std::uint64_t kScratchBytes = 64 * 1024;
void* scratch = nullptr;

template <class T>
void GatherReduce(std::string_view call, const TeamEntry& team, ops::ReduceOp op, T* dest,
                  const T* source, std::size_t count) {
  std::lock_guard<std::mutex> lock(scratch_mutex);
  if (scratch == nullptr) {
    FailArgument(call, "team", "a team whose PEs all made the library's scratch", "none");
  }
  const std::size_t n = team.pes.size();
  const std::size_t chunk = std::max<std::size_t>(1, kScratchBytes / (n * sizeof(T)));
  std::vector<T> result(std::min(chunk, count));
  for (std::size_t start = 0; start < count; start += chunk) {
    const std::size_t length = std::min(chunk, count - start);
    Run(call, team, "all_gather",
        ByteOperands(call, scratch, n * length * sizeof(T), source + start, length * sizeof(T)));
    const T* all = static_cast<const T*>(scratch);
    for (std::size_t i = 0; i < length; ++i) {
      T acc = all[i];
      for (std::size_t p = 1; p < n; ++p) acc = Combine(op, acc, all[p * length + i]);
      result[i] = acc;
    }
    std::memcpy(dest + start, result.data(), length * sizeof(T));
    Barrier(call, team);
  }
}

template <class T>
int Reduce(std::string_view call, const TeamEntry& team, ops::ReduceOp op, T* dest,
           const T* source, std::size_t count) {
  RefusalScope refusal(team.handle);  // a failed check takes the call's place
  if (count == 0) return 0;
  const std::uint64_t bytes = Bytes(call, count, sizeof(T));
  if (Small(team, bytes)) {
    // Every member combines the members' slots in team-PE order: the same bits everywhere.
    Resolve(call, "dest", dest, bytes);
    SmallCall small(team);
    std::memcpy(small.Payload(), source, bytes);
    small.Exchange(call, {kSmallReduce, 0, bytes, sizeof(T) * 16 + static_cast<std::uint64_t>(op)}, true);
    T result[kSmallBytes / sizeof(T) + 1];
    std::memcpy(result, small.Of(0), bytes);
    for (std::size_t p = 1; p < team.pes.size(); ++p) {
      const std::byte* theirs = small.Of(static_cast<int>(p));
      for (std::size_t i = 0; i < count; ++i) {
        T value;
        std::memcpy(&value, theirs + i * sizeof(T), sizeof(T));
        result[i] = Combine(op, result[i], value);
      }
    }
    std::memcpy(dest, result, bytes);
    return 0;
  }
  if (const std::optional<std::string_view> dtype = DtypeOf<T>()) {
    CollectiveOperands operands;
    operands.output = Resolve(call, "dest", dest, bytes);
    operands.input = source;
    operands.input_bytes = bytes;
    operands.element_bytes = sizeof(T);
    operands.dtype = *dtype;
    operands.arguments[0] = static_cast<std::int64_t>(op);
    Run(call, team, "all_reduce", operands);
    return 0;
  }
  Resolve(call, "dest", dest, bytes);
  GatherReduce(call, team, op, dest, source, count);
  return 0;
}

}  // namespace

void MakeScratch(int max_teams) {
  std::lock_guard<std::mutex> lock(scratch_mutex);
  scratch = Allocate("shmem_init", kScratchBytes, 64);
  small_scratch = static_cast<std::byte*>(
      Allocate("shmem_init", static_cast<std::uint64_t>(max_teams) * kAreaBytes, 64));
  small_areas = small_scratch != nullptr ? max_teams : 0;
}
void DropScratch() {
  std::lock_guard<std::mutex> lock(scratch_mutex);
  scratch = nullptr;  // shmem_finalize frees every block
  small_scratch = nullptr;
  small_areas = 0;
}

}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

void shmem_barrier_all(void) {
  Quiet("shmem_barrier_all");
  Barrier("shmem_barrier_all", *FindTeam("shmem_barrier_all", 1));
}
void shmem_sync_all(void) { Barrier("shmem_sync_all", *FindTeam("shmem_sync_all", 1)); }
int shmem_team_sync(shmem_team_t team) {
  if (team == SHMEM_TEAM_INVALID) return -1;
  Barrier("shmem_team_sync", TeamArg("shmem_team_sync", team));
  return 0;
}
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  (void)pSync;
  Quiet("shmem_barrier");
  Barrier("shmem_barrier", ActiveSet("shmem_barrier", PE_start, logPE_stride, PE_size));
}
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long* pSync) {
  (void)pSync;
  Barrier("shmem_sync", ActiveSet("shmem_sync", PE_start, logPE_stride, PE_size));
}

#define HPS_DEFINE_TEAM_COLLECTIVES(T, N)                                                         \
  int shmem_##N##_broadcast(shmem_team_t team, T* dest, const T* source, size_t nelems,          \
                            int PE_root) {                                                        \
    return Broadcast("shmem_" #N "_broadcast", TeamArg("shmem_" #N "_broadcast", team), dest,    \
                     source, Bytes("shmem_" #N, nelems, sizeof(T)), PE_root);                                        \
  }                                                                                               \
  int shmem_##N##_collect(shmem_team_t team, T* dest, const T* source, size_t nelems) {          \
    return Collect("shmem_" #N "_collect", TeamArg("shmem_" #N "_collect", team), dest, source,  \
                   Bytes("shmem_" #N, nelems, sizeof(T)));                                                           \
  }                                                                                               \
  int shmem_##N##_fcollect(shmem_team_t team, T* dest, const T* source, size_t nelems) {         \
    return Fcollect("shmem_" #N "_fcollect", TeamArg("shmem_" #N "_fcollect", team), dest,       \
                    source, Bytes("shmem_" #N, nelems, sizeof(T)));                                                  \
  }                                                                                               \
  int shmem_##N##_alltoall(shmem_team_t team, T* dest, const T* source, size_t nelems) {         \
    return Alltoall("shmem_" #N "_alltoall", TeamArg("shmem_" #N "_alltoall", team), dest,       \
                    source, Bytes("shmem_" #N, nelems, sizeof(T)));                                                  \
  }                                                                                               \
  int shmem_##N##_alltoalls(shmem_team_t team, T* dest, const T* source, ptrdiff_t dst,          \
                            ptrdiff_t sst, size_t nelems) {                                       \
    return Alltoalls("shmem_" #N "_alltoalls", TeamArg("shmem_" #N "_alltoalls", team), dest,    \
                     source, dst, sst, nelems, sizeof(T));                                        \
  }
HPS_SHMEM_RMA_TYPES(HPS_DEFINE_TEAM_COLLECTIVES)

int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                       int PE_root) {
  return Broadcast("shmem_broadcastmem", TeamArg("shmem_broadcastmem", team), dest, source,
                   nelems, PE_root);
}
int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return Collect("shmem_collectmem", TeamArg("shmem_collectmem", team), dest, source, nelems);
}
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return Fcollect("shmem_fcollectmem", TeamArg("shmem_fcollectmem", team), dest, source, nelems);
}
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems) {
  return Alltoall("shmem_alltoallmem", TeamArg("shmem_alltoallmem", team), dest, source, nelems);
}
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems) {
  return Alltoalls("shmem_alltoallsmem", TeamArg("shmem_alltoallsmem", team), dest, source, dst,
                   sst, nelems, 1);
}

// The active-set forms. broadcast leaves the root's dest as it was (OpenSHMEM 1.4).
#define HPS_DEFINE_ACTIVE_SET(BITS)                                                               \
  void shmem_broadcast##BITS(void* dest, const void* source, size_t nelems, int PE_root,          \
                             int PE_start, int logPE_stride, int PE_size, long* pSync) {          \
    (void)pSync;                                                                                  \
    constexpr const char* kCall = "shmem_broadcast" #BITS;                                        \
    const TeamEntry& team = ActiveSet(kCall, PE_start, logPE_stride, PE_size);                    \
    const std::size_t bytes = Bytes(kCall, nelems, BITS / 8);                                     \
    std::vector<char> kept;                                                                       \
    if (team.my_pe == PE_root && dest != source) {                                                \
      kept.assign(static_cast<char*>(dest), static_cast<char*>(dest) + bytes);                    \
    }                                                                                             \
    Broadcast(kCall, team, dest, source, bytes, PE_root);                                         \
    if (!kept.empty()) std::memcpy(dest, kept.data(), bytes);                                     \
  }                                                                                               \
  void shmem_collect##BITS(void* dest, const void* source, size_t nelems, int PE_start,           \
                           int logPE_stride, int PE_size, long* pSync) {                          \
    (void)pSync;                                                                                  \
    Collect("shmem_collect" #BITS, ActiveSet("shmem_collect" #BITS, PE_start, logPE_stride, PE_size), \
            dest, source, Bytes("shmem_" #BITS, nelems, BITS / 8));                                                   \
  }                                                                                               \
  void shmem_fcollect##BITS(void* dest, const void* source, size_t nelems, int PE_start,          \
                            int logPE_stride, int PE_size, long* pSync) {                         \
    (void)pSync;                                                                                  \
    Fcollect("shmem_fcollect" #BITS,                                                              \
             ActiveSet("shmem_fcollect" #BITS, PE_start, logPE_stride, PE_size), dest, source,    \
             Bytes("shmem_" #BITS, nelems, BITS / 8));                                                                \
  }                                                                                               \
  void shmem_alltoall##BITS(void* dest, const void* source, size_t nelems, int PE_start,          \
                            int logPE_stride, int PE_size, long* pSync) {                         \
    (void)pSync;                                                                                  \
    Alltoall("shmem_alltoall" #BITS,                                                              \
             ActiveSet("shmem_alltoall" #BITS, PE_start, logPE_stride, PE_size), dest, source,    \
             Bytes("shmem_" #BITS, nelems, BITS / 8));                                                                \
  }                                                                                               \
  void shmem_alltoalls##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,        \
                             size_t nelems, int PE_start, int logPE_stride, int PE_size,          \
                             long* pSync) {                                                       \
    (void)pSync;                                                                                  \
    Alltoalls("shmem_alltoalls" #BITS,                                                            \
              ActiveSet("shmem_alltoalls" #BITS, PE_start, logPE_stride, PE_size), dest, source,  \
              dst, sst, nelems, BITS / 8);                                                        \
  }
HPS_DEFINE_ACTIVE_SET(32)
HPS_DEFINE_ACTIVE_SET(64)

#define HPS_DEFINE_REDUCE(T, N, OP, CODE)                                                         \
  int shmem_##N##_##OP##_reduce(shmem_team_t team, T* dest, const T* source, size_t nreduce) {    \
    if (team == SHMEM_TEAM_INVALID) return -1;                                                    \
    return Reduce<T>("shmem_" #N "_" #OP "_reduce", TeamArg("shmem_" #N "_" #OP "_reduce", team), \
                     CODE, dest, source, nreduce);                                                \
  }
#define HPS_DEFINE_REDUCE_BITWISE(T, N)                  \
  HPS_DEFINE_REDUCE(T, N, and, ops::ReduceOp::kAnd)      \
  HPS_DEFINE_REDUCE(T, N, or, ops::ReduceOp::kOr)        \
  HPS_DEFINE_REDUCE(T, N, xor, ops::ReduceOp::kXor)
#define HPS_DEFINE_REDUCE_ORDERED(T, N)                  \
  HPS_DEFINE_REDUCE(T, N, min, ops::ReduceOp::kMin)      \
  HPS_DEFINE_REDUCE(T, N, max, ops::ReduceOp::kMax)      \
  HPS_DEFINE_REDUCE(T, N, sum, ops::ReduceOp::kSum)      \
  HPS_DEFINE_REDUCE(T, N, prod, ops::ReduceOp::kProd)
HPS_SHMEM_REDUCE_BITWISE_TYPES(HPS_DEFINE_REDUCE_BITWISE)
HPS_SHMEM_REDUCE_ORDERED_TYPES(HPS_DEFINE_REDUCE_ORDERED)

#define HPS_DEFINE_TO_ALL(T, N, OP, CODE)                                                         \
  void shmem_##N##_##OP##_to_all(T* dest, const T* source, int nreduce, int PE_start,             \
                                 int logPE_stride, int PE_size, T* pWrk, long* pSync) {           \
    (void)pWrk, (void)pSync;                                                                      \
    constexpr const char* kCall = "shmem_" #N "_" #OP "_to_all";                                  \
    if (nreduce < 0) FailArgument(kCall, "nreduce", "not negative", std::to_string(nreduce));    \
    Reduce<T>(kCall, ActiveSet(kCall, PE_start, logPE_stride, PE_size), CODE, dest, source,       \
              static_cast<std::size_t>(nreduce));                                                 \
  }
#define HPS_DEFINE_TO_ALL_BITWISE(T, N)                 \
  HPS_DEFINE_TO_ALL(T, N, and, ops::ReduceOp::kAnd)     \
  HPS_DEFINE_TO_ALL(T, N, or, ops::ReduceOp::kOr)       \
  HPS_DEFINE_TO_ALL(T, N, xor, ops::ReduceOp::kXor)
#define HPS_DEFINE_TO_ALL_ORDERED(T, N)                 \
  HPS_DEFINE_TO_ALL(T, N, min, ops::ReduceOp::kMin)     \
  HPS_DEFINE_TO_ALL(T, N, max, ops::ReduceOp::kMax)     \
  HPS_DEFINE_TO_ALL(T, N, sum, ops::ReduceOp::kSum)     \
  HPS_DEFINE_TO_ALL(T, N, prod, ops::ReduceOp::kProd)
HPS_SHMEM_TO_ALL_BITWISE_TYPES(HPS_DEFINE_TO_ALL_BITWISE)
HPS_SHMEM_TO_ALL_ORDERED_TYPES(HPS_DEFINE_TO_ALL_ORDERED)

// The complex types: C's _Complex (a GCC extension in C++) in the signatures, std::complex
// (the same layout) in the arithmetic.
#define HPS_DEFINE_COMPLEX(CT, ST, N)                                                             \
  void shmem_##N##_put(CT* dest, const CT* source, size_t nelems, int pe) {                       \
    shmem_putmem(dest, source, Bytes("shmem_" #N, nelems, sizeof(CT)), pe);                                          \
  }                                                                                               \
  void shmem_##N##_get(CT* dest, const CT* source, size_t nelems, int pe) {                       \
    shmem_getmem(dest, source, Bytes("shmem_" #N, nelems, sizeof(CT)), pe);                                          \
  }                                                                                               \
  int shmem_##N##_sum_reduce(shmem_team_t team, CT* dest, const CT* source, size_t nreduce) {     \
    return Reduce<ST>("shmem_" #N "_sum_reduce", TeamArg("shmem_" #N "_sum_reduce", team),       \
                      ops::ReduceOp::kSum, reinterpret_cast<ST*>(dest),                           \
                      reinterpret_cast<const ST*>(source), nreduce);                              \
  }                                                                                               \
  int shmem_##N##_prod_reduce(shmem_team_t team, CT* dest, const CT* source, size_t nreduce) {    \
    return Reduce<ST>("shmem_" #N "_prod_reduce", TeamArg("shmem_" #N "_prod_reduce", team),     \
                      ops::ReduceOp::kProd, reinterpret_cast<ST*>(dest),                          \
                      reinterpret_cast<const ST*>(source), nreduce);                              \
  }                                                                                               \
  void shmem_##N##_sum_to_all(CT* dest, const CT* source, int nreduce, int PE_start,              \
                              int logPE_stride, int PE_size, CT* pWrk, long* pSync) {             \
    (void)pWrk, (void)pSync;                                                                      \
    Reduce<ST>("shmem_" #N "_sum_to_all",                                                         \
               ActiveSet("shmem_" #N "_sum_to_all", PE_start, logPE_stride, PE_size),             \
               ops::ReduceOp::kSum, reinterpret_cast<ST*>(dest),                                  \
               reinterpret_cast<const ST*>(source), static_cast<std::size_t>(std::max(0, nreduce))); \
  }                                                                                               \
  void shmem_##N##_prod_to_all(CT* dest, const CT* source, int nreduce, int PE_start,             \
                               int logPE_stride, int PE_size, CT* pWrk, long* pSync) {            \
    (void)pWrk, (void)pSync;                                                                      \
    Reduce<ST>("shmem_" #N "_prod_to_all",                                                        \
               ActiveSet("shmem_" #N "_prod_to_all", PE_start, logPE_stride, PE_size),            \
               ops::ReduceOp::kProd, reinterpret_cast<ST*>(dest),                                 \
               reinterpret_cast<const ST*>(source), static_cast<std::size_t>(std::max(0, nreduce))); \
  }
HPS_DEFINE_COMPLEX(float _Complex, std::complex<float>, complexf)
HPS_DEFINE_COMPLEX(double _Complex, std::complex<double>, complexd)

}  // extern "C"
