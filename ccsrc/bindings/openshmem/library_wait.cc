// The OpenSHMEM C library's waits and completion (docs/openshmem.md, "How it works"): the
// bounded wait every polling routine runs, paced by the Runtime's wait policy, and quiet.
#include <sched.h>

#include <atomic>
#include <thread>

#include "bindings/openshmem/library_state.h"

namespace hyper_parallel::shmem::openshmem {
namespace {

std::atomic<bool> runtime_rma{false};

// The sleeps of the last phase. The word is written by peers' plain stores (the direct path),
// which ring no doorbell, so the wait polls: short sleeps first, longer ones once the wait has
// lasted kLongWait, so a PE waiting long leaves the cores to the others (docs/openshmem.md).
constexpr std::chrono::microseconds kShortSleep{20};
constexpr std::chrono::microseconds kLongSleep{200};
constexpr std::chrono::milliseconds kLongWait{50};

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void NoteRuntimeRma() { runtime_rma.store(true, std::memory_order_release); }
bool RuntimeRmaPending() { return runtime_rma.load(std::memory_order_acquire); }

void Quiet(std::string_view call) {
  Runtime& runtime = Ready(call);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the direct path's stores
  if (!runtime_rma.exchange(false, std::memory_order_acq_rel)) return;
  if (Status s = runtime.Quiet(kDefaultStream); !s.ok()) Fail(call, s);
}

Waiter::Waiter(std::string_view call)
    : call_(call), started_(std::chrono::steady_clock::now()) {}

void Waiter::Pause() {
  const WaitInfo& policy = S().wait;
  ++round_;
  // While it spins, the wait reads the clock every 64th pause and asks the Runtime about lost
  // peers and the timeout every 4096th (a spin polls tightly); after, at every 64th.
  if (spinning_ && round_ % 64 != 0) {
    CpuRelax();
    return;
  }
  const auto waited = std::chrono::steady_clock::now() - started_;
  spinning_ = waited < policy.spin;
  if (round_ % (spinning_ ? 4096 : 64) == 0) {
    Runtime& runtime = Runtime::Process();
    if (runtime.state() == RuntimeState::kFailed) Fail(call_, runtime.Snapshot().terminal_failure);
    if (waited > runtime.timeout()) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
      Fail(call_, Status::Assertion(ErrorCode::kTimeout, "the awaited value did not come",
                                    {{"waited_ms", std::to_string(ms)}}));
    }
  }
  if (spinning_) {
    CpuRelax();
  } else if (waited - policy.spin < policy.yield || !policy.sleeps) {
    ::sched_yield();
  } else {
    std::this_thread::sleep_for(waited < kLongWait ? kShortSleep : kLongSleep);
  }
}

}  // namespace hyper_parallel::shmem::openshmem
