// Threads of one PE on a device backend (over the fakes): no thread's call waits behind another
// thread's wait. PE 0 enters a barrier on one thread; PE 1 joins it only once PE 0's other
// thread has signalled it. A backend that serialised its default-stream work behind a lock held
// across the barrier's wait (or that queued the signal behind the wait on one shared stream)
// would hold that signal back until PE 1's wait timed out.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/multiprocess/cuda_layers.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

enum class Device { kCannFake, kCudaFake };

std::string DeviceName(const ::testing::TestParamInfo<Device>& param) {
  return param.param == Device::kCannFake ? "CannFake" : "CudaFake";
}

// Two PEs on `device` with a 5 s timeout: a held-back signal fails in seconds, not minutes.
PeLaunch Launch(Device device) {
  PeLaunch launch = LaunchPes(2, "5", 4 << 20, 120s);
  if (device == Device::kCannFake) {
    launch.env["HYPER_PARALLEL_SHMEM_BACKEND"] = "cann";
    launch.env["HYPER_PARALLEL_SHMEM_CANN_LIBRARY"] = HPS_FAKE_CANN_V1_5;
    launch.env["HYPER_PARALLEL_SHMEM_ACL_LIBRARY"] = HPS_FAKE_CANN_V1_5;
  }
  return launch;
}

Status Init(PeContext& ctx, Device device) {
  if (device == Device::kCudaFake) {
    return ctx.InitRuntime(std::chrono::seconds(20), CudaBackendOn(CudaLayer::kFake));
  }
  return ctx.InitRuntime();
}

class DeviceThreads : public ::testing::TestWithParam<Device> {};

TEST_P(DeviceThreads, ASignalIsNotHeldBackByAnotherThreadsBarrier) {
  const Device device = GetParam();
  EXPECT_ALL_PES_PASS(RunPes(Launch(device), [device](PeContext& ctx) {
    CHECK_PE_OK(ctx, Init(ctx, device));
    Allocation flag = MustAllocate(ctx, 8);
    Fill(ctx, flag, 0);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // the flag is zero everywhere first
    if (ctx.rank == 0) {
      Status barrier;
      std::thread waiting([&barrier] { barrier = Barrier(Rt(), {}); });
      // Once the barrier is in flight, give it time to reach its wait for PE 1.
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      while (Rt().Snapshot().collectives_in_flight == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
      }
      std::this_thread::sleep_for(200ms);
      const Status signalled =
          Rt().Signal(View(flag), SignalWidth::k64, 1, /*pe=*/1, SignalOp::kSet, {});
      waiting.join();
      CHECK_PE_OK(ctx, signalled);
      CHECK_PE_OK(ctx, barrier);
    } else {
      CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, 1, Comparison::kGe, {}));
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Fakes, DeviceThreads,
                         ::testing::Values(Device::kCannFake, Device::kCudaFake), DeviceName);

// CUDA loads kernels lazily, and a kernel's first load may wait for the kernels running on the
// device. PE 0 waits on one thread for PE 1's signal, which PE 1 sends once PE 0's other thread
// has signalled it with a kernel launched for the first time (the add kernel: nothing before
// launched it). Over the fake in lock-step mode, that launch waits for the running wait, so
// unless the backend loaded every kernel before the wait, the signal is held back until the wait
// gives up.
TEST(CudaKernelLoading, AFirstLaunchDoesNotWaitForASpinningWait) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(Device::kCudaFake), [](PeContext& ctx) {
    cuda::FakeCudaApi* fake = nullptr;
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20),
                                     CudaBackendOn(CudaLayer::kFake, nullptr, &fake)));
    Allocation flag = MustAllocate(ctx, 8);
    Fill(ctx, flag, 0);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // the flag is zero everywhere first
    const std::vector<std::string> calls = fake->calls();
    const bool added_before = std::any_of(calls.begin(), calls.end(), [](const std::string& call) {
      return call.rfind("AddValue64", 0) == 0;
    });
    CHECK_PE(ctx, !added_before, "the add kernel was launched before the test's signal");
    fake->FirstLaunchSynchronises();
    if (ctx.rank == 0) {
      Status waited;
      std::atomic<bool> waiting{false};
      std::thread waiter([&] {
        waiting = true;
        waited = Rt().WaitSignal(View(flag), SignalWidth::k64, 1, Comparison::kGe, {});
      });
      while (!waiting) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(200ms);  // the wait is spinning by now
      const Status signalled =
          Rt().Signal(View(flag), SignalWidth::k64, 1, /*pe=*/1, SignalOp::kAdd, {});
      waiter.join();
      CHECK_PE_OK(ctx, signalled);
      CHECK_PE_OK(ctx, waited);
    } else {
      CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, 1, Comparison::kGe, {}));
      CHECK_PE_OK(ctx, Rt().Signal(View(flag), SignalWidth::k64, 1, /*pe=*/0, SignalOp::kAdd, {}));
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
