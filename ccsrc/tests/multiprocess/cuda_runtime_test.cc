// The whole Runtime on the CUDA backend: heaps exported and opened as IPC handles, copies
// (batches as the multi-block copy kernel) and 64-bit signals on streams, polling waits that
// report a timeout, the descriptor-checked collectives, all_gather and MegaMoE's kernels, device
// identity and drift, and clean lifecycles. PEs are forked processes. Each check runs over the
// fake CUDA layer (testing/fake_cuda/, whose device memory is host shared memory) and, where it
// can be written the same way, over the real CUDA layer with 2 and 4 PEs sharing GPU 0; the
// real layer's cases skip, naming the reason, where MakeCudaRuntimeApi answers
// UNSUPPORTED_CAPABILITY (scripts/gpu_check.sh runs them on a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "testing/fake_cuda/require_cuda.h"
#include "tests/multiprocess/cuda_layers.h"
#include "tests/multiprocess/device_backend_checks.h"
#include "tests/multiprocess/device_reduction_checks.h"
#include "tests/multiprocess/team_checks.h"

namespace hyper_parallel::shmem::testing {
namespace {

// Skips the test, saying why, where the real layer is unusable here (fails it where
// HPS_TEST_REQUIRE_CUDA=1); fails it where the probe itself failed. Asked in a child: this
// process must not initialise CUDA before the PEs fork.
#define SKIP_UNLESS_USABLE(layer)                                                 \
  do {                                                                            \
    if ((layer) == CudaLayer::kReal) {                                            \
      const RealCudaProbe& probe = ProbeRealCuda();                               \
      if (probe.unsupported) {                                                    \
        HPS_SKIP_UNLESS_CUDA_REQUIRED("no usable CUDA device: " + probe.reason);  \
      }                                                                           \
      ASSERT_TRUE(probe.usable) << probe.reason;                                  \
    }                                                                             \
  } while (false)

struct Case {
  CudaLayer layer;
  int pes;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& param) {
  return std::to_string(param.param.pes) + "pes";
}

class CudaRuntime : public ::testing::TestWithParam<Case> {};

TEST_P(CudaRuntime, RmaCollectivesAndKernels) {
  const Case c = GetParam();
  SKIP_UNLESS_USABLE(c.layer);
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(c.pes, "20", 8 << 20), [c](PeContext& ctx) {
    cuda::FakeCudaApi* fake = nullptr;
    CHECK_PE_OK(ctx,
                ctx.InitRuntime(std::chrono::seconds(20), CudaBackendOn(c.layer, nullptr, &fake)));
    const Diagnostics state = Rt().Snapshot();
    CHECK_PE(ctx, state.backend == "cuda", "backend " + state.backend);
    CHECK_PE(ctx, state.device == "cuda:0", "device " + state.device);
    // The fake's memory is host memory; the real heap is device memory.
    const Status host = Rt().RequireHostAddressableHeap("empty");
    if (c.layer == CudaLayer::kFake) {
      CHECK_PE_OK(ctx, host);
    } else {
      CHECK_PE(ctx, host.code() == ErrorCode::kUnsupportedCapability, host.ToString());
    }
    CheckDeviceBackend(ctx, /*refuses_wide_signals=*/false);
    if (fake != nullptr) {  // each of the two all_gathers' puts went as one batch
      const std::vector<std::string> calls = fake->calls();
      const auto batches = std::count_if(calls.begin(), calls.end(), [](const std::string& call) {
        return call.rfind("CopyBlocksAsync ", 0) == 0;
      });
      CHECK_PE(ctx, batches == 2, std::to_string(batches) + " batched copies");
    }
    CheckDeviceAllToAll(ctx);
    if (ctx.size >= 4) CheckTeams(ctx);
    // Signal words are 64-bit here.
    Allocation word = MustAllocate(ctx, 8);
    const Status narrow = Rt().Signal(Sub(word, 0, 4), SignalWidth::k32, 1, ctx.rank,
                                      SignalOp::kSet, {});
    CHECK_PE(ctx, narrow.code() == ErrorCode::kUnsupportedCapability, narrow.ToString());
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// Reductions run staged on the device (the element-wise kernel; the fake runs it on the CPU),
// over several passes of a 4 KiB workspace; all_gather_v and split all_to_all exchange their
// sizes over the control block's round words.
TEST_P(CudaRuntime, ReductionsAndVariableSizes) {
  const Case c = GetParam();
  SKIP_UNLESS_USABLE(c.layer);
  PeLaunch launch = LaunchPes(c.pes, "20", 8 << 20);
  launch.env["HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE"] = "4096";
  EXPECT_ALL_PES_PASS(RunPes(launch, [c](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20), CudaBackendOn(c.layer)));
    CheckDeviceVariableCollectives(ctx);
    CheckDeviceReductions(ctx);
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(FakeLayer, CudaRuntime,
                         ::testing::Values(Case{CudaLayer::kFake, 2}, Case{CudaLayer::kFake, 3},
                                           Case{CudaLayer::kFake, 4}),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(RealLayer, CudaRuntime,
                         ::testing::Values(Case{CudaLayer::kReal, 2}, Case{CudaLayer::kReal, 4}),
                         CaseName);

// The timeout bounds the Runtime's init as well as the wait under test. On the real layer each
// PE creates a CUDA context on GPU 0 during init, which may take seconds (two or four contexts
// on one GPU, a loaded machine): 1 s made that init flaky, so a layer that may start slowly gets
// 5 s. The slow fake shows it: its PE 1 starts its layer 1.5 s after PE 0 (as a context may),
// which a 1 s timeout does not survive.
struct WaitCase {
  CudaLayer layer;
  std::chrono::milliseconds pe1_start_delay{0};
  const char* name;
};

// The timeout (seconds, as the variable's text) for a layer that starts at once or may not.
std::string InitSafeTimeout(const WaitCase& c) {
  return c.layer == CudaLayer::kReal || c.pe1_start_delay.count() > 0 ? "5" : "1";
}

class CudaRuntimeWaits : public ::testing::TestWithParam<WaitCase> {};

TEST_P(CudaRuntimeWaits, AWaitThatGivesUpIsATimeoutNamingWhatItSaw) {
  const WaitCase c = GetParam();
  SKIP_UNLESS_USABLE(c.layer);
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, InitSafeTimeout(c), 8 << 20), [c](PeContext& ctx) {
    BackendFactory layer = CudaBackendOn(c.layer);
    if (ctx.rank == 1 && c.pe1_start_delay.count() > 0) {
      layer = [layer, delay = c.pe1_start_delay](BackendKind kind, std::unique_ptr<Backend>* out) {
        std::this_thread::sleep_for(delay);  // a context that takes this long to create
        return layer(kind, out);
      };
    }
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20), layer));
    Allocation flag = MustAllocate(ctx, 8);
    const std::int64_t three = 3;
    CHECK_PE_OK(ctx, Rt().Put(View(flag), &three, ctx.rank, {}));
    const Status waited = Rt().WaitSignal(View(flag), SignalWidth::k64, 7, Comparison::kEq, {});
    CHECK_PE(ctx, waited.code() == ErrorCode::kTimeout, waited.ToString());
    CHECK_PE(ctx, Contains(waited.ToString(), "observed=3") &&
                      Contains(waited.ToString(), "expected=7"),
             waited.ToString());
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // a wait's timeout is not terminal
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(
    Layers, CudaRuntimeWaits,
    ::testing::Values(WaitCase{CudaLayer::kFake, std::chrono::milliseconds(0), "fake"},
                      WaitCase{CudaLayer::kFake, std::chrono::milliseconds(1500), "slow_fake"},
                      WaitCase{CudaLayer::kReal, std::chrono::milliseconds(0), "real"}),
    [](const ::testing::TestParamInfo<WaitCase>& param) { return std::string(param.param.name); });

// The fake only (its streams run each operation as it is enqueued, so every wait has passed by
// the time the records run out): waits on a caller's stream beyond the 1024 wait records, with
// no synchronisation between them, reuse the records of waits that passed.
// A PE's exported heap outlives every peer's mapping of it: close unmaps the peers' heaps on
// every PE, meets at a barrier, and only then frees. Over the fake (whose Free refuses memory
// still open through IPC anywhere), PE 1 is slow to close its mappings; a PE that freed its
// heap as soon as it had closed its own mappings would free it under PE 1's.
TEST(CudaRuntimeClose, AHeapIsFreedOnlyAfterEveryPeerClosedItsMapping) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(3, "20", 8 << 20), [](PeContext& ctx) {
    cuda::FakeCudaApi* fake = nullptr;
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20),
                                     CudaBackendOn(CudaLayer::kFake, nullptr, &fake)));
    Allocation data = MustAllocate(ctx, 64);
    Fill(ctx, data, static_cast<unsigned char>(ctx.rank));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    if (ctx.rank == 1) fake->DelayNextIpcClose(std::chrono::milliseconds(500));
    const int freed = cuda::FakeCudaApi::FreedAllocations();
    FreeAllAndShutdown(ctx);  // fails where a heap is freed while PE 1 still has it open
    // And the heap was freed, not kept (close confirmed that no peer has it open).
    CHECK_PE(ctx, cuda::FakeCudaApi::FreedAllocations() == freed + 1,
             std::to_string(cuda::FakeCudaApi::FreedAllocations() - freed) + " allocations freed");
    return 0;
  }));
}

