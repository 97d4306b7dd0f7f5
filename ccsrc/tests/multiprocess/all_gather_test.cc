// AllGather across real PE processes: a byte-boundary matrix, back-to-back calls with a
// delayed PE, queued calls on a stream with rank skew, the pull variant on the device surface
// directly, and all_gather written on the kernel-side API alone (Runtime::Launch) against the
// runtime's.
#include <gtest/gtest.h>

#include <thread>

#include "backends/host/host_backend.h"
#include "backends/host/host_stream.h"
#include "data_plane/chunk_plan.h"
#include "ops/all_gather/all_gather.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t kChunk = data_plane::kCollectiveChunkBytes;

// The byte pattern PE `pe` contributes in call `call`: distinct per PE, call and position.
std::uint8_t Pattern(int pe, int call, std::uint64_t i) {
  return static_cast<std::uint8_t>((i * 131u + static_cast<std::uint64_t>(pe) * 17u +
                                    static_cast<std::uint64_t>(call) * 101u) >> 1);
}

const std::vector<std::uint64_t>& ByteMatrix() {
  static const std::vector<std::uint64_t> sizes = {
      0, 1, 31, 32, 33, kChunk - 1, kChunk, kChunk + 1,
      kChunk + 100,                 // short tail: split with the last full chunk
      2 * kChunk + 64 * 1024 - 1,   // tail just below the minimum
      (64 << 10) - 1, 64 << 10, (64 << 10) + 1, (1 << 20) - 1, 1 << 20,
      (3 << 20) + 12345};          // large and odd
  return sizes;
}

bool CheckGathered(PeContext& ctx, const std::uint8_t* output, std::uint64_t bytes, int call) {
  for (int pe = 0; pe < ctx.size; ++pe) {
    const std::uint8_t* slot = output + static_cast<std::uint64_t>(pe) * bytes;
    for (std::uint64_t i = 0; i < bytes; ++i) {
      if (slot[i] != Pattern(pe, call, i)) {
        return CHECK_PE(ctx, false, "slot of PE " + std::to_string(pe) + " wrong at byte " +
                                        std::to_string(i) + " of " + std::to_string(bytes) +
                                        " (call " + std::to_string(call) + ")");
      }
    }
  }
  return true;
}

PeLaunch Launch(int size, std::string workers = "") {
  PeLaunch launch = LaunchPes(size, "30", 96 << 20, 240s);
  if (!workers.empty()) launch.env["HYPER_PARALLEL_SHMEM_COPY_WORKERS"] = workers;
  return launch;
}

int ByteMatrixBody(PeContext& ctx) {
  CHECK_PE_OK(ctx, ctx.InitRuntime());
  const std::uint64_t largest = ByteMatrix().back();
  Allocation output = MustAllocate(ctx, largest * ctx.size);
  std::vector<std::uint8_t> input(largest);
  int call = 0;
  for (std::uint64_t bytes : ByteMatrix()) {
    ++call;
    for (std::uint64_t i = 0; i < bytes; ++i) input[i] = Pattern(ctx.rank, call, i);
    std::memset(output.data, 0xEE, output.bytes);
    const SymmetricView view = Sub(output, 0, bytes * ctx.size);
    CHECK_PE_OK(ctx, AllGather(Rt(), view, input.data(), bytes, {}));
    if (!CheckGathered(ctx, As<std::uint8_t>(output), bytes, call)) break;
    // Nothing beyond the gathered bytes was written.
    const std::uint8_t* tail = As<std::uint8_t>(output) + bytes * ctx.size;
    const std::uint64_t spare = std::min<std::uint64_t>(64, output.bytes - bytes * ctx.size);
    for (std::uint64_t i = 0; i < spare; ++i) {
      if (tail[i] != 0xEE) {
        CHECK_PE(ctx, false, "wrote past the output for " + std::to_string(bytes) + " bytes");
        break;
      }
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // everyone checked before the next call reuses it
  }
  FreeAllAndShutdown(ctx);
  return 0;
}

class AllGatherTest : public ::testing::TestWithParam<int> {};

TEST_P(AllGatherTest, ByteBoundaryMatrix) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), ByteMatrixBody));
}

