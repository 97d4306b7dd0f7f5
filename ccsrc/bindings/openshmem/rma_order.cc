// The OpenSHMEM C library's ordering, locks and cache routines (docs/openshmem.md, "How it
// works"): shmem_fence and shmem_quiet, shmem_set_lock and kin, and the cache routines that
// have nothing to do on a coherent heap.
#include <atomic>

#include "bindings/openshmem/rma.h"

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

namespace {
// Locks: the lock word at PE 0 holds 0 when free, else 1 + the holder's PE.
constexpr int kLockHome = 0;
}  // namespace

extern "C" {

// ---- ordering -----------------------------------------------------------------------------------------
// The direct path's copies are plain stores: a full fence orders them (a no-op instruction on
// x86, a barrier elsewhere) before the Runtime orders its own.
void shmem_fence(void) {
  Runtime& runtime = Ready("shmem_fence");
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!RuntimeRmaPending()) return;
  if (Status s = runtime.Fence(kDefaultStream); !s.ok()) Fail("shmem_fence", s);
}
// SHMEM_CTX_INVALID: fence and quiet do nothing (OpenSHMEM 1.5).
void shmem_ctx_fence(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  ContextPe("shmem_ctx_fence", Ctx(ctx), 0);
  shmem_fence();
}
void shmem_quiet(void) { Quiet("shmem_quiet"); }
void shmem_ctx_quiet(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;
  ContextPe("shmem_ctx_quiet", Ctx(ctx), 0);
  Quiet("shmem_ctx_quiet");
}

// ---- locks ----------------------------------------------------------------------------------------------
void shmem_set_lock(long* lock) {
  const long me = shmem_my_pe() + 1;
  WaitUntil("shmem_set_lock", [&] {
    return Atomic<long>("shmem_set_lock", lock, AtomicOp::kCompareSwap, me, 0L, kLockHome) == 0;
  });
}
void shmem_clear_lock(long* lock) {
  Quiet("shmem_clear_lock");  // what the holder wrote lands before the next holder enters
  Atomic<long>("shmem_clear_lock", lock, AtomicOp::kSet, 0L, 0L, kLockHome);
}
int shmem_test_lock(long* lock) {
  const long me = shmem_my_pe() + 1;
  return Atomic<long>("shmem_test_lock", lock, AtomicOp::kCompareSwap, me, 0L, kLockHome) == 0 ? 0 : 1;
}

// ---- cache management: the heap is coherent, so these do nothing --------------------------------------
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void* dest) { (void)dest; }
void shmem_set_cache_line_inv(void* dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void* dest) { (void)dest; }

}  // extern "C"
