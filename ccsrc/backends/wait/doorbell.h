// Doorbell: a futex word in shared memory that lets a PE sleep until a peer changed something
// it waits for, instead of spinning (two cores and eight PEs starve under pure spinning).
//
// A writer changes the watched data first, then Ring()s the doorbell of the PE that waits.
// A waiter calls WaitUntil() with a predicate over the watched data: it spins briefly, then
// yields the core for a while (with more PEs than cores, the PE it waits for may be the one
// that needs it), then sleeps on the futex, re-checking at least every kMaxSleep so data
// changed without a ring (a signal word written by a plain put) is still seen. Every wait has
// a deadline, and may be aborted early by a flag (a peer that is gone, see liveness.h).
//
// A PE with peers on other hosts has a second way to sleep (docs/scale-out.md, "Waiting"): on
// the network's own events (an EventSleeper: the UCX worker's event fd), so that a message from
// another host wakes the waiter itself rather than a progress thread that then rings the
// futex. A waiter asleep there cannot hear the futex, so the doorbell also names the owner's
// wake socket (an abstract Unix datagram socket, reachable from every process of the host), and
// a ring kicks it while such a waiter sleeps.
//
// Safe from any thread of any process that maps the doorbell; the members are lock-free,
// address-free atomics.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "backends/wait/call_sites.h"
#include "backends/wait/wait_policy.h"
#include "base/config.h"
#include "base/status.h"

namespace hyper_parallel::shmem::host {

struct Doorbell {
  /// The futex word: bumped (by 2) by rings that may wake; its low bit (kArmed) is set by a
  /// sleeper before it sleeps and cleared by the ring that wakes it.
  std::atomic<std::uint32_t> sequence{0};
  std::atomic<std::uint32_t> sleepers{0};  ///< waiters inside futex wait (skip wake if none)
  /// Waiters asleep on the network's events: a ring kicks the wake socket while any are.
  std::atomic<std::uint32_t> event_sleepers{0};
  std::uint32_t unused = 0;
  /// The owner's wake socket (WakeSocket::name(); 0: it has none).
  std::atomic<std::uint64_t> wake_name{0};
};

using WaitClock = std::chrono::steady_clock;

/// The longest single sleep: data changed without a ring is seen within it.
inline constexpr std::chrono::milliseconds kMaxSleep{2};

/// How long HYPER_PARALLEL_SHMEM_WAIT=auto spins when every PE has a core of its own.
inline constexpr std::chrono::microseconds kAutoSpin{200};

/// A wait that has lasted this long is registered for diagnostics even while it still spins.
inline constexpr std::chrono::microseconds kRegisterAfter{20};

/// How long a waiter spins, then yields, before it sleeps. With no more PEs than cores the
/// awaited PE is running, so spinning answers fastest; with more PEs than cores it may be
/// waiting for this very core, so the waiter yields at once. A spin longer than the timeout
/// spins until the timeout (HYPER_PARALLEL_SHMEM_WAIT=spin).
struct WaitPolicy {
  std::chrono::nanoseconds spin{std::chrono::microseconds(20)};
  std::chrono::nanoseconds yield{std::chrono::microseconds(100)};

  /// The policy of `mode` for `local_pes` PEs sharing `cores` cores (see WaitMode).
  static WaitPolicy For(WaitMode mode, int local_pes, int cores);
  /// Spins until the timeout: never yields, never sleeps.
  bool spins_forever() const { return spin == std::chrono::nanoseconds::max(); }
};

/// The cores this process may run on (its affinity mask), at least 1.
int UsableCores();

/// Stream executor threads of this process running queued work right now (HostStream keeps
/// it). While any runs, a spinning waiter yields between polls: the executor shares the PE's
/// cores (it inherits the PE thread's pinning) and may be what the waiter waits for, or may
/// be the waiter while the PE thread needs the core.
std::atomic<int>& RunningExecutors();

namespace internal {
void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
               std::chrono::nanoseconds timeout);
void FutexWakeAll(std::atomic<std::uint32_t>* word);

/// Doorbell::sequence's low bit: a sleeper may be asleep on the word's present value.
inline constexpr std::uint32_t kArmed = 1;

/// Moves the futex word on (by 2, clearing kArmed) and wakes its sleepers if it was armed (or
/// `always_wake`). A sleeper sets kArmed and reads the word in one fetch_or, then checks its
/// predicate, then sleeps on that value: a bump after its fetch_or either finds it armed and
/// wakes, or follows a bump that did (after the fetch_or: the word has moved, so a sleeper
/// not yet asleep returns at once); a bump before it came with data its check sees.
inline void BumpDoorbell(Doorbell* bell, bool always_wake) {
  std::uint32_t current = bell->sequence.load(std::memory_order_relaxed);
  while (!bell->sequence.compare_exchange_weak(current, (current + 2) & ~kArmed,
                                               std::memory_order_seq_cst)) {
  }
  if (always_wake || (current & kArmed) != 0) FutexWakeAll(&bell->sequence);
}
void CpuRelax();
void Yield();
/// Sends one datagram to the wake socket called `name` (nothing when 0 or when it is gone).
void Kick(std::uint64_t name);
}  // namespace internal

