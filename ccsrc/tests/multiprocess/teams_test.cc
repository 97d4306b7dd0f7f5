// Teams across real PE processes on the host backend (docs/teams.md): the shared team checks on
// 4 and 8 PEs, collectives on disjoint teams from two threads at once, creations whose PEs
// disagree, the team-slot limit, a handle of an older lifecycle, and a PE that dies while its
// team partner waits in a team barrier.
#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>

#include "tests/multiprocess/team_checks.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

class TeamsTest : public ::testing::TestWithParam<int> {};

TEST_P(TeamsTest, SplitsCollectivesKernelsMismatchesAndLifetimes) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(GetParam(), "30", 8 << 20, 180s), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    CheckTeams(ctx);
    // debug_state's table: the world only, with its number of collectives.
    const Diagnostics d = Rt().Snapshot();
    CHECK_PE(ctx, d.teams.size() == 1 && d.teams[0].info.slot == 0 &&
                      d.teams[0].info.sequence == d.collective_sequence,
             "teams in the snapshot");
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Pes, TeamsTest, ::testing::Values(4, 8),
                         [](const auto& param) { return std::to_string(param.param) + "pes"; });

// A PE in a row team and a column team runs each team's collectives on a thread of its own:
// disjoint teams' collectives run at the same time, each team in program order.
TEST(Teams, CollectivesOfDisjointTeamsRunAtOnceFromTwoThreads) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(4, "30", 8 << 20, 120s), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    TeamHandle row, column;
    CHECK_PE_OK(ctx, Rt().TeamSplit2d(kWorldTeam, 2, &row, &column));
    Allocation row_out = MustAllocate(ctx, 64 << 10);
    Allocation column_out = MustAllocate(ctx, 64 << 10);
    auto loop = [&](const TeamHandle& team, const Allocation& out, int salt) {
      const TeamInfo info = MustDescribe(ctx, team);
      std::vector<std::uint32_t> input(4096);
      for (int call = 0; call < 40; ++call) {
        for (std::size_t i = 0; i < input.size(); ++i) input[i] = ctx.rank * 1000000 + call * 1000 + salt + i % 7;
        const Status status = Rt().RunCollective(
            team, CollectiveNamed("all_gather"),
            CollectiveOperands{Sub(out, 0, 2 * input.size() * 4), input.data(), input.size() * 4,
                               0, {}},
            {});
        if (!status.ok()) {
          CHECK_PE_OK(ctx, status);
          return;
        }
        const auto* got = As<std::uint32_t>(out);
        for (int member = 0; member < 2; ++member) {
          for (std::size_t i = 0; i < input.size(); i += 511) {
            const std::uint32_t want = info.pes[member] * 1000000 + call * 1000 + salt + i % 7;
            if (got[member * input.size() + i] != want) {
              CHECK_PE(ctx, false, "team slot " + std::to_string(info.slot) + " call " +
                                       std::to_string(call) + " member " +
                                       std::to_string(member));
              return;
            }
          }
        }
        // Every member read the result before the next call overwrites it.
        CHECK_PE_OK(ctx, Rt().RunCollective(team, CollectiveNamed("barrier"), {}, {}));
      }
    };
    std::thread rows([&] { loop(row, row_out, 1); });
    loop(column, column_out, 2);
    rows.join();
    CHECK_PE_OK(ctx, Rt().TeamDestroy(row));
    CHECK_PE_OK(ctx, Rt().TeamDestroy(column));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(Teams, CreationsWhoseArgumentsDifferFailOnEveryPe) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(4, "30", 8 << 20, 120s), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    // A split's arguments are checked across the parent before any team is made.
    TeamHandle team;
    const Status split = Rt().TeamSplitStrided(kWorldTeam, 0, ctx.rank == 3 ? 1 : 2, 2, &team);
    CHECK_PE(ctx, split.code() == ErrorCode::kCollectiveMismatch &&
                      Contains(split.message(), "(stride: 2 on PEs 0,1,2, 1 on PE 3)") &&
                      Contains(split.message(), "field=arguments") &&
                      Contains(split.message(), "split_strided #1 start=0 stride=2 size=2") &&
                      Contains(split.message(), "pe 3: split_strided #1 start=0 stride=1 size=2"),
             split.ToString());
    CHECK_PE(ctx, !team.valid(), "no team after a refused split");
    // A triplet outside the parent: refused alike on every PE, after the agreement.
    const Status outside = Rt().TeamSplitStrided(kWorldTeam, 1, 2, 3, &team);
    CHECK_PE(ctx, outside.code() == ErrorCode::kInvalidArgument &&
                      Contains(outside.message(), "start + stride * (size - 1)"),
             outside.ToString());
    // Members that list their team differently: each member of the pair names the field.
    if (ctx.rank < 2) {
      const std::vector<int> pes = ctx.rank == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
      const Status made = Rt().TeamCreate(pes, &team);
      CHECK_PE(ctx, made.code() == ErrorCode::kCollectiveMismatch &&
                        Contains(made.message(), "field=members"),
               made.ToString());
      // The pair's rounds stay in step: the same call afterwards works.
      CHECK_PE_OK(ctx, Rt().TeamCreate({0, 1}, &team));
      CHECK_PE_OK(ctx, Rt().TeamDestroy(team));
    }
    // A handle of another PE's team: this PE is not in it.
    TeamHandle row, column;
    CHECK_PE_OK(ctx, Rt().TeamSplit2d(kWorldTeam, 2, &row, &column));
    TeamHandle theirs = row;
    theirs.id = (row.id & ((1ull << 40) - 1)) | static_cast<std::uint64_t>((ctx.rank + 2) % 4 + 1) << 40;
    const Status foreign = Rt().RunCollective(theirs, CollectiveNamed("barrier"), {}, {});
    CHECK_PE(ctx, foreign.code() == ErrorCode::kInvalidArgument &&
                      Contains(foreign.message(), "a team this PE is in"),
             foreign.ToString());
    CHECK_PE_OK(ctx, Rt().TeamDestroy(row));
    CHECK_PE_OK(ctx, Rt().TeamDestroy(column));
    // A list without this PE, and a PE out of range, are refused before anything collective.
    CHECK_PE(ctx, Rt().TeamCreate({(ctx.rank + 1) % 4}, &team).code() ==
                      ErrorCode::kInvalidArgument,
             "a team without this PE");
    CHECK_PE(ctx, Rt().TeamCreate({ctx.rank, 9}, &team).code() == ErrorCode::kInvalidArgument,
             "a PE out of range");
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(Teams, TheSlotLimitIsAClearErrorOnEveryMemberAndAFreedSlotIsReused) {
  PeLaunch launch = LaunchPes(4, "30", 8 << 20, 120s);
  launch.env.emplace("HYPER_PARALLEL_SHMEM_MAX_TEAMS", "3");  // the world and two more
  EXPECT_ALL_PES_PASS(RunPes(launch, [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    TeamHandle row, column, third;
    CHECK_PE_OK(ctx, Rt().TeamSplit2d(kWorldTeam, 2, &row, &column));
    const Status full = Rt().TeamSplitStrided(kWorldTeam, 0, 1, 3, &third);
    if (ctx.rank < 3) {
      CHECK_PE(ctx, full.code() == ErrorCode::kInvalidState &&
                        Contains(full.message(), "HYPER_PARALLEL_SHMEM_MAX_TEAMS") &&
                        Contains(full.message(), "max_teams=3"),
               full.ToString());
    } else {
      CHECK_PE_OK(ctx, full);  // outside the new team: nothing to make
    }
    CHECK_PE_OK(ctx, Rt().TeamDestroy(column));
    CHECK_PE_OK(ctx, Rt().TeamSplitStrided(kWorldTeam, 0, 1, 3, &third));
    CHECK_PE(ctx, third.valid() == (ctx.rank < 3), "made once a slot was free");
    if (third.valid()) {
      CHECK_PE_OK(ctx, Rt().RunCollective(third, CollectiveNamed("barrier"), {}, {}));
      CHECK_PE_OK(ctx, Rt().TeamDestroy(third));
    }
    CHECK_PE_OK(ctx, Rt().TeamDestroy(row));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(Teams, EveryTeamEndsAtCloseAndAnOlderLifecyclesHandleIsRefused) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, "30", 8 << 20, 120s), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    TeamHandle self;
    CHECK_PE_OK(ctx, Rt().TeamCreate({ctx.rank}, &self));
    CHECK_PE_OK(ctx, Rt().RunCollective(self, CollectiveNamed("barrier"), {}, {}));
    CHECK_PE_OK(ctx, Rt().Shutdown());  // a live team does not hold the close back
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    TeamInfo info;
    const Status stale = Rt().DescribeTeam(self, &info);
    CHECK_PE(ctx, stale.code() == ErrorCode::kStaleLifecycle, stale.ToString());
    CHECK_PE_OK(ctx, Rt().DescribeTeam(kWorldTeam, &info));  // predefined: every lifecycle's
    CHECK_PE(ctx, info.pes.size() == 2 && info.predefined, "the world team");
    CHECK_PE(ctx, Rt().Snapshot().teams.size() == 1, "the new lifecycle has the world only");
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// PE 3 exits while PE 2 waits for it in their row's barrier: PE 2 raises PEER_LOST naming it,
// and so does every other survivor at its next call.
TEST(Teams, APeThatDiesDuringATeamBarrierReachesEverySurvivor) {
  const std::vector<PeOutcome> outcomes = RunPes(LaunchPes(4, "", 8 << 20, 60s), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    TeamHandle row, column;
    CHECK_PE_OK(ctx, Rt().TeamSplit2d(kWorldTeam, 2, &row, &column));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    if (ctx.rank == 3) {
      std::this_thread::sleep_for(300ms);  // PE 2 is in the row barrier by then
      ::_exit(3);
    }
    Status status = Rt().RunCollective(row, CollectiveNamed("barrier"), {}, {});
    if (ctx.rank != 2) {
      CHECK_PE_OK(ctx, status);  // the other row completes
      status = Barrier(Rt(), {});
    }
    CHECK_PE(ctx, status.code() == ErrorCode::kPeerLost && Contains(status.message(), "pe=3"),
             status.ToString());
    CHECK_PE(ctx, Rt().Shutdown().code() == ErrorCode::kPeerLost, "close after PEER_LOST");
    return 0;
  });
  for (const PeOutcome& outcome : outcomes) {
    if (outcome.rank == 3) {
      EXPECT_EQ(outcome.exit_code, 3) << outcome.output;
    } else {
      EXPECT_TRUE(outcome.exit_code == 0 && !outcome.timed_out)
          << "PE " << outcome.rank << ": " << outcome.output;
    }
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
