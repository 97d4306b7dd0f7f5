#include "backends/host/liveness.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <vector>
#include <thread>

#include "testing/eventually.h"

namespace hyper_parallel::shmem::host {
namespace {

using testing::Eventually;

using namespace std::chrono_literals;

// A child that blocks until killed (or until its pipe closes).
struct Child {
  pid_t pid = -1;
  int pipe_write = -1;

  Child() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::close(fds[1]);
      char byte;
      [[maybe_unused]] ssize_t got = ::read(fds[0], &byte, 1);
      ::_exit(0);
    }
    ::close(fds[0]);
    pipe_write = fds[1];
  }
  ~Child() {
    if (pipe_write >= 0) ::close(pipe_write);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(FailureLatch, FirstFailureWinsUntilReset) {
  FailureLatch latch;
  EXPECT_FALSE(latch.failed());
  EXPECT_TRUE(latch.Get().ok());
  EXPECT_TRUE(latch.Set(PeerLost(1, 42)));
  EXPECT_FALSE(latch.Set(Status::Assertion(ErrorCode::kTimeout, "later")));
  EXPECT_TRUE(latch.failed() && latch.flag()->load());
  EXPECT_EQ(latch.Get().code(), ErrorCode::kPeerLost);
  EXPECT_EQ(latch.Get().message(), "a peer PE exited while this PE depends on it: pe=1, pid=42");
  latch.Reset();
  EXPECT_FALSE(latch.failed());
  EXPECT_TRUE(latch.Get().ok());
}

TEST(PeerMonitor, LatchesAPeerThatIsKilledAndWakesASleepingWaiter) {
  Child child;
  ASSERT_GT(child.pid, 0);
  FailureLatch latch;
  Doorbell bell;
  PeerMonitor monitor;
  ASSERT_TRUE(monitor.Start(0, {static_cast<int>(::getpid()), child.pid}, &latch, &bell).ok());
  EXPECT_FALSE(latch.failed());
  WaitOutcome outcome = WaitOutcome::kReady;
  std::thread waiter([&] {
    // Never satisfied, timeout far away: only the latch can end it.
    outcome = WaitUntil<CallSite::kHostThread>(&bell, [] { return false; }, 60s, WaitPolicy(),
                                               latch.flag());
  });
  std::this_thread::sleep_for(20ms);
  ::kill(child.pid, SIGKILL);  // not reaped: a zombie is gone too
  waiter.join();
  EXPECT_EQ(outcome, WaitOutcome::kAborted);
  ASSERT_TRUE(latch.failed());
  EXPECT_EQ(latch.Get().message(), "a peer PE exited while this PE depends on it: pe=1, pid=" +
                                       std::to_string(child.pid));
  monitor.Stop();
  monitor.Stop();  // idempotent
}

TEST(PeerMonitor, APeerThatDepartedAfterAgreeingToCloseIsNoLossAndIsNotPassedOn) {
  Child departing;
  Child crashing;
  ASSERT_GT(departing.pid, 0);
  ASSERT_GT(crashing.pid, 0);
  FailureLatch latch;
  Doorbell bell;
  std::atomic<std::int32_t> departed{0};
  std::atomic<std::int32_t> not_departed{0};
  std::vector<int> exits;
  std::mutex mutex;
  PeerMonitor monitor;
  ASSERT_TRUE(monitor
                  .Start(0, {static_cast<int>(::getpid()), departing.pid, crashing.pid}, &latch,
                         &bell, {}, [&](int pe) {
                           std::lock_guard<std::mutex> lock(mutex);
                           exits.push_back(pe);
                         },
                         {nullptr, &departed, &not_departed})
                  .ok());
  departed.store(1);  // PE 1 agreed to close, then exits
  ::kill(departing.pid, SIGKILL);
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(latch.failed()) << latch.Get().message();
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_TRUE(exits.empty()) << "a departure was passed on";
  }
  ::kill(crashing.pid, SIGKILL);  // PE 2 did not: a loss, latched and passed on
  ASSERT_TRUE(Eventually([&] { return latch.failed(); }));
  EXPECT_NE(latch.Get().message().find("pe=2"), std::string::npos) << latch.Get().message();
  monitor.Stop();
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(exits, std::vector<int>{2});
}

TEST(PeerMonitor, APeerThatExitedAfterLosingAnotherNamesTheFirstLoss) {
  Child first, second;  // PE 1 died first; PE 2 noticed it, published it, then exited
  ASSERT_GT(first.pid, 0);
  ASSERT_GT(second.pid, 0);
  std::atomic<std::int32_t> words[3] = {-1, -1, 1};
  FailureLatch latch;
  PeerMonitor monitor;
  ASSERT_TRUE(monitor
                  .Start(0, {static_cast<int>(::getpid()), first.pid, second.pid}, &latch,
                         nullptr, {&words[0], &words[1], &words[2]})
                  .ok());
  ::kill(second.pid, SIGKILL);
  ASSERT_TRUE(Eventually([&] { return latch.failed(); }));
  EXPECT_EQ(latch.Get().message(),
            "a peer PE exited while this PE depends on it: pe=1, pid=" +
                std::to_string(first.pid) + ", noticed_through=pe 2 (pid " +
                std::to_string(second.pid) + "), which exited after losing it");
  EXPECT_EQ(words[0].load(), 1) << "this PE publishes the loss it latched";
}

// Refuses pidfd_open in this process (ENOSYS), as an old kernel or a container's seccomp
// profile would.
bool DenyPidfdOpen() {
  sock_filter program[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog filter{static_cast<unsigned short>(sizeof program / sizeof program[0]), program};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) == 0;
}

TEST(PeerMonitor, WithoutPidfdsAPollingFallbackStillLatchesTheLoss) {
  // In a child, so the filter stays out of the test process.
  const pid_t tester = ::fork();
  if (tester == 0) {
    Child peer;
    if (peer.pid <= 0 || !DenyPidfdOpen()) ::_exit(2);
    FailureLatch latch;
    PeerMonitor monitor;
    if (!monitor.Start(0, {static_cast<int>(::getpid()), peer.pid}, &latch, nullptr).ok()) {
      ::_exit(3);
    }
    if (latch.failed()) ::_exit(4);
    ::kill(peer.pid, SIGKILL);  // a zombie until ~Child reaps it: still gone
    if (!Eventually([&] { return latch.failed(); })) ::_exit(5);
    const bool named = latch.Get().message() ==
                       "a peer PE exited while this PE depends on it: pe=1, pid=" +
                           std::to_string(peer.pid);
    monitor.Stop();
    ::_exit(named ? 0 : 6);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(tester, &status, 0), tester);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1-6 name the step that failed in the child";
}

TEST(PeerMonitor, APeerAlreadyGoneIsLatchedAtStart) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);  // reaped: the pid no longer exists
  FailureLatch latch;
  PeerMonitor monitor;
  ASSERT_TRUE(monitor.Start(1, {pid, static_cast<int>(::getpid())}, &latch, nullptr).ok());
  EXPECT_TRUE(Eventually([&] { return latch.failed(); }));
  EXPECT_NE(latch.Get().message().find("pe=0, pid=" + std::to_string(pid)), std::string::npos);
}

