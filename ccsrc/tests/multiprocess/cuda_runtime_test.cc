// The whole Runtime on the CUDA backend's logic, over the fake CUDA layer (testing/fake_cuda/):
// heaps exported and opened as IPC handles, copies and 64-bit signals on streams, polling waits
// that report a timeout, the descriptor-checked collectives, all_gather and MegaMoE's kernels,
// device identity and drift, and clean lifecycles. PEs are forked processes; the fake's device
// memory is host shared memory. (On a GPU, scripts/gpu_check.sh runs the real CUDA layer.)
#include <gtest/gtest.h>

#include <memory>

#include "backends/cuda/cuda_backend.h"
#include "testing/fake_cuda/fake_cuda_api.h"
#include "tests/multiprocess/device_backend_checks.h"

namespace hyper_parallel::shmem::testing {
namespace {

// Every PE on one fake GPU, as several PEs may share one real GPU.
BackendFactory FakeCuda(cuda::FakeCudaApi** api = nullptr) {
  return [api](BackendKind, std::unique_ptr<Backend>* out) {
    auto fake = std::make_unique<cuda::FakeCudaApi>();
    if (api != nullptr) *api = fake.get();
    *out = std::make_unique<cuda::CudaBackend>(std::move(fake));
    return Status::Ok();
  };
}

class CudaRuntime : public ::testing::TestWithParam<int> {};

TEST_P(CudaRuntime, RmaCollectivesAndKernelsOverTheFakeCudaLayer) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(GetParam(), "20", 8 << 20), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20), FakeCuda()));
    const Diagnostics state = Rt().Snapshot();
    CHECK_PE(ctx, state.backend == "cuda", "backend " + state.backend);
    CHECK_PE(ctx, state.device == "cuda:0", "device " + state.device);
    CHECK_PE_OK(ctx, Rt().RequireHostAddressableHeap("empty"));  // the fake's memory is host
    CheckDeviceBackend(ctx, /*refuses_wide_signals=*/false);
    // Signal words are 64-bit here.
    Allocation word = MustAllocate(ctx, 8);
    const Status narrow = Rt().Signal(Sub(word, 0, 4), SignalWidth::k32, 1, ctx.rank,
                                      SignalOp::kSet, {});
    CHECK_PE(ctx, narrow.code() == ErrorCode::kUnsupportedCapability, narrow.ToString());
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Pes, CudaRuntime, ::testing::Values(2, 3, 4));

TEST(CudaRuntimeWaits, AWaitThatGivesUpIsATimeoutNamingWhatItSaw) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, "1", 8 << 20), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20), FakeCuda()));
    Allocation flag = MustAllocate(ctx, 8);
    *As<std::int64_t>(flag) = 3;
    const Status waited = Rt().WaitSignal(View(flag), SignalWidth::k64, 7, Comparison::kEq, {});
    CHECK_PE(ctx, waited.code() == ErrorCode::kTimeout, waited.ToString());
    CHECK_PE(ctx, Contains(waited.ToString(), "observed=3") &&
                      Contains(waited.ToString(), "expected=7"),
             waited.ToString());
    CHECK_PE_OK(ctx, Rt().Barrier({}));  // a wait's timeout is not terminal
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(CudaRuntimeDevice, TheDeviceIsFrozenAtInitAndLifecyclesRepeat) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, "20", 8 << 20), [](PeContext& ctx) {
    for (int cycle = 0; cycle < 2; ++cycle) {
      cuda::FakeCudaApi* api = nullptr;
      CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20), FakeCuda(&api)));
      Allocation a = MustAllocate(ctx, 64);
      api->DriftCurrentDevice(1);  // another current device behind the Runtime's back
      const Status drifted = Rt().Put(View(a), a.data, ctx.rank, {});
      CHECK_PE(ctx, drifted.code() == ErrorCode::kDeviceMismatch, drifted.ToString());
      api->DriftCurrentDevice(0);
      CHECK_PE_OK(ctx, Rt().Put(View(a), a.data, ctx.rank, {}));
      FreeAllAndShutdown(ctx);
    }
    return 0;
  }));
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
