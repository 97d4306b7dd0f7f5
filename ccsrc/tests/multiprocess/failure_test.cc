// Dead peers and residue: a PE that exits or is killed while its peers depend on it makes every
// survivor raise PEER_LOST naming it (with the default 120 s timeout: the launcher's 60 s
// deadline would kill a survivor that waited for the timeout instead), the survivors' runtime
// is terminal and their close returns at once; and after any death, in init, steady state or
// shutdown, no segment, socket or process of the job is left.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "backends/host/host_stream.h"
#include "runtime/socket_bootstrap.h"
#include "tests/multiprocess/pe_helpers.h"
#include "testing/eventually.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

PeLaunch DefaultTimeoutLaunch(int size) { return LaunchPes(size, "", 16 << 20, 60s); }

// Sockets in the abstract namespace whose name contains `part`.
std::vector<std::string> LiveSocketsNamed(const std::string& part) {
  std::vector<std::string> found;
  std::ifstream table("/proc/net/unix");
  std::string line;
  while (std::getline(table, line)) {
    if (line.find(part) != std::string::npos) found.push_back(line);
  }
  return found;
}

// Nothing of the job is left: no process, no mapped segment, no bootstrap socket.
void ExpectNoResidue(const std::vector<PeOutcome>& outcomes) {
  std::vector<int> pids;
  for (const PeOutcome& outcome : outcomes) pids.push_back(outcome.pid);
  EXPECT_TRUE(LiveSegmentsOf(pids).empty()) << LiveSegmentsOf(pids).front();
  EXPECT_TRUE(LiveChildrenOf(::getpid()).empty());
  EXPECT_TRUE(LiveSocketsNamed("hyper_parallel_shmem." + std::to_string(::getpid()) + ".").empty())
      << LiveSocketsNamed("hyper_parallel_shmem.").front();
}

// The survivors passed and the victim died the way it was told to.
void ExpectVictimDied(const std::vector<PeOutcome>& outcomes, int victim, bool killed) {
  for (const PeOutcome& outcome : outcomes) {
    if (outcome.rank == victim) {
      if (killed) {
        EXPECT_EQ(outcome.signal, SIGKILL) << outcome.output;
      } else {
        EXPECT_EQ(outcome.exit_code, 3) << outcome.output;
      }
      EXPECT_FALSE(outcome.timed_out);
    } else {
      EXPECT_TRUE(outcome.exit_code == 0 && outcome.signal == 0)
          << "PE " << outcome.rank << ": " << outcome.output;
    }
  }
}

// After PEER_LOST: terminal, every later call repeats it, close releases and returns at once.
void ExpectTerminal(PeContext& ctx, const Status& lost, const std::string& victim_text) {
  CHECK_PE(ctx, lost.code() == ErrorCode::kPeerLost, lost.ToString());
  CHECK_PE(ctx, Contains(lost.message(), "a peer PE exited while this PE depends on it: " +
                                             victim_text),
           lost.message());
  CHECK_PE(ctx, Rt().state() == RuntimeState::kFailed, "terminal");
  const Status later = Barrier(Rt(), {});
  CHECK_PE(ctx, later.code() == ErrorCode::kPeerLost && later.message() == lost.message(),
           later.ToString());
  const Diagnostics d = Rt().Snapshot();
  CHECK_PE(ctx, d.terminal_failure.message() == lost.message(), d.terminal_failure.ToString());
  const Status closed = Rt().Shutdown();
  CHECK_PE(ctx, closed.code() == ErrorCode::kPeerLost && closed.operation() == "shutdown",
           closed.ToString());
  CHECK_PE(ctx, OwnSegmentCount() == 0, "close released the heap");
  CHECK_PE(ctx, Rt().Shutdown().code() == ErrorCode::kPeerLost, "close stays an error");
}

enum class Blocked { kWaitSignal, kBarrier, kAllGather, kEmpty, kFree, kClose, kQueued };

std::string BlockedName(Blocked op) {
  switch (op) {
    case Blocked::kWaitSignal: return "wait_signal";
    case Blocked::kBarrier: return "barrier";
    case Blocked::kAllGather: return "all_gather";
    case Blocked::kEmpty: return "empty";
    case Blocked::kFree: return "free";
    case Blocked::kClose: return "shutdown";
    case Blocked::kQueued: return "queued";
  }
  return "?";
}

