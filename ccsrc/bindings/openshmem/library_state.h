// The OpenSHMEM C library's shared state (docs/openshmem.md, "How it works"), private to the
// library's own files (library_*.cc): the symmetric blocks, the team and context tables and
// where each PE's heap lies, behind one annotated Mutex (base/mutex.h), so the compiler checks
// every use (scripts/thread_safety.sh).
//
// Thread-safety: every member a thread may change after shmem_init is GUARDED_BY the mutex or
// atomic; n_pes, peer_heaps and my_heap are written by shmem_init before `ready` is set and
// only read meanwhile (the RMA hot path reads them without the lock).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/mutex.h"
#include "bindings/openshmem/library.h"
#include "bindings/openshmem/static_data.h"
#include "runtime/socket_bootstrap.h"

namespace hyper_parallel::shmem::openshmem {

// A symmetric block: [lo, hi) of this process's addresses, whose bytes are those of heap
// allocation `id` from `heap` on.
struct Block {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  AllocationId id = 0;
  std::byte* heap = nullptr;
  std::byte* base = nullptr;  // the allocation's start (Release frees the whole)
  std::uint64_t bytes = 0;    // the allocation's size
};

struct State {
  Mutex mutex;
  std::atomic<bool> ready{false};
  int init_calls GUARDED_BY(mutex) = 0;
  std::map<std::uintptr_t, Block> blocks GUARDED_BY(mutex);  // by lo
  // Bumped (under the mutex) at every change of `blocks`: a thread's cached block is good while
  // the generation it was read at is current.
  std::atomic<std::uint64_t> generation{1};
  std::optional<StaticData> static_data GUARDED_BY(mutex);
  std::map<std::uintptr_t, TeamEntry> teams GUARDED_BY(mutex);  // by shmem_team_t value
  std::uintptr_t next_team GUARDED_BY(mutex) = 3;               // 1: world, 2: shared
  std::map<std::tuple<int, int, int>, std::uintptr_t> active_sets GUARDED_BY(mutex);
  std::map<std::uintptr_t, std::uintptr_t> contexts GUARDED_BY(mutex);  // ctx -> its team
  std::uintptr_t next_context GUARDED_BY(mutex) = 2;  // 1: SHMEM_CTX_DEFAULT
  // Set by shmem_init before `ready` (see the file comment).
  int n_pes = 0;
  // Where each PE's heap lies in this process (null: through the Runtime), for this lifecycle.
  std::vector<std::byte*> peer_heaps;
  std::byte* my_heap = nullptr;
  // The Runtime's wait policy in force (HYPER_PARALLEL_SHMEM_WAIT), which Waiter follows.
  WaitInfo wait;
};

/// The one State; never destroyed (atexit handlers and PEs' threads use it).
State& S();

/// The process environment as the Runtime reads it (SHMEM_SYMMETRIC_SIZE standing for the heap
/// size), and how this PE finds the others (library_environment.cc).
std::optional<std::string> Environment(std::string_view name);
Status MakeBootstrap(std::chrono::milliseconds timeout, std::unique_ptr<SocketBootstrap>* out);

}  // namespace hyper_parallel::shmem::openshmem
