// Waits on a busy machine: the ping-pong finishes, correct, with a CPU-bound process beside the
// job under every wait policy (the benchmark's lost-first-signal hang and the minutes-long runs
// under load were the bugs), and HYPER_PARALLEL_SHMEM_WAIT=auto pins each PE's initialising
// thread to its own core only when the PEs fit on the cores, giving the affinity back at close.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "backends/wait/doorbell.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

int MachineCores() { return static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)); }

// A CPU-bound process for the length of a test (like `yes > /dev/null`).
class CpuHog {
 public:
  CpuHog() : pid_(::fork()) {
    if (pid_ == 0) {
      std::atomic<unsigned long> spin{0};
      for (;;) spin.fetch_add(1, std::memory_order_relaxed);
    }
  }
  ~CpuHog() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

 private:
  pid_t pid_;
};

// `rounds` round trips between PEs 0 and 1: a tagged payload put, then a signal of the round
// number; each side checks the payload of every round it receives.
int PingPong(PeContext& ctx, std::int64_t rounds) {
  CHECK_PE_OK(ctx, ctx.InitRuntime());
  Allocation data = MustAllocate(ctx, 64);
  Allocation flag = MustAllocate(ctx, 8);
  *As<std::int64_t>(flag) = 0;
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // zeroed on every PE before the first signal
  const int peer = 1 - ctx.rank;
  std::int64_t payload[8];
  for (std::int64_t round = 1; round <= rounds && ctx.failures == 0; ++round) {
    auto send = [&] {
      for (std::int64_t& word : payload) word = round * 10 + ctx.rank;
      CHECK_PE_OK(ctx, Rt().Put(View(data), payload, peer, {}));
      CHECK_PE_OK(ctx, Rt().Signal(View(flag), SignalWidth::k64, round, peer, SignalOp::kSet, {}));
    };
    auto receive = [&] {
      CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, round, Comparison::kGe, {}));
      CHECK_PE(ctx, As<std::int64_t>(data)[7] == round * 10 + peer,
               "round " + std::to_string(round) + " payload");
    };
    if (ctx.rank == 0) {
      send();
      receive();
    } else {
      receive();
      send();
    }
  }
  CHECK_PE_OK(ctx, Barrier(Rt(), {}));
  FreeAllAndShutdown(ctx);
  return 0;
}

class UnderACpuHog : public ::testing::TestWithParam<std::string> {};

TEST_P(UnderACpuHog, PingPongFinishesCorrectly) {
  // Pure spinning without pinning leaves each hand-off to the scheduler's timeslices:
  // correct, but slow; it gets fewer rounds.
  const std::int64_t rounds = GetParam() == "spin" ? 200 : 5000;
  CpuHog hog;
  PeLaunch launch = LaunchPes(2, "20", 1 << 20);
  launch.env["HYPER_PARALLEL_SHMEM_WAIT"] = GetParam();
  EXPECT_ALL_PES_PASS(RunPes(launch, [rounds](PeContext& ctx) { return PingPong(ctx, rounds); }));
}

INSTANTIATE_TEST_SUITE_P(Wait, UnderACpuHog, ::testing::Values("auto", "spin", "block"));

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  ::sched_getaffinity(0, sizeof set, &set);
  return CPU_COUNT(&set);
}

TEST(AutoWait, PinsOneCorePerPeWhenThePesFitAndRestoresTheAffinityAtClose) {
  const int size = std::min(2, MachineCores());
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(size, "20", 1 << 20), [](PeContext& ctx) {
    const int before = AllowedCpus();
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const WaitInfo wait = Rt().Snapshot().wait;
    CHECK_PE(ctx, wait.mode == "auto", "auto is the default");
    CHECK_PE(ctx, wait.spin == host::kAutoSpin && wait.sleeps, "a core each: a long spin");
    if (before == MachineCores()) {
      // This rank's contiguous share of the cpus (the launcher left them all usable).
      const int base = before / ctx.size, extra = before % ctx.size;
      const int first = ctx.rank * base + std::min(ctx.rank, extra);
      const int count = base + (ctx.rank < extra ? 1 : 0);
      const std::string share =
          count == 1 ? "cpu " + std::to_string(first)
                     : "cpus " + std::to_string(first) + "-" + std::to_string(first + count - 1);
      CHECK_PE(ctx, wait.pinning == share, wait.pinning + " != " + share);
      cpu_set_t set;
      CPU_ZERO(&set);
      ::sched_getaffinity(0, sizeof set, &set);
      bool exact = CPU_COUNT(&set) == count;
      for (int cpu = first; cpu < first + count; ++cpu) exact = exact && CPU_ISSET(cpu, &set);
      CHECK_PE(ctx, exact, "this thread is pinned to its share");
      CHECK_PE(ctx, wait.pinned, "pinned to cores of its own");
    }
    CHECK_PE_OK(ctx, Rt().Shutdown());
    CHECK_PE(ctx, AllowedCpus() == before, "the close gave the affinity back");
    return 0;
  }));
}

TEST(AutoWait, NeitherPinsNorSpinsWhenPesShareCores) {
  const int size = MachineCores() + 1;
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(size, "20", 1 << 20), [](PeContext& ctx) {
    const int before = AllowedCpus();
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const WaitInfo wait = Rt().Snapshot().wait;
    CHECK_PE(ctx, wait.spin == std::chrono::nanoseconds(0), "no spin: a peer may need this core");
    CHECK_PE(ctx, Contains(wait.pinning, "PEs share"), wait.pinning);
    CHECK_PE(ctx, !wait.pinned, "no core of its own");
    CHECK_PE(ctx, AllowedCpus() == before, "nothing pinned");
    CHECK_PE_OK(ctx, Rt().Shutdown());
    return 0;
  }));
}

TEST(WaitModes, SpinAndBlockAreWhatTheySayAndNeverPin) {
  for (const char* mode : {"spin", "block"}) {
    PeLaunch launch = LaunchPes(2, "20", 1 << 20);
    launch.env["HYPER_PARALLEL_SHMEM_WAIT"] = mode;
    EXPECT_ALL_PES_PASS(RunPes(launch, [mode = std::string(mode)](PeContext& ctx) {
      const int before = AllowedCpus();
      CHECK_PE_OK(ctx, ctx.InitRuntime());
      const WaitInfo wait = Rt().Snapshot().wait;
      if (mode == "spin") {
        CHECK_PE(ctx, wait.mode == "spin" && !wait.sleeps, "spin never sleeps");
      } else {
        CHECK_PE(ctx, wait.mode == "block" && wait.sleeps &&
                          wait.spin == std::chrono::nanoseconds(0) &&
                          wait.yield == std::chrono::nanoseconds(0),
                 "block sleeps at once");
      }
      CHECK_PE(ctx, wait.pinning == "none (HYPER_PARALLEL_SHMEM_WAIT=" + mode + ")",
               wait.pinning);
      CHECK_PE(ctx, !wait.pinned, "no core of its own");
      CHECK_PE(ctx, AllowedCpus() == before, "nothing pinned");
      CHECK_PE_OK(ctx, Rt().Shutdown());
      return 0;
    }));
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