struct DeathCase {
  Blocked op;
  int victim;
  bool killed;  // SIGKILL; otherwise the victim exits with 3 without closing
};

std::string CaseName(const ::testing::TestParamInfo<DeathCase>& info) {
  return BlockedName(info.param.op) + "_victim" + std::to_string(info.param.victim) +
         (info.param.killed ? "_killed" : "_exited");
}

class PeerDeath : public ::testing::TestWithParam<DeathCase> {};

TEST_P(PeerDeath, EverySurvivorRaisesPeerLostNamingThePeAndExitsCleanly) {
  const DeathCase c = GetParam();
  const std::vector<PeOutcome> outcomes = RunPes(DefaultTimeoutLaunch(3), [c](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation words = MustAllocate(ctx, 3 * 64);  // [0] pid of the victim, [1] armed, [2] flag
    Allocation spare = MustAllocate(ctx, 64);
    Allocation output = MustAllocate(ctx, 3 * 64);
    std::memset(words.data, 0, words.bytes);
    As<std::int64_t>(words)[0] = ::getpid();
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    std::int64_t victim_pid = 0;
    CHECK_PE_OK(ctx, Rt().Get(&victim_pid, Sub(words, 0, 8), c.victim, {}));
    const std::string victim_text =
        "pe=" + std::to_string(c.victim) + ", pid=" + std::to_string(victim_pid);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    if (ctx.rank == c.victim) {
      // Die once every survivor is about to block (each raised the armed word first).
      CHECK_PE_OK(ctx, Rt().WaitSignal(Sub(words, 64, 8), SignalWidth::k64, 2, Comparison::kGe,
                                       {}));
      std::this_thread::sleep_for(100ms);
      if (c.killed) ::raise(SIGKILL);
      std::fflush(nullptr);
      ::_exit(3);  // an error exit: no close, no cleanup of ours
    }
    CHECK_PE_OK(ctx, Rt().Signal(Sub(words, 64, 8), SignalWidth::k64, 1, c.victim, SignalOp::kAdd,
                                 {}));
    Status lost;
    std::vector<std::uint8_t> input(64, 1);
    switch (c.op) {
      case Blocked::kWaitSignal:
        lost = Rt().WaitSignal(Sub(words, 128, 8), SignalWidth::k64, 1, Comparison::kEq, {});
        break;
      case Blocked::kBarrier:
        lost = Barrier(Rt(), {});
        break;
      case Blocked::kAllGather:
        lost = AllGather(Rt(), View(output), input.data(), 64, {});
        break;
      case Blocked::kEmpty: {
        Allocation more;
        lost = Rt().Allocate(64, 64, &more);
        break;
      }
      case Blocked::kFree:
        lost = Rt().Free(View(spare));
        break;
      case Blocked::kClose:
        for (const Allocation* a : {&words, &spare, &output}) {
          // Frees need the victim too: they fail with PEER_LOST once it is gone.
          lost = Rt().Free(View(*a));
          if (!lost.ok()) break;
        }
        if (lost.ok()) lost = Rt().Shutdown();
        break;
      case Blocked::kQueued: {
        auto stream = host::HostStream::Create<CallSite::kHostThread>();
        CHECK_PE_OK(ctx, Rt().WaitSignal(Sub(words, 128, 8), SignalWidth::k64, 1, Comparison::kEq,
                                         StreamRef{stream.get()}));
        CHECK_PE_OK(ctx, Barrier(Rt(), StreamRef{stream.get()}));
        lost = stream->Synchronize<CallSite::kHostThread>(60s);
        CHECK_PE(ctx, lost.operation() == "wait_signal", lost.ToString());
        break;
      }
    }
    if (c.op != Blocked::kClose && c.op != Blocked::kQueued) {
      CHECK_PE(ctx, lost.operation() == BlockedName(c.op), lost.ToString());
    }
    ExpectTerminal(ctx, lost, victim_text);
    return 0;
  });
  ExpectVictimDied(outcomes, c.victim, c.killed);
  ExpectNoResidue(outcomes);
}

