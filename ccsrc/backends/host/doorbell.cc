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

WaitPolicy WaitPolicy::ForPes(int local_pes) {
  WaitPolicy policy;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (static_cast<unsigned>(local_pes) > cores) policy.spin = std::chrono::nanoseconds(0);
  return policy;
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
