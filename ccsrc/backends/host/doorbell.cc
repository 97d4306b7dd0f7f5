#include "backends/host/doorbell.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <thread>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace hyper_parallel::shmem::host {

WaitPolicy WaitPolicy::For(WaitMode mode, int local_pes, int cores) {
  WaitPolicy policy;
  switch (mode) {
    case WaitMode::kSpin:
      policy.spin = std::chrono::nanoseconds::max();
      policy.yield = std::chrono::nanoseconds(0);
      break;
    case WaitMode::kBlock:
      policy.spin = std::chrono::nanoseconds(0);
      policy.yield = std::chrono::nanoseconds(0);
      break;
    case WaitMode::kAuto:
      if (local_pes > cores) {
        // The awaited PE may be waiting for this very core: give it up at once.
        policy.spin = std::chrono::nanoseconds(0);
      } else {
        // Each PE has a core. A busy machine preempts the awaited PE for whole timeslices;
        // a waiter that slept meanwhile then costs a wake-up (of an idle virtual CPU, tens of
        // microseconds) at every return. Measured under one CPU hog: a 20 µs spin gave a
        // 0.4-1.6 µs half round trip, 200 µs gave 0.33-0.41 µs (OSHMEM 0.26-0.35 µs).
        policy.spin = kAutoSpin;
      }
      break;
  }

  return policy;
}

std::atomic<int>& RunningExecutors() {
  static std::atomic<int> running{0};
  return running;
}

int UsableCores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return std::max(1, CPU_COUNT(&allowed));
}

}  // namespace hyper_parallel::shmem::host

namespace hyper_parallel::shmem::host::internal {

// Shared (not FUTEX_PRIVATE) futexes: the word lives in memory mapped by several processes at
// different addresses; the kernel keys it by the page, not the address.
void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
               std::chrono::nanoseconds timeout) {
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  relative.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  // EAGAIN (the word moved), EINTR and ETIMEDOUT all just mean: look again.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &relative,
            nullptr, 0);
}

void FutexWakeAll(std::atomic<std::uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

void Yield() { ::sched_yield(); }

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace hyper_parallel::shmem::host::internal
