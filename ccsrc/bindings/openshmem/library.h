// The OpenSHMEM C library's shared state (docs/openshmem.md): the process's one Runtime as the
// C API sees it, the symmetric blocks (heap allocations, and the executable's static data
// remapped onto one), teams and contexts by handle, and the one way a call fails.
//
// OpenSHMEM calls return no errors: a call that cannot go on prints one line naming the call
// and the argument, in the project's error shape, and ends the job on every PE (GlobalExit).
//
// Thread-safety: the Runtime is thread-safe; the tables here are guarded by one mutex
// (shmem_init_thread offers SHMEM_THREAD_MULTIPLE).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::openshmem {

/// Prints "hyper_parallel_shmem: PE <n>: <call>: <status>" on stderr.
void Report(std::string_view call, const Status& status);
/// Report, then ends the job on every PE (exit status 1).
[[noreturn]] void Fail(std::string_view call, const Status& status);
/// For the length of a collective's own checks on `team`: a Fail meanwhile first publishes
/// this PE's refusal in the collective's place (Runtime::RefuseCollective), so every other
/// member's call fails too, printing this PE's reason, and none waits for a PE that is gone
/// (docs/openshmem.md, "Bad input"). Ended (RefusalScope::Entered) when the call reaches the
/// Runtime, whose failures every member sees alike. One per thread at a time.
class RefusalScope {
 public:
  explicit RefusalScope(const TeamHandle& team);
  ~RefusalScope();
  RefusalScope(const RefusalScope&) = delete;
  RefusalScope& operator=(const RefusalScope&) = delete;
  /// The call reached the Runtime: a failure from here on is not a refusal.
  static void Entered();
};

/// Fail with INVALID_ARGUMENT naming `argument`, the rule and what was given.
[[noreturn]] void FailArgument(std::string_view call, std::string_view argument,
                               std::string_view rule, std::string_view given);
/// Ends the job on every PE with `status` (shmem_global_exit): tells the launcher, which
/// stops the other PEs, then exits this process at once.
[[noreturn]] void GlobalExit(int status);

/// The Runtime, ready; a call before shmem_init (or after shmem_finalize) fails naming `call`.
Runtime& Ready(std::string_view call);
/// Whether shmem_init ran and shmem_finalize has not.
bool Initialized();

/// The heap view of `bytes` bytes at `address`, which must lie in a symmetric block (a heap
/// allocation or the static data); fails naming `call` and `argument` otherwise.
SymmetricView Resolve(std::string_view call, std::string_view argument, const void* address,
                      std::uint64_t bytes);
/// Resolve without failing: false when `address` is not symmetric.
bool TryResolve(const void* address, std::uint64_t bytes, SymmetricView* out);
/// The bytes from `address` to the end of its symmetric block (0 when not symmetric).
std::uint64_t BytesToEnd(const void* address);

/// Where `view` (this PE's heap) lies in PE `pe`'s heap as mapped in this process, when this
/// process may load, store and use CPU atomics there (a PE of this host: the direct path, as
/// OSHMEM's shared-memory transport); null when `pe` is reached through the Runtime's
/// operations (another host).
void* Direct(int pe, const SymmetricView& view);

/// The one-call form of an RMA operand's checks, for the hot path: fails as `call` unless the
/// library is initialised, `pe` is a world PE and `bytes` at `address` lie in one symmetric
/// block (named `argument`); then fills `view` and returns Direct(pe, view).
void* Target(std::string_view call, std::string_view argument, const void* address,
             std::uint64_t bytes, int pe, SymmetricView* view);

/// Records that an operation went through the Runtime's RMA (a PE of another host), so that
/// the next quiet or fence asks the Runtime too; quiet and fence skip the Runtime otherwise.
void NoteRuntimeRma();
bool RuntimeRmaPending();

/// `count` elements of `size` bytes, in bytes; fails naming `call` when that overflows.
std::uint64_t Bytes(std::string_view call, std::uint64_t count, std::uint64_t size);

