// all_gather_v and all_to_all with split sizes across real PE processes on the host backend:
// sizes that differ from PE to PE (zero included, several chunks), back-to-back calls reusing
// one output, and the failures every PE sees alike: an output too small for what all give
// together, split sizes that do not match across a pair of PEs (nothing written).
#include <gtest/gtest.h>

#include <cstring>

#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

std::uint8_t Pattern(int from, int to, int call, std::uint64_t i) {
  return static_cast<std::uint8_t>((i * 131u + static_cast<std::uint64_t>(from) * 17u +
                                    static_cast<std::uint64_t>(to) * 29u +
                                    static_cast<std::uint64_t>(call) * 101u) >> 1);
}

// Bytes PE `from` gives in all_gather_v call `call`: zero for some, several chunks for others.
std::uint64_t GatherBytes(int from, int call) {
  const std::uint64_t choices[] = {0, 1, 777, (300 << 10) + 5, 64};
  return choices[static_cast<std::size_t>(from + call) % std::size(choices)];
}

// Bytes PE `from` sends PE `to` in all_to_all call `call`.
std::uint64_t SplitBytes(int from, int to, int call) {
  const std::uint64_t choices[] = {0, 3, 4096, (200 << 10) + 1, 17};
  return choices[static_cast<std::size_t>(from * 3 + to + call) % std::size(choices)];
}

PeLaunch Launch(int size) { return LaunchPes(size, "30", 64 << 20, 240s); }

class VariableSizesTest : public ::testing::TestWithParam<int> {};

TEST_P(VariableSizesTest, AllGatherVPacksEveryPesInputAndReportsTheSizes) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation output = MustAllocate(ctx, (300 << 10) * 8 + 4096);
    std::vector<std::uint8_t> input((300 << 10) + 5);
    for (int call = 0; call < 6; ++call) {
      const std::uint64_t mine = GatherBytes(ctx.rank, call);
      for (std::uint64_t i = 0; i < mine; ++i) input[i] = Pattern(ctx.rank, 0, call, i);
      std::vector<std::uint64_t> sizes;
      CHECK_PE_OK(ctx, AllGatherV(Rt(), View(output), input.data(), mine, &sizes, {}));
      CHECK_PE(ctx, sizes.size() == static_cast<std::size_t>(ctx.size), "one size per PE");
      std::uint64_t at = 0;
      for (int pe = 0; pe < ctx.size && pe < static_cast<int>(sizes.size()); ++pe) {
        CHECK_PE(ctx, sizes[pe] == GatherBytes(pe, call), "size of PE " + std::to_string(pe));
        for (std::uint64_t i = 0; i < sizes[pe]; ++i) {
          if (As<std::uint8_t>(output)[at + i] != Pattern(pe, 0, call, i)) {
            CHECK_PE(ctx, false, "PE " + std::to_string(pe) + " byte " + std::to_string(i));
            break;
          }
        }
        at += sizes[pe];
      }
      // No barrier: the next call's first write waits until every PE entered it.
    }
    // An output too small for everything together: every PE fails alike, naming the need.
    if (ctx.size > 1) {
      std::vector<std::uint64_t> sizes;
      const std::uint64_t small = ctx.rank == 0 ? 8 : output.bytes;
      const Status status = AllGatherV(Rt(), Sub(output, 0, small), input.data(), 16, &sizes, {});
      CHECK_PE(ctx, status.code() == ErrorCode::kInvalidArgument, status.ToString());
      CHECK_PE(ctx, Contains(status.message(), "output byte size of PE 0 must be at least " +
                                                   std::to_string(16 * ctx.size)),
               status.message());
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(VariableSizesTest, AllToAllWithSplitSizesAndAMismatchedPair) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation output = MustAllocate(ctx, ((200 << 10) + 64) * 8);
    std::vector<std::uint8_t> input(((200 << 10) + 64) * 8);
    for (int call = 0; call < 5; ++call) {
      std::vector<std::uint64_t> send(ctx.size), receive(ctx.size);
      std::uint64_t at = 0;
      for (int to = 0; to < ctx.size; ++to) {
        send[to] = SplitBytes(ctx.rank, to, call);
        receive[to] = SplitBytes(to, ctx.rank, call);
        for (std::uint64_t i = 0; i < send[to]; ++i) input[at + i] = Pattern(ctx.rank, to, call, i);
        at += send[to];
      }
      CHECK_PE_OK(ctx, AllToAllV(Rt(), View(output), input.data(), send, receive, {}));
      std::uint64_t got = 0;
      for (int from = 0; from < ctx.size; ++from) {
        for (std::uint64_t i = 0; i < receive[from]; ++i) {
          if (As<std::uint8_t>(output)[got + i] != Pattern(from, ctx.rank, call, i)) {
            CHECK_PE(ctx, false, "block from PE " + std::to_string(from) + " byte " +
                                     std::to_string(i) + " (call " + std::to_string(call) + ")");
            break;
          }
        }
        got += receive[from];
      }
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    if (ctx.size > 1) {
      // The last PE expects one byte more from PE 0 than PE 0 sends: every PE fails, naming the
      // pair, and nothing is written.
      std::memset(output.data, 0x5A, 64);
      std::vector<std::uint64_t> send(ctx.size, 8), receive(ctx.size, 8);
      if (ctx.rank == ctx.size - 1) receive[0] = 9;
      const Status status = AllToAllV(Rt(), View(output), input.data(), send, receive, {});
      CHECK_PE(ctx, status.code() == ErrorCode::kCollectiveMismatch, status.ToString());
      CHECK_PE(ctx, Contains(status.message(), "PE 0 sends 8 bytes to PE " +
                                                   std::to_string(ctx.size - 1) +
                                                   ", which expects 9 bytes"),
               status.message());
      for (int i = 0; i < 64; ++i) {
        if (As<std::uint8_t>(output)[i] != 0x5A) {
          CHECK_PE(ctx, false, "a mismatched call wrote the output");
          break;
        }
      }
      // Local rules, on the caller alone: the send sizes must sum to the input.
      const Status sum = Rt().RunCollective(
          CollectiveNamed("all_to_all_v"),
          CollectiveOperands{View(output), input.data(), 3, 0, "uint8", {}, send}, {});
      CHECK_PE(ctx, sum.code() == ErrorCode::kInvalidArgument, sum.ToString());
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Pes, VariableSizesTest, ::testing::Values(1, 2, 3, 4, 8));

}  // namespace
}  // namespace hyper_parallel::shmem::testing
