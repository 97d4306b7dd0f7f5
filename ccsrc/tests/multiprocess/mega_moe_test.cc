// MegaMoE dispatch and combine kernels across real PEs: every routed row reaches its expert's
// owner at the layout's place, the owner's results come back to the source's expert-sorted
// place, over several steps with monotonic counters, including experts nobody routes to, a PE
// that receives nothing, and row counts that are not a multiple of the chunk.
#include <gtest/gtest.h>

#include <random>

#include "backends/host/host_stream.h"
#include "ops/mega_moe/kernels.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;
using ops::kMoeCounterStride;

constexpr int kHidden = 6;  // floats per row
constexpr std::uint64_t kRowBytes = kHidden * sizeof(float);

float Value(int pe, std::int64_t row, int column, int step) {
  return static_cast<float>(pe * 100000 + row * 10 + column + step * 0.5);
}

// What an "expert" computes on a row: something that shows which expert ran it.
float Expert(float value, int expert) { return 2.0f * value + static_cast<float>(expert); }

struct Case {
  int pes;
  int experts;
  int chunk;
  bool skewed;  // every row of every PE to expert 0; the other owners receive nothing
};

class MoeKernels : public ::testing::TestWithParam<Case> {};

TEST_P(MoeKernels, EveryRowReachesItsExpertAndComesBack) {
  const Case c = GetParam();
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(c.pes, "30", 16 << 20), [c](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const int locals = c.experts / c.pes;
    const std::int64_t capacity = 4096;  // rows; more than any step below routes to one PE
    Allocation recv = MustAllocate(ctx, capacity * kRowBytes, 4096);
    Allocation ret = MustAllocate(ctx, capacity * kRowBytes, 4096);
    Allocation counters = MustAllocate(ctx, (2 * locals + 1) * kMoeCounterStride);
    Allocation gathered = MustAllocate(ctx, c.pes * c.experts * sizeof(std::int64_t));
    std::memset(counters.data, 0, counters.bytes);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // counters zeroed everywhere before any add
    const std::uint64_t dispatch_counters = 0, done_counters = locals * kMoeCounterStride;
    const std::uint64_t return_counter = 2 * locals * kMoeCounterStride;
    auto counter_view = [&](std::uint64_t offset) { return Sub(counters, offset, 8); };
    auto combine_stream = host::HostStream::Create<CallSite::kHostThread>();
    std::mt19937 rng(1234 + ctx.rank);
    std::vector<std::int64_t> dispatch_target(locals, 0), done_target(locals, 0);
    std::int64_t return_target = 0;
    for (int step = 0; step < 4; ++step) {
      // Route: a random count per expert (some zero, some above a chunk), or all to expert 0.
      std::vector<std::int64_t> mine(c.experts, 0);
      for (int e = 0; e < c.experts; ++e) {
        mine[e] = c.skewed ? (e == 0 ? 37 + step : 0) : static_cast<std::int64_t>(rng() % 11);
      }
      CHECK_PE_OK(ctx, AllGather(Rt(), View(gathered), mine.data(), c.experts * 8, {}));
      std::vector<std::int64_t> counts(As<std::int64_t>(gathered),
                                       As<std::int64_t>(gathered) + c.pes * c.experts);
      const ops::MoeLayout layout(
          ops::MoeShape{c.pes, c.experts, kRowBytes, static_cast<std::uint64_t>(c.chunk)},
          counts);
      CHECK_PE_OK(ctx, layout.Validate());
      CHECK_PE(ctx, layout.MaxRecvRows() <= capacity, "capacity");
      // This PE's rows, sorted by expert.
      std::vector<float> rows(layout.SendRows(ctx.rank) * kHidden);
      for (std::int64_t r = 0; r < layout.SendRows(ctx.rank); ++r) {
        for (int col = 0; col < kHidden; ++col) rows[r * kHidden + col] = Value(ctx.rank, r, col, step);
      }
      std::vector<float> results(std::max<std::int64_t>(1, layout.RecvRows(ctx.rank)) * kHidden);
      for (int l = 0; l < locals; ++l) {
        dispatch_target[l] += layout.ExpectedChunks(ctx.rank, l);
        done_target[l] += 1;
      }
      return_target += c.experts;
      // Combine first, on its own stream: it waits for each expert's "done" in turn.
      ops::CombinePlan combine{reinterpret_cast<const std::byte*>(results.data()), 0, 0, 0,
                               done_target};
      CHECK_PE_OK(ctx, Rt().Launch("moe_combine", {View(ret), View(counters)},
                                   StreamRef{combine_stream.get()},
                                   [layout, combine, done_counters, return_counter](
                                       data_plane::KernelApi& api,
                                                     const std::vector<std::uint64_t>& at) {
                                     ops::CombinePlan plan = combine;
                                     plan.return_offset = at[0];
                                     plan.done_offset = at[1] + done_counters;
                                     plan.return_counter_offset = at[1] + return_counter;
                                     return ops::Combine(api, layout, plan);
                                   }));
      ops::DispatchPlan dispatch{reinterpret_cast<const std::byte*>(rows.data()), 0, 0};
      CHECK_PE_OK(ctx, Rt().Launch("moe_dispatch", {View(recv), View(counters)}, {},
                                   [layout, dispatch](data_plane::KernelApi& api,
                                                      const std::vector<std::uint64_t>& at) {
                                     ops::DispatchPlan plan = dispatch;
                                     plan.recv_offset = at[0];
                                     plan.counters_offset = at[1];
                                     return ops::Dispatch(api, layout, plan);
                                   }));
      // Each local expert computes once its own rows are in, then raises its "done".
      for (int l = 0; l < locals; ++l) {
        CHECK_PE_OK(ctx, Rt().WaitSignal(counter_view(dispatch_counters + l * kMoeCounterStride),
                                         SignalWidth::k64, dispatch_target[l], Comparison::kGe, {}));
        const int expert = ctx.rank * locals + l;
        for (int source = 0; source < c.pes; ++source) {
          const std::int64_t first = layout.RecvRow(ctx.rank, l, source);
          for (std::int64_t r = 0; r < layout.Count(source, expert); ++r) {
            const float* in = As<float>(recv) + (first + r) * kHidden;
            // The row the source sent: its r-th row for this expert.
            const std::int64_t sent = layout.SendRow(source, expert) + r;
            if (in[0] != Value(source, sent, 0, step) || in[kHidden - 1] != Value(source, sent, kHidden - 1, step)) {
              CHECK_PE(ctx, false, "step " + std::to_string(step) + ": row " + std::to_string(sent) +
                                       " of pe " + std::to_string(source) + " for expert " +
                                       std::to_string(expert) + " arrived wrong");
            }
            for (int col = 0; col < kHidden; ++col) {
              results[(first + r) * kHidden + col] = Expert(in[col], expert);
            }
          }
        }
        CHECK_PE_OK(ctx, Rt().Signal(counter_view(done_counters + l * kMoeCounterStride),
                                     SignalWidth::k64, 1, ctx.rank, SignalOp::kAdd, {}));
      }
      CHECK_PE_OK(ctx, Rt().WaitSignal(counter_view(return_counter), SignalWidth::k64,
                                       return_target, Comparison::kGe, {}));
      CHECK_PE_OK(ctx, combine_stream->Synchronize<CallSite::kHostThread>(30s));
      // Every row came back through its expert.
      bool right = true;
      for (int e = 0; e < c.experts; ++e) {
        for (std::int64_t r = layout.SendRow(ctx.rank, e); r < layout.SendRow(ctx.rank, e + 1); ++r) {
          for (int col = 0; col < kHidden; ++col) {
            right = right && As<float>(ret)[r * kHidden + col] == Expert(Value(ctx.rank, r, col, step), e);
          }
        }
      }
      CHECK_PE(ctx, right, "step " + std::to_string(step) + ": results in expert-sorted order");
      // The next step reuses the receive and return buffers: every PE must be done with them.
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeKernels,
                         ::testing::Values(Case{1, 2, 4, false}, Case{2, 4, 4, false},
                                           Case{2, 4, 3, true}, Case{3, 6, 5, false},
                                           Case{4, 8, 4, false}, Case{4, 4, 128, true}),
                         [](const ::testing::TestParamInfo<Case>& shape) {
                           const Case& p = shape.param;
                           return std::to_string(p.pes) + "pes_" + std::to_string(p.experts) +
                                  "experts_chunk" + std::to_string(p.chunk) +
                                  (p.skewed ? "_skewed" : "");
                         });

}  // namespace
}  // namespace hyper_parallel::shmem::testing
