// all_to_all across real PE processes on the host backend: a block-size matrix (zero bytes, one
// byte, odd sizes, every chunking branch) on 1 to 4 and 8 PEs, back-to-back calls reusing one
// output with a delayed PE, calls queued on a stream with rank skew, and the rejections: local
// contract violations on the caller alone, calls that differ across PEs on every PE.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "backends/host/host_stream.h"
#include "data_plane/chunk_plan.h"
#include "ops/all_to_all/all_to_all.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t kChunk = data_plane::kCollectiveChunkBytes;

// The byte at position `i` of the block PE `from` sends to PE `to` in call `call`.
std::uint8_t Pattern(int from, int to, int call, std::uint64_t i) {
  return static_cast<std::uint8_t>((i * 131u + static_cast<std::uint64_t>(from) * 17u +
                                    static_cast<std::uint64_t>(to) * 29u +
                                    static_cast<std::uint64_t>(call) * 101u) >> 1);
}

// Block sizes (bytes per PE pair), each chunking branch of the data plane's plan.
const std::vector<std::uint64_t>& BlockSizes() {
  static const std::vector<std::uint64_t> sizes = {
      0, 1, 31, 64, (64 << 10) - 1, kChunk - 1, kChunk, kChunk + 1,
      kChunk + 100,  // short tail: split with the last full chunk
      (1 << 20) + 13};
  return sizes;
}

// This PE's input of call `call`: block j is what it sends to PE j.
void FillInput(PeContext& ctx, std::vector<std::uint8_t>* input, std::uint64_t block, int call) {
  for (int to = 0; to < ctx.size; ++to) {
    for (std::uint64_t i = 0; i < block; ++i) {
      (*input)[to * block + i] = Pattern(ctx.rank, to, call, i);
    }
  }
}

// Block i of this PE's output must be what PE i sent it.
bool CheckExchanged(PeContext& ctx, const std::uint8_t* output, std::uint64_t block, int call) {
  for (int from = 0; from < ctx.size; ++from) {
    for (std::uint64_t i = 0; i < block; ++i) {
      if (output[from * block + i] != Pattern(from, ctx.rank, call, i)) {
        return CHECK_PE(ctx, false, "block from PE " + std::to_string(from) + " wrong at byte " +
                                        std::to_string(i) + " of " + std::to_string(block) +
                                        " (call " + std::to_string(call) + ")");
      }
    }
  }
  return true;
}

PeLaunch Launch(int size) { return LaunchPes(size, "30", 64 << 20, 240s); }

class AllToAllTest : public ::testing::TestWithParam<int> {};