/// A PE's wake socket: an abstract-namespace Unix datagram socket with a random name, which
/// any process of the host (they share the network namespace) can kick (internal::Kick). The
/// name vanishes with the socket. Not thread-safe to open or close; fd() may be polled and
/// Drain() called from one thread at a time.
class WakeSocket {
 public:
  WakeSocket() = default;
  ~WakeSocket();
  WakeSocket(const WakeSocket&) = delete;
  WakeSocket& operator=(const WakeSocket&) = delete;

  /// Binds a fresh socket (BACKEND_ERROR naming the system error if it cannot).
  Status Open();
  void Close();
  int fd() const { return fd_; }
  std::uint64_t name() const { return name_; }
  /// Reads every pending kick.
  void Drain() const;

 private:
  int fd_ = -1;
  std::uint64_t name_ = 0;
};

/// Wakes every waiter of `bell`. Call after the watched data changed.
///
/// The fence pairs with the waiter's seq_cst sleepers increment (Dekker): either this load
/// sees the sleeper, or the sleeper's predicate check sees the new data. Only when someone
/// may sleep is the futex word bumped (so a waiter between its check and its futex wait
/// returns at once) and woken; a spinning waiter costs the writer no atomic read-modify-write.
/// Ring() for a writer whose change was itself a seq_cst operation (and whose waiter reads it
/// with seq_cst loads): the seq_cst total order then already orders it before the sleeper
/// check, so no fence is needed.
///
/// Of the rings that find sleepers, only one that finds the futex word armed makes the wake
/// system call (BumpDoorbell); the others only bump the word. A burst of atomics or signals to a
/// PE that sleeps then costs one system call each time it goes back to sleep, not one each.
template <CallSite kSite>
void RingAfterSeqCst(Doorbell* bell) {
  RequireCallable<HostCall::kAtomicSignal, kSite>();
  if (bell->sleepers.load(std::memory_order_seq_cst) != 0) internal::BumpDoorbell(bell, false);
  // The same Dekker pairing with an event sleeper's seq_cst increment (EventSleeper::Arm).
  if (bell->event_sleepers.load(std::memory_order_seq_cst) != 0) {
    internal::Kick(bell->wake_name.load(std::memory_order_relaxed));
  }
}

template <CallSite kSite>
void Ring(Doorbell* bell) {
  RequireCallable<HostCall::kAtomicSignal, kSite>();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  RingAfterSeqCst<kSite>(bell);
}

/// How a bounded wait ended.
enum class WaitOutcome : std::uint8_t {
  kReady,     ///< the predicate held
  kTimedOut,  ///< the timeout passed first
  kAborted,   ///< the abort flag was raised first (a peer is gone; see liveness.h)
};

/// The default `on_block` hook of WaitUntil: registers nothing.
struct NoBlockingNotice {
  int operator()() const { return 0; }
};

/// A sleep that the network's events end (UcxTransport): see the file comment. At most one
/// thread of a PE holds the role at a time; the others sleep on the futex, and the holder's
/// progress rings them when their data lands.
class EventSleeper {
 public:
  enum class Armed : std::uint8_t {
    kArmed,  ///< this thread holds the role and counts in `bell`'s event_sleepers: Sleep next
    kBusy,   ///< events were pending, or data is streaming, and progress ran: check again
    kTaken,  ///< another thread holds the role: sleep on the futex instead
  };
  /// Takes the role, counts this thread in bell->event_sleepers (seq_cst: a ring after this
  /// kicks), drains old kicks and arms the network's events.
  virtual Armed Arm(Doorbell* bell) = 0;
  /// After kArmed: sleeps until a network event, a kick or `timeout` (zero: not at all), then
  /// gives the role back and progresses what arrived.
  virtual void Sleep(Doorbell* bell, std::chrono::nanoseconds timeout) = 0;

 protected:
  ~EventSleeper() = default;
};