INSTANTIATE_TEST_SUITE_P(
    Survivors, PeerDeath,
    ::testing::Values(DeathCase{Blocked::kWaitSignal, 1, true},
                      DeathCase{Blocked::kWaitSignal, 2, false},
                      DeathCase{Blocked::kBarrier, 1, true}, DeathCase{Blocked::kBarrier, 0, true},
                      DeathCase{Blocked::kBarrier, 2, false},
                      DeathCase{Blocked::kAllGather, 1, true},
                      DeathCase{Blocked::kEmpty, 2, true}, DeathCase{Blocked::kFree, 0, true},
                      DeathCase{Blocked::kClose, 1, true}, DeathCase{Blocked::kClose, 2, false},
                      DeathCase{Blocked::kQueued, 1, true}),
    CaseName);

// A Bootstrap that SIGKILLs its process on its n-th all-gather: a death at a chosen step of
// Init (1: before the configuration check, 2: after the heap was created, 3: after the peers
// were mapped).
class DyingBootstrap final : public Bootstrap {
 public:
  DyingBootstrap(std::unique_ptr<Bootstrap> inner, int die_at)
      : inner_(std::move(inner)), die_at_(die_at) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status AllGather(std::string_view mine, std::chrono::milliseconds timeout,
                   std::vector<std::string>* all) override {
    if (++calls_ == die_at_) ::raise(SIGKILL);
    return inner_->AllGather(mine, timeout, all);
  }
  Status Barrier(std::chrono::milliseconds timeout) override { return inner_->Barrier(timeout); }

 private:
  std::unique_ptr<Bootstrap> inner_;
  int die_at_;
  int calls_ = 0;
};

class DeathDuringInit : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(DeathDuringInit, SurvivorsFailInitAndNothingIsLeft) {
  const auto [victim, die_at] = GetParam();
  const std::vector<PeOutcome> outcomes =
      RunPes(DefaultTimeoutLaunch(3), [victim = victim, die_at = die_at](PeContext& ctx) {
        std::unique_ptr<SocketBootstrap> socket;
        CHECK_PE_OK(ctx, SocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 20s,
                                                     &socket));
        InitOptions options;
        options.bootstrap =
            std::make_shared<DyingBootstrap>(std::move(socket), ctx.rank == victim ? die_at : 0);
        const Status init = Rt().Init(std::move(options));
        CHECK_PE(ctx, !init.ok(), "init cannot succeed without the victim");
        CHECK_PE(ctx, Rt().state() == RuntimeState::kUninitialized, "rolled back");
        CHECK_PE(ctx, OwnSegmentCount() == 0, "nothing mapped after the rollback");
        return 0;
      });
  ExpectVictimDied(outcomes, victim, true);
  ExpectNoResidue(outcomes);
}

INSTANTIATE_TEST_SUITE_P(Steps, DeathDuringInit,
                         ::testing::Combine(::testing::Values(0, 2), ::testing::Values(1, 2, 3)));

TEST(DeathDuringShutdown, AVictimKilledInsideItsCloseLeavesTheSurvivorsTerminal) {
  const std::vector<PeOutcome> outcomes = RunPes(DefaultTimeoutLaunch(3), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr int kVictim = 1;
    if (ctx.rank == kVictim) {
      // Dies while blocked in its own close, waiting for the others.
      std::thread killer([] {
        Eventually([] {
          const auto ops = Rt().Snapshot().blocking;
          return !ops.empty() && ops.front().operation == "shutdown";
        });
        ::raise(SIGKILL);
      });
      const Status closed = Rt().Shutdown();
      CHECK_PE(ctx, false, "the victim outlived its close: " + closed.ToString());
      killer.join();
      return 1;
    }
    // The survivors close only once they know the victim is gone.
    CHECK_PE(ctx, Eventually([] { return Rt().Snapshot().state == RuntimeState::kFailed; }),
             "the victim's death is noticed without any call");
    const Status closed = Rt().Shutdown();
    CHECK_PE(ctx, closed.code() == ErrorCode::kPeerLost, closed.ToString());
    CHECK_PE(ctx, Contains(closed.message(), "pe=1"), closed.message());
    CHECK_PE(ctx, OwnSegmentCount() == 0, "close released the heap");
    return 0;
  });
  ExpectVictimDied(outcomes, 1, true);
  ExpectNoResidue(outcomes);
}

TEST(NormalExit, NothingIsLeftAfterEveryPeClosed) {
  const std::vector<PeOutcome> outcomes = RunPes(DefaultTimeoutLaunch(3), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation a = MustAllocate(ctx, 4096);
    std::memset(a.data, 1, a.bytes);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
  ExpectNoResidue(outcomes);
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