TEST(PeerMonitor, LivePeersLatchNothingAndStopEndsTheThread) {
  Child child;
  ASSERT_GT(child.pid, 0);
  FailureLatch latch;
  {
    PeerMonitor monitor;
    ASSERT_TRUE(monitor.Start(1, {child.pid, static_cast<int>(::getpid())}, &latch, nullptr).ok());
    std::this_thread::sleep_for(50ms);
  }  // destroyed: stopped
  EXPECT_FALSE(latch.failed());
}

TEST(WaitPolicy, EachModeForCoresAndPes) {
  const WaitPolicy spin = WaitPolicy::For(WaitMode::kSpin, 2, 2);
  EXPECT_TRUE(spin.spins_forever());
  const WaitPolicy block = WaitPolicy::For(WaitMode::kBlock, 2, 2);
  EXPECT_EQ(block.spin, std::chrono::nanoseconds(0));
  EXPECT_EQ(block.yield, std::chrono::nanoseconds(0));
  const WaitPolicy fits = WaitPolicy::For(WaitMode::kAuto, 2, 2);
  EXPECT_EQ(fits.spin, kAutoSpin);
  EXPECT_FALSE(fits.spins_forever());
  const WaitPolicy shared = WaitPolicy::For(WaitMode::kAuto, 3, 2);
  EXPECT_EQ(shared.spin, std::chrono::nanoseconds(0)) << "a peer may need this very core";
  EXPECT_GT(shared.yield, std::chrono::nanoseconds(0));
}

