#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/socket_bootstrap.h"
#include "testing/multiprocess.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

class BootstrapTest : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapTest, AllGatherDeliversEveryPayloadInRankOrder) {
  const auto outcomes = RunPes({GetParam(), 60s, {}}, [](PeContext& ctx) {
    std::unique_ptr<SocketBootstrap> boot;
    CHECK_PE_OK(ctx, SocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 20s,
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

// A port of 127.0.0.1 that nothing listens on right now.
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// "tcp:<address>:<port>": the group forms over TCP, as PEs on several hosts do.
TEST(Bootstrap, TcpAddressFormsTheGroup) {
  const std::string name = "tcp:127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const auto outcomes = RunPes({3, 60s, {}}, [&name](PeContext& ctx) {
    std::unique_ptr<SocketBootstrap> boot;
    CHECK_PE_OK(ctx, SocketBootstrap::Create(name, ctx.rank, ctx.size, 20s, &boot));
    if (!boot) return 1;
    std::vector<std::string> all;
    CHECK_PE_OK(ctx, boot->AllGather(std::string(static_cast<std::size_t>(ctx.rank) + 1, 'x'),
                                     20s, &all));
    for (int pe = 0; pe < ctx.size; ++pe) {
      CHECK_PE(ctx, all[pe] == std::string(static_cast<std::size_t>(pe) + 1, 'x'),
               "payload of PE " + std::to_string(pe));
    }
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
}

TEST(Bootstrap, MissingPeerTimesOut) {
  const auto outcomes = RunPes({2, 30s, {}}, [](PeContext& ctx) {
    if (ctx.rank == 1) return 0;  // never joins
    std::unique_ptr<SocketBootstrap> boot;
    Status status =
        SocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 300ms, &boot);
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
    std::unique_ptr<SocketBootstrap> boot;
    Status status =
        SocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 300ms, &boot);
    CHECK_PE(ctx, status.code() == ErrorCode::kTimeout, status.ToString());
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
}

TEST(Bootstrap, RejectsBadArguments) {
  std::unique_ptr<SocketBootstrap> boot;
  EXPECT_EQ(SocketBootstrap::Create("x", 2, 2, 1s, &boot).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(SocketBootstrap::Create("x", 0, 0, 1s, &boot).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(SocketBootstrap::Create("", 0, 2, 1s, &boot).code(),
            ErrorCode::kInvalidArgument);
  for (const char* name : {"tcp:1.2.3:80", "tcp:127.0.0.1:0", "tcp:127.0.0.1:x", "tcp:",
                           "tcp:127.0.0.1:70000", "tcp:host:80"}) {
    const Status status = SocketBootstrap::Create(name, 0, 2, 1s, &boot);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << name;
    EXPECT_NE(status.message().find("tcp:<IPv4 address>:<port>"), std::string::npos)
        << status.message();
  }
  auto env = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  Status incomplete = SocketBootstrap::FromEnvironment(env, 1s, &boot);
  EXPECT_EQ(incomplete.code(), ErrorCode::kInvalidConfig);
  EXPECT_NE(incomplete.message().find("HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME=<unset>"),
            std::string::npos);
}

TEST(Bootstrap, PeerCrashIsReportedNotHung) {
  const auto outcomes = RunPes({3, 30s, {}}, [](PeContext& ctx) {
    std::unique_ptr<SocketBootstrap> boot;
    CHECK_PE_OK(ctx, SocketBootstrap::Create(ctx.bootstrap_name, ctx.rank, ctx.size, 20s,
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
