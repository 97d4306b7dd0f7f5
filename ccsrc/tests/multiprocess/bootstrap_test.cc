#include <gtest/gtest.h>

#include "runtime/unix_socket_bootstrap.h"
#include "testing/multiprocess.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

class BootstrapTest : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapTest, AllGatherDeliversEveryPayloadInRankOrder) {
  const auto outcomes = RunPes({GetParam(), 60s, {}}, [](PeContext& ctx) {
    std::unique_ptr<UnixSocketBootstrap> boot;
    CHECK_PE_OK(ctx, UnixSocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 20s,
                                                 &boot));
    if (!boot) return 1;
    for (int round = 0; round < 3; ++round) {
      // Payload sizes differ per rank and round, including empty ones.
      const std::string mine(static_cast<std::size_t>(ctx.rank * 1000 * round),
                             static_cast<char>('a' + ctx.rank));
      std::vector<std::string> all;
      CHECK_PE_OK(ctx, boot->AllGather(mine, 20s, &all));
      CHECK_PE(ctx, static_cast<int>(all.size()) == ctx.size, "one payload per PE");
      for (int pe = 0; pe < static_cast<int>(all.size()); ++pe) {
        const std::string expected(static_cast<std::size_t>(pe * 1000 * round),
                                   static_cast<char>('a' + pe));
        CHECK_PE(ctx, all[pe] == expected, "payload of PE " + std::to_string(pe));
      }
      CHECK_PE_OK(ctx, boot->Barrier(20s));
    }
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
}

INSTANTIATE_TEST_SUITE_P(Pes, BootstrapTest, ::testing::Values(1, 2, 4, 8));

TEST(Bootstrap, MissingPeerTimesOut) {
  const auto outcomes = RunPes({2, 30s, {}}, [](PeContext& ctx) {
    if (ctx.rank == 1) return 0;  // never joins
    std::unique_ptr<UnixSocketBootstrap> boot;
    Status status =
        UnixSocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 300ms, &boot);
    CHECK_PE(ctx, status.code() == ErrorCode::kTimeout, status.ToString());
    CHECK_PE(ctx, status.message().find("bootstrap timed out") != std::string::npos,
             status.message());
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
}

TEST(Bootstrap, RootMissingTimesOut) {
  const auto outcomes = RunPes({2, 30s, {}}, [](PeContext& ctx) {
    if (ctx.rank == 0) return 0;
    std::unique_ptr<UnixSocketBootstrap> boot;
    Status status =
        UnixSocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 300ms, &boot);
    CHECK_PE(ctx, status.code() == ErrorCode::kTimeout, status.ToString());
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
}

TEST(Bootstrap, RejectsBadArguments) {
  std::unique_ptr<UnixSocketBootstrap> boot;
  EXPECT_EQ(UnixSocketBootstrap::Create("x", 2, 2, 1s, &boot).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(UnixSocketBootstrap::Create("x", 0, 0, 1s, &boot).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(UnixSocketBootstrap::Create("", 0, 2, 1s, &boot).code(),
            ErrorCode::kInvalidArgument);
  auto env = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  Status incomplete = UnixSocketBootstrap::FromEnvironment(env, 1s, &boot);
  EXPECT_EQ(incomplete.code(), ErrorCode::kInvalidConfig);
  EXPECT_NE(incomplete.message().find("HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME=<unset>"),
            std::string::npos);
}

TEST(Bootstrap, PeerCrashIsReportedNotHung) {
  const auto outcomes = RunPes({3, 30s, {}}, [](PeContext& ctx) {
    std::unique_ptr<UnixSocketBootstrap> boot;
    CHECK_PE_OK(ctx, UnixSocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 20s,
                                                 &boot));
    if (ctx.rank == 2) ::_exit(0);  // dies without taking part
    std::vector<std::string> all;
    Status status = boot->AllGather("x", 5s, &all);
    CHECK_PE(ctx, !status.ok(), "all-gather must fail when a peer died");
    CHECK_PE(ctx,
             status.code() == ErrorCode::kBackendError || status.code() == ErrorCode::kTimeout,
             status.ToString());
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