TEST(WaitUntil, SpinningForeverStillEndsAtTheTimeoutAndRegistersItself) {
  Doorbell bell;
  int registered = 0;
  EXPECT_EQ(WaitUntil<CallSite::kHostThread>(&bell, [] { return false; }, 5ms,
                                             WaitPolicy::For(WaitMode::kSpin, 1, 1), nullptr,
                                             [&] { return ++registered; }),
            WaitOutcome::kTimedOut);
  EXPECT_EQ(registered, 1) << "a long spin is visible to diagnostics";
}

TEST(WaitUntil, TheConditionWinsOverTheAbortFlag) {
  Doorbell bell;
  std::atomic<bool> abort{true};
  EXPECT_EQ(WaitUntil<CallSite::kHostThread>(&bell, [] { return true; }, 1s, WaitPolicy(), &abort),
            WaitOutcome::kReady);
  EXPECT_EQ(WaitUntil<CallSite::kHostThread>(&bell, [] { return false; }, 10s, WaitPolicy(), &abort),
            WaitOutcome::kAborted);
  std::atomic<bool> calm{false};
  EXPECT_EQ(WaitUntil<CallSite::kHostThread>(&bell, [] { return false; }, 5ms, WaitPolicy(), &calm),
            WaitOutcome::kTimedOut);
}

TEST(WaitUntil, OnBlockRunsOnlyWhenTheSpinPhaseEndsUnanswered) {
  Doorbell bell;
  int registered = 0;
  auto notice = [&] { return ++registered; };
  EXPECT_EQ(WaitUntil<CallSite::kHostThread>(&bell, [] { return true; }, 1s, WaitPolicy(), nullptr,
                                             notice),
            WaitOutcome::kReady);
  EXPECT_EQ(registered, 0) << "answered at once: nothing registered";
  EXPECT_EQ(WaitUntil<CallSite::kHostThread>(&bell, [] { return false; }, 2ms, WaitPolicy(),
                                             nullptr, notice),
            WaitOutcome::kTimedOut);
  EXPECT_EQ(registered, 1);
}

TEST(WatchPartners, DistancesOfPowersOfTwoEitherWay) {
  EXPECT_TRUE(WatchPartners(0, 1).empty());
  EXPECT_EQ(WatchPartners(0, 2), (std::vector<int>{1}));
  EXPECT_EQ(WatchPartners(0, 8), (std::vector<int>{1, 2, 4, 6, 7}));
  EXPECT_EQ(WatchPartners(5, 16), (std::vector<int>{1, 3, 4, 6, 7, 9, 13}));
  EXPECT_EQ(WatchPartners(2, 5), (std::vector<int>{0, 1, 3, 4}));
}

TEST(WatchPartners, SymmetricSmallAndConnectedWithinLog2Hops) {
  for (int size : {2, 3, 5, 8, 13, 16, 33, 100, 1024, 4097}) {
    SCOPED_TRACE(size);
    int rounds = 0;
    while ((1 << rounds) < size) ++rounds;
    std::vector<std::vector<int>> partners(static_cast<std::size_t>(size));
    for (int pe = 0; pe < size; ++pe) {
      partners[pe] = WatchPartners(pe, size);
      EXPECT_LE(partners[pe].size(), static_cast<std::size_t>(2 * rounds));
    }
    for (int a = 0; a < size; a += std::max(1, size / 64)) {
      for (int b : partners[a]) {
        EXPECT_TRUE(std::binary_search(partners[b].begin(), partners[b].end(), a))
            << a << " watches " << b << " but not the other way";
      }
    }
    // A loss known at PE 0 (or any PE: the graph is a circulant) passed on along the
    // partners reaches every PE within ceil(log2 size) hops, also without one PE (the lost one).
    for (int lost : {-1, 1, size / 2}) {
      std::vector<int> hops(static_cast<std::size_t>(size), -1);
      std::vector<int> frontier{0};
      hops[0] = 0;
      while (!frontier.empty()) {
        std::vector<int> next;
        for (int pe : frontier) {
          for (int to : partners[pe]) {
            if (to == lost || hops[to] >= 0) continue;
            hops[to] = hops[pe] + 1;
            next.push_back(to);
          }
        }
        frontier = std::move(next);
      }
      for (int pe = 0; pe < size; ++pe) {
        if (pe == lost) continue;
        ASSERT_GE(hops[pe], 0) << "PE " << pe << " never hears, without PE " << lost;
        if (lost < 0) EXPECT_LE(hops[pe], rounds) << "PE " << pe;
      }
    }
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem::host
