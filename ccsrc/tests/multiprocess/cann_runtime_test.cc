// The whole Runtime on the CANN backend, over the fake vendor library (testing/fake_cann/):
// init through the vendor's unique id, the protection chain, RMA and signals on the backend's
// stream, the descriptor-checked collectives (barrier, all_gather, a mismatch), the MegaMoE
// dispatch and combine kernels on the kernel-side API, and a clean shutdown that leaves no
// shared memory behind. Real PEs are forked processes; each loads the fake through the
// library override variables.
#include <gtest/gtest.h>

#include <dirent.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/multiprocess/device_backend_checks.h"
#include "tests/multiprocess/device_reduction_checks.h"
#include "tests/multiprocess/team_checks.h"

namespace hyper_parallel::shmem::testing {
namespace {

PeLaunch CannPes(int size, const char* library) {
  PeLaunch launch = LaunchPes(size, "20", 8 << 20);
  launch.env["HYPER_PARALLEL_SHMEM_BACKEND"] = "cann";
  launch.env["HYPER_PARALLEL_SHMEM_CANN_LIBRARY"] = library;
  launch.env["HYPER_PARALLEL_SHMEM_ACL_LIBRARY"] = library;
  return launch;
}

// The fake's segments left in /dev/shm by these PEs. A segment is named after the PE that made
// its unique id, so segments of jobs that other tests run at the same time are not counted.
int FakeSegmentsOf(const std::vector<PeOutcome>& pes) {
  int count = 0;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* entry = ::readdir(dir)) {
      for (const PeOutcome& pe : pes) {
        const std::string prefix = "hps_fake_cann_" + std::to_string(pe.pid) + "_";
        if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) ++count;
      }
    }
    ::closedir(dir);
  }
  return count;
}

struct Case {
  int pes;
  const char* library;
};

class CannRuntime : public ::testing::TestWithParam<Case> {};

TEST_P(CannRuntime, RmaCollectivesAndKernelsOverTheFakeVendorLibrary) {
  const Case c = GetParam();
  const std::vector<PeOutcome> pes = RunPes(CannPes(c.pes, c.library), [c](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    const Diagnostics state = Rt().Snapshot();
    CHECK_PE(ctx, state.backend == "cann", "backend " + state.backend);
    CHECK_PE(ctx, state.device == "npu:" + std::to_string(ctx.rank), "device " + state.device);
    // The fake's heap is host memory, mapped here: a binding may make host tensors over it.
    CHECK_PE_OK(ctx, Rt().RequireHostAddressableHeap("empty"));
    CheckDeviceBackend(ctx, /*refuses_wide_signals=*/true);
    CheckDeviceAllToAll(ctx);
    if (ctx.size >= 4) CheckTeams(ctx);
    FreeAllAndShutdown(ctx);
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(pes));
  EXPECT_EQ(FakeSegmentsOf(pes), 0) << "the fake's shared memory was left behind";
}

// all_gather_v and split all_to_all exchange their sizes over the control block's round words;
// the reductions combine on the CPU through host memory (CANN's host API has no kernel of
// ours), over several passes of a 4 KiB workspace.
TEST_P(CannRuntime, ReductionsAndVariableSizes) {
  const Case c = GetParam();
  PeLaunch launch = CannPes(c.pes, c.library);
  launch.env["HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE"] = "4096";
  const std::vector<PeOutcome> pes = RunPes(launch, [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    CheckDeviceVariableCollectives(ctx);
    CheckDeviceReductions(ctx);
    FreeAllAndShutdown(ctx);
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(pes));
  EXPECT_EQ(FakeSegmentsOf(pes), 0) << "the fake's shared memory was left behind";
}

// The fake's control functions, from the copy the backend loaded in this process.
template <class Fn>
Fn FakeControl(const char* name) {
  void* library = ::dlopen(HPS_FAKE_CANN_V1_5, RTLD_NOW | RTLD_NOLOAD);
  Fn fn = library == nullptr ? nullptr : reinterpret_cast<Fn>(::dlsym(library, name));
  if (library != nullptr) ::dlclose(library);  // the backend's reference keeps it loaded
  return fn;
}

TEST(CannRuntimeLifecycle, ReinitCyclesDeviceDriftAndAFinalizeThatFails) {
  const std::vector<PeOutcome> pes = RunPes(CannPes(2, HPS_FAKE_CANN_V1_5), [](PeContext& ctx) {
    // Three lifecycles: each initialises the vendor anew and leaves nothing behind.
    for (int cycle = 0; cycle < 3; ++cycle) {
      CHECK_PE_OK(ctx, ctx.InitRuntime());
      Allocation a = MustAllocate(ctx, 1024 * (cycle + 1));
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
      CHECK_PE_OK(ctx, Rt().Free(View(a)));
      CHECK_PE_OK(ctx, Rt().Shutdown());
    }
    // The device is frozen at init: another current device is DEVICE_MISMATCH, until restored.
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation a = MustAllocate(ctx, 64);
    auto set_device = FakeControl<void (*)(int)>("hps_fake_set_device");
    CHECK_PE(ctx, set_device != nullptr, "the fake's control API");
    set_device(ctx.rank + 4);
    const Status drifted = Rt().Put(View(a), a.data, ctx.rank, {});
    CHECK_PE(ctx, drifted.code() == ErrorCode::kDeviceMismatch, drifted.ToString());
    set_device(ctx.rank);
    CHECK_PE_OK(ctx, Rt().Put(View(a), a.data, ctx.rank, {}));
    CHECK_PE_OK(ctx, Rt().Free(View(a)));
    // A finalize that fails (on every PE) is terminal: the Runtime is failed for good.
    auto fail_at = FakeControl<void (*)(const char*, int, int)>("hps_fake_fail_at");
    CHECK_PE(ctx, fail_at != nullptr, "the fake's control API");
    fail_at("aclshmemx_finalize", 1, -3);
    const Status closed = Rt().Shutdown();
    CHECK_PE(ctx, closed.code() == ErrorCode::kBackendError &&
                      Contains(closed.ToString(), "ACLSHMEM_SMEM_ERROR"),
             closed.ToString());
    CHECK_PE(ctx, Rt().state() == RuntimeState::kFailed, "failed after the finalize");
    const Status again = ctx.InitRuntime();
    CHECK_PE(ctx, again.code() == ErrorCode::kBackendError, again.ToString());
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(pes));
  EXPECT_EQ(FakeSegmentsOf(pes), 0) << "the fake's shared memory was left behind";
}

INSTANTIATE_TEST_SUITE_P(Generations, CannRuntime,
                         ::testing::Values(Case{2, HPS_FAKE_CANN_V1_5}, Case{3, HPS_FAKE_CANN_V1_5},
                                           Case{4, HPS_FAKE_CANN_V1_5},
                                           Case{2, HPS_FAKE_CANN_V1_0}),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           return std::to_string(param.param.pes) + "pes_" +
                                  (std::string(param.param.library).find("v1_0") != std::string::npos
                                       ? "v1_0"
                                       : "v1_5");
                         });

}  // namespace
}  // namespace hyper_parallel::shmem::testing
