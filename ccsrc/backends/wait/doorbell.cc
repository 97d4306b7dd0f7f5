#include "backends/wait/doorbell.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
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

namespace {

// "\0hyper_parallel_shmem.wake.<16 hex digits>": abstract, so no file is made and the name
// goes with the socket; scoped to the network namespace, which the PEs of a host share.
socklen_t WakeAddress(std::uint64_t name, sockaddr_un* address) {
  std::memset(address, 0, sizeof *address);
  address->sun_family = AF_UNIX;
  char text[64];
  const int length = std::snprintf(text, sizeof text, "hyper_parallel_shmem.wake.%016llx",
                                   static_cast<unsigned long long>(name));
  std::memcpy(address->sun_path + 1, text, static_cast<std::size_t>(length));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
}

}  // namespace

WakeSocket::~WakeSocket() { Close(); }

Status WakeSocket::Open() {
  Close();
  std::random_device random;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      return Status::Assertion(ErrorCode::kBackendError, "creating the wake socket failed",
                               {{"errno", std::strerror(errno)}});
    }
    std::uint64_t name = 0;
    while (name == 0) {
      name = (static_cast<std::uint64_t>(random()) << 32) ^ random();
    }
    sockaddr_un address;
    const socklen_t length = WakeAddress(name, &address);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0) {
      fd_ = fd;
      name_ = name;
      return Status::Ok();
    }
    const int error = errno;
    ::close(fd);
    if (error != EADDRINUSE) {
      return Status::Assertion(ErrorCode::kBackendError, "binding the wake socket failed",
                               {{"errno", std::strerror(error)}});
    }
  }
  return Status::Assertion(ErrorCode::kBackendError, "no free name for the wake socket", {});
}

void WakeSocket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  name_ = 0;
}

void WakeSocket::Drain() const {
  char byte[8];
  while (fd_ >= 0 && ::recv(fd_, byte, sizeof byte, MSG_DONTWAIT) >= 0) {
  }
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

void Kick(std::uint64_t name) {
  if (name == 0) return;
  // One unbound sender per process: sendto on a datagram socket is thread-safe.
  static const int sender = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sender < 0) return;
  sockaddr_un address;
  const socklen_t length = WakeAddress(name, &address);
  // A full queue already wakes the sleeper; a socket that is gone has nobody to wake.
  const char byte = 1;
  (void)::sendto(sender, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&address), length);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace hyper_parallel::shmem::host::internal