TEST_P(AllToAllTest, BlockSizeMatrix) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const std::uint64_t largest = BlockSizes().back() * ctx.size;
    Allocation output = MustAllocate(ctx, largest + 64);
    std::vector<std::uint8_t> input(largest);
    int call = 0;
    for (std::uint64_t block : BlockSizes()) {
      ++call;
      const std::uint64_t bytes = block * ctx.size;
      FillInput(ctx, &input, block, call);
      std::memset(output.data, 0xEE, output.bytes);
      CHECK_PE_OK(ctx, AllToAll(Rt(), Sub(output, 0, bytes), input.data(), bytes, {}));
      if (!CheckExchanged(ctx, As<std::uint8_t>(output), block, call)) break;
      for (std::uint64_t i = bytes; i < bytes + 64; ++i) {  // nothing written past the output
        if (As<std::uint8_t>(output)[i] != 0xEE) {
          CHECK_PE(ctx, false, "wrote past the output for blocks of " + std::to_string(block));
          break;
        }
      }
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // everyone checked before the next call reuses it
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(AllToAllTest, BackToBackReusingOneOutputWithADelayedPe) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr std::uint64_t kBlock = kChunk + 4096;
    Allocation output = MustAllocate(ctx, kBlock * ctx.size);
    std::vector<std::uint8_t> input(kBlock * ctx.size);
    for (int call = 1; call <= 12; ++call) {
      // PE 0 lags behind: no peer may write its output of this call while it still checks the
      // previous one.
      if (ctx.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(call % 4 * 3));
      FillInput(ctx, &input, kBlock, call);
      CHECK_PE_OK(ctx, AllToAll(Rt(), View(output), input.data(), input.size(), {}));
      if (!CheckExchanged(ctx, As<std::uint8_t>(output), kBlock, call)) break;
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(AllToAllTest, QueuedOnAStreamWithRankSkew) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr int kCalls = 4;
    constexpr std::uint64_t kBlock = 2 * kChunk + 77;
    std::vector<Allocation> outputs;
    std::vector<std::vector<std::uint8_t>> inputs;
    for (int call = 0; call < kCalls; ++call) {
      outputs.push_back(MustAllocate(ctx, kBlock * ctx.size));
      inputs.emplace_back(kBlock * ctx.size);
      FillInput(ctx, &inputs.back(), kBlock, call);
    }
    auto stream = host::HostStream::Create<CallSite::kHostThread>();
    std::this_thread::sleep_for(std::chrono::milliseconds(ctx.rank * 20));  // rank skew
    for (int call = 0; call < kCalls; ++call) {
      CHECK_PE_OK(ctx, AllToAll(Rt(), View(outputs[call]), inputs[call].data(),
                                inputs[call].size(), StreamRef{stream.get()}));
    }
    CHECK_PE_OK(ctx, stream->Synchronize<CallSite::kHostThread>(60s));
    for (int call = 0; call < kCalls; ++call) {
      if (!CheckExchanged(ctx, As<std::uint8_t>(outputs[call]), kBlock, call)) break;
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(AllToAllTest, RejectionsChangeNothingAndDifferingCallsFailOnEveryPe) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const std::uint64_t bytes = 64 * ctx.size;
    Allocation output = MustAllocate(ctx, bytes);
    std::vector<std::uint8_t> input(bytes);
    FillInput(ctx, &input, 64, 0);
    // Local contract violations: this PE alone, no collective number taken.
    const Status wrong_size = AllToAll(Rt(), View(output), input.data(), bytes - ctx.size, {});
    CHECK_PE(ctx, wrong_size.code() == ErrorCode::kInvalidArgument, wrong_size.ToString());
    CHECK_PE(ctx, Contains(wrong_size.message(), "output byte size must be input byte size ("),
             wrong_size.message());
    if (ctx.size > 1) {
      const Status indivisible = AllToAll(Rt(), Sub(output, 0, bytes - 1), input.data(),
                                          bytes - 1, {});
      CHECK_PE(ctx, indivisible.code() == ErrorCode::kInvalidArgument, indivisible.ToString());
      CHECK_PE(ctx, Contains(indivisible.message(),
                             "input byte size must be divisible by the root size (" +
                                 std::to_string(ctx.size) + ")"),
               indivisible.message());
    }
    const Status overlap = AllToAll(Rt(), Sub(output, 0, 8 * ctx.size),
                                    As<std::uint8_t>(output) + 4, 8 * ctx.size, {});
    CHECK_PE(ctx, overlap.code() == ErrorCode::kInvalidArgument, overlap.ToString());
    CHECK_PE(ctx, Contains(overlap.message(), "all_to_all input must be disjoint from the output"),
             overlap.message());
    const Status null = AllToAll(Rt(), View(output), nullptr, bytes, {});
    CHECK_PE(ctx, null.code() == ErrorCode::kInvalidArgument, null.ToString());
    CHECK_PE_OK(ctx, AllToAll(Rt(), Sub(output, 0, 0), nullptr, 0, {}));  // zero bytes
    // Still in step: a real call works.
    CHECK_PE_OK(ctx, AllToAll(Rt(), View(output), input.data(), bytes, {}, nullptr, "uint8"));
    CheckExchanged(ctx, As<std::uint8_t>(output), 64, 0);
    if (ctx.size > 1) {
      // Calls that differ across PEs, in size and then in dtype: every PE fails, in step.
      const std::uint64_t mine = ctx.rank == 0 ? bytes / 2 : bytes;
      const Status size = AllToAll(Rt(), Sub(output, 0, mine), input.data(), mine, {});
      CHECK_PE(ctx, size.code() == ErrorCode::kCollectiveMismatch, size.ToString());
      CHECK_PE(ctx, Contains(size.message(), "field=bytes"), size.message());
      const Status dtype = AllToAll(Rt(), View(output), input.data(), bytes, {}, nullptr,
                                    ctx.rank == 0 ? "int8" : "uint8");
      CHECK_PE(ctx, dtype.code() == ErrorCode::kCollectiveMismatch, dtype.ToString());
      CHECK_PE(ctx, Contains(dtype.message(), "field=dtype"), dtype.message());
      CHECK_PE(ctx, Contains(dtype.message(), "all_to_all #"), dtype.message());
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Pes, AllToAllTest, ::testing::Values(1, 2, 3, 4, 8));

}  // namespace
}  // namespace hyper_parallel::shmem::testing
