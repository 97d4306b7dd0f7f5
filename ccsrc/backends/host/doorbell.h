// Doorbell: a futex word in shared memory that lets a PE sleep until a peer changed something
// it waits for, instead of spinning (two cores and eight PEs starve under pure spinning).
//
// A writer changes the watched data first, then Ring()s the doorbell of the PE that waits.
// A waiter calls WaitUntil() with a predicate over the watched data: it spins briefly, then
// sleeps on the futex, re-checking at least every kMaxSleep so data changed without a ring
// (for example a signal word written by a plain put) is still seen. Every wait has a deadline.
//
// Safe from any thread of any process that maps the doorbell; the members are lock-free,
// address-free atomics.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "backends/host/call_sites.h"

namespace hyper_parallel::shmem::host {

struct Doorbell {
  std::atomic<std::uint32_t> sequence{0};  ///< futex word; bumped by every ring
  std::atomic<std::uint32_t> sleepers{0};  ///< waiters inside futex wait (skip wake if none)
};

using WaitClock = std::chrono::steady_clock;

/// How long a waiter spins before it sleeps, and the longest single sleep.
inline constexpr std::chrono::microseconds kSpinBudget{20};
inline constexpr std::chrono::milliseconds kMaxSleep{2};

namespace internal {
void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
               std::chrono::nanoseconds timeout);
void FutexWakeAll(std::atomic<std::uint32_t>* word);
void CpuRelax();
}  // namespace internal

/// Wakes every waiter of `bell`. Call after the watched data changed.
template <CallSite kSite>
void Ring(Doorbell* bell) {
  RequireCallable<HostCall::kAtomicSignal, kSite>();
  // seq_cst pairs with the waiter's sleepers increment: either it sees this bump, or we see it.
  bell->sequence.fetch_add(1, std::memory_order_seq_cst);
  if (bell->sleepers.load(std::memory_order_seq_cst) != 0) internal::FutexWakeAll(&bell->sequence);
}

/// Waits until `ready()` is true or `deadline` passes; returns the last `ready()` value.
template <CallSite kSite, class Predicate>
bool WaitUntil(Doorbell* bell, Predicate&& ready, WaitClock::time_point deadline) {
  RequireCallable<HostCall::kBoundedWait, kSite>();
  if (ready()) return true;
  const auto spin_end = WaitClock::now() + kSpinBudget;
  for (unsigned i = 1;; ++i) {
    internal::CpuRelax();
    if (ready()) return true;
    if ((i & 63) == 0 && WaitClock::now() >= spin_end) break;
  }
  for (;;) {
    bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t sequence = bell->sequence.load(std::memory_order_seq_cst);
    bool done = ready();
    if (!done) {
      const auto now = WaitClock::now();
      if (now < deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
        internal::FutexWait(&bell->sequence, sequence,
                            std::min<std::chrono::nanoseconds>(left, kMaxSleep));
      }
      done = ready();
    }
    bell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (done) return true;
    if (WaitClock::now() >= deadline) return ready();
  }
}

}  // namespace hyper_parallel::shmem::host
