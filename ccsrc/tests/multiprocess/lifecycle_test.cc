// Runtime lifecycle across real PE processes: re-initialisation, configuration agreement.
#include <gtest/gtest.h>

#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

TEST(Lifecycle, ReinitStartsANewLifecycleWithANewHeapSize) {
  EXPECT_ALL_PES_PASS(RunPes({4, 120s, {{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "20"}}},
                                  [](PeContext& ctx) {
    ::setenv("HYPER_PARALLEL_SHMEM_HEAP_SIZE", "1048576", 1);
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation first = MustAllocate(ctx, 4096);
    const std::int64_t value = ctx.rank;
    CHECK_PE_OK(ctx, Rt().Put(Sub(first, 0, 8), &value, (ctx.rank + 1) % ctx.size, {}));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    CHECK_PE(ctx, Rt().state() == RuntimeState::kUninitialized, "back to uninitialized");

    ::setenv("HYPER_PARALLEL_SHMEM_HEAP_SIZE", "8388608", 1);
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const Diagnostics d = Rt().Snapshot();
    CHECK_PE(ctx, d.lifecycle == 2, "second lifecycle");
    CHECK_PE(ctx, d.heap.heap_bytes == 8388608, "config re-read at init");
    Allocation second = MustAllocate(ctx, 6 << 20);
    CHECK_PE(ctx, second.id > first.id, "ids keep increasing");
    std::int64_t sink = 0;
    Status stale = Rt().Get(&sink, Sub(first, 0, 8), 0, {});
    CHECK_PE(ctx, stale.code() == ErrorCode::kStaleLifecycle, stale.ToString());
    CHECK_PE_OK(ctx, Rt().Put(Sub(second, (6 << 20) - 8, 8), &value, (ctx.rank + 1) % ctx.size, {}));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    CHECK_PE(ctx, As<std::int64_t>(second)[(6 << 20) / 8 - 1] == (ctx.rank + ctx.size - 1) % ctx.size,
             "the new, larger heap is shared");
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(Lifecycle, PesThatDisagreeOnHeapSizeAllFailAndCanRetry) {
  EXPECT_ALL_PES_PASS(RunPes({3, 120s, {{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "20"}}},
                                  [](PeContext& ctx) {
    ::setenv("HYPER_PARALLEL_SHMEM_HEAP_SIZE", ctx.rank == 1 ? "2097152" : "1048576", 1);
    Status status = ctx.InitRuntime();
    CHECK_PE(ctx, status.code() == ErrorCode::kInvalidConfig, status.ToString());
    CHECK_PE(ctx, Contains(status.message(), "PEs disagree on the configuration"),
             status.message());
    // The setting that differs, named with its variable, and the two values: no dumps.
    const std::string theirs = ctx.rank == 1 ? "1048576" : "2097152";
    const std::string ours = ctx.rank == 1 ? "2097152" : "1048576";
    CHECK_PE(ctx, Contains(status.message(),
                           "setting=heap_bytes (HYPER_PARALLEL_SHMEM_HEAP_SIZE), pe=" +
                               std::string(ctx.rank == 1 ? "0" : "1") + ", theirs=" + theirs +
                               ", ours=" + ours),
             status.message());
    CHECK_PE(ctx, status.message().size() < 200, status.message());
    CHECK_PE(ctx, Rt().state() == RuntimeState::kUninitialized, "rolled back");
    CHECK_PE(ctx, OwnSegmentCount() == 0, "no segment after a failed init");
    ::setenv("HYPER_PARALLEL_SHMEM_HEAP_SIZE", "1048576", 1);
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    CHECK_PE_OK(ctx, Rt().Shutdown());
    return 0;
  }));
}

TEST(Lifecycle, ShutdownWithLiveAllocationIsRefusedOnEveryPe) {
  EXPECT_ALL_PES_PASS(RunPes({2, 120s, {{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "20"}}},
                                  [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    // Both PEs still hold b: both must refuse, and neither may tear anything down.
    Allocation a = MustAllocate(ctx, 64);
    Allocation b = MustAllocate(ctx, 64);
    CHECK_PE_OK(ctx, Rt().Free(View(a)));
    Status refused = Rt().Shutdown();
    CHECK_PE(ctx, refused.code() == ErrorCode::kInvalidState, refused.ToString());
    CHECK_PE(ctx, Contains(refused.message(), "pes_with_live_allocations=[0,1]"),
             refused.message());
    CHECK_PE(ctx, Rt().state() == RuntimeState::kReady, "still ready");
    CHECK_PE_OK(ctx, Rt().Free(View(b)));
    CHECK_PE_OK(ctx, Rt().Shutdown());
    return 0;
  }));
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