TEST_P(AllGatherTest, ByteBoundaryMatrixWithThreeCopyWorkers) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam(), "3"), ByteMatrixBody));
}

TEST_P(AllGatherTest, BackToBackReusingOneOutputWithADelayedPe) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr std::uint64_t kBytes = kChunk + 4096;
    Allocation output = MustAllocate(ctx, kBytes * ctx.size);
    std::vector<std::uint8_t> input(kBytes);
    for (int call = 1; call <= 25; ++call) {
      // PE 0 lags behind: the others must not overwrite its output of the previous call
      // while it still checks it, nor before it enters this one.
      if (ctx.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(call % 4 * 3));
      for (std::uint64_t i = 0; i < kBytes; ++i) input[i] = Pattern(ctx.rank, call, i);
      CHECK_PE_OK(ctx, AllGather(Rt(), View(output), input.data(), kBytes, {}));
      if (!CheckGathered(ctx, As<std::uint8_t>(output), kBytes, call)) break;
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(AllGatherTest, QueuedOnAStreamWithRankSkew) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr int kCalls = 6;
    constexpr std::uint64_t kBytes = 3 * kChunk + 77;
    std::vector<Allocation> outputs;
    for (int call = 0; call < kCalls; ++call) outputs.push_back(MustAllocate(ctx, kBytes * ctx.size));
    auto stream = host::HostStream::Create<CallSite::kHostThread>();
    std::vector<std::vector<std::uint8_t>> inputs(kCalls, std::vector<std::uint8_t>(kBytes));
    std::this_thread::sleep_for(std::chrono::milliseconds(ctx.rank * 20));  // rank skew
    for (int call = 0; call < kCalls; ++call) {
      for (std::uint64_t i = 0; i < kBytes; ++i) inputs[call][i] = Pattern(ctx.rank, call, i);
      CHECK_PE_OK(ctx, AllGather(Rt(), View(outputs[call]), inputs[call].data(), kBytes,
                                 StreamRef{stream.get()}));
    }
    CHECK_PE_OK(ctx, stream->Synchronize<CallSite::kHostThread>(60s));
    for (int call = 0; call < kCalls; ++call) {
      if (!CheckGathered(ctx, As<std::uint8_t>(outputs[call]), kBytes, call)) break;
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(AllGatherTest, RejectionsChangeNothingAndMixWithRma) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation output = MustAllocate(ctx, 64 * ctx.size);
    std::vector<std::uint8_t> input(64, static_cast<std::uint8_t>(ctx.rank));
    Status wrong_size = AllGather(Rt(), View(output), input.data(), 63, {});
    CHECK_PE(ctx, wrong_size.code() == ErrorCode::kInvalidArgument, wrong_size.ToString());
    CHECK_PE(ctx, Contains(wrong_size.message(), "output byte size must be input byte size * root size"),
             wrong_size.message());
    Status overlap =
        AllGather(Rt(), Sub(output, 0, 32 * ctx.size), As<std::uint8_t>(output) + 8, 32, {});
    CHECK_PE(ctx, overlap.code() == ErrorCode::kInvalidArgument, overlap.ToString());
    CHECK_PE(ctx, Contains(overlap.message(), "all_gather input must be disjoint from the output"),
             overlap.message());
    CHECK_PE(ctx,
             AllGather(Rt(), View(output), nullptr, 64, {}).code() == ErrorCode::kInvalidArgument,
             "null input");
    CHECK_PE_OK(ctx, AllGather(Rt(), Sub(output, 0, 0), nullptr, 0, {}));  // zero bytes
    // Rejections take no collective number: a real call still works, in step.
    CHECK_PE_OK(ctx, AllGather(Rt(), View(output), input.data(), 64, {}));
    for (int pe = 0; pe < ctx.size; ++pe) {
      CHECK_PE(ctx, As<std::uint8_t>(output)[pe * 64 + 63] == pe, "slot " + std::to_string(pe));
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Pes, AllGatherTest, ::testing::Values(1, 2, 4, 8));

}  // namespace
}  // namespace hyper_parallel::shmem::testing