/// A world PE number in range, else fails naming `call`.
void CheckPe(std::string_view call, int pe);

/// Collective over the world: a heap allocation of `bytes` aligned to `alignment` (null on
/// every PE when the heap cannot hold it), and its release.
void* Allocate(std::string_view call, std::uint64_t bytes, std::uint64_t alignment);
void Release(std::string_view call, void* address);

/// A team handle's entry: its Runtime handle and its PEs (world numbers, in team order).
struct TeamEntry {
  TeamHandle handle;
  std::vector<int> pes;
  int my_pe = -1;
  int num_contexts = 0;  ///< as its split's configuration asked (shmem_team_get_config)
  int slot = 0;          ///< the Runtime's team slot (its small collectives' scratch area)
  bool direct = false;   ///< every member's heap is mapped here (small collectives by copies)
  /// Small collectives run on this team so far (the same count on every member).
  mutable std::uint64_t small_calls = 0;
};
/// The entry of `team` (shmem_team_t as an integer), or fails naming `call`; null for
/// SHMEM_TEAM_INVALID when `allow_invalid`.
const TeamEntry* FindTeam(std::string_view call, std::uintptr_t team, bool allow_invalid = false);
/// The entry of the Runtime team `handle` as this PE sees it (its PEs, slot, whether every
/// member is mapped here); fails as `call` when the Runtime refuses the handle.
TeamEntry Described(std::string_view call, const TeamHandle& handle, int num_contexts = 0);
/// Registers a new team entry and returns its shmem_team_t value.
std::uintptr_t AddTeam(TeamEntry entry);
void RemoveTeam(std::uintptr_t team);
/// The team of the active set (PE_start, 2^logPE_stride, PE_size), made at its first use and
/// kept (collective over its members, who all call the same deprecated routine).
const TeamEntry& ActiveSet(std::string_view call, int start, int log_stride, int size);
/// Contexts: a new one of `team` (its shmem_ctx_t value), its release, and its team
/// (SHMEM_TEAM_WORLD for SHMEM_CTX_DEFAULT; 0 for an unknown or destroyed context).
std::uintptr_t AddContext(std::uintptr_t team);
void RemoveContext(std::uintptr_t ctx);
std::uintptr_t ContextTeam(std::uintptr_t ctx);
/// The world PE of `pe` as context `ctx` numbers it (a context of a team: that team's PE).
int ContextPe(std::string_view call, std::uintptr_t ctx, int pe);

/// The collectives' scratch blocks (collectives.cc): made by shmem_init once the library is
/// ready (collective; `max_teams` areas for the small collectives), forgotten by
/// shmem_finalize before it frees every block.
void MakeScratch(int max_teams);
void DropScratch();

/// The stream every operation of the C API is enqueued on (the calling thread's default,
/// which runs inline).
inline constexpr StreamRef kDefaultStream{};

/// Quiet on the default stream (everything this PE issued is complete), failing as `call`.
void Quiet(std::string_view call);

/// One bounded wait of the C API (docs/openshmem.md, "How it works"), paced by the Runtime's
/// wait policy in force (HYPER_PARALLEL_SHMEM_WAIT, docs/api.md; the spin and yield bounds the
/// host backend's own waits use): spin while the policy spins, then yield while it yields, then
/// sleep briefly between checks (unless it never sleeps); fails as `call` after the Runtime's
/// timeout or once the Runtime failed (a peer lost).
class Waiter {
 public:
  explicit Waiter(std::string_view call);
  /// Between two checks of the awaited condition.
  void Pause();

 private:
  std::string_view call_;
  std::chrono::steady_clock::time_point started_;
  std::uint64_t round_ = 0;
  bool spinning_ = true;  ///< still in the policy's spin (as of the last look at the clock)
};

/// Waits until `satisfied()` holds (Waiter).
template <class Predicate>
void WaitUntil(std::string_view call, Predicate satisfied) {
  if (satisfied()) return;
  Waiter waiter(call);
  while (!satisfied()) waiter.Pause();
}

}  // namespace hyper_parallel::shmem::openshmem