// Where no barrier confirmed that the peers closed their mappings (here an init that fails
// after the heaps' handles were handed out: PE 1 cannot open PE 0's heap), a heap is kept until
// the process ends, never freed under a mapping a peer may still hold.
TEST(CudaRuntimeClose, AFailedInitKeepsTheHeapItHandedOut) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, "2", 8 << 20), [](PeContext& ctx) {
    const int rank = ctx.rank;
    BackendFactory factory = [rank](BackendKind, std::unique_ptr<Backend>* out) {
      auto fake = std::make_unique<cuda::FakeCudaApi>();
      if (rank == 1) {
        fake->FailNext("IpcOpen", Status::Assertion(ErrorCode::kBackendError, "injected"));
      }
      *out = std::make_unique<cuda::CudaBackend>(std::move(fake));
      return Status::Ok();
    };
    const int freed = cuda::FakeCudaApi::FreedAllocations();
    const Status init = ctx.InitRuntime(std::chrono::seconds(20), factory);
    CHECK_PE(ctx, !init.ok(), "init succeeded");
    CHECK_PE(ctx, cuda::FakeCudaApi::FreedAllocations() == freed,
             std::to_string(cuda::FakeCudaApi::FreedAllocations() - freed) +
                 " handed-out heaps freed after a failed init");
    return 0;
  }));
}