/// Waits until `ready()` is true, `timeout` has passed, or `*abort` (if not null) is raised;
/// the predicate is checked before the flag, so a wait that was answered is never reported as
/// aborted. The clock is read only once the first check failed, so a wait that is already
/// satisfied costs one predicate call. Once the wait has lasted kRegisterAfter, or when the
/// spin phase ends unanswered, `on_block()` is called once and its result is kept until the
/// wait returns (an RAII registration of the blocked wait, for diagnostics): a wait answered
/// quickly pays nothing for it. With an `events` sleeper (a PE with network peers), the sleep
/// phase sleeps there when it can take the role, on the futex otherwise; a thread that held
/// the role rings the futex sleepers as it returns, so one of them takes it over.
template <CallSite kSite, class Predicate, class OnBlock = NoBlockingNotice>
WaitOutcome WaitUntil(Doorbell* bell, Predicate&& ready, std::chrono::nanoseconds timeout,
                      const WaitPolicy& policy = WaitPolicy(),
                      const std::atomic<bool>* abort = nullptr,
                      OnBlock&& on_block = OnBlock(), EventSleeper* events = nullptr) {
  RequireCallable<HostCall::kBoundedWait, kSite>();
  if (ready()) return WaitOutcome::kReady;
  auto aborted = [abort] { return abort != nullptr && abort->load(std::memory_order_acquire); };
  const auto start = WaitClock::now();
  const auto deadline = start + timeout;
  const auto spin_end = start + std::min<std::chrono::nanoseconds>(policy.spin, timeout);
  const auto register_at = start + kRegisterAfter;
  std::optional<decltype(on_block())> notice;
  for (unsigned i = 1; policy.spin.count() > 0; ++i) {
    // Poll tightly at first (the answer is often a cache-line transfer away), then pause
    // between polls so a long spin does not hog the core's shared resources; while a stream
    // executor of this process runs, give it the core between polls instead.
    if ((i & 7) == 0 && RunningExecutors().load(std::memory_order_relaxed) > 0) {
      internal::Yield();
    } else if (i > 256) {
      internal::CpuRelax();
    }
    if (ready()) return WaitOutcome::kReady;
    if ((i & 63) == 0) {
      if (aborted()) return WaitOutcome::kAborted;
      const auto now = WaitClock::now();
      if (now >= spin_end) break;
      if (!notice && now >= register_at) notice.emplace(on_block());
    }
  }
  if (!notice) notice.emplace(on_block());
  const auto yield_end = std::min(WaitClock::now() + policy.yield, deadline);
  do {
    internal::Yield();
    if (ready()) return WaitOutcome::kReady;
    if (aborted()) return WaitOutcome::kAborted;
  } while (WaitClock::now() < yield_end);
  struct HandOver {  // the role's next holder, among this PE's futex sleepers
    Doorbell* bell;
    bool held = false;
    ~HandOver() {
      if (held && bell->sleepers.load(std::memory_order_seq_cst) != 0) {
        internal::BumpDoorbell(bell, /*always_wake=*/true);
      }
    }
  } hand_over{bell};
  for (;;) {
    const EventSleeper::Armed armed =
        events != nullptr ? events->Arm(bell) : EventSleeper::Armed::kTaken;
    if (armed != EventSleeper::Armed::kTaken) {
      bool done = ready();
      if (armed == EventSleeper::Armed::kArmed) {
        hand_over.held = true;
        std::chrono::nanoseconds sleep{0};
        if (!done && !aborted()) {
          const auto now = WaitClock::now();
          if (now < deadline) {
            sleep = std::min<std::chrono::nanoseconds>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now), kMaxSleep);
          }
        }
        events->Sleep(bell, sleep);
        done = done || ready();
      }
      if (done) return WaitOutcome::kReady;
      if (aborted()) return WaitOutcome::kAborted;
      if (WaitClock::now() >= deadline) {
        return ready() ? WaitOutcome::kReady : WaitOutcome::kTimedOut;
      }
      continue;
    }
    bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
    // Arm and read in one step (BumpDoorbell): a ring after it moves the word, and the first
    // such ring wakes.
    const std::uint32_t sequence =
        bell->sequence.fetch_or(internal::kArmed, std::memory_order_seq_cst) | internal::kArmed;
    bool done = ready();
    if (!done && !aborted()) {
      const auto now = WaitClock::now();
      if (now < deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
        internal::FutexWait(&bell->sequence, sequence,
                            std::min<std::chrono::nanoseconds>(left, kMaxSleep));
      }
      done = ready();
    }
    bell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (done) return WaitOutcome::kReady;
    if (aborted()) return WaitOutcome::kAborted;
    if (WaitClock::now() >= deadline) {
      return ready() ? WaitOutcome::kReady : WaitOutcome::kTimedOut;
    }
  }
}

}  // namespace hyper_parallel::shmem::host
