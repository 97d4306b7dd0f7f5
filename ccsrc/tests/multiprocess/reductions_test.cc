// broadcast, all_reduce and reduce_scatter across real PE processes on the host backend: every
// dtype with every operator it takes (values whose results are exact in any order, checked
// bitwise against a reference every PE computes), in place, sizes from zero to many passes of
// the workspace (a small HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE), random floats giving the same
// bits on every PE and on a second run, calls queued on a stream, and the rejections: local
// contract violations on the caller alone, calls that differ across PEs on every PE.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "backends/host/host_stream.h"
#include "ops/reduce/element.h"
#include "tests/multiprocess/pe_helpers.h"
#include "tests/multiprocess/reduction_values.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;
using ops::ElementType;
using ops::ReduceOp;

PeLaunch Launch(int size, std::string workspace = "") {
  PeLaunch launch = LaunchPes(size, "30", 64 << 20, 240s);
  if (!workspace.empty()) launch.env["HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE"] = workspace;
  return launch;
}

class ReductionsTest : public ::testing::TestWithParam<int> {};

TEST_P(ReductionsTest, EveryDtypeWithEveryOperatorItTakes) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    CheckEveryDtypeAndOperator(ctx);
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// Sizes from zero through many passes of a 4 KiB workspace, in place and not, for both.
TEST_P(ReductionsTest, SizesInPlaceAndManyPassesOfASmallWorkspace) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam(), "4096"), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const std::uint64_t sizes[] = {0, 1, 2, 5, 511, 512, 4099, 100003};
    const std::uint64_t largest = sizes[std::size(sizes) - 1];
    Allocation output = MustAllocate(ctx, largest * 8);
    std::vector<std::byte> input(largest * 8 * ctx.size);
    int call = 0;
    for (std::uint64_t count : sizes) {
      for (ElementType type : {ElementType::kFloat32, ElementType::kBFloat16, ElementType::kInt64}) {
        const std::uint64_t eb = ops::ElementBytes(type);
        const std::string dtype(ops::ElementTypeName(type));
        ++call;
        const std::string what = "count " + std::to_string(count);
        // In place: the output holds the input.
        FillValues(ctx, type, ReduceOp::kSum, 0, count, call, As<std::byte>(output));
        CHECK_PE_OK(ctx, AllReduce(Rt(), Sub(output, 0, count * eb), output.data, count * eb,
                                   Code(ReduceOp::kSum), dtype, {}));
        if (!CheckReduced(ctx, type, ReduceOp::kSum, 0, count, call, As<std::byte>(output),
                          "in-place all_reduce " + what)) {
          break;
        }
        CHECK_PE_OK(ctx, Barrier(Rt(), {}));
        FillValues(ctx, type, ReduceOp::kMax, 0, count * ctx.size, call, input.data());
        CHECK_PE_OK(ctx, ReduceScatter(Rt(), Sub(output, 0, count * eb), input.data(),
                                       count * eb * ctx.size, Code(ReduceOp::kMax), dtype, {}));
        if (!CheckReduced(ctx, type, ReduceOp::kMax, count * ctx.rank, count, call,
                          As<std::byte>(output), "reduce_scatter " + what)) {
          break;
        }
        CHECK_PE_OK(ctx, Barrier(Rt(), {}));
      }
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// Random float32 inputs: every PE ends with the same bits, and a second run gives them again.
TEST_P(ReductionsTest, RandomFloatsGiveTheSameBitsOnEveryPeAndEveryRun) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr std::uint64_t kCount = 70001;
    Allocation output = MustAllocate(ctx, kCount * 4);
    Allocation gathered = MustAllocate(ctx, kCount * 4 * ctx.size);
    std::vector<float> input(kCount);
    std::mt19937 random(static_cast<unsigned>(ctx.rank) * 7919u + 1u);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float& v : input) v = uniform(random) * (1 + ctx.rank);
    std::vector<float> first(kCount);
    for (int run = 0; run < 2; ++run) {
      CHECK_PE_OK(ctx, AllReduce(Rt(), View(output), input.data(), kCount * 4,
                                 Code(ReduceOp::kSum), "float32", {}));
      if (run == 0) {
        std::memcpy(first.data(), output.data, kCount * 4);
      } else {
        CHECK_PE(ctx, std::memcmp(first.data(), output.data, kCount * 4) == 0,
                 "a second run gave other bits");
      }
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    }
    CHECK_PE_OK(ctx, AllGather(Rt(), View(gathered), first.data(), kCount * 4, {}));
    for (int pe = 0; pe < ctx.size; ++pe) {
      CHECK_PE(ctx, std::memcmp(As<std::byte>(gathered) + pe * kCount * 4, first.data(),
                                kCount * 4) == 0,
               "PE " + std::to_string(pe) + " has other bits");
    }
    // Within rounding of the sum in double.
    std::vector<double> exact(kCount, 0.0);
    for (int pe = 0; pe < ctx.size; ++pe) {
      std::mt19937 peer(static_cast<unsigned>(pe) * 7919u + 1u);
      for (std::uint64_t i = 0; i < kCount; ++i) exact[i] += uniform(peer) * (1 + pe);
    }
    for (std::uint64_t i = 0; i < kCount; ++i) {
      if (std::abs(exact[i] - first[i]) > 1e-5 * ctx.size * ctx.size) {
        CHECK_PE(ctx, false, "element " + std::to_string(i) + " far from the exact sum");
        break;
      }
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(ReductionsTest, BroadcastFromEveryRootInPlaceAndQueuedOnAStream) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr std::uint64_t kBytes = (600 << 10) + 13;  // several chunks, an odd tail
    Allocation output = MustAllocate(ctx, kBytes);
    std::vector<std::uint8_t> input(kBytes);
    const auto pattern = [](int root, std::uint64_t i) {
      return static_cast<std::uint8_t>((i * 131 + static_cast<std::uint64_t>(root) * 17) >> 2);
    };
    for (int root = 0; root < ctx.size; ++root) {
      for (std::uint64_t i = 0; i < kBytes; ++i) input[i] = ctx.rank == root ? pattern(root, i) : 0;
      const bool in_place = root % 2 == 1;
      if (in_place) std::memcpy(output.data, input.data(), kBytes);
      CHECK_PE_OK(ctx, Broadcast(Rt(), View(output), in_place ? output.data : input.data(),
                                 kBytes, root, "uint8", {}));
      for (std::uint64_t i = 0; i < kBytes; ++i) {
        if (As<std::uint8_t>(output)[i] != pattern(root, i)) {
          CHECK_PE(ctx, false, "root " + std::to_string(root) + ": byte " + std::to_string(i));
          break;
        }
      }
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    }
    // Queued on a stream with rank skew: an all_reduce after a broadcast, in stream order.
    Allocation sums = MustAllocate(ctx, 4096 * 8);
    std::vector<std::int64_t> ones(4096, 1);
    for (std::uint64_t i = 0; i < kBytes; ++i) input[i] = ctx.rank == 0 ? pattern(0, i) : 0;
    auto stream = host::HostStream::Create<CallSite::kHostThread>();
    std::this_thread::sleep_for(std::chrono::milliseconds(ctx.rank * 20));
    CHECK_PE_OK(ctx, Broadcast(Rt(), View(output), input.data(), kBytes, 0, "uint8",
                               StreamRef{stream.get()}));
    CHECK_PE_OK(ctx, AllReduce(Rt(), View(sums), ones.data(), 4096 * 8, Code(ReduceOp::kSum),
                               "int64", StreamRef{stream.get()}));
    CHECK_PE_OK(ctx, stream->Synchronize<CallSite::kHostThread>(60s));
    CHECK_PE(ctx, As<std::uint8_t>(output)[kBytes - 1] == pattern(0, kBytes - 1), "queued broadcast");
    for (std::uint64_t i = 0; i < 4096; ++i) {
      if (As<std::int64_t>(sums)[i] != ctx.size) {
        CHECK_PE(ctx, false, "queued all_reduce element " + std::to_string(i));
        break;
      }
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(ReductionsTest, RejectionsChangeNothingAndDifferingCallsFailOnEveryPe) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const std::uint64_t count = 8 * ctx.size;
    Allocation output = MustAllocate(ctx, count * 4);
    std::vector<float> input(count * ctx.size, 1.0f);
    std::memset(output.data, 0x5A, output.bytes);
    const auto untouched = [&] {
      for (std::uint64_t i = 0; i < output.bytes; ++i) {
        if (As<std::uint8_t>(output)[i] != 0x5A) return false;
      }
      return true;
    };
    const Status bitwise = AllReduce(Rt(), View(output), input.data(), count * 4,
                                     Code(ReduceOp::kXor), "float32", {});
    CHECK_PE(ctx, bitwise.code() == ErrorCode::kInvalidArgument, bitwise.ToString());
    CHECK_PE(ctx, Contains(bitwise.message(), "all_reduce op must be sum, prod, min or max for float32"),
             bitwise.message());
    const Status unknown = AllReduce(Rt(), View(output), input.data(), count * 4, 42, "float32", {});
    CHECK_PE(ctx, Contains(unknown.message(), "all_reduce op must be one of sum"), unknown.message());
    const Status dtype = AllReduce(Rt(), View(output), input.data(), count * 4, 0, "complex64", {});
    CHECK_PE(ctx, Contains(dtype.message(), "all_reduce dtype must be one of float16"), dtype.message());
    const Status small = AllReduce(Rt(), Sub(output, 0, count * 4 - 4), input.data(), count * 4,
                                   0, "float32", {});
    CHECK_PE(ctx, Contains(small.message(), "output byte size must be input byte size"),
             small.message());
    const Status scatter = ReduceScatter(Rt(), View(output), input.data(),
                                         count * 4 * ctx.size + 4, 0, "float32", {});
    CHECK_PE(ctx, Contains(scatter.message(), "input byte size must be output byte size * team size"),
             scatter.message());
    const Status root = Broadcast(Rt(), View(output), input.data(), count * 4, ctx.size,
                                  "float32", {});
    CHECK_PE(ctx, Contains(root.message(), "broadcast root must be a PE of the team"),
             root.message());
    CHECK_PE(ctx, untouched(), "a rejected call wrote the output");
    if (ctx.size > 1) {
      // Calls that differ across PEs: the operator, then the root. Every PE fails, in step.
      const Status op = AllReduce(Rt(), View(output), input.data(), count * 4,
                                  ctx.rank == 0 ? 2 : 3, "float32", {});
      CHECK_PE(ctx, op.code() == ErrorCode::kCollectiveMismatch, op.ToString());
      CHECK_PE(ctx, Contains(op.message(), "field=arguments"), op.message());
      const Status roots = Broadcast(Rt(), View(output), input.data(), count * 4, ctx.rank % 2,
                                     "float32", {});
      CHECK_PE(ctx, roots.code() == ErrorCode::kCollectiveMismatch, roots.ToString());
      CHECK_PE(ctx, untouched(), "a mismatched call wrote the output");
    }
    if (ctx.size > 1) {
      // A call refused on PE 0 only keeps its place (docs/architecture.md, "A refused call keeps
      // its place"): PE 0 reports its own reason, every other PE names it, and the next calls
      // pair with each other.
      const bool refuses = ctx.rank == 0;
      auto check_refused = [&](const Status& status, const std::string& reason) {
        if (refuses) {
          CHECK_PE(ctx, status.code() == ErrorCode::kInvalidArgument &&
                            Contains(status.message(), reason), status.ToString());
        } else {
          CHECK_PE(ctx, status.code() == ErrorCode::kCollectiveMismatch &&
                            Contains(status.message(), "was refused on PE 0: INVALID_ARGUMENT: " +
                                                           reason),
                   status.ToString());
        }
      };
      check_refused(Broadcast(Rt(), View(output), input.data(), count * 4,
                              refuses ? ctx.size : 0, "float32", {}),
                    "broadcast root must be a PE of the team");
      check_refused(AllReduce(Rt(), View(output), input.data(), count * 4, 0,
                              refuses ? "complex64" : "float32", {}),
                    "all_reduce dtype must be one of");
      check_refused(AllReduce(Rt(), View(output), input.data(), refuses ? 0 : count * 4, 0,
                              "float32", {}),
                    "output byte size must be input byte size");
      check_refused(ReduceScatter(Rt(), View(output), input.data(),
                                  count * 4 * ctx.size + (refuses ? 4 : 0), 0, "float32", {}),
                    "input byte size must be output byte size * team size");
      CHECK_PE(ctx, untouched(), "a refused call wrote the output");
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    }
    // Still in step.
    CHECK_PE_OK(ctx, AllReduce(Rt(), View(output), input.data(), count * 4, 0, "float32", {}));
    CHECK_PE(ctx, As<float>(output)[count - 1] == static_cast<float>(ctx.size), "sum after rejections");
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Pes, ReductionsTest, ::testing::Values(1, 2, 3, 4, 5, 8));

}  // namespace
}  // namespace hyper_parallel::shmem::testing