TEST(CudaRuntimeWaitRecords, WaitsThatPassedGiveTheirRecordsBackWithoutASync) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, "20", 8 << 20), [](PeContext& ctx) {
    cuda::CudaApi* api = nullptr;
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20),
                                     CudaBackendOn(CudaLayer::kFake, &api)));
    void* stream = nullptr;
    CHECK_PE_OK(ctx, api->StreamCreate(&stream));
    Allocation flag = MustAllocate(ctx, 8);
    const std::int64_t one = 1;
    CHECK_PE_OK(ctx, Rt().Put(View(flag), &one, ctx.rank, {}));
    for (int i = 0; i < 3000; ++i) {
      const Status waited = Rt().WaitSignal(View(flag), SignalWidth::k64, 1, Comparison::kEq,
                                            StreamRef{stream});
      CHECK_PE(ctx, waited.ok(), "wait " + std::to_string(i) + ": " + waited.ToString());
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);  // synchronises the stream; the fake's streams are handles only
    return 0;
  }));
}

// The fake only: torch's default CUDA stream reaches the backend as cudaStreamLegacy (the
// binding's CallerStream(null)); work on it is the caller's, kept and synchronised at Quiesce.
TEST(CudaRuntimeCallerStreams, TheLegacyDefaultStreamIsACallerStream) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, "20", 8 << 20), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20), CudaBackendOn(CudaLayer::kFake)));
    const StreamRef legacy = cuda::CallerStream(nullptr);
    CHECK_PE(ctx, legacy.native != nullptr, "the legacy stream is not the backend's own");
    Allocation data = MustAllocate(ctx, 64);
    Allocation flag = MustAllocate(ctx, 8);
    const std::int64_t zero = 0;
    CHECK_PE_OK(ctx, Rt().Put(View(flag), &zero, ctx.rank, {}));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    const std::int64_t mine = 1000 + ctx.rank;
    const int next = (ctx.rank + 1) % ctx.size, previous = (ctx.rank + ctx.size - 1) % ctx.size;
    CHECK_PE_OK(ctx, Rt().Put(Sub(data, 0, 8), &mine, next, legacy));
    CHECK_PE_OK(ctx, Rt().Signal(View(flag), SignalWidth::k64, 1, next, SignalOp::kAdd, legacy));
    CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, 1, Comparison::kGe, legacy));
    std::int64_t got = 0;
    CHECK_PE_OK(ctx, Rt().Get(&got, Sub(data, 0, 8), ctx.rank, legacy));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // synchronises the caller's streams first
    CHECK_PE(ctx, got == 1000 + previous, "got " + std::to_string(got));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// The fake only: it moves the current device behind the Runtime's back.
TEST(CudaRuntimeDevice, TheDeviceIsFrozenAtInitAndLifecyclesRepeat) {
  EXPECT_ALL_PES_PASS(RunPes(LaunchPes(2, "20", 8 << 20), [](PeContext& ctx) {
    for (int cycle = 0; cycle < 2; ++cycle) {
      cuda::FakeCudaApi* api = nullptr;
      CHECK_PE_OK(ctx, ctx.InitRuntime(std::chrono::seconds(20),
                                       CudaBackendOn(CudaLayer::kFake, nullptr, &api)));
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
